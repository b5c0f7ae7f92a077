"""Claims notebook 05 (codegen) makes about PyTorch 2.13, checked against the installed wheel.

Each test carries the id of a ``<!-- claim: ... -->`` marker in the notebook (see ``claims.py``).
The yaml files and generators come from the ``torchgen`` package shipped inside the wheel.
"""

from __future__ import annotations

import inspect
import pathlib
import re
import subprocess
import warnings

import pytest
from claims import claim, torch_213, warnings_in_fresh_python


def packaged(torch_ref, *parts: str) -> pathlib.Path:
    """A file of the torchgen copy that ships with the installed PyTorch."""
    import torchgen

    return pathlib.Path(torchgen.__file__).parent.joinpath(*parts)


@pytest.fixture(scope="module")
def native_yaml() -> list[dict]:
    import yaml

    torch_ref = torch_213()
    text = packaged(torch_ref, "packaged", "ATen", "native", "native_functions.yaml").read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def entry(entries: list[dict], name: str) -> dict:
    (found,) = [e for e in entries if e["func"].split("(")[0] == name]
    return found


def dump_lines(torch_ref, op: str) -> list[str]:
    return torch_ref._C._dispatch_dump(op).splitlines()


@claim("nb05.native_functions_size")
def test_native_functions_size(torch_ref, native_yaml):
    from torchgen.gen import parse_native_yaml

    assert len(native_yaml) == 2584
    folder = packaged(torch_ref, "packaged", "ATen", "native")
    parsed = parse_native_yaml(str(folder / "native_functions.yaml"), str(folder / "tags.yaml"))
    assert len(parsed.native_functions) == 3101


@claim("nb05.add_out_entry")
def test_add_out_entry(native_yaml):
    add_out = entry(native_yaml, "add.out")
    assert add_out["structured"] is True and add_out["structured_inherits"] == "TensorIteratorBase"
    assert "ufunc_inner_loop" in add_out
    keys = {k.strip() for group in add_out["dispatch"] for k in group.split(",")}
    assert {"SparseCPU", "MkldnnCPU", "MPS"} <= keys
    # the functional and in-place entries delegate to it
    assert entry(native_yaml, "add.Tensor")["structured_delegate"] == "add.out"
    assert entry(native_yaml, "add_.Tensor")["structured_delegate"] == "add.out"
    assert entry(native_yaml, "add_.Tensor")["variants"] == "method"


