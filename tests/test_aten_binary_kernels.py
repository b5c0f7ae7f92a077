"""Structured add/sub/mul (meta + impl) against torch: random dtype pairs, broadcasting, the three
promotion tiers, alpha, and the functional / in-place / out= variants, values and error messages.

The kernels are driven through ``labsupport.aten.testing``, which builds the same functional /
inplace / out subclasses the code generator writes.
"""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from labsupport.aten import dtype as D
from labsupport.aten.native import structured_mul_out, structured_sub_out, structured_ufunc_add_CPU
from labsupport.aten.scalar_tensor import wrapped_scalar_tensor as _wrap
from labsupport.aten.tensor import TensorBase
from labsupport.aten.testing import from_numpy, run_functional, run_inplace, run_out


def wrapped_scalar_tensor(value):
    """A Python number as the binding passes it: a 0-dim "wrapped number" tensor."""
    return _wrap(value, TensorBase)


pytestmark = [
    pytest.mark.filterwarnings("ignore:An output with one or more elements was resized"),
    pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning"),
]

ALL = D.all_dtypes
SHAPE_PAIRS = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((2, 1), (1, 3)),
    ((3,), (2, 3)),
    ((1,), (4,)),
    ((2, 3), (3, 2)),
    ((3,), (2,)),
    ((0,), (1,)),
    ((2, 0), (2, 1)),
    ((4, 1, 2), (3, 1)),
]
ALPHAS = [1, 2, -1, 0, 3, True, False, 0.5, 2.5, -0.25, 1.0]


