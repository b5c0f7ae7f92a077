"""bfloat16 in the lab: float32 storage rounded to bfloat16 (labsupport/aten/dtype.py).

Lab-only tests check the storage contract (every stored value is a bfloat16 value) and the dtype's
attributes; agreement tests (skipped without PyTorch) check rounding, type promotion, printing,
``tensor(...)``, ``.to(...)`` and the pointwise/reduction kernels against PyTorch 2.13.
"""

from __future__ import annotations

import numpy as np
import pytest

import labsupport as lab
import labsupport.torch as lt
from labsupport.aten import dtype as D
from labsupport.aten.dtype import round_to_bfloat16

LAB_DTYPES = (*D.all_dtypes, D.bfloat16)


def _is_bfloat16_valued(data: np.ndarray) -> bool:
    """Every value has zero low 16 bits (or is NaN): a bfloat16 stored as float32."""
    assert data.dtype == np.float32
    bits = data.view(np.uint32)
    return bool(np.all(((bits & 0xFFFF) == 0) | np.isnan(data)))


def _f64(t) -> np.ndarray:
    return t.detach().to(lt.float64).numpy()


# ------------------------------------------------------------------ lab only


def test_dtype_attributes():
    bf = lt.bfloat16
    assert repr(bf) == "torch.bfloat16" and bf.is_floating_point and bf.is_signed
    assert bf.itemsize == 2 and lt.tensor([1.0], dtype=bf).element_size() == 2
    assert bf.scalar_type_name == "BFloat16" and bf.typemeta_name == "c10::BFloat16"
    import pickle

    assert pickle.loads(pickle.dumps(bf)) is bf


def test_round_to_nearest_even_on_known_values():
    values = np.array(
        [1.0, 1.00390625, 1.01171875, 1.0 + 2**-9, 1.0 + 3 * 2**-9, 3.3895313892515355e38, 3.4e38, np.inf,
         -np.inf, np.nan, -0.0, 1e-40], dtype=np.float32,
    )
    rounded = round_to_bfloat16(values.copy())
    assert rounded[0] == 1.0
    assert rounded[1] == 1.0  # exactly halfway between 1 and 1+2**-7: ties go to the even neighbour (1.0)
    assert rounded[2] == 1.015625  # halfway, and the even neighbour is the upper one
    assert rounded[3] == 1.0 and rounded[4] == 1.0078125
    assert rounded[5] == 3.3895313892515355e38
    assert rounded[6] == np.inf  # rounds past the largest bfloat16
    assert rounded[7] == np.inf and rounded[8] == -np.inf and np.isnan(rounded[9])
    assert rounded[10] == 0.0 and np.signbit(rounded[10])
    assert _is_bfloat16_valued(rounded)


def test_every_kernel_stores_bfloat16_values():
    a = lt.randn(4, 5).to(lt.bfloat16)
    b = lt.randn(4, 5)
    results = {
        "tensor": lt.tensor([0.1, 1 / 3, 2.0], dtype=lt.bfloat16),
        "to": lt.randn(3).to(lt.bfloat16),
        "add": lt.add(a, a),
        "add alpha": lt.add(a, a, alpha=0.3),
        "sub": lt.sub(a, 0.1),
        "mul": lt.mul(a, 0.1),
        "sin": lt.sin(a),
        "cos": lt.cos(a),
        "neg": lt.neg(a),
        "sum": a.sum(),
        "sum dim": a.sum(0),
        "mm": lt.mm(a, lt.randn(5, 2).to(lt.bfloat16)),
        "randn": lt.randn(10, dtype=lt.bfloat16),
        "ones": lt.ones(3, dtype=lt.bfloat16),
        "fill_": lt.zeros(3, dtype=lt.bfloat16).fill_(0.1),
        "copy_": lt.zeros(4, 5, dtype=lt.bfloat16).copy_(b),
        "add out=": lt.add(b, b, out=lt.empty(4, 5, dtype=lt.bfloat16)),
    }
    for name, t in results.items():
        assert t.dtype is lt.bfloat16, name
        assert _is_bfloat16_valued(t._data), name


def test_numpy_is_refused_and_item_works():
    t = lt.tensor([1.1], dtype=lt.bfloat16)
    with pytest.raises(TypeError, match="Got unsupported ScalarType BFloat16"):
        t.numpy()
    assert t.item() == 1.1015625


def test_fill_checks_bfloat16s_own_range():
    with pytest.raises(RuntimeError, match="value cannot be converted to type c10::BFloat16 without overflow"):
        lt.empty(2, dtype=lt.bfloat16).fill_(1e39)
    assert lt.empty(1, dtype=lt.bfloat16).fill_(3.3895e38).item() == pytest.approx(3.3895e38, rel=1e-3)


def test_promotion_with_float16_is_float32_in_the_lab():
    assert lt.promote_types(lt.bfloat16, lt.float16) is lt.float32
    assert lt.promote_types(lt.bfloat16, lt.int64) is lt.bfloat16
    assert lt.add(lt.ones(2, dtype=lt.bfloat16), lt.ones(2, dtype=lt.float16)).dtype is lt.float32


def test_key_set_is_a_cpu_tensors():
    assert lab.dispatch_keys(lt.ones(2, dtype=lt.bfloat16)) == lab.dispatch_keys(lt.ones(2))


# ------------------------------------------------------------------ agreement with PyTorch 2.13