@claim("nb05.binding_checks_torch_function")
def test_binding_checks_torch_function(torch_ref):
    seen = []

    class Spy(torch_ref.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return "intercepted"

    t = torch_ref.tensor([1.0]).as_subclass(Spy)
    assert torch_ref.add(t, t) == "intercepted"
    assert seen == [torch_ref.add]


@claim("nb05.binding_releases_gil")
def test_binding_releases_gil(torch_ref):
    generator = packaged(torch_ref, "packaged", "autograd", "gen_python_functions.py").read_text()
    assert "pybind11::gil_scoped_release no_gil;" in generator


@claim("nb05.binding_error_messages")
def test_binding_error_messages(torch_ref):
    a = torch_ref.tensor([1.0, 2.0])
    with pytest.raises(TypeError) as e:
        torch_ref.add(a, "x")
    assert str(e.value) == "add(): argument 'other' (position 2) must be Tensor, not str"
    with pytest.raises(TypeError) as e:
        torch_ref.sum(a, "x")
    assert str(e.value) == (
        "sum() received an invalid combination of arguments - got (Tensor, str), but expected one of:\n"
        " * (Tensor input, *, torch.dtype dtype = None)\n"
        " * (Tensor input, tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n"
    )


@claim("nb05.deprecated_add_signature")
def test_deprecated_add_signature(torch_ref):
    a, b = torch_ref.tensor([1.0, 2.0]), torch_ref.tensor([10.0, 20.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch_ref.add(a, 2, b).tolist() == [21.0, 42.0]
    # the deprecation warning is TORCH_WARN_ONCE: ask a fresh process
    messages = warnings_in_fresh_python("import torch\ntorch.add(torch.ones(2), 2, torch.ones(2))")
    assert "This overload of add is deprecated" in messages


@claim("nb05.deprecated_signature_text")
def test_deprecated_signature_text(torch_ref):
    import inspect

    import yaml
    from torchgen.api import python

    assert '+ "|deprecated"' in inspect.getsource(python.PythonSignatureDeprecated)
    text = packaged(torch_ref, "packaged", "autograd", "deprecated.yaml").read_text()
    names = [e["name"] for e in yaml.safe_load(text)]
    assert "add(Tensor self, Scalar alpha, Tensor other) -> Tensor" in names


@claim("nb05.variable_type_autograd_alias")
def test_variable_type_autograd_alias(torch_ref):
    (line,) = [x for x in dump_lines(torch_ref, "aten::add.Tensor") if x.startswith("Autograd[alias]:")]
    assert "torch/csrc/autograd/generated/VariableType_" in line


@claim("nb05.add_derivatives_entry")
def test_add_derivatives_entry(torch_ref):
    import yaml

    text = packaged(torch_ref, "packaged", "autograd", "derivatives.yaml").read_text()
    entries = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (add,) = [e for e in entries if e["name"].startswith("add.Tensor(")]
    assert add["self"] == "handle_r_to_c(self.scalar_type(), grad)"
    assert add["other"] == "handle_r_to_c(other.scalar_type(), maybe_multiply(grad, alpha.conj()))"
    assert add["result"] == "self_t + maybe_multiply(other_t, alpha)"


@claim("nb05.adinplaceorview_kernels")
def test_adinplaceorview_kernels(torch_ref):
    def has_kernel(op: str) -> bool:
        return any(x.startswith("ADInplaceOrView:") for x in dump_lines(torch_ref, op))

    assert not has_kernel("aten::add.Tensor")
    assert has_kernel("aten::add_.Tensor")
    assert has_kernel("aten::add.out")
    table = torch_ref._C._dispatch_dump_table("aten::add.Tensor")
    assert re.search(r"^ADInplaceOrView: fallthrough registered at .*\[backend fallback\]$", table, re.M)


@pytest.fixture(scope="module")
def add_cpu_text() -> str:
    """What torchgen writes into RegisterCPU.cpp for add.Tensor: the variant class and its wrapper."""
    pytest.importorskip("torchgen")
    from torchgen.dest.register_dispatch_key import StructuredRegisterDispatchKey
    from torchgen.gen import get_grouped_native_functions, parse_native_yaml
    from torchgen.model import DispatchKey, NativeFunctionsGroup
    from torchgen.selective_build.selector import SelectiveBuilder
    from torchgen.utils import Target

    torch_ref = torch_213()
    folder = packaged(torch_ref, "packaged", "ATen", "native")
    parsed = parse_native_yaml(str(folder / "native_functions.yaml"), str(folder / "tags.yaml"))
    (group,) = [
        g
        for g in get_grouped_native_functions(parsed.native_functions)
        if isinstance(g, NativeFunctionsGroup) and str(g.out.func.name) == "add.out"
    ]
    gen = StructuredRegisterDispatchKey(
        parsed.backend_indices[DispatchKey.CPU],
        Target.ANONYMOUS_DEFINITION,
        SelectiveBuilder.get_nop_selector(),
        rocm=False,
        symint=False,
        class_method_name=None,
        skip_dispatcher_op_registration=False,
        g=group,
    )
    return gen.gen_one(group.functional)


@claim("nb05.cpu_wrapper_names")
def test_cpu_wrapper_names(torch_ref, add_cpu_text):
    assert "struct structured_ufunc_add_CPU_functional final : public at::native::structured_ufunc_add_CPU" in add_cpu_text
    assert "at::Tensor wrapper_CPU_add_Tensor(" in add_cpu_text
    # anonymous definitions: RegisterDispatchKey puts them in `namespace {` inside namespace at
    source = packaged(torch_ref, "dest", "register_dispatch_key.py").read_text()
    assert "}} // anonymous namespace" in source
    cpu = [x for x in dump_lines(torch_ref, "aten::add.Tensor") if x.startswith("CPU:")]
    assert cpu and "build/aten/src/ATen/RegisterCPU_" in cpu[0]
    # the wheel's symbols: one anonymous namespace around a structured wrapper, two around the others
    symbols = wheel_symbols(torch_ref)
    assert "at::(anonymous namespace)::wrapper_CPU_add_Tensor>" in symbols
    assert "at::(anonymous namespace)::(anonymous namespace)::wrapper_CPU_memory_format_empty>" in symbols
    # and the lab's trace prints the same names
    import labsupport as lab
    import labsupport.torch as lab_torch

    with lab.trace() as rec:
        lab_torch.add(lab_torch.ones(2), lab_torch.ones(2))
        lab_torch.empty(2)
    names = {f.torch_name for f in rec.frames}
    assert "at::(anonymous namespace)::wrapper_CPU_add_Tensor" in names
    assert "at::(anonymous namespace)::(anonymous namespace)::wrapper_CPU_memory_format_empty" in names


def wheel_symbols(torch_ref) -> str:
    """The demangled symbol table of the wheel's libtorch_cpu.so (``nm -C``), or a skip without nm."""
    import shutil

    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    lib = pathlib.Path(torch_ref.__file__).parent / "lib" / "libtorch_cpu.so"
    return subprocess.run(["nm", "-C", str(lib)], capture_output=True, text=True, check=True).stdout


@claim("nb05.out_kernel_names")
def test_out_kernel_names(torch_ref):
    symbols = wheel_symbols(torch_ref)
    for name in ("add_Tensor", "add__Tensor", "add_out_out", "sum_out_IntList_out"):
        assert f"torch::autograd::VariableType::(anonymous namespace)::{name}(" in symbols
        if name != "add_Tensor":  # ADInplaceOrView has kernels only for ops that write (inlined: template args)
            assert re.search(rf"torch::ADInplaceOrView::\(anonymous namespace\)::{name}[(>]", symbols), name
    assert "VariableType::(anonymous namespace)::sum_IntList_out(" not in symbols
    assert "VariableType::(anonymous namespace)::add_out(" not in symbols
    # the lab's kernels have the same names, and the out= ones still call the at::_ops::add_out handle
    from labsupport.torch import _build

    names = ("add_Tensor", "add__Tensor", "add_out_out", "sum_out_IntList_out")
    lab_kernels = {name: vars(_build.variable_type).get(name) for name in names}
    assert all(lab_kernels.values()), lab_kernels
    assert not hasattr(_build.variable_type, "add_out") and not hasattr(_build.variable_type, "sum_IntList_out")
    assert {"add__Tensor", "add_out_out", "sum_out_IntList_out"} <= set(vars(_build.ad_inplace_or_view_type))
    assert "_ops.add_out.redispatch(" in inspect.getsource(lab_kernels["add_out_out"])
    assert "at::_ops::add_out::call(" in symbols  # PyTorch's handle: no overload in its name either


@claim("nb05.backend_select_registrations")
def test_backend_select_registrations(torch_ref):
    from torchgen.gen import needs_backend_select, parse_native_yaml
    from torchgen.selective_build.selector import SelectiveBuilder

    # what torchgen writes into RegisterBackendSelect.cpp: 81 aten operators, 29 of them taking a tensor
    folder = packaged(torch_ref, "packaged", "ATen", "native")
    parsed = parse_native_yaml(str(folder / "native_functions.yaml"), str(folder / "tags.yaml"))
    selector = SelectiveBuilder.get_nop_selector()
    generated = [f for f in parsed.native_functions if needs_backend_select(f, selector)]
    assert len(generated) == 81
    with_tensor = {str(f.func.name) for f in generated if any(a.type.is_tensor_like() for a in f.func.arguments.flat_all)}
    assert len(with_tensor) == 29
    assert {"_to_copy", "to.dtype_layout"} <= with_tensor
    # what the dispatcher holds: those 81, plus 13 prims kernels registered from Python
    regs = sorted(torch_ref._C._dispatch_get_registrations_for_dispatch_key("BackendSelect"))
    assert len(regs) == 94
    assert {r for r in regs if r.startswith("aten::")} == {"aten::" + str(f.func.name) for f in generated}
    others = [r for r in regs if not r.startswith("aten::")]
    assert len(others) == 13 and all(r.split("::")[0] in ("prims", "debugprims") for r in others)
    for r in others:
        name, _, overload = r.partition(".")
        debug = [x for x in dump_lines(torch_ref, r) if x.startswith("BackendSelect:")]
        assert debug and ".py:" in debug[0], (r, debug)  # a Python registration, not RegisterBackendSelect.cpp
    assert {"aten::randn", "aten::empty.memory_format", "aten::zeros", "aten::ones"} <= set(regs)
    assert "aten::add.Tensor" not in regs


@claim("nb05.implicit_composite_default")
def test_implicit_composite_default(torch_ref, native_yaml):
    from torchgen.gen import parse_native_yaml
    from torchgen.model import DispatchKey

    folder = packaged(torch_ref, "packaged", "ATen", "native")
    parsed = parse_native_yaml(str(folder / "native_functions.yaml"), str(folder / "tags.yaml"))
    cia = parsed.backend_indices[DispatchKey.CompositeImplicitAutograd]
    plain = {e["func"].split("(")[0] for e in native_yaml
             if "dispatch" not in e and not e.get("structured") and "structured_delegate" not in e}
    assert len(plain) > 100
    by_name = {str(f.func.name): f for f in parsed.native_functions}
    assert all(cia.has_kernel(by_name[name]) for name in plain)
    # an entry that delegates gets no CompositeImplicitAutograd kernel, with or without a dispatch: block
    delegating = [e for e in native_yaml if "structured_delegate" in e and "dispatch" not in e]
    assert delegating
    assert not any(cia.has_kernel(by_name[e["func"].split("(")[0]]) for e in delegating)
    assert not torch_ref._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "CompositeImplicitAutograd")
    # and the lab's add.Tensor entry is such an entry
    from labsupport.codegen import load_ops_yaml
    from labsupport.codegen.build import DEFAULT_OPS_YAML

    f = load_ops_yaml(DEFAULT_OPS_YAML).by_name("add.Tensor")
    assert not f.dispatch and f.structured_delegate == "add.out"


@claim("nb05.device_guard_backends")
def test_device_guard_backends(torch_ref):
    import inspect

    import torchgen.gen

    source = inspect.getsource(torchgen.gen)
    assert "device_guard=is_cuda_dispatch_key(k) or is_xpu_dispatch_key(k)" in source


@claim("nb05.variable_type_extras")
def test_variable_type_extras(torch_ref):
    source = packaged(torch_ref, "packaged", "autograd", "gen_variable_type.py").read_text()
    assert "check_inplace(" in source
    assert "_fw_grad" in source


@claim("nb05.view_ops_adinplaceorview")
def test_view_ops_adinplaceorview(torch_ref):
    import labsupport as lab
    import labsupport.torch  # registers the default build

    assert torch_ref._C._dispatch_has_kernel_for_dispatch_key("aten::expand", "ADInplaceOrView")
    # in-place and out= variants too, not the functional one
    assert torch_ref._C._dispatch_has_kernel_for_dispatch_key("aten::add_.Tensor", "ADInplaceOrView")
    assert not torch_ref._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "ADInplaceOrView")
    # the lab generates the same kinds: a view kernel for expand, a version bump for add_, none for add
    def has_kernel(name: str) -> bool:
        row = next(r for r in lab.dispatcher.dump_table(name).splitlines() if r.startswith("ADInplaceOrView:"))
        return "fallthrough" not in row

    assert has_kernel("aten::expand") and has_kernel("aten::add_.Tensor") and not has_kernel("aten::add.Tensor")


@claim("nb05.at_cpu_add_header")
def test_at_cpu_add_header(torch_ref):
    header = pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / "ops" / "add_cpu_dispatch.h"
    text = header.read_text()
    assert "namespace cpu {" in text
    assert "TORCH_API at::Tensor add(const at::Tensor & self, const at::Tensor & other" in text
    assert "at::Tensor & add_out(at::Tensor & out," in text


@claim("nb05.override_warning")
def test_override_warning(torch_ref):
    messages = warnings_in_fresh_python(
        """
        import torch
        lib = torch.library.Library("claims_nb05", "DEF")
        lib.define("neg2(Tensor self) -> Tensor")
        lib.impl("neg2", lambda self: -self, "CPU")
        lib.impl("neg2", lambda self: self.neg(), "CPU")
        """
    )
    assert "Overriding a previously registered kernel for the same operator and the same dispatch key" in messages


@claim("nb05.ops_handle_created_once")
def test_ops_handle_created_once(torch_ref):
    import inspect

    from torchgen.gen import ComputeOperators

    source = inspect.getsource(ComputeOperators)
    assert "static C10_NOINLINE c10::TypedOperatorHandle<{name}::schema> create_{name}_typed_handle()" in source
    assert "static auto op = create_{name}_typed_handle();" in source


@claim("nb05.below_ad_inplace_guard")
def test_below_ad_inplace_guard(torch_ref):
    header = pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / "core" / "LegacyTypeDispatch.h"
    text = header.read_text()
    struct = text[text.index("struct TORCH_API AutoDispatchBelowADInplaceOrView") :]
    struct = struct[: struct.index("};")]
    assert "c10::impl::ExcludeDispatchKeyGuard dispatch_key_guard_;" in struct
    assert "dispatch_key_guard_(c10::autograd_dispatch_keyset_with_ADInplaceOrView)" in struct


@claim("nb05.structured_inherits_values")
def test_structured_inherits_values(native_yaml):
    values = {e.get("structured_inherits") for e in native_yaml if e.get("structured")}
    assert values == {"TensorIteratorBase", None}  # None: the default base, at::impl::MetaBase
    assert entry(native_yaml, "add.out")["structured_inherits"] == "TensorIteratorBase"
    import inspect

    import torchgen.gen

    assert 'parent_class = "at::impl::MetaBase"' in inspect.getsource(torchgen.gen)
