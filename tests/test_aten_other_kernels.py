"""neg/sin/cos, sum.dim_IntList and the non-structured kernels (empty, fill_, zero_, copy_,
normal_) against torch."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from labsupport.aten import dtype as D
from labsupport.aten import generator
from labsupport.aten.native import (
    empty_cpu,
    empty_cuda,
    empty_meta,
    fill_,
    normal_,
    structured_cos_out,
    structured_neg_out,
    structured_sin_out,
    structured_sum_out,
    zero_,
)
from labsupport.aten.native.copy import copy_
from labsupport.aten.tensor import TensorBase, tensor_device
from labsupport.aten.testing import from_numpy, run_functional, run_inplace, run_out

pytestmark = [
    pytest.mark.filterwarnings("ignore:An output with one or more elements was resized"),
    pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning"),
]

ALL = D.all_dtypes


class Tensor(TensorBase):
    """Stands for a build's Tensor class (factories must create this type)."""

    __slots__ = ()


def values_for(dtype: D.dtype, shape=(2, 3), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype is D.bool:
        return (rng.random(n) < 0.5).reshape(shape)
    if not dtype.is_floating_point:
        info = np.iinfo(dtype.np)
        return rng.integers(info.min, info.max, n, endpoint=True).astype(dtype.np).reshape(shape)
    return (rng.normal(size=n) * 100).astype(dtype.np).reshape(shape)


def same_outcome(theirs, ours, exact=True, shapes_only=False):
    """Both raise the same error, or give the same dtype, shape and values."""
    try:
        expected = theirs()
    except Exception as e:
        with pytest.raises(type(e)) as info:
            ours()
        assert str(info.value) == str(e)
        return None
    got = ours()
    assert repr(got.dtype) == repr(expected.dtype) and got.shape == tuple(expected.shape)
    if shapes_only:
        assert got.is_meta
    elif exact:
        np.testing.assert_array_equal(got._data, expected.numpy())
    else:
        np.testing.assert_allclose(
            got._data, expected.numpy(), rtol=2e-6 if got.dtype is not D.float16 else 1e-3
        )
    return got


# --- unary ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["neg", "sin", "cos"])
def test_unary_values_against_torch(name):
    torch = pytest.importorskip("torch")
    kernel = {"neg": structured_neg_out, "sin": structured_sin_out, "cos": structured_cos_out}[name]
    for dtype in ALL:
        values = values_for(dtype)
        t, lab = torch.from_numpy(values.copy()), from_numpy(values)
        exact = name == "neg"
        same_outcome(lambda t=t: getattr(torch, name)(t), lambda lab=lab: run_functional(kernel, lab), exact)
        t_self, l_self = t.clone(), from_numpy(values)
        same_outcome(
            lambda t_self=t_self: getattr(t_self, name + "_")(),
            lambda l_self=l_self: run_inplace(kernel, l_self),
            exact,
        )
        for out_dtype in (D.float64, D.float16, D.int64):
            zeros = np.zeros(3, out_dtype.np)
            t_out, l_out = torch.from_numpy(zeros).clone(), from_numpy(zeros)
            same_outcome(
                lambda t=t, t_out=t_out: getattr(torch, name)(t, out=t_out),
                lambda lab=lab, l_out=l_out: run_out(kernel, lab, out=l_out),
                exact,
            )


def test_neg_wraps_integers():
    data = np.array([-(2**63), 5], np.int64)
    assert run_functional(structured_neg_out, from_numpy(data))._data.tolist() == [-(2**63), -5]
    assert run_functional(structured_neg_out, from_numpy(np.array([1, 0], np.uint8)))._data.tolist() == [
        255,
        0,
    ]


# --- sum -----------------------------------------------------------------------------------------

SUM_ARGS = [
    (None, False, None),
    ([], False, None),
    ([], True, None),
    (None, True, None),
    (0, False, None),
    (1, True, None),
    ((1,), False, None),
    ([0, 1], False, None),
    ([-1, 0], True, None),
    ([0, 0], False, None),
    ([0, -2], False, None),
    (2, False, None),
    (-3, False, None),
    (1, False, "float64"),
    (1, False, "int64"),
    (1, False, "bool"),
    (1, False, "float16"),
    (0, False, "int32"),
]


def _torch_sum(torch, t, dim, keepdim, dtype, out=None):
    kwargs = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    if out is not None:
        kwargs["out"] = out
    if dim is None:
        dim = []  # torch.sum(t, None) also reduces everything
    return torch.sum(t, dim, keepdim, **kwargs)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_sum_against_torch(dtype):
    torch = pytest.importorskip("torch")
    for shape in [(2, 3), (), (0, 3), (4,)]:
        values = values_for(dtype, shape)
        t, lab = torch.from_numpy(values.copy()), from_numpy(values)
        for dim, keepdim, out_dtype in SUM_ARGS:
            if shape == () and dim not in (None, [], 0, -1, [0, 0]):
                continue
            lab_dtype = None if out_dtype is None else getattr(D, out_dtype)
            exact = not (dtype.is_floating_point or (out_dtype or "").startswith("float"))
            theirs = partial(_torch_sum, torch, t, dim, keepdim, out_dtype)
            same_outcome(
                theirs, partial(run_functional, structured_sum_out, lab, dim, keepdim, lab_dtype), exact
            )
            # The lab's meta tensors go through the same C++-style meta(), so torch's CPU call is
            # the reference (torch 2.13 runs meta tensors through Python refs with other messages).
            lab_meta = TensorBase._make(None, lab._sizes, lab._dtype, tensor_device("meta"))
            ours = partial(run_functional, structured_sum_out, lab_meta, dim, keepdim, lab_dtype)
            same_outcome(theirs, ours, shapes_only=True)


def test_sum_out_and_errors_against_torch():
    torch = pytest.importorskip("torch")
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    t, lab = torch.from_numpy(x.copy()), from_numpy(x)
    for out_dtype, dtype in [(D.float64, None), (D.float64, D.float32), (D.int32, None), (D.float32, None)]:
        for shape in [(2,), (5,), (0,)]:
            zeros = np.zeros(shape, out_dtype.np)
            t_out, l_out = torch.from_numpy(zeros).clone(), from_numpy(zeros)
            same_outcome(
                partial(_torch_sum, torch, t, 1, False, None if dtype is None else dtype.name, t_out),
                partial(run_out, structured_sum_out, lab, 1, False, dtype, out=l_out),
            )


def test_sum_wraps_and_accumulates_like_torch():
    torch = pytest.importorskip("torch")
    cases = [
        np.array([2**62, 2**62, 2**62], np.int64),
        np.full(3, 30000, np.float16),
        np.array([1e-4] * 5000, np.float16),
        np.array([True] * 300),
        np.array([0.6, 0.7, 1.9], np.float32),
    ]
    for values in cases:
        for dtype in (None, D.int64, D.bool, D.float16):
            lab = from_numpy(values)
            ours = run_functional(structured_sum_out, lab, [0], False, dtype)
            theirs = torch.sum(
                torch.from_numpy(values.copy()),
                [0],
                dtype=None if dtype is None else getattr(torch, dtype.name),
            )
            np.testing.assert_array_equal(ours._data, theirs.numpy())


# --- factories -----------------------------------------------------------------------------------


def test_empty_factories():
    torch = pytest.importorskip("torch")
    t = empty_cpu([2, 3], tensor_cls=Tensor)
    assert (
        type(t) is Tensor and t.shape == (2, 3) and t.dtype is D.float32 and t.device is tensor_device("cpu")
    )
    assert t._data.shape == (2, 3) and t._data.dtype == np.float32
    m = empty_meta((4,), D.int64, tensor_cls=Tensor)
    assert m._data is None and m.is_meta and m.dtype is D.int64 and type(m) is Tensor
    c = empty_cuda((1,), D.float16, device="cuda", tensor_cls=Tensor)
    assert c.is_cuda and str(c.device) == "cuda:0" and c._data.dtype == np.float16
    assert empty_cpu((), tensor_cls=Tensor).shape == ()
    for size in ([-1], [2, -3], (-1, -2)):
        with pytest.raises(RuntimeError) as theirs:
            torch.empty(size)
        for factory in (empty_cpu, empty_meta):
            with pytest.raises(RuntimeError) as ours:
                factory(size, tensor_cls=Tensor)
            assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError, match="must be tuple of ints, not float"):
        empty_cpu([2.5], tensor_cls=Tensor)


