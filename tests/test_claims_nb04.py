"""Claims of notebook 04 (registering operators) about PyTorch 2.13, checked against an installed PyTorch."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import warnings

import pytest
from claims import claim, table_rows, warnings_in_fresh_python
from test_claims_nb02 import torch_key

import labsupport as lab
import labsupport.torch as lab_torch
from labsupport.c10.dispatch_key_set import RUNTIME_KEYS, runtime_keys_of_alias


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


# ------------------------------------------------------------------ section 9b: torch.autocast, for real


def autocast_header(torch_ref) -> str:
    import pathlib

    return (pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / "autocast_mode.h").read_text()


def header_list(header: str, macro: str) -> list[str]:
    """The operator names of one ``#define AT_FORALL_...(_)`` list in autocast_mode.h."""
    body = re.search(r"#define " + macro + r"\(_\)(.*?)\n\n", header, re.S).group(1)
    return re.findall(r"_\((\w+)", body)


@claim("nb04.autocast_signature")
def test_autocast_signature_and_cache_default(torch_ref):
    import inspect

    params = inspect.signature(torch_ref.autocast.__init__).parameters
    assert [str(params[n]) for n in ("device_type", "dtype", "enabled", "cache_enabled")] == [
        "device_type: str", "dtype: torch.dtype | None = None", "enabled: bool = True",
        "cache_enabled: bool | None = None",
    ]
    assert torch_ref.is_autocast_cache_enabled()  # on by default
    with torch_ref.autocast("cpu", cache_enabled=False):
        with torch_ref.autocast("cpu"):  # None: keep the current setting
            assert not torch_ref.is_autocast_cache_enabled()
    assert torch_ref.is_autocast_cache_enabled()


@claim("nb04.autocast_three_things")
def test_autocast_switches_tls_dtype_cache_and_nesting(torch_ref):
    import inspect

    C = torch_ref._C
    assert (torch_ref.get_autocast_dtype("cpu"), torch_ref.get_autocast_dtype("cuda")) == (
        torch_ref.bfloat16, torch_ref.float16)
    # set_autocast_enabled is the TLS exclude bit of the device's key, nothing else
    assert C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.AutocastCPU)
    torch_ref.set_autocast_enabled("cpu", True)
    try:
        assert not C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.AutocastCPU)
    finally:
        torch_ref.set_autocast_enabled("cpu", False)
    enter = inspect.getsource(torch_ref.amp.autocast_mode.autocast.__enter__)
    for call in ("set_autocast_enabled", "set_autocast_dtype", "set_autocast_cache_enabled",
                 "autocast_increment_nesting"):
        assert call in enter


@claim("nb04.autocast_only_own_key")
def test_only_the_devices_key_leaves_the_exclude_set(torch_ref):
    C = torch_ref._C
    before_in, before_ex = str(C._dispatch_tls_local_include_set()), str(C._dispatch_tls_local_exclude_set())
    with torch_ref.autocast("cpu"):
        inside_in, inside_ex = str(C._dispatch_tls_local_include_set()), str(C._dispatch_tls_local_exclude_set())
    assert inside_in == before_in
    assert before_ex.replace("AutocastCPU, ", "") == inside_ex and "AutocastCUDA" in inside_ex
    with lab_torch.autocast("cpu"):
        assert repr(lab.tls_exclude_set()) == inside_ex


def policy_program(m) -> list[str]:
    """Cell 'Inside torch.autocast("cpu"), what dtype does each call return?' of section 9b."""
    m1 = m.tensor([[1.0, 2.0], [3.0, 4.0]])
    m2 = m.tensor([[0.5, -1.0], [0.25, 2.0]])
    with m.autocast("cpu"):
        out = [str(m.mm(m1, m2).dtype), str(m.matmul(m1, m2).dtype),
               str(m.mm(m1.to(m.float16), m2.to(m.float16)).dtype),
               str(m.mm(m1.to(m.float64), m2.to(m.float64)).dtype),
               str(m.mm(m.tensor([[1, 2]]), m.tensor([[3], [4]])).dtype),
               str(m.add(m1, m2).dtype), str(m1.sum().dtype)]
        try:
            m.mm(m1, m2.to(m.float64))
        except RuntimeError as e:
            out.append(str(e))
    return out


@claim("nb04.autocast_cpu_policy")
def test_cpu_policy_dtypes_and_mixed_error(torch_ref):
    real = policy_program(torch_ref)
    assert real == policy_program(lab_torch)
    assert real[-1] == "expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != double"


