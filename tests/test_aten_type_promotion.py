"""labsupport.aten.dtype and labsupport.aten.type_promotion against torch (promote_types, can_cast,
result_type with its three tiers), plus the dtype objects themselves."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from labsupport.aten import dtype as D
from labsupport.aten.scalar_tensor import wrapped_scalar_tensor as _wrap
from labsupport.aten.tensor import TensorBase
from labsupport.aten.testing import from_numpy
from labsupport.aten.type_promotion import can_cast, promote_types, result_type


def wrapped_scalar_tensor(value):
    """A Python number as the binding passes it: a 0-dim "wrapped number" tensor."""
    return _wrap(value, TensorBase)


ALL = D.all_dtypes


@pytest.fixture
def restore_default_dtype():
    yield
    D.set_default_dtype(D.float32)
    try:
        import torch
    except ImportError:
        return
    torch.set_default_dtype(torch.float32)


def torch_dtype(torch, d: D.dtype):
    return getattr(torch, d.name)


# --- dtype objects ---------------------------------------------------------------------------


def test_dtype_attributes_match_torch():
    torch = pytest.importorskip("torch")
    for d in ALL:
        t = torch_dtype(torch, d)
        assert repr(d) == repr(t) and str(d) == str(t)
        assert d.is_floating_point == t.is_floating_point
        assert d.is_signed == t.is_signed
        assert d.itemsize == t.itemsize
        assert d.np == torch.empty(0, dtype=t).numpy().dtype


def test_dtype_aliases_categories_and_immutability():
    assert D.float is D.float32 and D.double is D.float64 and D.half is D.float16 and D.long is D.int64
    assert [D.bool.category, D.int64.category, D.float32.category] == [0, 1, 2]
    assert D.float32.name == "float32"
    with pytest.raises(AttributeError):
        D.float32.name = "x"
    assert pickle.loads(pickle.dumps(D.float16)) is D.float16
    assert D.from_numpy_dtype(np.dtype("float64")) is D.float64
    with pytest.raises(TypeError, match=r"can't convert np\.ndarray of type numpy\.complex128"):
        D.from_numpy_dtype(np.complex128)


def test_default_dtype(restore_default_dtype):
    torch = pytest.importorskip("torch")
    assert D.get_default_dtype() is D.float32
    for bad in (D.int64, D.bool):
        with pytest.raises(TypeError) as theirs:
            torch.set_default_dtype(torch_dtype(torch, bad))
        with pytest.raises(TypeError) as ours:
            D.set_default_dtype(bad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError) as theirs:
        torch.set_default_dtype("float")
    with pytest.raises(TypeError) as ours:
        D.set_default_dtype("float")
    assert str(ours.value) == str(theirs.value)
    D.set_default_dtype(D.float64)
    assert D.get_default_dtype() is D.float64


# --- promote_types / can_cast ------------------------------------------------------------------


def test_promote_types_and_can_cast_tables_match_torch():
    torch = pytest.importorskip("torch")
    for a in ALL:
        for b in ALL:
            ta, tb = torch_dtype(torch, a), torch_dtype(torch, b)
            assert promote_types(a, b) is getattr(D, str(torch.promote_types(ta, tb)).split(".")[1]), (a, b)
            assert can_cast(a, b) == torch.can_cast(ta, tb), (a, b)


# --- result_type -------------------------------------------------------------------------------

PY_NUMBERS = [True, False, 3, -7, 0, 2.5, -0.0]


def _random_operand(rng: random.Random):
    """('dim' | 'zero' | 'py', dtype or Python value)."""
    kind = rng.choice(["dim", "zero", "py"])
    if kind == "py":
        return kind, rng.choice(PY_NUMBERS)
    return kind, rng.choice(ALL)


def _make_pair(torch, kind, spec):
    if kind == "py":
        return spec, spec
    shape = (2,) if kind == "dim" else ()
    t = torch.zeros(shape, dtype=torch_dtype(torch, spec))
    return t, from_numpy(t.numpy())


@pytest.mark.parametrize("default", [D.float32, D.float64, D.float16])
def test_result_type_random_against_torch(default, restore_default_dtype):
    torch = pytest.importorskip("torch")
    D.set_default_dtype(default)
    torch.set_default_dtype(torch_dtype(torch, default))
    rng = random.Random(1234)
    for _ in range(600):
        (k1, s1), (k2, s2) = _random_operand(rng), _random_operand(rng)
        t1, l1 = _make_pair(torch, k1, s1)
        t2, l2 = _make_pair(torch, k2, s2)
        expected = torch.result_type(t1, t2)
        assert repr(result_type(l1, l2)) == repr(expected), (k1, s1, k2, s2)


def test_result_type_tier_examples():
    f32 = from_numpy(np.zeros(2, np.float32))
    i64 = from_numpy(np.zeros(2, np.int64))
    i32 = from_numpy(np.zeros(2, np.int32))
    b = from_numpy(np.zeros(2, bool))
    zero_f64 = from_numpy(np.zeros((), np.float64))
    zero_i64 = from_numpy(np.zeros((), np.int64))
    assert result_type(i64, 2.5) is D.float32  # a Python float counts as the default dtype
    assert result_type(f32, zero_f64) is D.float32  # same category: the dimensioned tensor wins
    assert result_type(i64, zero_f64) is D.float64  # higher category: the zero-dim tensor wins
    assert result_type(i32, zero_i64) is D.int32
    assert result_type(b, zero_i64) is D.int64  # bool always promotes
    assert result_type(b, 1) is D.int64
    assert result_type(zero_i64, 2.5) is D.float32
    assert result_type(wrapped_scalar_tensor(2.5), wrapped_scalar_tensor(1)) is D.float32
    assert result_type(i32, wrapped_scalar_tensor(10**12)) is D.int32
    assert result_type(f32, i64, zero_f64, True) is D.float32  # any number of operands