# --- fill_ / zero_ -------------------------------------------------------------------------------

FILL_VALUES = [
    0,
    1,
    -1,
    300,
    -255,
    -256,
    1.7,
    -1.7,
    -0.5,
    255.9,
    2**31,
    2**40,
    2**63,
    2**64 - 1,
    2**70,
    float("nan"),
    float("inf"),
    1e300,
    65504.0,
    65505.0,
    70000,
    True,
    False,
    1 + 2**-11 + 2**-40,
]


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_fill_against_torch(dtype):
    torch = pytest.importorskip("torch")
    for value in FILL_VALUES:
        t = torch.zeros(3, dtype=getattr(torch, dtype.name))
        lab = from_numpy(np.zeros(3, dtype.np))
        result = same_outcome(
            lambda t=t, value=value: t.fill_(value), lambda lab=lab, value=value: fill_(lab, value)
        )
        if result is not None:
            assert result is lab
    t, lab = torch.zeros(2), from_numpy(np.zeros(2, np.float32))
    same_outcome(lambda: t.fill_(torch.ones(2)), lambda: fill_(lab, from_numpy(np.ones(2))))
    same_outcome(lambda: t.fill_(torch.tensor(3)), lambda: fill_(lab, from_numpy(np.array(3))))
    same_outcome(
        lambda: t.fill_(torch.tensor(3.0, device="meta")),
        lambda: fill_(lab, TensorBase._make(None, (), D.float32, tensor_device("meta"))),
    )