def test_rounding_agrees_bit_for_bit(torch_ref):
    torch = torch_ref
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32)
    # add exact ties (low half 0x8000) and the values next to them
    ties = (bits & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    samples = np.concatenate([bits, ties, ties + np.uint32(1), ties - np.uint32(1)]).view(np.float32)
    mine = round_to_bfloat16(samples.copy())
    real = torch.from_numpy(samples.copy()).to(torch.bfloat16).float().numpy()
    nan = np.isnan(real)
    assert np.array_equal(np.isnan(mine), nan)
    assert np.array_equal(mine[~nan].view(np.uint32), real[~nan].view(np.uint32))


def test_promote_types_table_agrees(torch_ref):
    torch = torch_ref
    for a in LAB_DTYPES:
        for b in LAB_DTYPES:
            real = torch.promote_types(getattr(torch, a.name), getattr(torch, b.name))
            assert str(lt.promote_types(a, b)) == str(real), (a, b)


def test_printing_agrees(torch_ref):
    torch = torch_ref
    rng = np.random.default_rng(1)
    cases = [
        [1.0, 0.1, 3.14159, 1e-5],
        [[1.1, -2.5e-5], [3e8, 0.0]],
        [1.0, 2.0],
        (rng.standard_normal((3, 4)) * 100).tolist(),
        [float("inf"), float("nan"), -1.5],
        [],
    ]
    for data in cases:
        mine = lt.tensor(data, dtype=lt.bfloat16)
        real = torch.tensor(data, dtype=torch.bfloat16)
        assert repr(mine) == repr(real), data
    w = lt.tensor([1.0, 2.0], dtype=lt.bfloat16, requires_grad=True)
    assert repr(w) == repr(torch.tensor([1.0, 2.0], dtype=torch.bfloat16, requires_grad=True))


def test_tensor_and_to_agree(torch_ref):
    torch = torch_ref
    rng = np.random.default_rng(2)
    data = rng.standard_normal(50) * 10.0 ** rng.integers(-8, 8, size=50)
    mine = lt.tensor(data.tolist(), dtype=lt.bfloat16)
    real = torch.tensor(data.tolist(), dtype=torch.bfloat16)
    assert np.array_equal(_f64(mine), real.double().numpy())
    for src in ("float64", "float32", "float16", "int64"):
        m = lt.tensor(data).to(getattr(lt, src)).to(lt.bfloat16)
        r = torch.tensor(data).to(getattr(torch, src)).to(torch.bfloat16)
        assert np.array_equal(_f64(m), r.double().numpy(), equal_nan=True), src
        back = m.to(getattr(lt, src))
        assert str(back.dtype) == str(r.to(getattr(torch, src)).dtype)


@pytest.mark.parametrize("seed", range(3))
def test_kernels_agree(torch_ref, seed):
    torch = torch_ref
    rng = np.random.default_rng(10 + seed)
    others = ("bfloat16", "float16", "float32", "float64", "int64", "bool")
    for other in others:
        x = rng.standard_normal((3, 4))
        y = rng.standard_normal((3, 4)) if other != "int64" else rng.integers(-3, 4, (3, 4))
        if other == "bool":
            y = rng.integers(0, 2, (3, 4)).astype(bool)
        la, ta = lt.tensor(x).to(lt.bfloat16), torch.tensor(x).to(torch.bfloat16)
        lb, tb = lt.tensor(y).to(getattr(lt, other)), torch.tensor(y).to(getattr(torch, other))
        calls = {
            "add": lambda m, a, b: m.add(a, b),
            "add alpha": lambda m, a, b: m.add(a, b, alpha=2),
            "sub": lambda m, a, b: m.sub(a, b) if b.dtype != m.bool else m.sub(a, 1.5),
            "mul": lambda m, a, b: m.mul(a, b),
            "mul scalar": lambda m, a, b: m.mul(a, 0.1),
            "add scalar": lambda m, a, b: m.add(a, 0.1),
            "sin": lambda m, a, b: m.sin(a),
            "neg": lambda m, a, b: m.neg(a),
            "sum": lambda m, a, b: a.sum(),
            "sum dim": lambda m, a, b: a.sum(1),
            "sum dtype": lambda m, a, b: a.sum(dtype=m.float32),
        }
        for name, call in calls.items():
            mine, real = call(lt, la, lb), call(torch, ta, tb)
            case = f"{name} bfloat16 with {other}"
            assert str(mine.dtype) == str(real.dtype), case
            # the same float32 math rounded once: equal, up to one bfloat16 step for transcendental/sums
            np.testing.assert_allclose(_f64(mine), real.double().numpy(), rtol=8e-3, atol=1e-6, err_msg=case)


def test_the_binary_fast_path_is_never_taken_for_bfloat16():
    """TensorIterator's cached set-up says when a kernel may apply its ufunc to the arrays as they are
    (``direct``); bfloat16 results need rounding, so never for them."""
    from labsupport.aten.tensor_iterator import _setup_binary

    f32, bf16 = lt.ones(2), lt.ones(2, dtype=lt.bfloat16)
    assert _setup_binary(None, f32, f32)[-1] is True
    assert _setup_binary(None, bf16, bf16)[-1] is False
    assert _setup_binary(None, f32, lt.ones(2, dtype=lt.float64))[-1] is False
    assert lt.add(bf16, bf16.mul(2**-9)).tolist() == [1.0, 1.0]  # 1 + 2**-9 rounds back to 1 in bfloat16
