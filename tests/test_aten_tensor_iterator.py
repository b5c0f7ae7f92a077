"""TensorIteratorBase: broadcast shape, common dtype, device rules, in-place/out checks and the
setup cache, compared with torch on CPU (torch runs meta tensors through Python reference
implementations, so the lab's device-mismatch messages are checked against the C++ text)."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from labsupport.aten import dtype as D
from labsupport.aten import tensor_iterator as TI
from labsupport.aten.meta import structured_add_Tensor, structured_cos, structured_neg, structured_sin
from labsupport.aten.scalar_tensor import wrapped_scalar_tensor as _wrap
from labsupport.aten.tensor import TensorBase, TensorOptions, tensor_device
from labsupport.aten.tensor_iterator import infer_size
from labsupport.aten.testing import from_numpy, variant_classes


def wrapped_scalar_tensor(value):
    """A Python number as the binding passes it: a 0-dim "wrapped number" tensor."""
    return _wrap(value, TensorBase)


ALL = D.all_dtypes


def meta_tensor(shape, dtype=D.float32, device="meta") -> TensorBase:
    dev = tensor_device(device)
    data = None if dev.type == "meta" else np.zeros(shape, dtype.np)
    return TensorBase._make(data, tuple(shape), dtype, dev)


class Recorder(structured_add_Tensor):
    """Meta only: remembers what set_output_raw_strided was told."""

    def __init__(self, out=None):
        self.out = out
        self.calls = []

    def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):
        self.calls.append((output_idx, sizes, strides, options, names))

    def maybe_get_output(self, output_idx=0):
        return self.out


def test_infer_size():
    assert infer_size((2, 1), (1, 3)) == (2, 3)
    assert infer_size((), (4,)) == (4,)
    assert infer_size((0,), (1,)) == (0,)
    assert infer_size((5, 1, 2), (3, 1)) == (5, 3, 2)
    with pytest.raises(
        RuntimeError,
        match=r"size of tensor a \(3\) must match the size of tensor b \(2\) at "
        r"non-singleton dimension 1",
    ):
        infer_size((2, 3), (3, 2))


SHAPES = [(), (1,), (3,), (2, 1), (2, 3), (1, 3), (4, 1, 3), (0,), (2, 0)]


def test_broadcast_shapes_and_dtypes_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for shape_a, shape_b in itertools.product(SHAPES, SHAPES):
        da, db = ALL[int(rng.integers(0, len(ALL)))], ALL[int(rng.integers(0, len(ALL)))]
        t_a = torch.zeros(shape_a, dtype=getattr(torch, da.name))
        t_b = torch.zeros(shape_b, dtype=getattr(torch, db.name))
        op = Recorder()
        try:
            expected = torch.mul(t_a, t_b)
        except RuntimeError as e:
            with pytest.raises(RuntimeError) as info:
                op.meta(meta_tensor(shape_a, da), meta_tensor(shape_b, db))
            assert str(info.value) == str(e)
            continue
        op.meta(meta_tensor(shape_a, da), meta_tensor(shape_b, db))
        ((idx, sizes, strides, options, names),) = op.calls
        assert (idx, strides, names) == (0, None, None)
        assert sizes == tuple(expected.shape) == op.shape
        assert repr(options.dtype) == repr(expected.dtype) and options.dtype is op.common_dtype
        assert options.device is tensor_device("meta") is op.device


def test_python_scalars_are_the_lowest_tier():
    op = Recorder()
    op.meta(meta_tensor((2,), D.int64), wrapped_scalar_tensor(2.5))
    assert op.common_dtype is D.float32
    op.meta(meta_tensor((2,), D.float16), wrapped_scalar_tensor(2.5))
    assert op.common_dtype is D.float16
    op.meta(meta_tensor((2,), D.int32), wrapped_scalar_tensor(7))
    assert op.common_dtype is D.int32
    op.meta(meta_tensor((), D.int32), wrapped_scalar_tensor(7))
    assert op.common_dtype is D.int32


def test_default_dtype_change_clears_the_cache():
    op = Recorder()
    a, s = meta_tensor((2,), D.int64), wrapped_scalar_tensor(1.5)
    op.meta(a, s)
    assert op.common_dtype is D.float32
    D.set_default_dtype(D.float64)
    try:
        op.meta(a, s)
        assert op.common_dtype is D.float64
    finally:
        D.set_default_dtype(D.float32)
    op.meta(a, s)
    assert op.common_dtype is D.float32


def test_out_options_are_the_out_tensors():
    out = meta_tensor((2, 2), D.float64)
    op = Recorder(out)
    op.meta(meta_tensor((2, 1)), meta_tensor((2,)))
    assert op.calls[0][1] == (2, 2) and op.calls[0][3] is TensorOptions(D.float64, "meta")
    assert op.common_dtype is D.float32


# --- devices -------------------------------------------------------------------------------------


def test_device_rules():
    cpu, cpu0, cuda, cuda0, meta = (
        meta_tensor((2,), device="cpu"),
        meta_tensor((), device="cpu"),
        meta_tensor((2,), device="cuda"),
        meta_tensor((), device="cuda"),
        meta_tensor((2,)),
    )
    ok = [
        (cuda, cpu0, "cuda:0"),
        (cpu0, cuda, "cuda:0"),
        (cuda, wrapped_scalar_tensor(1), "cuda:0"),
        (meta, cpu0, "meta"),
        (cpu0, meta, "meta"),
        (cpu0, cpu0, "cpu"),
        (cuda0, cpu0, "cuda:0"),
    ]
    for a, b, device in ok:
        op = Recorder()
        op.meta(a, b)
        assert str(op.device) == device
    bad = [
        (cuda, cpu, "cuda:0 and cpu"),
        (cpu, cuda, "cuda:0 and cpu"),
        (meta, cpu, "meta and cpu"),
        (cpu, meta, "meta and cpu"),
        (cuda, meta, "cuda:0 and meta"),
    ]
    for a, b, devices in bad:
        with pytest.raises(RuntimeError) as info:
            Recorder().meta(a, b)
        assert str(info.value) == (
            f"Expected all tensors to be on the same device, but found at least two devices, {devices}!"
        )
    with pytest.raises(RuntimeError, match=r"^Trying to pass too many CPU scalars to non-CPU kernel!$"):
        Recorder(meta_tensor((), device="cuda")).meta(cpu0, cpu0)
    with pytest.raises(RuntimeError, match="at least two devices, cuda:0 and cpu!"):
        Recorder(cpu).meta(cuda, cuda)


# --- unary builders ------------------------------------------------------------------------------


def test_unary_builders_against_torch():
    torch = pytest.importorskip("torch")
    for meta_cls, torch_fn in (
        (structured_neg, torch.neg),
        (structured_sin, torch.sin),
        (structured_cos, torch.cos),
    ):
        functional, inplace, out_variant = variant_classes(meta_cls)
        for dtype in ALL:
            t = torch.ones(2, 3, dtype=getattr(torch, dtype.name))
            lab = from_numpy(t.numpy())
            try:
                expected = torch_fn(t)
            except RuntimeError as e:
                with pytest.raises(RuntimeError) as info:
                    functional(TensorBase).meta(lab)
                assert str(info.value) == str(e)
                continue
            op = functional(TensorBase)
            op.meta(lab)
            assert repr(op.outputs[0].dtype) == repr(expected.dtype) and op.outputs[0].shape == (2, 3)
            for out_dtype in ALL:
                t_out = torch.empty(2, 3, dtype=getattr(torch, out_dtype.name))
                l_out = from_numpy(t_out.numpy())
                try:
                    torch_fn(t, out=t_out)
                except RuntimeError as e:
                    with pytest.raises(RuntimeError) as info:
                        out_variant(l_out).meta(lab)
                    assert str(info.value) == str(e)
                else:
                    out_variant(l_out).meta(lab)
            try:
                getattr(t.clone(), torch_fn.__name__ + "_")()
            except RuntimeError as e:
                with pytest.raises(RuntimeError) as info:
                    inplace(lab).meta(lab)
                assert str(info.value) == str(e)
            else:
                inplace(lab).meta(lab)


def test_cached_setup_is_fast():
    """A repeated same-shape, same-dtype setup is one dict lookup (generous bound: no flaky timing)."""

    class Null(structured_add_Tensor):
        __slots__ = ()

        def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):
            pass

        def maybe_get_output(self, output_idx=0):
            return None

    a, b, op = meta_tensor((4,), device="cpu"), meta_tensor((4,), device="cpu"), Null()
    op.meta(a, b)
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        op.meta(a, b)
    per_call = (time.perf_counter() - start) / n
    assert per_call < 5e-6, per_call
    assert len(TI._binary_cache) >= 1
