"""Claims notebook 07 (boxing, fallbacks, fallthrough, BackendSelect) makes about PyTorch 2.13.

Each test carries the id of a ``<!-- claim: ... -->`` marker in the notebook (see ``claims.py``).
"""

from __future__ import annotations

import re

import pytest
from claims import claim


def table(torch_ref, op: str) -> dict[str, str]:
    """dump_table rows: key -> the rest of the line."""
    rows = {}
    for line in torch_ref._C._dispatch_dump_table(op).splitlines():
        key, sep, rest = line.partition(": ")
        if sep:
            rows[key] = rest
    return rows


@pytest.fixture
def scratch_library(torch_ref):
    """A fresh namespace with one operator; its registrations go away with the library."""
    libs = []

    def make(schema: str):
        lib = torch_ref.library.Library("claims_nb07", "FRAGMENT")
        lib.define(schema)
        libs.append(lib)
        return lib

    yield make
    for lib in libs:
        lib._destroy()


@claim("nb07.boxed_unboxed_brackets")
def test_boxed_unboxed_brackets(torch_ref, scratch_library):
    dump = torch_ref._C._dispatch_dump("aten::add.Tensor").splitlines()
    (cpu,) = [x for x in dump if x.startswith("CPU: ")]
    assert cpu.endswith(":: (Tensor _0, Tensor _1, Scalar _2) -> Tensor _0 [ boxed unboxed ]")
    lib = scratch_library("scale(Tensor self, float factor) -> Tensor")
    lib.impl("scale", lambda self, factor: self * factor, "CPU")
    (python_kernel,) = [x for x in torch_ref._C._dispatch_dump("claims_nb07::scale").splitlines() if x.startswith("CPU: ")]
    assert python_kernel.endswith(":: (none) [ boxed ]")


@claim("nb07.one_fallback_per_key")
def test_one_fallback_per_key(torch_ref):
    lib = torch_ref.library.Library("_", "IMPL")
    try:
        with pytest.raises(RuntimeError) as e:
            lib.fallback(lambda *args: None, "Tracer")
    finally:
        lib._destroy()
    assert re.match(
        r"Tried to register multiple backend fallbacks for the same dispatch key Tracer; previous registration "
        r"registered at \S*torch/csrc/autograd/TraceTypeManual\.cpp:296, new registration registered at ",
        str(e.value),
    )


@claim("nb07.add_fallthrough_keys")
def test_add_fallthrough_keys(torch_ref):
    rows = table(torch_ref, "aten::add.Tensor")
    fallthrough = [k for k, rest in rows.items() if rest.startswith("fallthrough ")]
    assert fallthrough == [
        "BackendSelect", "ADInplaceOrView",
        "AutocastCPU", "AutocastMTIA", "AutocastMAIA", "AutocastXPU", "AutocastMPS", "AutocastCUDA",
        "FuncTorchVmapMode", "VmapMode",
    ]  # fmt: skip
    for key in ("AutocastIPU", "AutocastHPU", "AutocastXLA", "AutocastPrivateUse1"):
        assert key not in rows
    exclude = str(torch_ref._C._dispatch_tls_local_exclude_set())
    assert all(k in exclude for k in ("AutocastIPU", "AutocastHPU", "AutocastXLA", "AutocastPrivateUse1"))


@claim("nb07.backend_select_registrations")
def test_backend_select_registrations(torch_ref):
    import pathlib

    import torchgen
    from torchgen.gen import needs_backend_select, parse_native_yaml
    from torchgen.selective_build.selector import SelectiveBuilder

    folder = pathlib.Path(torchgen.__file__).parent / "packaged" / "ATen" / "native"
    parsed = parse_native_yaml(str(folder / "native_functions.yaml"), str(folder / "tags.yaml"))
    selector = SelectiveBuilder.get_nop_selector()
    generated = {"aten::" + str(f.func.name) for f in parsed.native_functions if needs_backend_select(f, selector)}
    assert len(generated) == 81
    regs = set(torch_ref._C._dispatch_get_registrations_for_dispatch_key("BackendSelect"))
    assert len(regs) == 94
    assert {r for r in regs if r.startswith("aten::")} == generated
    python_registered = regs - generated
    assert len(python_registered) == 13 and all(r.startswith(("prims::", "debugprims::")) for r in python_registered)
    assert {"aten::randn", "aten::empty.memory_format", "aten::_to_copy", "aten::to.dtype_layout"} <= regs
    assert not any(r.split("::")[1].startswith("new_") or r.split(".")[0].endswith("_like") for r in regs)


