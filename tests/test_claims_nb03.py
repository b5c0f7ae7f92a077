"""Claims of notebook 03 (walk torch.add) about PyTorch 2.13, checked against an installed PyTorch."""

from __future__ import annotations

import pytest
from claims import claim
from test_claims_nb02 import call_key_set, highest


@claim("nb03.torch_function_override")
def test_binding_hands_the_call_to_torch_function(torch_ref):
    calls = []

    class Logged(torch_ref.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            return "handled by __torch_function__"

    a = torch_ref.ones(2).as_subclass(Logged)
    assert torch_ref.add(a, torch_ref.ones(2)) == "handled by __torch_function__"
    assert calls == ["add"]

    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(f"mode: {func.__name__}")
            return "handled by the mode"

    x, y = torch_ref.ones(2), torch_ref.ones(2)
    with Mode():  # plain tensors, but a mode is active
        assert torch_ref.add(x, y) == "handled by the mode"
    assert calls == ["add", "mode: add"]


@claim("nb03.wrapped_number")
def test_wrapped_numbers(torch_ref):
    assert torch_ref._C._should_allow_numbers_as_tensors("add")
    assert not torch_ref._C._should_allow_numbers_as_tensors("atan2")
    with pytest.raises(TypeError, match="must be Tensor, not int"):
        torch_ref.atan2(torch_ref.ones(2), 2)
    assert torch_ref.add(torch_ref.tensor([1, 1]), 2).dtype == torch_ref.int64
    assert torch_ref.add(torch_ref.tensor([1.0], dtype=torch_ref.float32), 2.5).dtype == torch_ref.float32


@claim("nb03.forward_ad")
def test_forward_mode_ad_through_add(torch_ref):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        dual = fwAD.make_dual(torch_ref.tensor([1.0, 2.0]), torch_ref.tensor([1.0, 3.0]))
        out = torch_ref.add(dual, torch_ref.tensor([5.0, 5.0]), alpha=2)
        assert fwAD.unpack_dual(out).tangent.tolist() == [1.0, 3.0]


@claim("nb03.redispatch_not_profiled")
def test_one_profiler_event_for_add(torch_ref):
    x = torch_ref.ones(2, requires_grad=True)
    y = torch_ref.ones(2)
    with torch_ref.profiler.profile() as prof:
        torch_ref.add(x, y)
    assert [event.name for event in prof.events()] == ["aten::add"]


@claim("nb03.meta_keyset")
def test_meta_add_keyset(torch_ref):
    m = torch_ref.empty(2, 3, device="meta")
    ks = call_key_set(torch_ref, "aten::add.Tensor", m, m)
    assert repr(ks) == "DispatchKeySet(Meta, AutogradMeta)" and highest(torch_ref, ks) == "AutogradMeta"


def _wheel_has_symbol(torch_ref, mangled: str) -> bool:
    """Whether libtorch_cpu.so's symbol table holds a mangled name (``12_GLOBAL__N_1`` is an anonymous namespace)."""
    import mmap
    import pathlib

    library = pathlib.Path(torch_ref.__file__).parent / "lib" / "libtorch_cpu.so"
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(mangled.encode()) != -1


@claim("nb03.anonymous_namespaces")
def test_wrappers_and_autograd_kernels_are_file_local(torch_ref):
    assert _wheel_has_symbol(torch_ref, "_ZN2at12_GLOBAL__N_122wrapper_CPU_add_TensorE")
    assert _wheel_has_symbol(torch_ref, "_ZN5torch8autograd12VariableType12_GLOBAL__N_110add_TensorE")
    assert not _wheel_has_symbol(torch_ref, "_ZN2at22wrapper_CPU_add_TensorE")  # no exported twin
    assert _wheel_has_symbol(torch_ref, "_ZN2at3cpu3addERKNS_6TensorES3_RKN3c106ScalarE")  # at::cpu::add is public


@claim("nb03.add_fallthrough_fallbacks")
def test_add_backendselect_and_adinplaceorview_are_fallthrough_fallbacks(torch_ref):
    rows = dict(line.split(": ", 1) for line in torch_ref._C._dispatch_dump_table("aten::add.Tensor").splitlines())
    for key, source in (("BackendSelect", "BackendSelectFallbackKernel.cpp"), ("ADInplaceOrView", "VariableFallbackKernel.cpp")):
        assert rows[key].startswith("fallthrough registered at ") and source in rows[key], rows[key]
        assert rows[key].endswith("[backend fallback]")