def random_values(rng: np.random.Generator, dtype: D.dtype, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    if dtype is D.bool:
        values = rng.random(n) < 0.5
    elif dtype is D.uint8:
        values = rng.integers(0, 256, n)
    elif dtype is D.int32:
        values = rng.integers(-(2**31), 2**31, n) if rng.random() < 0.3 else rng.integers(-50, 50, n)
    elif dtype is D.int64:
        values = rng.integers(-(2**63), 2**63 - 1, n) if rng.random() < 0.3 else rng.integers(-50, 50, n)
    else:
        values = rng.normal(size=n) * 10.0 ** int(rng.integers(-2, 4))
        if n and rng.random() < 0.2:
            values[int(rng.integers(0, n))] = rng.choice([np.inf, -np.inf, np.nan, 0.0, 70000.0])
    return np.asarray(values).astype(dtype.np).reshape(shape)


def make_operand(torch, rng: np.random.Generator, shape: tuple[int, ...]):
    """(torch operand, lab operand): a tensor of a random dtype, a 0-dim tensor or a Python number."""
    kind = rng.random()
    if kind < 0.15:
        number = [True, False, 3, -2, 300, 2.5, -0.1, 1e-3, 1e10][int(rng.integers(0, 9))]
        return number, wrapped_scalar_tensor(number)
    if kind < 0.3:
        shape = ()
    dtype = ALL[int(rng.integers(0, len(ALL)))]
    values = random_values(rng, dtype, shape)
    return torch.from_numpy(values.copy()), from_numpy(values)


def assert_same_values(ours, theirs, exact: bool, a=None, b=None, alpha=1) -> None:
    """Same dtype and shape; same values, exactly or (``exact=False``) within one rounding of the
    computation dtype, measured against the size of the terms of ``a + alpha * b``."""
    assert repr(ours.dtype) == repr(theirs.dtype)
    assert ours.shape == tuple(theirs.shape)
    expected = theirs.numpy()
    if exact or not ours.dtype.is_floating_point:
        np.testing.assert_array_equal(ours._data, expected)
        return
    terms = np.abs(np.asarray(a, np.float64)) + np.abs(float(alpha) * np.asarray(b, np.float64))
    bound = 2 * np.finfo(np.float16).eps * np.broadcast_to(terms, expected.shape)
    got, want = ours._data.astype(np.float64), expected.astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    close = np.abs(got - want) <= bound
    assert np.all(same | close), (got, want)


def exactness(op: str, alpha: object, dtypes: set) -> bool:
    """Where the lab must match torch bit for bit.

    torch fuses ``a + alpha * b`` (FMA) on CPU, which the lab reproduces for float32. For float64 the
    lab does not fuse, and for float16 torch itself rounds differently in the tails of its SIMD loops.
    Alphas that make ``alpha * b`` exact give identical results everywhere.
    """
    if op == "mul" or alpha in (1, -1, 0, 2, 0.5, True, False, 1.0, -0.25):
        return True
    return not ({"float64", "float16"} & dtypes)


def run_case(torch, op: str, variant: str, t_a, l_a, t_b, l_b, alpha, out_spec=None):
    kernel = {"add": structured_ufunc_add_CPU, "sub": structured_sub_out, "mul": structured_mul_out}[op]
    torch_fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op]
    lab_args = (l_a, l_b) if op == "mul" else (l_a, l_b, alpha)
    torch_kwargs = {} if op == "mul" else {"alpha": alpha}
    if variant == "functional":
        theirs = lambda: torch_fn(t_a, t_b, **torch_kwargs)  # noqa: E731
        ours = lambda: run_functional(kernel, *lab_args)  # noqa: E731
    elif variant == "inplace":
        t_self = t_a.clone()
        l_self = from_numpy(l_a._data)
        theirs = lambda: getattr(t_self, op + "_")(t_b, **torch_kwargs)  # noqa: E731
        ours = lambda: run_inplace(kernel, l_self, *lab_args[1:])  # noqa: E731
    else:
        dtype, shape = out_spec
        zeros = np.zeros(shape, dtype.np)
        t_out, l_out = torch.from_numpy(zeros).clone(), from_numpy(zeros)  # clone: resizable storage
        theirs = lambda: torch_fn(t_a, t_b, **torch_kwargs, out=t_out)  # noqa: E731
        ours = lambda: run_out(kernel, *lab_args, out=l_out)  # noqa: E731
    try:
        expected = theirs()
    except Exception as e:
        with pytest.raises(type(e)) as info:
            ours()
        assert str(info.value) == str(e)
        return "error"
    got = ours()
    dtypes = {str(t.dtype).split(".")[1] for t in (t_a, t_b, expected) if isinstance(t, torch.Tensor)}
    if isinstance(t_b, torch.Tensor):
        dtypes.add(str(torch.result_type(t_a, t_b)).split(".")[1])
    exact = exactness(op, alpha, dtypes)
    b_values = t_b.double().numpy() if isinstance(t_b, torch.Tensor) else float(t_b)
    assert_same_values(got, expected, exact, t_a.double().numpy(), b_values, alpha)
    return "ok"


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("variant", ["functional", "inplace", "out"])
def test_random_binary_ops_against_torch(op, variant):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(zlib.crc32(f"{op}-{variant}".encode()))
    py_rng = random.Random(5)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(160):
        shape_a, shape_b = SHAPE_PAIRS[int(rng.integers(0, len(SHAPE_PAIRS)))]
        t_a, l_a = make_operand(torch, rng, shape_a)
        if not isinstance(t_a, torch.Tensor):  # `self` must be a tensor
            values = random_values(rng, D.float32, shape_a)
            t_a, l_a = torch.from_numpy(values.copy()), from_numpy(values)
        t_b, l_b = make_operand(torch, rng, shape_b)
        alpha = py_rng.choice(ALPHAS)
        out_spec = None
        if variant == "out":
            out_dtype = ALL[int(rng.integers(0, len(ALL)))]
            out_spec = (out_dtype, py_rng.choice([(0,), (3,), (2, 3), (1,)]))
        outcomes[run_case(torch, op, variant, t_a, l_a, t_b, l_b, alpha, out_spec)] += 1
    assert outcomes["ok"] > 20 and outcomes["error"] > 5, outcomes


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_all_dtype_pairs_against_torch(op):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    for da in ALL:
        for db in ALL:
            a, b = random_values(rng, da, (2, 3)), random_values(rng, db, (3,))
            for alpha in (1, 2, 0.5):
                run_case(
                    torch,
                    op,
                    "functional",
                    torch.from_numpy(a.copy()),
                    from_numpy(a),
                    torch.from_numpy(b.copy()),
                    from_numpy(b),
                    alpha,
                )


def test_integer_overflow_wraps_like_torch():
    torch = pytest.importorskip("torch")
    big = np.array([2**62, 2**63 - 1, -(2**63)], np.int64)
    for op in ("add", "sub", "mul"):
        for alpha in (1, 3, -1):
            run_case(
                torch,
                op,
                "functional",
                torch.from_numpy(big.copy()),
                from_numpy(big),
                torch.from_numpy(big.copy()),
                from_numpy(big),
                alpha,
            )
    u8 = np.array([250, 3, 0], np.uint8)
    for other in (10, 300, -1):
        run_case(
            torch,
            "add",
            "functional",
            torch.from_numpy(u8.copy()),
            from_numpy(u8),
            other,
            wrapped_scalar_tensor(other),
            1,
        )