@claim("nb07.backend_select_with_tensors")
def test_backend_select_with_tensors(torch_ref):
    import inspect

    from torchgen.gen import ComputeBackendSelect

    source = inspect.getsource(ComputeBackendSelect)
    assert "c10::detail::multi_dispatch_key_set(" in source
    assert "DispatchKeySet(DispatchKeySet::FULL_AFTER, DispatchKey::BackendSelect)" in source
    assert "c10::impl::computeDispatchKeySet(_dk_set, _dk_mask)" in source
    # and it works: a tensor-taking BackendSelect op keeps the tensor's autograd keys
    x = torch_ref.ones(2, requires_grad=True)
    assert x.to(dtype=torch_ref.float64, device="cpu").grad_fn.name() == "ToCopyBackward0"


def logged_key_sets(torch_ref, call) -> list[tuple[str, str]]:
    """(operator, key set) of every dispatch during `call`, through a fallback on TESTING_ONLY_GenericMode."""
    mode = torch_ref._C._parse_dispatch_key("TESTING_ONLY_GenericMode")
    log = []

    def fallback(ks, op, *args, **kwargs):
        log.append((str(op), str(ks.remove(mode))))
        return op.redispatch(ks.remove(mode), *args, **kwargs)

    lib = torch_ref.library.Library("_", "IMPL")
    lib.fallback(fallback, "TESTING_ONLY_GenericMode", with_keyset=True)
    try:
        with torch_ref._C._IncludeDispatchKeyGuard(mode):
            call()
    finally:
        lib._destroy()
    return log


@claim("nb07.randn_nested_key_sets")
def test_randn_nested_key_sets(torch_ref):
    assert logged_key_sets(torch_ref, lambda: torch_ref.randn(2, 3)) == [
        ("aten.randn.default", "DispatchKeySet(BackendSelect)"),
        ("aten.empty.memory_format", "DispatchKeySet(BackendSelect)"),
        ("aten.normal_.default", "DispatchKeySet(CPU)"),
    ]
    # a tensor made outside randn does carry the keys that the guard kept out
    assert str(torch_ref._C._dispatch_keys(torch_ref.empty(2))) == (
        "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    )


def profiled(torch_ref, call) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {row.key: row.count for row in prof.key_averages()}


@claim("nb07.randn_profiler_rows")
def test_randn_profiler_rows(torch_ref):
    assert profiled(torch_ref, lambda: torch_ref.randn(2, 3)) == {"aten::randn": 1, "aten::empty": 1, "aten::normal_": 1}
    assert profiled(torch_ref, lambda: torch_ref.randn(2, 3, device="meta")) == {
        "aten::randn": 1, "prims::normal": 1, "aten::empty_strided": 1,
    }  # fmt: skip


@claim("nb07.no_tensor_arguments_error")
def test_no_tensor_arguments_error(torch_ref, scratch_library):
    lib = scratch_library("three(*, Device? device=None) -> Tensor")
    lib.impl("three", lambda device=None: torch_ref.ones(3), "CPU")
    with pytest.raises(NotImplementedError) as e:
        torch_ref.ops.claims_nb07.three(device="cpu")
    assert str(e.value).startswith(
        "There were no tensor arguments to this function (e.g., you passed an empty list of Tensors), "
        "but no fallback function is registered for schema claims_nb07::three."
    )


@claim("nb07.per_backend_fallthrough")
def test_per_backend_fallthrough(torch_ref, scratch_library):
    lib = scratch_library("myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: a.detach() + b.detach(), "CPU")
    lib.impl("myadd", lambda a, b: torch_ref.empty_like(a.detach()), "Meta")
    x = torch_ref.ones(2, requires_grad=True)
    m = torch_ref.ones(2, device="meta", requires_grad=True)
    assert torch_ref.ops.claims_nb07.myadd(x, x).grad_fn.name() == "torch::autograd::WarnNotImplemented"
    lib.impl("myadd", torch_ref.library.fallthrough_kernel, "AutogradCPU")
    assert torch_ref.ops.claims_nb07.myadd(x, x).grad_fn is None
    assert torch_ref.ops.claims_nb07.myadd(m, m).grad_fn.name() == "torch::autograd::WarnNotImplemented"
    assert table(torch_ref, "claims_nb07::myadd")["AutogradCPU"].startswith("fallthrough registered at ")


@claim("nb07.randn_requires_grad_outside")
def test_randn_requires_grad_outside(torch_ref):
    import pathlib

    path = pathlib.Path(torch_ref.__file__).parent / "include" / "torch" / "csrc" / "autograd" / "generated"
    text = (path / "variable_factories.h").read_text()
    start = text.index("inline at::Tensor randn(at::IntArrayRef size, at::TensorOptions options = {}) {")
    body = text[start : text.index("\n}", start)]
    assert "at::AutoDispatchBelowADInplaceOrView guard;" in body
    assert "autograd::make_variable(at::randn(size, at::TensorOptions(options).requires_grad(::std::nullopt))" in body
    assert "/*requires_grad=*/options.requires_grad()" in body
    # and the result is a leaf that requires grad, with no grad_fn
    r = torch_ref.randn(2, requires_grad=True)
    assert r.requires_grad and r.is_leaf and r.grad_fn is None