@claim("nb04.autocast_sum_cuda_only")
def test_add_and_sum_have_no_cpu_autocast_kernel(torch_ref):
    for op in ("aten::add.Tensor", "aten::sum"):
        assert table_rows(torch_ref, op)["AutocastCPU"].startswith("fallthrough")
    assert table_rows(torch_ref, "aten::sum")["AutocastCUDA"].endswith("[kernel]")
    header = autocast_header(torch_ref)
    assert "sum" in header_list(header, "AT_FORALL_FP32_SET_OPT_DTYPE")
    lists = [header_list(header, m) for m in ("AT_FORALL_LOWER_PRECISION_FP", "AT_FORALL_FP32",
                                               "AT_FORALL_FP32_SET_OPT_DTYPE", "AT_FORALL_PROMOTE")]
    assert not any("add" in names for names in lists)


@claim("nb04.autocast_matmul_casts_once")
def test_matmul_casts_once_then_calls_mm(torch_ref):
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    assert "CompositeImplicitAutograd" in table_rows(torch_ref, "aten::matmul")["CPU"]
    a, b = torch_ref.randn(2, 2), torch_ref.randn(2, 2)
    with torch_ref.autocast("cpu"), Log():
        torch_ref.matmul(a, b)
    assert seen == ["aten._to_copy", "aten._to_copy", "aten.mm"]
    # batches: the casts, then the views and bmm (bmm is on the CPU lower_precision_fp list too); the lab
    # logs the same calls with its own TorchDispatchMode
    from labsupport.utils._python_dispatch import TorchDispatchMode as LabMode

    class LabLog(LabMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    logs = []
    for m, mode in ((torch_ref, Log), (lab.torch, LabLog)):
        seen.clear()
        x, y = m.randn(2, 3, 4), m.randn(2, 4, 5)
        with m.autocast("cpu"), mode():
            out = m.matmul(x, y)
        logs.append((list(seen), str(out.dtype)))
    assert logs[0] == logs[1]
    assert logs[0][0] == ["aten._to_copy", "aten._to_copy", "aten.expand", "aten.view", "aten.expand", "aten.view",
                          "aten.bmm", "aten._unsafe_view"]


@claim("nb04.autocast_lists_and_lines")
def test_autocast_rows_and_lists(torch_ref):
    header = autocast_header(torch_ref)
    for name in ("mm", "matmul", "mv"):
        assert name in header_list(header, "AT_FORALL_LOWER_PRECISION_FP")
    assert "dot" in header_list(header, "AT_FORALL_PROMOTE")
    for op in ("aten::mm", "aten::matmul", "aten::sum", "aten::add.Tensor"):
        real, mine = table_rows(torch_ref, op), lab.dispatcher.dump_table(op).splitlines()
        for key in ("AutocastCPU", "AutocastCUDA"):
            assert f"{key}: {real[key]}" in mine


@claim("nb04.autocast_cuda_without_cuda_warns")
def test_cpu_only_pytorch_disables_cuda_autocast(torch_ref):
    if torch_ref.cuda.is_available():
        pytest.skip("this PyTorch has CUDA")
    text = warnings_in_fresh_python("""
        import torch
        with torch.autocast("cuda"):
            print(torch.is_autocast_enabled("cuda"))
    """)
    assert "CUDA is not available" in text and "disabling" in text.lower()


@claim("nb04.autocast_wrapfunction_symbol")
def test_wrapfunction_symbol_in_libtorch_cpu(torch_ref):
    import mmap
    import pathlib

    assert re.search(r"lower_precision_fp = 0,", autocast_header(torch_ref))
    assert re.search(r"\bCPU = 0,", (pathlib.Path(torch_ref.__file__).parent / "include" / "torch" / "headeronly"
                                     / "core" / "DeviceType.h").read_text())
    lib = pathlib.Path(torch_ref.__file__).parent / "lib" / "libtorch_cpu.so"
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        # at::autocast::WrapFunction_<(CastPolicy)0, (DeviceType)0, Tensor (Tensor const&, Tensor const&),
        # &at::_ops::mm::call, ...>::call, mangled
        assert re.search(rb"_ZN2at8autocast13WrapFunction_ILNS0_10CastPolicyE0ELN3c1010DeviceTypeE0E"
                         rb"FNS_6TensorERKS5_S7_EXadL_ZNS_4_ops2mm4callE", data)


@claim("nb04.autocast_excludes_own_key")
def test_wrapper_excludes_only_its_own_key(torch_ref):
    header = autocast_header(torch_ref)
    guards = re.findall(r"ExcludeDispatchKeyGuard no_autocast\(\s*([^;]*?)\);", header)
    assert guards and all(g.strip() == "get_autocast_dispatch_key_from_device_type(device_type)" for g in guards)


@claim("nb04.autocast_cast_is_to_copy")
def test_cast_is_to_then_to_copy_with_backward(torch_ref):
    assert "CompositeImplicitAutograd" in table_rows(torch_ref, "aten::to.dtype")["CPU"]
    w = torch_ref.randn(2, 2, requires_grad=True)
    assert type(w.to(torch_ref.bfloat16).grad_fn).__name__ == "ToCopyBackward0"


@claim("nb04.autocast_above_autograd")
def test_autocast_before_autograd_saves_low_precision(torch_ref):
    C = torch_ref._C
    keys = str(C._dispatch_keys(torch_ref.randn(2, requires_grad=True)))  # listed from lowest to highest
    assert keys == "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    w, x = torch_ref.randn(2, 2, requires_grad=True), torch_ref.randn(2, 2, requires_grad=True)
    with torch_ref.autocast("cpu"):
        out = torch_ref.mm(w, x)
    assert out.grad_fn._saved_self.dtype == torch_ref.bfloat16


def weight_cache_program(m) -> list[int]:
    """Cell 'How many _to_copy calls does each line make?' of section 9b."""
    from collections import Counter

    weight = m.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    inp = m.tensor([[1.0, 2.0], [3.0, 4.0]])

    def casts(fn):
        if m is lab_torch:
            with lab.profiler.profile() as prof:
                fn()
            return prof.counts().get("aten::_to_copy", 0)
        with m.profiler.profile() as prof:
            fn()
        return Counter({row.key: row.count for row in prof.key_averages()})["aten::_to_copy"]

    out = []
    with m.autocast("cpu"):
        out += [casts(lambda: m.mm(weight, inp)), casts(lambda: m.mm(weight, inp))]
    with m.autocast("cpu"):
        out.append(casts(lambda: m.mm(weight, inp)))
    with m.autocast("cpu", cache_enabled=False):
        casts(lambda: m.mm(weight, inp))
        out.append(casts(lambda: m.mm(weight, inp)))
    nonleaf = weight.mul(m.tensor(1.0))
    with m.autocast("cpu"):
        casts(lambda: m.mm(nonleaf, inp))
        out.append(casts(lambda: m.mm(nonleaf, inp)))
    with m.inference_mode(), m.autocast("cpu"):
        casts(lambda: m.mm(weight, inp))
        out.append(casts(lambda: m.mm(weight, inp)))
    return out


@claim("nb04.autocast_weight_cache")
def test_weight_cache_counts(torch_ref):
    real = weight_cache_program(torch_ref)
    assert real[:4] == [2, 1, 2, 2] and real[4:] == [2, 2]  # non-leaves and inference_mode are not cached
    assert weight_cache_program(lab_torch) == real


def grad_program(m):
    weight = m.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    inp = m.tensor([[1.0, 2.0], [3.0, 4.0]])
    with m.autocast("cpu"):
        out = m.mm(weight, inp)
    chain = [type(out.grad_fn).__name__.removesuffix(" object")] + [
        None if fn is None else type(fn).__name__ for fn, _ in out.grad_fn.next_functions]
    out.sum().backward()
    return str(out.dtype), chain, str(weight.grad.dtype)


@claim("nb04.autocast_grad_chain")
def test_grad_chain_and_weight_grad_dtype(torch_ref):
    dtype, chain, grad = grad_program(torch_ref)
    assert (dtype, chain, grad) == ("torch.bfloat16", ["MmBackward0", "ToCopyBackward0", None], "torch.float32")
    mine = grad_program(lab_torch)
    assert (mine[0], mine[2]) == (dtype, grad)
    assert [None if n is None else re.sub(r"\W.*", "", n.lstrip("<")) for n in mine[1]][1:] in (
        ["ToCopyBackward0", None], ["Node", None])


def decorator_program(m) -> list[str]:
    weight = m.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    inp = m.tensor([[1.0, 2.0], [3.0, 4.0]])

    @m.autocast("cpu")
    def layer(inputs, weights):
        return m.matmul(inputs, weights)

    out = [str(layer(inp, weight).dtype)]
    with m.autocast("cpu"):
        with m.autocast("cpu", enabled=False):
            out.append(str(m.mm(inp, weight).dtype))
        with m.no_grad():
            r = m.mm(inp, weight)
            out += [str(r.dtype), str(r.requires_grad)]
    out.append(str(m.mm(inp, weight).dtype))
    return out


@claim("nb04.autocast_decorator_nesting_no_grad")
def test_decorator_nesting_and_no_grad(torch_ref):
    real = decorator_program(torch_ref)
    assert real == ["torch.bfloat16", "torch.float32", "torch.bfloat16", "False", "torch.float32"]
    assert decorator_program(lab_torch) == real


@claim("nb04.autocast_stale_cache")
def test_stale_cache_error(torch_ref):
    def program(m):
        weight = m.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
        inp = m.tensor([[1.0, 2.0], [3.0, 4.0]])
        with m.autocast("cpu"):
            with m.autocast("cpu", dtype=m.float16):
                m.mm(inp, weight)
            with pytest.raises(RuntimeError) as e:
                m.mm(inp, weight)
            m.clear_autocast_cache()
            fixed = str(m.mm(inp, weight).dtype)
        return str(e.value), fixed

    real = program(torch_ref)
    assert real == ("expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != c10::Half", "torch.bfloat16")
    assert program(lab_torch) == real


@claim("nb04.bfloat16_values")
def test_bfloat16_values(torch_ref):
    import pathlib

    def program(m):
        t = m.tensor([1.0, 0.1, 3.14159, 1e-5], dtype=m.bfloat16)
        return (repr(t), t.element_size(), str(m.promote_types(m.bfloat16, m.float16)),
                m.tensor([0.1], dtype=m.bfloat16).item())

    real = program(torch_ref)
    assert real[1:] == (2, "torch.float32", 0.10009765625)
    assert program(lab_torch) == real
    with pytest.raises(TypeError, match="BFloat16"):
        torch_ref.ones(1, dtype=torch_ref.bfloat16).numpy()
    with pytest.raises(TypeError, match="BFloat16"):
        lab_torch.ones(1, dtype=lab_torch.bfloat16).numpy()
    include = pathlib.Path(torch_ref.__file__).parent / "include"
    assert "#include <torch/headeronly/util/BFloat16.h>" in (include / "c10" / "util" / "BFloat16.h").read_text()
    headeronly = (include / "torch" / "headeronly" / "util" / "BFloat16.h").read_text()
    assert re.search(r"namespace detail \{.*?uint16_t round_to_nearest_even\(float src\)", headeronly, re.S)


@claim("nb04.cached_cast_device_type")
def test_cached_cast_takes_the_device_type(torch_ref):
    assert re.search(r"Tensor cached_cast\(\s*at::ScalarType to_type,\s*const Tensor& arg,\s*"
                     r"c10::DeviceType device_type = c10::DeviceType::CUDA\);", autocast_header(torch_ref))
    # DispatchKey::Autocast is AutocastCUDA, whose lower-precision dtype is half (kHalf)
    assert torch_ref.get_autocast_dtype("cuda") == torch_ref.float16


@claim("nb04.autocast_cache_process_wide")
def test_weight_cache_is_shared_by_threads(torch_ref):
    import threading

    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    weight, inp = torch_ref.randn(2, 2, requires_grad=True), torch_ref.randn(2, 2)
    seen = {}

    def other_thread():
        with torch_ref.autocast("cpu"), Log() as log:
            torch_ref.mm(weight, inp)
        seen["ops"] = log.seen

    with torch_ref.autocast("cpu"):
        torch_ref.mm(weight, inp)  # this thread fills the cache
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert seen["ops"] == ["aten._to_copy", "aten.mm"]  # only inp is cast: the weight's cast was found


@claim("nb04.bfloat16_bits")
def test_bfloat16_has_float32_exponent_and_7_mantissa_bits(torch_ref):
    bf16, f32 = torch_ref.finfo(torch_ref.bfloat16), torch_ref.finfo(torch_ref.float32)
    assert (bf16.bits, bf16.eps, f32.eps) == (16, 2.0**-7, 2.0**-23)
    assert bf16.max == pytest.approx(f32.max, rel=1e-2) and bf16.tiny == f32.tiny  # same exponent range
