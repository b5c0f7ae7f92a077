"""Claims of notebook 04 (registering operators) about PyTorch 2.13, checked against an installed PyTorch."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import warnings

import pytest
from claims import claim
from test_claims_nb02 import torch_key

import labsupport as lab
import labsupport.torch as lab_torch
from labsupport.c10.dispatch_key_set import RUNTIME_KEYS, runtime_keys_of_alias


@pytest.fixture
def library(torch_ref):
    """A fresh torch.library namespace per test, dropped afterwards."""
    made = []

    def make(ns: str, kind: str = "DEF", *args):
        lib = torch_ref.library.Library(ns, kind, *args)
        made.append(lib)
        return lib

    yield make
    for lib in reversed(made):
        lib._destroy()


def table_rows(torch_ref, op: str) -> dict[str, str]:
    """``_dispatch_dump_table`` as {key: rest of the line}, with the build path prefix removed."""
    rows = {}
    for line in torch_ref._C._dispatch_dump_table(op).splitlines():
        key, _, rest = line.partition(": ")
        rows[key] = re.sub(r"/\S*?/pytorch/pytorch/", "", rest)
    return rows


def define(library, ns: str, schema: str = "myadd(Tensor self, Tensor other) -> Tensor"):
    lib = library(ns)
    lib.define(schema)
    return lib


@claim("nb04.only_available_backends")
def test_only_available_for_these_backends(torch_ref, library):
    define(library, "claims04a")
    with pytest.raises(NotImplementedError) as torch_error:
        torch_ref.ops.claims04a.myadd(torch_ref.ones(2), torch_ref.ones(2))
    torch_keys = re.search(r"only available for these backends: \[(.*?)\]", str(torch_error.value)).group(1)

    with lab.Library("claims04a", "DEF") as lab_lib:
        lab_lib.define("myadd(Tensor self, Tensor other) -> Tensor")
        with pytest.raises(NotImplementedError) as lab_error:
            lab.ops.claims04a.myadd(lab_torch.ones(2), lab_torch.ones(2))
    lab_keys = re.search(r"only available for these backends: \[(.*?)\]", str(lab_error.value)).group(1)
    assert torch_keys == lab_keys
    assert len(torch_keys.split(", ")) == 38
    assert str(torch_error.value).startswith("Could not run 'claims04a::myadd' with arguments from the 'CPU' backend.")


@claim("nb04.meta_fallback_message")
def test_meta_fallback_message(torch_ref, library):
    lib = define(library, "claims04b")
    lib.impl("myadd", lambda a, b: a + b, "CPU")
    meta = torch_ref.empty(2, device="meta")
    with pytest.raises(NotImplementedError, match="there was no fake impl or Meta kernel registered"):
        torch_ref.ops.claims04b.myadd(meta, meta)


@claim("nb04.python_kernel_dump")
def test_python_kernel_is_listed_boxed_only(torch_ref, library):
    lib = define(library, "claims04c")
    lib.impl("myadd", lambda a, b: a + b, "CPU")
    cpu_line = [
        line for line in torch_ref._C._dispatch_dump("claims04c::myadd").splitlines() if line.startswith("CPU:")
    ]
    assert len(cpu_line) == 1 and cpu_line[0].endswith(":: (none) [ boxed ]")


@claim("nb04.custom_op_rows")
def test_rows_of_a_cpu_only_operator(torch_ref, library):
    lib = define(library, "claims04d")
    lib.impl("myadd", lambda a, b: a + b, "CPU")
    rows = table_rows(torch_ref, "claims04d::myadd")
    # the rows notebook 04 prints for myadd (section 3)
    assert (
        rows["ADInplaceOrView"]
        == "fallthrough registered at aten/src/ATen/core/VariableFallbackKernel.cpp:103 [backend fallback]"
    )
    assert rows["AutogradCPU"] == "registered at aten/src/ATen/core/VariableFallbackKernel.cpp:66 [backend fallback]"
    assert rows["AutocastCPU"] == "fallthrough registered at aten/src/ATen/autocast_mode.cpp:330 [backend fallback]"
    assert rows["CPU"].endswith("[kernel]") and "CUDA" not in rows


@claim("nb04.autograd_fallback_warns")
def test_default_autograd_fallback_warns(torch_ref, library):
    assert torch_ref._C._get_autograd_fallback_mode() == "warn"
    lib = define(library, "claims04e")
    lib.impl("myadd", lambda a, b: a.detach() + b.detach(), "CPU")
    x = torch_ref.ones(3, requires_grad=True)
    out = torch_ref.ops.claims04e.myadd(x, torch_ref.ones(3))
    assert out.grad_fn.name() == "torch::autograd::WarnNotImplemented"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out.sum().backward()
    assert any(
        str(w.message).startswith(
            "claims04e::myadd: an autograd kernel was not registered to the Autograd key(s) but we are trying to backprop through it"
        )
        for w in caught
    )
    assert x.grad is None


@claim("nb04.add_adinplaceorview")
def test_add_inplace_has_an_adinplaceorview_kernel(torch_ref):
    inplace = table_rows(torch_ref, "aten::add_.Tensor")["ADInplaceOrView"]
    assert inplace.endswith("[kernel]") and "ADInplaceOrViewType" in inplace
    functional = table_rows(torch_ref, "aten::add.Tensor")["ADInplaceOrView"]
    assert (
        functional == "fallthrough registered at aten/src/ATen/core/VariableFallbackKernel.cpp:103 [backend fallback]"
    )


@claim("nb04.autocast_is_autocastcuda")
def test_autocast_is_an_alias_of_autocastcuda(torch_ref):
    import pathlib

    header = pathlib.Path(torch_ref.__file__).parent / "include" / "c10" / "core" / "DispatchKey.h"
    assert re.search(r"^\s*Autocast = AutocastCUDA,", header.read_text(), re.MULTILINE)
    assert not torch_ref._C._dispatch_is_alias_key(torch_ref._C.DispatchKey.AutocastCUDA)  # a synonym, not an alias key
    assert lab.DispatchKey.Autocast is lab.DispatchKey.AutocastCUDA


@claim("nb04.autocast_cpu_tls")
def test_autocast_cpu_removes_its_key_from_the_exclude_set(torch_ref):
    C = torch_ref._C
    outside = C._dispatch_tls_local_exclude_set()
    with torch_ref.autocast("cpu"):
        inside = C._dispatch_tls_local_exclude_set()
    assert "AutocastCPU" in str(outside) and "AutocastCPU" not in str(inside)
    assert str(outside).replace("AutocastCPU, ", "") == str(inside)
    assert str(C._dispatch_tls_local_include_set()) == "DispatchKeySet(BackendSelect, ADInplaceOrView)"


@claim("nb04.add_autocast_fallthrough")
def test_add_falls_through_autocast_cpu(torch_ref):
    row = table_rows(torch_ref, "aten::add.Tensor")["AutocastCPU"]
    assert row == "fallthrough registered at aten/src/ATen/autocast_mode.cpp:330 [backend fallback]"
    assert table_rows(torch_ref, "aten::mm")["AutocastCPU"].endswith("[kernel]")  # matmuls do get one


@claim("nb04.cpu_autocast_dtype")
def test_cpu_autocast_uses_bfloat16(torch_ref):
    assert torch_ref.get_autocast_dtype("cpu") == torch_ref.bfloat16


@claim("nb04.tracer_and_batched")
def test_tracer_and_batching_kernels(torch_ref, library):
    add = table_rows(torch_ref, "aten::add.Tensor")
    assert add["Tracer"].endswith("[kernel]") and "TraceType" in add["Tracer"]
    assert add["FuncTorchBatched"].endswith("[kernel]") and "BatchRules" in add["FuncTorchBatched"]
    assert add["Batched"].endswith("[kernel]") and "LegacyBatchingRegistrations" in add["Batched"]
    lib = define(library, "claims04f")
    lib.impl("myadd", lambda a, b: a + b, "CPU")
    custom = table_rows(torch_ref, "claims04f::myadd")
    for key in ("Tracer", "FuncTorchBatched", "Batched"):
        assert custom[key].endswith("[backend fallback]") and "fallthrough" not in custom[key]


@claim("nb04.alias_sizes")
def test_alias_expansions(torch_ref):
    C = torch_ref._C
    runtime = str(C._dispatch_keyset_full()).removeprefix("DispatchKeySet(").removesuffix(")").split(", ")
    assert sorted(runtime) == sorted(key.name for key in RUNTIME_KEYS)
    sizes = {}
    for alias in (
        "Autograd",
        "CompositeImplicitAutograd",
        "CompositeExplicitAutograd",
        "CompositeExplicitAutogradNonFunctional",
    ):
        members = {
            name
            for name in runtime
            if C._dispatch_is_included_in_alias(torch_key(torch_ref, name), torch_key(torch_ref, alias))
        }
        assert members == {key.name for key in runtime_keys_of_alias(lab.DispatchKey[alias])}
        sizes[alias] = len(members)
    assert sizes == {
        "Autograd": 18,
        "CompositeImplicitAutograd": 103,
        "CompositeExplicitAutograd": 69,
        "CompositeExplicitAutogradNonFunctional": 47,
    }

    def included(name: str, alias: str) -> bool:
        return C._dispatch_is_included_in_alias(torch_key(torch_ref, name), torch_key(torch_ref, alias))

    # CEA: backend keys of every kind, but no nested-tensor or autograd key; CIA adds both
    for name in ("CPU", "QuantizedCPU", "SparseCPU", "SparseCsrCPU", "MkldnnCPU"):
        assert included(name, "CompositeExplicitAutograd") and included(name, "CompositeImplicitAutograd")
    for name in ("NestedTensorCPU", "AutogradCPU", "AutogradOther", "AutogradNestedTensor"):
        assert not included(name, "CompositeExplicitAutograd") and included(name, "CompositeImplicitAutograd")


def _torch_table(torch_ref, registrations):
    from torch._python_dispatcher import PythonDispatcher

    dispatcher = PythonDispatcher()
    try:
        dispatcher.register(registrations)
        return dispatcher.dispatchTable()
    finally:
        del dispatcher
        gc.collect()


REGISTRATIONS = (
    ["CPU", "CompositeImplicitAutograd"],
    ["FPGA", "CompositeImplicitAutograd"],
    ["Autograd", "CompositeImplicitAutograd"],
    ["CompositeExplicitAutograd", "Autograd"],
    ["CPU", "XLA", "Autograd"],
)


@claim("nb04.python_dispatcher_keys")
def test_python_dispatcher_keys(torch_ref):
    from torch._python_dispatcher import PythonDispatcher

    assert PythonDispatcher.runtime_keys == lab.PythonDispatcher().keys()[:8]
    assert len(PythonDispatcher.runtime_keys) == 8


@claim("nb04.python_dispatcher_tables")
def test_python_dispatcher_tables(torch_ref):
    for registrations in REGISTRATIONS:
        lab_dispatcher = lab.PythonDispatcher()
        lab_dispatcher.register(registrations)
        assert _torch_table(torch_ref, registrations) == lab_dispatcher.dispatchTable(), registrations


@claim("nb04.python_dispatcher_no_ceanf")
def test_python_dispatcher_refuses_ceanf(torch_ref):
    with pytest.raises(RuntimeError, match="CompositeExplicitAutogradNonFunctional is not supported"):
        _torch_table(torch_ref, ["CompositeExplicitAutogradNonFunctional"])


@claim("nb04.ambiguous_autogradother_error")
def test_ambiguous_autogradother_error(torch_ref, library):
    lib = define(library, "claims04g", "f(Tensor x) -> Tensor")
    lib.impl("f", lambda x: x, "QuantizedCPU")  # a backend mapped to AutogradOther, registered first
    lib.impl("f", lambda x: x, "CompositeImplicitAutograd")
    assert table_rows(torch_ref, "claims04g::f")["AutogradOther"] == "ambiguous_autogradother [ambiguous autogradother]"
    mkldnn = torch_ref.ones(2, 2).to_mkldnn()  # its keys end in AutogradOther
    with pytest.raises(
        RuntimeError,
        match="has kernels registered to both CompositeImplicitAutograd and a backend mapped to AutogradOther",
    ):
        torch_ref.ops.claims04g.f(mkldnn)


@claim("nb04.autogradother_tensors")
def test_which_tensors_reach_autogradother(torch_ref):
    keys = torch_ref._C._dispatch_keys
    assert str(keys(torch_ref.ones(2, 2).to_mkldnn())) == "DispatchKeySet(MkldnnCPU, ADInplaceOrView, AutogradOther)"
    assert "AutogradCPU" in str(keys(torch_ref.ones(2).to_sparse()))
    assert "AutogradOther" not in str(keys(torch_ref.ones(2).to_sparse()))


@claim("nb04.cea_ceanf_rows")
def test_cea_and_ceanf_rows(torch_ref, library):
    define(library, "claims04h", "f(Tensor x) -> Tensor")
    ran = []

    def cea(x):
        ran.append("CEA")
        return x

    def ceanf(x):
        ran.append("CEANF")
        return x

    lib = library("claims04h", "IMPL")
    lib.impl("f", cea, "CompositeExplicitAutograd")
    lib.impl("f", ceanf, "CompositeExplicitAutogradNonFunctional")
    rows = table_rows(torch_ref, "claims04h::f")
    for key in ("Undefined", "CPU", "XLA", "Lazy", "Meta", "SparseCPU"):
        assert rows[key].endswith("[default backend kernel]"), key
    assert rows["AutogradCPU"] == "registered at aten/src/ATen/core/VariableFallbackKernel.cpp:66 [backend fallback]"
    for t in (torch_ref.ones(2), torch_ref.empty(2, device="meta"), torch_ref.ones(2).to_sparse()):
        torch_ref.ops.claims04h.f(t)
    assert ran == ["CEANF", "CEANF", "CEA"]  # CEANF where it applies; CEA covers the sparse keys


OVERRIDE_SCRIPT = """
import warnings, torch
lib = torch.library.Library("claims04i", "DEF")
lib.define("myadd(Tensor self, Tensor other) -> Tensor")
lib.define("mysub(Tensor self, Tensor other) -> Tensor")
for name in ("myadd", "mysub"):
    lib.impl(name, lambda a, b: a + b, "CPU")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lib.impl("myadd", lambda a, b: a - b, "CPU")
    lib.impl("mysub", lambda a, b: a - b, "CPU")  # a second operator: no second warning
