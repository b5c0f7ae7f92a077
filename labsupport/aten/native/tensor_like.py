"""The allocation kernels autograd dispatches: ``empty_strided``, the ``*_like`` factories,
``new_empty_strided`` and ``detach``.

Stands for ``aten/src/ATen/native/TensorFactories.cpp`` (``empty_strided_cpu``, ``empty_like``,
``ones_like``, ``zeros_like``, ``new_empty_strided_symint``) and ``TensorShape.cpp`` (``detach``).
PyTorch's autograd calls them through the dispatcher: ``.backward()`` seeds the graph with
``ones_like``, ``AccumulateGrad`` keeps a gradient with ``detach`` or clones it with
``new_empty_strided`` + ``copy_``, and the backward of ``fill_`` / ``zero_`` / ``normal_`` is
``zeros_like``; select's and slice's backward formulas call ``select_backward`` / ``slice_backward``
(TensorShape.cpp). The CompositeExplicitAutograd ones take the build's C++ API ``at`` first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labsupport.aten.memory_overlap import is_non_overlapping_and_dense
from labsupport.aten.native.tensor_factories import empty_cpu, empty_cuda, empty_meta
from labsupport.aten.native.tensor_shape import alias_with_sizes_and_strides
from labsupport.aten.storage import contiguous_strides
from labsupport.aten.tensor import TensorBase


def _strided(empty: Any, size: Sequence[int], stride: Sequence[int], dtype: Any, layout: Any, device: Any,
             tensor_cls: type) -> TensorBase:
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(
            f"mismatch in length of strides and shape: {len(stride)} strides for a {len(size)}-dim tensor"
        )
    if stride == contiguous_strides(size) or 0 in size:
        return empty(size, dtype, layout, device, tensor_cls=tensor_cls)
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride))
    buffer = empty((span,), dtype, layout, device, tensor_cls=tensor_cls)
    return alias_with_sizes_and_strides(buffer, size, stride, 0)


def empty_strided_cpu(size: Sequence[int], stride: Sequence[int], dtype: Any = None, layout: Any = None,
                      device: Any = None, pin_memory: Any = None, *, tensor_cls: type) -> TensorBase:
    """``at::native::empty_strided_cpu``: uninitialized memory laid out with the given strides."""
    return _strided(empty_cpu, size, stride, dtype, layout, device, tensor_cls)


def empty_strided_cuda(size: Sequence[int], stride: Sequence[int], dtype: Any = None, layout: Any = None,
                       device: Any = None, pin_memory: Any = None, *, tensor_cls: type) -> TensorBase:
    """``at::native::empty_strided_cuda`` (simulated: numpy memory, CUDA keys)."""
    return _strided(empty_cuda, size, stride, dtype, layout, device, tensor_cls)


def empty_strided_meta_symint(size: Sequence[int], stride: Sequence[int], dtype: Any = None, layout: Any = None,
                              device: Any = None, pin_memory: Any = None, *, tensor_cls: type) -> TensorBase:
    """``at::native::empty_strided_meta_symint``: sizes, strides and dtype, no data."""
    return _strided(empty_meta, size, stride, dtype, layout, device, tensor_cls)


def _options(self: TensorBase, dtype: Any, device: Any) -> tuple[Any, Any]:
    return (self._dtype if dtype is None else dtype), (self._device if device is None else device)


def empty_like(at: Any, self: TensorBase, dtype: Any = None, layout: Any = None, device: Any = None,
               pin_memory: Any = None, memory_format: Any = None) -> TensorBase:
    """``at::native::empty_like``: with the default ``preserve_format``, a non-overlapping and dense
    input's strides are kept (``at::empty_strided``); any other input gets a contiguous ``at::empty``."""
    dtype, device = _options(self, dtype, device)
    sizes, strides = tuple(self._sizes), tuple(self.stride())
    if memory_format is None and is_non_overlapping_and_dense(sizes, strides):
        return at.empty_strided(sizes, strides, dtype, layout, device, pin_memory)
    return at.empty(sizes, dtype, layout, device, pin_memory, None)


def ones_like(at: Any, self: TensorBase, dtype: Any = None, layout: Any = None, device: Any = None,
              pin_memory: Any = None, memory_format: Any = None) -> TensorBase:
    """``at::native::ones_like``: ``empty_like``, then ``fill_(1)``."""
    result = at.empty_like(self, dtype, layout, device, pin_memory, memory_format)
    return at.Tensor.fill_(result, 1.0)


def zeros_like(at: Any, self: TensorBase, dtype: Any = None, layout: Any = None, device: Any = None,
               pin_memory: Any = None, memory_format: Any = None) -> TensorBase:
    """``at::native::zeros_like``: ``empty_like``, then ``zero_()``."""
    result = at.empty_like(self, dtype, layout, device, pin_memory, memory_format)
    return at.Tensor.zero_(result)


def new_empty_strided_symint(at: Any, self: TensorBase, size: Sequence[int], stride: Sequence[int],
                             dtype: Any = None, layout: Any = None, device: Any = None,
                             pin_memory: Any = None) -> TensorBase:
    """``at::native::new_empty_strided_symint``: ``at::empty_strided`` with self's options."""
    dtype, device = _options(self, dtype, device)
    return at.empty_strided(size, stride, dtype, layout, device, pin_memory)


def detach(at: Any, self: TensorBase) -> TensorBase:
    """``at::native::detach``: a new tensor on the same storage with the same geometry, no autograd
    history; it shares the version counter (the ADInplaceOrView kernel's job in PyTorch) but is not
    ``_is_view()``."""
    return TensorBase.detach(self)


def select_backward_symint(at: Any, grad_output: TensorBase, input_sizes: Sequence[int], dim: int,
                           index: int) -> TensorBase:
    """``at::native::select_backward_symint``: zeros of the input's sizes, ``grad`` copied into the row."""
    grad_input = at.zeros(tuple(input_sizes), grad_output._dtype, None, grad_output._device, None)
    at.Tensor.copy_(at.Tensor.select(grad_input, dim, index), grad_output)
    return grad_input


def slice_backward(at: Any, grad_output: TensorBase, input_sizes: Sequence[int], dim: int, start: int, end: int,
                   step: int) -> TensorBase:
    """``at::native::slice_backward``: zeros of the input's sizes, ``grad`` copied into the slice."""
    grad_input = at.zeros(tuple(input_sizes), grad_output._dtype, None, grad_output._device, None)
    at.Tensor.copy_(at.Tensor.slice(grad_input, dim, start, end, step), grad_output)
    return grad_input
