"""Dispatch-table precedence: the lab's computed tables against PyTorch 2.13 (vectors and live)."""

from __future__ import annotations

import itertools
import random
import re

import pytest

import labsupport as lab
from labsupport import DispatchKey as K


def _named_kernel(name: str):
    def kernel(x):
        return x

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


def _op_with(registrations, fallthrough=()):
    d = lab.Dispatcher("test")
    lib = lab.Library("t", "DEF", dispatcher=d)
    lib.define("foo(Tensor x) -> Tensor")
    for key in registrations:
        lib.impl("foo", _named_kernel("fn_" + key), key)
    for key in fallthrough:
        lib.impl("foo", lab.fallthrough_kernel, key)
    return d, lib, d.find_schema_or_throw("t::foo")


def _check_vector_case(case):
    d, lib, op = _op_with(case["registrations"])
    for key_name, expected in case["table"].items():
        entry = op.table[lab.c10.dispatch_key_set.SLOT_OF_KEY[K[key_name]]]
        assert entry.label == expected["label"], (case["registrations"], key_name)
        if expected["kernel"] == "<fallback>":
            assert entry.label == "backend fallback"
        elif expected["kernel"] is not None:
            assert entry.kernel_name == expected["kernel"], (case["registrations"], key_name)
        assert entry.is_fallthrough == expected["fallthrough"], (case["registrations"], key_name)


def test_python_dispatcher_vectors(vectors):
    for case in vectors["python_dispatcher_tables"]:
        _check_vector_case(case)


def test_wide_table_vectors(vectors):
    for case in vectors["wide_tables"]:
        _check_vector_case(case)


def test_table_is_rebuilt_after_every_change():
    d, lib, op = _op_with(["CompositeImplicitAutograd"])
    assert op.table[lab.c10.dispatch_key_set.SLOT_OF_KEY[K.AutogradOther]].label == "math kernel"
    extra = lab.Library("t", "IMPL", dispatcher=d)
    extra.impl("foo", _named_kernel("fn_QuantizedCPU"), "QuantizedCPU")
    # PyTorch 2.13's incremental update leaves this entry stale; the canonical answer is ambiguity.
    assert op.table[lab.c10.dispatch_key_set.SLOT_OF_KEY[K.AutogradOther]].label == "ambiguous autogradother"
    extra.close()
    assert op.table[lab.c10.dispatch_key_set.SLOT_OF_KEY[K.AutogradOther]].label == "math kernel"


def test_per_op_fallthrough_masks_only_its_backend():
    d, lib, op = _op_with(["CPU", "Meta"], fallthrough=["AutogradCPU"])
    assert op.backend_masks is not None
    cpu = int(lab.DispatchKeySet([K.CPU, K.AutogradCPU]))
    meta = int(lab.DispatchKeySet([K.Meta, K.AutogradMeta]))
    assert not lab.DispatchKeySet.from_raw(op.fallthrough_mask(cpu)).has(K.AutogradCPU)
    assert lab.DispatchKeySet.from_raw(op.fallthrough_mask(meta)).has(K.AutogradMeta)
    # BackendSelect and ADInplaceOrView are global fallthroughs: masked for every backend
    assert not lab.DispatchKeySet.from_raw(op.mask).has(K.BackendSelect)


# ---------------------------------------------------------------- live comparison with PyTorch

KEYS = [
    "CPU", "CUDA", "XLA", "Meta", "FPGA", "Lazy", "QuantizedCPU", "SparseCPU",
    "AutogradCPU", "AutogradCUDA", "AutogradXLA", "AutogradOther", "AutogradMeta",
    "Autograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
    "CompositeImplicitAutograd",
]  # fmt: skip
FALLTHROUGH_KEYS = ["AutogradCPU", "AutogradXLA", "CPU", "XLA", "AutocastCPU"]


def _normalize_torch(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = re.sub(r"registered at /__w/pytorch/pytorch/", "registered at ", line)
        line = re.sub(r"fallthrough registered at [^\[]*\[kernel\]", "fallthrough <site> [kernel]", line)
        lines.append(line)
    return lines


def _normalize_lab(text: str) -> list[str]:
    return [re.sub(r"fallthrough registered at [^\[]*\[kernel\]", "fallthrough <site> [kernel]", line)
            for line in text.splitlines()]  # fmt: skip


@pytest.mark.torch
def test_dump_table_agrees_with_pytorch(torch_ref):
    torch = torch_ref
    rng = random.Random(7)
    cases = [list(c) for r in (1, 2) for c in itertools.combinations(KEYS, r)]
    cases += [rng.sample(KEYS, rng.randint(3, 6)) for _ in range(150)]
    for i, keys in enumerate(cases):
        ft = [k for k in rng.sample(FALLTHROUGH_KEYS, rng.randint(0, 1)) if k not in keys]
        ns = f"labcmp{i}"
        ref = torch._C._dispatch_library("FRAGMENT", ns, "")
        ref.def_("foo(Tensor x) -> Tensor")
        for key in keys:
            ref.impl_t_t("foo", dispatch=key, debug="fn_" + key)
        ft_lib = torch.library.Library(ns, "IMPL")
        for key in ft:
            ft_lib.impl("foo", torch.library.fallthrough_kernel, key)
        expected = _normalize_torch(torch._C._dispatch_dump_table(f"{ns}::foo"))
        d, lib, op = _op_with(keys, fallthrough=ft)
        actual = _normalize_lab(d.dump_table("t::foo"))
        assert actual == expected, (keys, ft)
        del ft_lib, ref


@pytest.mark.torch
def test_all_python_dispatcher_registration_sets_agree(torch_ref):
    from torch._python_dispatcher import PythonDispatcher as TorchPythonDispatcher

    keys = lab.PythonDispatcher.supported_keys
    checked = 0
    for r in range(len(keys) + 1):
        for combo in itertools.combinations(keys, r):
            combo = list(combo)
            if "CompositeImplicitAutograd" in combo and "CompositeExplicitAutograd" in combo:
                continue
            ref, mine = TorchPythonDispatcher(), lab.PythonDispatcher()
            ref.register(combo)
            mine.register(combo)
            assert mine.dispatchTable() == ref.dispatchTable(), combo
            assert mine.registrations() == ref.registrations(), combo
            assert mine.rawRegistrations() == ref.rawRegistrations(), combo
            # the raw table names the same files; PyTorch's carry its build machine's checkout folder
            assert mine.rawDispatchTable() == ref.rawDispatchTable().replace("/__w/pytorch/pytorch/", ""), combo
            checked += 1
            del ref
    assert checked == 1536


def test_python_dispatcher_rules():
    d = lab.PythonDispatcher()
    assert d.keys()[:2] == ["CPU", "AutogradCPU"]
    with pytest.raises(RuntimeError, match="duplicates"):
        d.register(["CPU", "CPU"])
    with pytest.raises(RuntimeError, match="both CompositeImplicitAutograd and CompositeExplicitAutograd"):
        d.register(["CompositeImplicitAutograd", "CompositeExplicitAutograd"])
    with pytest.raises(RuntimeError, match="not supported"):
        d.register(["CUDA"])
    d.register(["CPU", "CompositeImplicitAutograd"])
    assert "AutogradCPU     [backend fallback]" in d.dispatchTable()
    assert "AutogradOther   fn_CompositeImplicitAutograd [math kernel]" in d.dispatchTable()