print(len(caught))
print(str(caught[0].message))
print("--- dump")
print(torch._C._dispatch_dump("claims04i::myadd"))
"""


def _override_run(torch_ref) -> tuple[int, str, list[str]]:
    # PyTorch warns once per process, so an earlier test may already have used it up: ask a fresh one.
    out = subprocess.run([sys.executable, "-c", OVERRIDE_SCRIPT], capture_output=True, text=True, check=True).stdout
    count, rest = out.split("\n", 1)
    message, _, dump = rest.partition("--- dump\n")
    return int(count), message, dump.splitlines()


@claim("nb04.override_inactive")
def test_override_lists_the_old_kernel_inactive(torch_ref):
    _, _, dump = _override_run(torch_ref)
    assert sum(line.startswith("CPU: ") for line in dump) == 1
    assert sum(line.startswith("CPU (inactive): ") for line in dump) == 1


@claim("nb04.override_warning_once")
def test_override_warns_once_per_process_with_the_notebooks_two_lines(torch_ref):
    count, message, _ = _override_run(torch_ref)
    assert count == 1
    lines = message.splitlines()
    assert lines[0] == "Warning only once for all operators,  other operators may also be overridden."
    assert lines[1] == "  Overriding a previously registered kernel for the same operator and the same dispatch key"
    # and the lab's first two lines are the same words
    from labsupport.c10.dispatcher import reset_override_warning

    with lab.Library("claims04w", "DEF") as defs, lab.Library("claims04w", "IMPL", "CPU") as first:
        defs.define("myadd(Tensor self, Tensor other) -> Tensor")
        first.impl("myadd", lambda a, b: a)
        reset_override_warning()
        with warnings.catch_warnings(record=True) as caught, lab.Library("claims04w", "IMPL", "CPU") as second:
            warnings.simplefilter("always")
            second.impl("myadd", lambda a, b: b)
    assert str(caught[0].message).splitlines()[:2] == lines[:2]


@claim("nb04.impl_before_define")
def test_impl_before_define_is_accepted_and_dumped_without_schema(torch_ref, library):
    impl = library("claims04s", "IMPL", "CPU")
    impl.impl("mysub", lambda a, b: a - b)
    dump = torch_ref._C._dispatch_dump("claims04s::mysub").splitlines()
    assert dump[:2] == ["name: claims04s::mysub", "schema: (none)"]
    assert not any(line.startswith(("debug:", "alias analysis kind:")) for line in dump)
    assert dump[2].startswith("CPU: ") and dump[2].endswith(":: (none) [ boxed ]")
    defs = library("claims04s", "DEF")
    defs.define("mysub(Tensor self, Tensor other) -> Tensor")
    out = torch_ref.ops.claims04s.mysub(torch_ref.tensor([10.0]), torch_ref.tensor([1.0]))
    assert out.tolist() == [9.0]


@claim("nb04.schemaless_error")
def test_find_schema_of_a_schemaless_operator(torch_ref, library):
    library("claims04e", "IMPL", "CPU").impl("mysub", lambda a, b: a - b)
    with pytest.raises(RuntimeError) as error:
        torch_ref._C._dispatch_find_schema_or_throw("claims04e::mysub", "")
    words = "Could not find schema for claims04e::mysub. but we found an implementation; did you forget to def() the operator?"
    assert str(error.value).startswith(words)
    with pytest.raises(RuntimeError) as lab_error:
        with lab.Library("claims04e", "IMPL", "CPU") as lab_lib:
            lab_lib.impl("mysub", lambda a, b: a)
            lab.dispatcher.find_schema_or_throw("claims04e::mysub")
    assert str(lab_error.value).startswith(words)


@claim("nb04.one_def_per_namespace")
def test_one_def_library_per_namespace(torch_ref, library):
    library("claims04d")
    with pytest.raises(RuntimeError, match="Only a single TORCH_LIBRARY can be used to register the namespace claims04d"):
        library("claims04d")
    library("claims04d", "FRAGMENT").define("extra(Tensor self) -> Tensor")


@claim("nb04.dangling_impls")
def test_dangling_impl_from_a_namespace_typo(torch_ref, library):
    define(library, "claims04t", "mysub(Tensor self, Tensor other) -> Tensor")
    library("claims04tt", "IMPL", "CUDA").impl("mysub", lambda a, b: a - b)
    dangling = torch_ref._C._dispatch_find_dangling_impls()
    assert any(text.startswith("name: claims04tt::mysub\nschema: (none)\n") for text in dangling)
    assert "claims04tt::mysub" in torch_ref._C._dispatch_get_registrations_for_dispatch_key("CUDA")
    torch_ref._C._dispatch_check_invariants("claims04t::mysub")  # exists, and passes here


@claim("nb04.stale_entry_check_invariants")
def test_stale_entry_after_cia_then_quantized_cpu(torch_ref, library):
    define(library, "claims04q", "f(Tensor x) -> Tensor")
    library("claims04q", "IMPL", "CompositeImplicitAutograd").impl("f", lambda x: x)
    library("claims04q", "IMPL", "QuantizedCPU").impl("f", lambda x: x)
    with pytest.raises(RuntimeError, match="INTERNAL ASSERT FAILED"):
        torch_ref._C._dispatch_check_invariants("claims04q::f")


@claim("nb04.dispatch_trace_release_wheel")
def test_show_dispatch_trace_does_nothing_in_the_wheel(torch_ref):
    script = "import torch; torch.add(torch.ones(2, requires_grad=True), torch.ones(2)); print('done')"
    env = {**os.environ, "TORCH_SHOW_DISPATCH_TRACE": "1"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert run.stdout == "done\n"
    assert "[call]" not in run.stderr and "op=[aten::add.Tensor]" not in run.stderr
    # the trace is compiled in only for debug builds or with HAS_TORCH_SHOW_DISPATCH_TRACE
    import pathlib

    header = pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / "core" / "dispatch" / "Dispatcher.h"
    assert "#if defined(HAS_TORCH_SHOW_DISPATCH_TRACE) || !defined(NDEBUG)" in header.read_text()


@claim("nb04.python_kernel_dump_site")
def test_python_kernel_is_dumped_by_site_and_boxed(torch_ref, library):
    lib = define(library, "claims04p")
    lib.impl("myadd", lambda a, b: a + b, "CPU")
    line = next(x for x in torch_ref._C._dispatch_dump("claims04p::myadd").splitlines() if x.startswith("CPU: "))
    assert re.fullmatch(r"CPU: registered at \S+:\d+ :: \(none\) \[ boxed \]", line)


@claim("nb04.auto_non_variable_type_mode")
def test_auto_non_variable_type_mode_is_deprecated_and_excludes_autograd(torch_ref):
    import pathlib

    header = pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / "core" / "LegacyTypeDispatch.h"
    text = header.read_text()

    def body(struct: str) -> str:
        start = text.index(f"struct TORCH_API {struct} {{")
        return text[start : text.index("};", start)]

    old, below = body("AutoNonVariableTypeMode"), body("AutoDispatchBelowAutograd")
    assert "autograd_guard_(c10::autograd_dispatch_keyset)" in old  # the same exclusion ...
    assert "autograd_guard_(c10::autograd_dispatch_keyset)" in below
    assert "TORCH_WARN_ONCE" in old and "is deprecated" in old  # ... with a one-time warning
    assert "AutoDispatchBelowADInplaceOrView" in old and "c10::InferenceMode" in old


@claim("nb04.keyless_impl_is_cia")
def test_a_kernel_without_a_key_goes_to_composite_implicit_autograd(torch_ref, library):
    lib = define(library, "claims04j")
    lib.impl("myadd", lambda a, b: a + b)  # no dispatch key
    dump = torch_ref._C._dispatch_dump("claims04j::myadd").splitlines()
    assert [line.split(":")[0] for line in dump[4:] if line] == ["CompositeImplicitAutograd[alias]"]
    assert table_rows(torch_ref, "claims04j::myadd")["CPU"].endswith("[math kernel]")


@claim("nb04.library_registration_site")
def test_torch_library_records_the_line_that_created_the_library(torch_ref, tmp_path):
    script = tmp_path / "site.py"
    script.write_text(
        "import torch\n"
        'defs = torch.library.Library("claims04site", "DEF")\n'  # line 2
        'impls = torch.library.Library("claims04site", "IMPL", "CPU")\n'  # line 3
        "\n"
        'defs.define("f(Tensor x) -> Tensor")\n'  # line 5
        'impls.impl("f", lambda x: x)\n'  # line 6
        'print(torch._C._dispatch_dump("claims04site::f"))\n'
    )
    dump = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    assert f"debug: registered at {script}:2" in dump.splitlines()
    assert f"CPU: registered at {script}:3 :: (none) [ boxed ]" in dump.splitlines()


@claim("nb04.dump_of_missing_operator")
def test_dump_of_an_operator_that_does_not_exist_is_empty(torch_ref):
    assert torch_ref._C._dispatch_dump("claims04nobody::f") == ""
    assert lab.dispatcher.dump("claims04nobody::f") == ""
