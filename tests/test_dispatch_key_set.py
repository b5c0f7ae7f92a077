"""DispatchKey numbering and DispatchKeySet algebra, checked against PyTorch 2.13's facts."""

from __future__ import annotations

import random

import pytest

from labsupport import DispatchKey, DispatchKeySet
from labsupport.c10 import dispatch_key_set as dks

K = DispatchKey


def test_enum_values_match_pytorch():
    assert K.Undefined.value == 0
    assert K.Dense.value == 1 and K.PythonDispatcher.value == 46
    assert K.CPU.value == 49 and K.Meta.value == 64
    assert K.QuantizedCPU.value == 66 and K.SparseCPU.value == 83 and K.SparseCsrCPU.value == 100
    assert K.NestedTensorCPU.value == 117 and K.AutogradCPU.value == 134 and K.AutogradMeta.value == 149
    assert K.Autograd.value == 150 and K.CompositeExplicitAutogradNonFunctional.value == 155
    assert K.Autocast is K.AutocastCUDA and K.CatchAll is K.Undefined
    assert K.DefaultBackend is K.CompositeExplicitAutograd


def test_cross_product_and_repr():
    s = DispatchKeySet(K.CPU) | DispatchKeySet(K.AutogradCUDA)
    assert repr(s) == "DispatchKeySet(CPU, CUDA, AutogradCPU, AutogradCUDA)"
    assert s.has(K.AutogradCPU) and s.has(K.CUDA)
    t = DispatchKeySet(K.SparseCPU) | DispatchKeySet(K.QuantizedCUDA)
    assert repr(t) == "DispatchKeySet(QuantizedCPU, QuantizedCUDA, SparseCPU, SparseCUDA)"
    assert t.highest_priority_key() is K.SparseCUDA


def test_raw_bits():
    assert int(DispatchKeySet([K.CPU, K.ADInplaceOrView, K.AutogradCPU, K.AutocastCPU])) == 0x9400010001
    assert int(DispatchKeySet(K.AutogradCPU)) == 0x1000000001
    assert int(DispatchKeySet(K.Meta)) == 0x18000
    assert int(DispatchKeySet(K.PythonDispatcher)) == 0x2000000000000000
    assert int(DispatchKeySet.full()) == 0x3FFFFFFFFFFFFFFF
    assert int(dks.after_autograd_keyset) == 0x20000007FFFFFFFF


def test_minus_keeps_backend_bits():
    s = DispatchKeySet([K.CPU, K.AutogradCUDA]).remove(K.AutogradCPU)
    assert repr(s) == "DispatchKeySet(CPU, CUDA)"
    assert DispatchKeySet([K.CPU, K.AutogradCPU]) - DispatchKeySet(K.AutogradCPU) == DispatchKeySet(K.CPU)


def test_building_block_alone_prints_empty_but_is_not_empty():
    s = DispatchKeySet(K.AutogradFunctionality)
    assert repr(s) == "DispatchKeySet()" and int(s) == 0x1000000000
    assert s.highest_priority_key() is K.StartOfAutogradFunctionalityBackends
    assert DispatchKeySet(K.Dense).highest_priority_key() is K.StartOfDenseBackends


def test_highest_priority_examples():
    cpu_tensor = DispatchKeySet([K.CPU, K.ADInplaceOrView, K.AutogradCPU, K.AutocastCPU])
    assert cpu_tensor.highest_priority_key() is K.AutocastCPU
    assert DispatchKeySet([K.CPU, K.CUDA]).highest_priority_key() is K.CUDA
    assert DispatchKeySet([K.CPU, K.Meta]).highest_priority_key() is K.Meta
    assert DispatchKeySet().highest_priority_key() is K.Undefined


def test_alias_sets_have_pytorch_sizes():
    sizes = {
        K.Autograd: 18,
        K.CompositeExplicitAutograd: 69,
        K.CompositeExplicitAutogradNonFunctional: 47,
        K.CompositeImplicitAutograd: 103,
        K.CompositeImplicitAutogradNestedTensor: 17,
        K.FuncTorchBatchedDecomposition: 1,
    }
    for alias, n in sizes.items():
        assert len(dks.runtime_keys_of_alias(alias)) == n, alias
    assert not dks.is_included_in_alias(K.Functionalize, K.CompositeImplicitAutograd)
    assert dks.backend_key_set_from_autograd(K.AutogradHIP) == 0
    assert dks.backend_key_set_from_autograd(K.AutogradCPU) == int(DispatchKeySet(K.CPU))


def test_table_slots():
    assert dks.NUM_RUNTIME_ENTRIES == 137
    assert dks.SLOT_KEYS[0] is K.Undefined and dks.SLOT_KEYS[1] is K.CPU and dks.SLOT_KEYS[16] is K.Meta
    assert dks.SLOT_KEYS[94] is K.ADInplaceOrView and dks.SLOT_KEYS[95] is K.AutogradOther
    assert dks.SLOT_KEYS[96] is K.AutogradCPU and dks.SLOT_KEYS[136] is K.PythonDispatcher
    assert list(dks.SLOT_KEYS[1:]) == list(DispatchKeySet.full())
    for slot, key in enumerate(dks.SLOT_KEYS[1:], start=1):
        assert dks.slot_index(int(DispatchKeySet(key))) == slot