def test_fill_meta_and_zero():
    m = empty_meta((2,), tensor_cls=Tensor)
    assert fill_(m, 3) is m and zero_(m) is m
    t = from_numpy(np.ones(3, np.int32))
    assert zero_(t) is t and t._data.tolist() == [0, 0, 0]
    assert t._version == 0  # kernels do not bump versions; ADInplaceOrView does


# --- copy_ ---------------------------------------------------------------------------------------


def test_copy_against_torch():
    torch = pytest.importorskip("torch")
    sources = [
        np.array([1.5, -2.7, float("nan")], np.float32),
        np.array([-1.0, 256.0, 1e10]),
        np.array([1, -2, 300], np.int64),
        np.array([2**40, -(2**40), 5], np.int64),
        np.array([3e9, -3e9, 1.0], np.float32),
        np.array([0.0, -0.0, float("nan")]),
        np.array([True, False, True]),
        np.array([1 + 2**-11 + 2**-40, 70000.0, 1e-8]),
    ]
    for src in sources:
        for dtype in ALL:
            t = torch.zeros(3, dtype=getattr(torch, dtype.name))
            lab = from_numpy(np.zeros(3, dtype.np))
            same_outcome(
                lambda t=t, src=src: t.copy_(torch.from_numpy(src.copy())),
                lambda lab=lab, src=src: copy_(lab, from_numpy(src)),
            )
    shapes = [((2,), (3,)), ((2, 3), (2,)), ((3,), (2, 3)), ((1, 3), (1, 1, 3)), ((2, 3), (3,)), ((2, 3), ())]
    for dst_shape, src_shape in shapes:
        t, lab = torch.zeros(dst_shape), from_numpy(np.zeros(dst_shape, np.float32))
        src = np.arange(int(np.prod(src_shape)), dtype=np.float64).reshape(src_shape)
        same_outcome(
            lambda t=t, src=src: t.copy_(torch.from_numpy(src.copy())),
            lambda lab=lab, src=src: copy_(lab, from_numpy(src)),
        )
        m = torch.zeros(dst_shape, device="meta")
        lab_m = TensorBase._make(None, tuple(dst_shape), D.float32, tensor_device("meta"))
        same_outcome(
            lambda m=m, src=src: m.copy_(torch.from_numpy(src.copy())),
            lambda lab_m=lab_m, src=src: copy_(lab_m, from_numpy(src)),
            shapes_only=True,
        )
    same_outcome(
        lambda: torch.zeros(2).copy_(torch.ones(2, device="meta")),
        lambda: copy_(from_numpy(np.zeros(2, np.float32)), empty_meta((2,), tensor_cls=Tensor)),
    )


def test_copy_between_devices_and_aliases():
    cpu = from_numpy(np.arange(3.0))
    cuda = empty_cuda((3,), D.float32, tensor_cls=Tensor)
    assert copy_(cuda, cpu) is cuda and cuda._data.tolist() == [0.0, 1.0, 2.0]
    assert copy_(cpu, cpu) is cpu


# --- normal_ / generator -------------------------------------------------------------------------


def test_normal_checks_against_torch():
    torch = pytest.importorskip("torch")
    for dtype in ALL:
        for std in (1.0, -1, -0.5, float("nan")):
            t = torch.zeros(3, dtype=getattr(torch, dtype.name))
            lab = from_numpy(np.zeros(3, dtype.np))
            try:
                t.normal_(0, std)
            except Exception as e:
                with pytest.raises(type(e)) as info:
                    normal_(lab, 0, std)
                assert str(info.value) == str(e)
            else:
                assert normal_(lab, 0, std) is lab


def test_normal_is_reproducible_with_the_lab_generator():
    generator.manual_seed(0)
    a = normal_(from_numpy(np.zeros(1000, np.float32)), 2.0, 3.0)._data.copy()
    generator.manual_seed(0)
    b = normal_(from_numpy(np.zeros(1000, np.float32)), 2.0, 3.0)._data
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - 2.0) < 0.5 and abs(a.std() - 3.0) < 0.5
    own = generator.Generator(5)
    c = normal_(from_numpy(np.zeros(4, np.float16)), generator=own)
    assert c._data.dtype == np.float16 and own.initial_seed() == 5
    assert generator.manual_seed(-1).initial_seed() == 2**64 - 1
    m = empty_meta((3,), tensor_cls=Tensor)
    assert normal_(m) is m
