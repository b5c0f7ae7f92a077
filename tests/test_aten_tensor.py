"""labsupport.aten.tensor: Device, TensorOptions, key sets, TensorBase accessors, torch.tensor()-style
data inference and repr, compared with torch where torch can run (CPU and meta)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from labsupport.aten import dtype as D
from labsupport.aten import tensor as T
from labsupport.aten.tensor import (
    Device,
    Size,
    TensorBase,
    TensorOptions,
    compute_key_set,
    tensor_data_to_numpy,
    tensor_device,
)
from labsupport.aten.testing import from_numpy


def lab(data, dtype=None, device="cpu", requires_grad=False) -> TensorBase:
    array, dt = tensor_data_to_numpy(data, dtype)
    dev = tensor_device(device)
    return TensorBase._make(None if dev.type == "meta" else array, array.shape, dt, dev, requires_grad)


def same_error(torch_fn, lab_fn):
    """Both raise the same exception type with the same message."""
    with pytest.raises(Exception) as theirs:
        torch_fn()
    with pytest.raises(type(theirs.value)) as ours:
        lab_fn()
    assert str(ours.value) == str(theirs.value)


# --- Device / TensorOptions ----------------------------------------------------------------------


def test_device_parsing_repr_and_interning():
    torch = pytest.importorskip("torch")
    for text in ["cpu", "meta", "cuda", "cuda:0", "cuda:1", "cpu:0"]:
        ours, theirs = Device(text), torch.device(text)
        assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
        assert ours.type == theirs.type and ours.index == theirs.index
    assert Device("cuda", 0) is Device("cuda:0") is Device(Device("cuda:0"))
    assert Device("cuda") != Device("cuda:0")
    assert pickle.loads(pickle.dumps(Device("cuda:1"))) is Device("cuda:1")
    for bad in ["foo", "cuda:x", "cuda:-1"]:
        same_error(lambda bad=bad: torch.device(bad), lambda bad=bad: Device(bad))
    same_error(lambda: torch.device("cuda", -1), lambda: Device("cuda", -1))
    same_error(lambda: torch.device("cuda:0", 1), lambda: Device("cuda:0", 1))
    with pytest.raises(RuntimeError, match="only has cpu, cuda"):
        Device("mps")


def test_tensor_device_and_options():
    assert tensor_device(None) is Device("cpu")
    assert tensor_device("cpu:0") is Device("cpu")
    assert tensor_device("cuda") is Device("cuda:0")
    opts = TensorOptions(D.float32, "cpu")
    assert opts is TensorOptions(D.float32, Device("cpu"))
    assert opts.dtype is D.float32 and opts.device is Device("cpu") and opts.layout == "strided"
    assert opts.with_dtype(D.int64) is TensorOptions(D.int64, "cpu")
    assert {opts: 1}[TensorOptions(D.float32, "cpu")] == 1


# --- key sets ------------------------------------------------------------------------------------


def test_key_set_constants():
    assert T.CPU_KEY_SET == 0x9400010001
    assert T.META_KEY_SET == 0x1400018000
    assert T.CUDA_KEY_SET == 0x801400010002
    assert T.CPU_INFERENCE_KEY_SET == 0x8000010001
    assert compute_key_set("cuda:0") == T.CUDA_KEY_SET
    assert compute_key_set(Device("meta"), inference=True) == 0x18000


def test_key_sets_match_torch():
    torch = pytest.importorskip("torch")
    raw = lambda t: torch._C._dispatch_keys(t).raw_repr()  # noqa: E731
    assert lab([1.0]).key_set() == raw(torch.ones(1))
    assert lab([1.0], requires_grad=True).key_set() == raw(torch.ones(1, requires_grad=True))
    assert lab([1.0], device="meta").key_set() == raw(torch.ones(1, device="meta"))
    K, DK = torch._C.DispatchKeySet, torch._C.DispatchKey
    cuda = K(DK.CUDA) | K(DK.ADInplaceOrView) | K(DK.AutogradCUDA) | K(DK.AutocastCUDA)
    assert lab([1.0], device="cuda").key_set() == cuda.raw_repr()
    with torch.inference_mode():
        expected = raw(torch.ones(1))
    T.set_inference_mode_enabled(True)
    try:
        t = lab([1.0])
    finally:
        T.set_inference_mode_enabled(False)
    assert t.key_set() == expected and t.is_inference()
    assert not lab([1.0]).is_inference()


# --- accessors -----------------------------------------------------------------------------------


def test_metadata_accessors():
    t = lab([[1, 2, 3], [4, 5, 6]])
    assert t.shape == (2, 3) and isinstance(t.shape, Size) and repr(t.shape) == "torch.Size([2, 3])"
    assert repr(lab(1.0).shape) == "torch.Size([])"
    assert t.size() == (2, 3) and t.size(1) == 3 and t.size(-2) == 2
    assert t.dim() == t.ndim == 2 and t.numel() == 6 and len(t) == 2
    assert t.dtype is D.int64 and t.device is Device("cpu") and t.element_size() == 8
    assert not t.is_meta and not t.is_cuda and t.is_cpu
    assert lab([1.0], device="meta").is_meta and lab([1.0], device="cuda").is_cuda
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_accessor_errors_match_torch():
    torch = pytest.importorskip("torch")
    pairs = [
        (torch.ones(2, 3), lab(np.ones((2, 3), np.float32))),
        (torch.tensor(1.0), lab(1.0)),
        (torch.ones(2), lab([1.0, 1.0])),
        (torch.ones(0), lab(np.ones(0, np.float32))),
        (torch.ones(2, device="meta"), lab([1.0, 1.0], device="meta")),
        (torch.ones(1, device="meta"), lab([1.0], device="meta")),
        (torch.tensor([2.5]), lab([2.5])),
        (torch.tensor(float("nan")), lab(float("nan"))),
    ]
    calls = [
        lambda t: t.size(5),
        lambda t: t.size(-3),
        lambda t: t.size(0),
        lambda t: t.item(),
        lambda t: len(t),
        lambda t: bool(t),
        lambda t: float(t),
        lambda t: int(t),
        lambda t: t.__index__(),
        lambda t: t.tolist(),
        lambda t: t.numpy(),
    ]
    compared = 0
    for theirs, ours in pairs:
        for call in calls:
            try:
                expected = call(theirs)
            except Exception as e:
                with pytest.raises(type(e)) as info:
                    call(ours)
                assert str(info.value) == str(e)
                compared += 1
            else:
                got = call(ours)
                if isinstance(expected, torch.Size):
                    expected = tuple(expected)
                if isinstance(expected, np.ndarray):
                    np.testing.assert_array_equal(got, expected)
                else:
                    assert got == expected or (expected != expected and got != got)
                    assert type(got) is type(expected)
    assert compared > 15


def test_item_types():
    assert lab([True]).item() is True
    assert type(lab([3]).item()) is int
    assert lab(np.array([1.5], np.float16)).item() == 1.5


def test_requires_grad_leaf_and_numpy():
    torch = pytest.importorskip("torch")
    same_error(
        lambda: torch.ones(2, dtype=torch.int64).requires_grad_(), lambda: lab([1, 1]).requires_grad_()
    )
    t = lab([1.0, 2.0])
    assert t.is_leaf and t.requires_grad_() is t and t.requires_grad and t.is_leaf
    same_error(lambda: torch.ones(2, requires_grad=True).numpy(), lambda: t.numpy())
    same_error(lambda: torch.ones(2, device="meta").numpy(), lambda: lab([1.0], device="meta").numpy())
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        lab([1.0], device="cuda").numpy()
    t.grad_fn = object()  # as if an autograd node had produced it
    assert not t.is_leaf
    theirs = torch.ones(2, requires_grad=True) * 2
    same_error(lambda: theirs.requires_grad_(False), lambda: t.requires_grad_(False))
    lab([1, 2]).requires_grad_(False)


def test_detach_shares_data_and_version():
    t = lab([1.0, 2.0], requires_grad=True)
    d = t.detach()
    assert d._data is t._data and not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert d._version_counter is t._version_counter
    t._bump_version()
    assert d._version == 1 and t._version == 1 and t._version_counter.value == 1
    assert lab([1.0])._version == 0


def test_numpy_shares_memory():
    t = lab([1.0, 2.0])
    assert np.shares_memory(t.numpy(), t._data)


# --- torch.tensor(data) inference ------------------------------------------------------------------

DATA_CASES = [
    1.5,
    3,
    True,
    [1, 2],
    [1.0, 2],
    [True, 1],
    [True, 1.0],
    [[1, 2], [3, 4]],
    ((1, 2), (3, 4)),
    [(1, 2), [3, 4]],
    [],
    [[]],
    [[], []],
    range(3),
    [np.float64(1.5), 1],
    [np.int32(1), 1],
    np.array([1, 2], np.int32),
    np.float64(2.5),
    np.int32(3),
    np.array([[1.5]], np.float16),
    [-0.0, float("inf"), float("nan")],
    [[[1]], [[2]]],
]

DATA_CASES_WITH_DTYPE = [
    ([1.5, 2], "int64"),
    ([-1.5, 2.7], "int64"),
    ([300], "uint8"),
    ([-1], "uint8"),
    ([-200], "uint8"),
    ([-256], "uint8"),
    (1e300, "float32"),
    (2**63 - 1, "float32"),
    ([1, 2], "bool"),
    ([1.5, float("nan")], "bool"),
    (float("nan"), "int64"),
    (float("inf"), "int64"),
    (1e20, "int64"),
    (2**63, "int64"),
    (2**40, "int32"),
    (1e10, "int32"),
    (70000.0, "float16"),
    (1 + 2**-11 + 2**-40, "float16"),
    ([1.5], "uint8"),
    ([-1.5], "uint8"),
    (2**70, "float32"),
    (2**70, "int32"),
    ([1, [2]], "float16"),
    ([1, [2]], "bool"),
]

RAGGED_CASES = [
    [[1, 2], [3]],
    [1, [2]],
    [[1], 2],
    [1.0, [2.0]],
    [[1, 2], [3, 4, 5]],
    [[[1, 2]], [[3]]],
    "abc",
    ["a"],
    [None],
    [1, None],
    2**63,
]


def _compare_tensor_data(torch, data, dtype=None):
    torch_kwargs = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    try:
        expected = torch.tensor(data, **torch_kwargs)
    except Exception as e:
        with pytest.raises(type(e)) as info:
            tensor_data_to_numpy(data, None if dtype is None else getattr(D, dtype))
        assert str(info.value) == str(e), data
        return
    array, dt = tensor_data_to_numpy(data, None if dtype is None else getattr(D, dtype))
    assert repr(dt) == repr(expected.dtype), data
    assert array.shape == tuple(expected.shape), data
    np.testing.assert_array_equal(array, expected.numpy(), err_msg=repr(data))


@pytest.mark.parametrize("data", DATA_CASES + RAGGED_CASES, ids=repr)
def test_tensor_data_inference_matches_torch(data):
    torch = pytest.importorskip("torch")
    _compare_tensor_data(torch, data)


@pytest.mark.parametrize(("data", "dtype"), DATA_CASES_WITH_DTYPE, ids=repr)
def test_tensor_data_with_dtype_matches_torch(data, dtype):
    torch = pytest.importorskip("torch")
    _compare_tensor_data(torch, data, dtype)


def test_tensor_data_from_lab_tensors():
    array, dt = tensor_data_to_numpy([lab(1), lab(2.0)])
    assert dt is D.float32 and array.tolist() == [1.0, 2.0]
    source = lab([1.0, 2.0])
    array, dt = tensor_data_to_numpy(source, D.float64)
    assert dt is D.float64 and not np.shares_memory(array, source._data)


def test_tensor_data_follows_default_dtype():
    D.set_default_dtype(D.float64)
    try:
        assert tensor_data_to_numpy([1, 2.5])[1] is D.float64
        assert tensor_data_to_numpy([])[1] is D.float64
    finally:
        D.set_default_dtype(D.float32)


# --- repr ----------------------------------------------------------------------------------------


def _random_array(rng: np.random.Generator) -> np.ndarray:
    ndim = int(rng.integers(0, 4))
    shape = tuple(int(s) for s in rng.integers(0, 5, ndim))
    if rng.random() < 0.04:
        shape = (int(rng.integers(995, 1100)),)  # summarized with "..."
    elif rng.random() < 0.03:
        shape = (int(rng.integers(30, 40)), int(rng.integers(30, 40)))
    n = int(np.prod(shape))
    kind = int(rng.integers(0, 7))
    scale = 10.0 ** int(rng.integers(-7, 10))
    if kind == 0:
        high = 10 ** int(rng.integers(0, 12))
        values = rng.integers(-high, high + 1, n).astype(np.int64)
    elif kind == 1:
        values = rng.random(n) < 0.5
    elif kind == 2:
        values = np.round(rng.normal(size=n) * scale).astype(np.float32)
    elif kind == 3:
        values = (rng.normal(size=n) * scale).astype(np.float32)
    elif kind == 4:
        values = rng.normal(size=n) * 10.0 ** int(rng.integers(-3, 4))
    elif kind == 5:
        values = (rng.normal(size=n) * 10.0 ** int(rng.integers(-3, 4))).astype(np.float16)
    else:
        pool = np.array([0.0, 1.0, -2.0, np.inf, -np.inf, np.nan, 0.5, 1e-5, 123456.0])
        values = rng.choice(pool, n).astype(np.float32)
    if kind in (2, 3, 4) and n and rng.random() < 0.2:
        values[int(rng.integers(0, n))] = rng.choice([0.0, np.inf, np.nan])
    return values.reshape(shape)


def test_repr_random_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    for _ in range(400):
        array = _random_array(rng)
        assert repr(from_numpy(array)) == repr(torch.from_numpy(array.copy())), array


def test_repr_suffixes_against_torch():
    torch = pytest.importorskip("torch")

    class AddBackward0:
        pass

    class NamedNode:
        def name(self):
            return "torch::autograd::MulBackward0"

    cases = [
        (torch.tensor([1.0, 2.0], requires_grad=True), lab([1.0, 2.0], requires_grad=True), None),
        (torch.tensor([1.0, 2.0]) * torch.tensor(1.0, requires_grad=True), lab([1.0, 2.0]), NamedNode()),
        (torch.tensor([1.0, 2.0], requires_grad=True) + 0, lab([1.0, 2.0]), AddBackward0()),
        (torch.ones(2, 3, device="meta"), lab(np.ones((2, 3), np.float32), device="meta"), None),
        (
            torch.ones(2, 3, device="meta", dtype=torch.int64),
            lab(np.ones((2, 3), np.int64), device="meta"),
            None,
        ),
        (torch.ones((), device="meta"), lab(1.0, device="meta"), None),
        (torch.ones(0, 3), lab(np.ones((0, 3), np.float32)), None),
        (torch.ones(0, dtype=torch.int64), lab(np.ones(0, np.int64)), None),
        (torch.ones(0, dtype=torch.float64), lab(np.ones(0)), None),
        (torch.ones(3, dtype=torch.float64) / 3, lab(np.ones(3) / 3), None),
        (torch.arange(40.0, dtype=torch.float64) / 7, lab(np.arange(40.0) / 7), None),
        (
            torch.arange(30.0, dtype=torch.float16).reshape(5, 6) * 1000,
            lab((np.arange(30.0, dtype=np.float16) * 1000).reshape(5, 6)),
            None,
        ),
        (torch.ones(2, dtype=torch.int32), lab(np.ones(2, np.int32)), None),
        (torch.ones(2, dtype=torch.uint8), lab(np.ones(2, np.uint8)), None),
    ]
    for theirs, ours, grad_fn in cases:
        if grad_fn is not None:
            ours.requires_grad = True
            ours.grad_fn = grad_fn
        assert repr(ours) == repr(theirs)


def test_repr_default_dtype_float64():
    torch = pytest.importorskip("torch")
    D.set_default_dtype(D.float64)
    torch.set_default_dtype(torch.float64)
    try:
        assert repr(lab([1.5, 2.0])) == repr(torch.tensor([1.5, 2.0]))
        assert repr(lab(np.ones(2, np.float32))) == repr(torch.ones(2, dtype=torch.float32))
    finally:
        D.set_default_dtype(D.float32)
        torch.set_default_dtype(torch.float32)


def test_repr_cuda_is_simulated():
    assert repr(lab([1.0, 2.0], device="cuda")) == "tensor([1., 2.], device='cuda:0')"
    assert repr(lab([1, 2], device="cuda")) == "tensor([1, 2], device='cuda:0')"