def test_constructor_rejects_raw_ints_and_unknown_names():
    with pytest.raises(TypeError):
        DispatchKeySet(5)
    with pytest.raises(ValueError, match="AutogradCPU"):
        DispatchKeySet("AutogradCPUU")
    assert DispatchKeySet.from_raw(0x1000000001) == DispatchKeySet(K.AutogradCPU)


def _shared_keys(torch):
    names = [k.name for k in dks.SLOT_KEYS[1:]]
    return [n for n in names if hasattr(torch._C.DispatchKey, n)]


@pytest.mark.torch
def test_random_sets_agree_with_pytorch(torch_ref):
    torch = torch_ref
    names = _shared_keys(torch)
    rng = random.Random(1234)
    for _ in range(1500):
        chosen = rng.sample(names, rng.randint(0, 6))
        ref = torch._C.DispatchKeySet(torch._C.DispatchKey.Undefined)
        for n in chosen:
            ref = ref | torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, n))
        lab = DispatchKeySet(chosen)
        assert repr(lab) == str(ref), chosen
        assert int(lab) == ref.raw_repr(), chosen
        assert lab.highest_priority_key().name == ref.highestPriorityTypeId().name, chosen


@pytest.mark.torch
def test_full_after_agrees_with_pytorch(torch_ref):
    torch = torch_ref
    after = torch._C._after_autograd_keyset if hasattr(torch._C, "_after_autograd_keyset") else None
    if after is not None:
        assert int(dks.after_autograd_keyset) == after.raw_repr()
    ref = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.AutogradOther)
    assert int(dks.after_autograd_keyset) == ref.raw_repr()
    ref = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.ADInplaceOrView)
    assert int(dks.after_ADInplaceOrView_keyset) == ref.raw_repr()


# ---- the compact view (a reading aid; repr stays PyTorch's) ----

DEFAULT_EXCLUDE = DispatchKeySet(
    f"Autocast{backend}"
    for backend in ("CPU", "MTIA", "MAIA", "XPU", "IPU", "HPU", "XLA", "MPS", "CUDA", "PrivateUse1")
)


def test_compact_folds_all_ten_autocast_keys_and_repr_is_unchanged():
    assert repr(DEFAULT_EXCLUDE).count("Autocast") == 10  # repr is still PyTorch's full text
    assert DEFAULT_EXCLUDE.compact() == "DispatchKeySet(Autocast{all 10})"
    with_autograd = DEFAULT_EXCLUDE | DispatchKeySet([K.AutogradOther, K.AutogradNestedTensor])
    assert with_autograd.compact() == "DispatchKeySet(AutogradOther, AutogradNestedTensor, Autocast{all 10})"


def test_compact_names_what_is_missing_from_a_large_subset():
    assert (DEFAULT_EXCLUDE - DispatchKeySet(K.AutocastCPU)).compact() == "DispatchKeySet(Autocast{all but CPU})"
    two_off = DEFAULT_EXCLUDE - DispatchKeySet([K.AutocastCPU, K.AutocastCUDA])
    assert two_off.compact() == "DispatchKeySet(Autocast{all but CPU,CUDA})"


def test_compact_lists_a_small_subset_in_priority_order_and_keeps_its_place():
    ks = DispatchKeySet([K.CPU, K.CUDA, K.AutogradCPU, K.AutocastCUDA, K.AutocastCPU, K.FuncTorchBatched])
    assert ks.compact() == "DispatchKeySet(CPU, CUDA, AutogradCPU, AutogradCUDA, Autocast{CPU,CUDA}, FuncTorchBatched)"


def test_compact_equals_repr_without_two_autocast_keys():
    for ks in (
        DispatchKeySet(),
        DispatchKeySet([K.CPU, K.ADInplaceOrView, K.AutogradCPU, K.AutocastCPU]),
        DispatchKeySet([K.Meta, K.ADInplaceOrView, K.AutogradMeta]),
        DispatchKeySet([K.BackendSelect, K.ADInplaceOrView]),
    ):
        assert ks.compact() == repr(ks)


def test_compact_agrees_with_repr_on_random_sets():
    rng = random.Random(11)
    autocast = {key.name for key in dks.AUTOCAST_KEYS}
    for _ in range(300):
        ks = DispatchKeySet.from_raw(rng.getrandbits(62))
        full = [key.name for key in ks]
        short = ks.compact().removeprefix("DispatchKeySet(").removesuffix(")")
        items = short.split(", ") if short else []
        kept = [name for name in full if name not in autocast]
        n_autocast = sum(name in autocast for name in full)
        if n_autocast < 2:
            assert items == full
        else:
            assert [item for item in items if not item.startswith("Autocast{")] == kept
            assert sum(item.startswith("Autocast{") for item in items) == 1