def test_float16_scalar_rules_like_torch():
    """add rounds a Python scalar to half first; mul reads it as float (BinaryOpsKernel.cpp)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    values = (rng.normal(size=2000) * 10).astype(np.float16)
    for op in ("add", "sub", "mul"):
        for scalar in (0.1, 1 / 3, 1e-3, 1 + 2**-11 + 2**-40):
            run_case(
                torch,
                op,
                "functional",
                torch.from_numpy(values.copy()),
                from_numpy(values),
                scalar,
                wrapped_scalar_tensor(scalar),
                1,
            )
            zero_dim = np.array(scalar)
            run_case(
                torch,
                op,
                "functional",
                torch.from_numpy(values.copy()),
                from_numpy(values),
                torch.from_numpy(zero_dim.copy()),
                from_numpy(zero_dim),
                1,
            )


def test_fused_alpha_float32_matches_torch_exactly():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b = (rng.normal(size=5000) * 10).astype(np.float32), (rng.normal(size=5000) * 10).astype(np.float32)
    for alpha in (0.3, 3, 1 / 7):
        expected = torch.add(torch.from_numpy(a), torch.from_numpy(b), alpha=alpha).numpy()
        got = run_functional(structured_ufunc_add_CPU, from_numpy(a), from_numpy(b), alpha)._data
        np.testing.assert_array_equal(got, expected)


# --- error messages ------------------------------------------------------------------------------


def test_binary_error_messages_match_torch():
    torch = pytest.importorskip("torch")
    i = np.ones(2, np.int64)
    f = np.ones(2, np.float32)
    b = np.ones(2, bool)

    def pair(x):
        return torch.from_numpy(x.copy()), from_numpy(x)

    (ti, li), (tf, lf), (tb, lb) = pair(i), pair(f), pair(b)
    cases = [
        ("add", "functional", ti, li, ti, li, 1.5),
        ("add", "functional", tf, lf, tf, lf, True),
        ("add", "functional", ti, li, ti, li, True),
        ("add", "functional", tb, lb, tb, lb, 0.5),
        ("sub", "functional", tb, lb, tb, lb, 1),
        ("sub", "functional", tb, lb, ti, li, 1),
        ("sub", "functional", ti, li, tb, lb, 1),
        ("sub", "functional", ti, li, True, wrapped_scalar_tensor(True), 1),
        ("sub", "functional", tb, lb, 1, wrapped_scalar_tensor(1), 1),
        ("add", "inplace", ti, li, tf, lf, 1),
        ("add", "inplace", ti, li, 1.5, wrapped_scalar_tensor(1.5), 1),
        ("mul", "inplace", ti, li, *pair(np.array(1.5)), 1),
        ("add", "inplace", tf, lf, *pair(np.ones((2, 2), np.float32)), 1),
        ("add", "inplace", *pair(np.ones(1, np.float32)), *pair(np.ones((2, 2), np.float32)), 1),
        ("add", "functional", *pair(np.ones((2, 3))), *pair(np.ones((3, 2))), 1),
    ]
    for op, variant, t_a, l_a, t_b, l_b, alpha in cases:
        assert run_case(torch, op, variant, t_a, l_a, t_b, l_b, alpha) == "error", (op, t_a, t_b, alpha)
    for out_dtype in (D.int64, D.bool):
        assert run_case(torch, "add", "out", tf, lf, tf, lf, 1, (out_dtype, (2,))) == "error"
    assert run_case(torch, "add", "out", ti, li, ti, li, 1.5, (D.float32, (2,))) == "error"


def test_bool_alpha_semantics_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([True, False, True, False])
    y = np.array([True, True, False, False])
    for alpha in (True, False, 2, 0, -1):
        run_case(
            torch,
            "add",
            "functional",
            torch.from_numpy(x),
            from_numpy(x),
            torch.from_numpy(y),
            from_numpy(y),
            alpha,
        )


def test_in_place_and_out_write_into_the_given_tensor():
    a = from_numpy(np.array([1.0, 2.0], np.float32))
    data = a._data
    assert run_inplace(structured_ufunc_add_CPU, a, from_numpy(np.array([1.0, 1.0], np.float32)), 1) is a
    assert a._data is data and a._data.tolist() == [2.0, 3.0]
    out = from_numpy(np.zeros(2, np.float64))
    assert run_out(structured_mul_out, a, wrapped_scalar_tensor(2), out=out) is out
    assert out.dtype is D.float64 and out._data.tolist() == [4.0, 6.0]
