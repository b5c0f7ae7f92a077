"""Allocation kernels (stands for ``empty_cpu`` in aten/src/ATen/native/TensorFactories.cpp and
ATen/EmptyTensor.cpp, ``empty_meta`` and the CUDA ``empty_cuda``).

The generated wrappers pass the build's Tensor class as ``tensor_cls`` so the factories create
tensors of the right Python type. Memory is uninitialized (``np.empty``), as in torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten import dtype as dtypes
from labsupport.aten.tensor import Device, tensor_device
from labsupport.aten.wrap_dim import format_sizes

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = ["empty_cpu", "empty_meta", "empty_cuda", "check_size_nonnegative"]


def check_size_nonnegative(size: int | Sequence[int]) -> tuple[int, ...]:
    """Validate ``size`` and return it as a tuple (``check_size_nonnegative`` in EmptyTensor.cpp)."""
    sizes = (size,) if isinstance(size, int) else tuple(size)
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(
                f"empty(): argument 'size' (position 1) must be tuple of ints, not {type(s).__name__}"
            )
    for s in sizes:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {format_sizes(sizes)}")
    return tuple(int(s) for s in sizes)


def _check_layout(layout: object) -> None:
    if layout is not None and str(layout) not in ("strided", "torch.strided"):
        raise RuntimeError(f"Dispatcher Lab only supports strided tensors, got layout {layout}")


def _empty(
    size: int | Sequence[int], dtype: DType | None, layout: object, device: Device, with_data: bool, tensor_cls: type
) -> TensorBase:
    """What the three allocation kernels share: check the arguments, pick the dtype, allocate."""
    sizes = check_size_nonnegative(size)
    _check_layout(layout)
    dtype = dtype if dtype is not None else dtypes.get_default_dtype()
    return tensor_cls._make(np.empty(sizes, dtype.np) if with_data else None, sizes, dtype, device)


def empty_cpu(
    size: int | Sequence[int],
    dtype: DType | None = None,
    layout: object = None,
    device: Device | str | None = None,
    pin_memory: bool | None = None,
    memory_format: object = None,
    *,
    tensor_cls: type[TensorBase],
) -> TensorBase:
    """A new uninitialized CPU tensor (``at::native::empty_cpu``). ``memory_format`` is accepted and ignored:
    lab tensors are always contiguous."""
    return _empty(size, dtype, layout, tensor_device("cpu"), True, tensor_cls)


def empty_cuda(
    size: int | Sequence[int],
    dtype: DType | None = None,
    layout: object = None,
    device: Device | str | None = None,
    pin_memory: bool | None = None,
    memory_format: object = None,
    *,
    tensor_cls: type[TensorBase],
) -> TensorBase:
    """A new (simulated) CUDA tensor (``at::native::empty_cuda``): numpy memory, CUDA dispatch keys."""
    return _empty(size, dtype, layout, tensor_device(device or "cuda"), True, tensor_cls)


def empty_meta(
    size: int | Sequence[int],
    dtype: DType | None = None,
    layout: object = None,
    device: Device | str | None = None,
    pin_memory: bool | None = None,
    memory_format: object = None,
    *,
    tensor_cls: type[TensorBase],
) -> TensorBase:
    """A new meta tensor (``at::native::empty_meta``): sizes and dtype but no data at all."""
    return _empty(size, dtype, layout, tensor_device("meta"), False, tensor_cls)
