"""Helper functions used by the backward formulas in ops.yaml.

Stands for ``torch/csrc/autograd/FunctionsManual.cpp``. They run with grad mode off, on the build's
own tensors. Each takes the build's C++ API ``at`` first (the generated nodes pass it) and calls
operators through it, as FunctionsManual.cpp calls ``at::`` functions and ``at::Tensor`` methods:
those calls are dispatched, so a logging mode and the profiler see them, and never go through the
Python bindings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labsupport.autograd.engine import sum_to as _engine_sum_to

__all__ = [
    "maybe_multiply", "sum_to", "sum_backward", "mm_mat1_backward", "mm_mat2_backward", "_to_copy_backward",
    "mv_self_backward", "mv_vec_backward", "TensorGeometry", "select_backward_symint",
    "slice_backward_wrapper", "unsqueeze_to", "as_strided_backward",
]


def maybe_multiply(at: Any, grad: Any, alpha: Any) -> Any:
    """``grad * alpha``, skipping the multiply when alpha is 1 (``maybe_multiply``)."""
    if alpha == 1:
        return grad
    from labsupport.aten.scalar_tensor import wrapped_scalar_tensor

    return at.Tensor.mul(grad, wrapped_scalar_tensor(alpha, type(grad)))  # C++: grad * alpha


def sum_to(at: Any, grad: Any, sizes: tuple[int, ...]) -> Any:
    """``at::sum_to``: reduce a broadcast gradient back to ``sizes`` (sum.dim_IntList, then view)."""
    return _engine_sum_to(grad, tuple(sizes), at)


def sum_backward(at: Any, grad: Any, sizes: tuple[int, ...], dims: Any, keepdim: bool) -> Any:
    """``sum_backward``: put back the reduced dimensions (``unsqueeze``), then ``expand`` to the input's
    sizes."""
    sizes = tuple(sizes)
    if not keepdim and sizes:
        if dims is None or len(dims) == 0:
            dims = range(len(sizes))
        for d in sorted(d % len(sizes) for d in dims):
            grad = at.Tensor.unsqueeze(grad, d)
    return at.Tensor.expand(grad, sizes)


def mm_mat1_backward(at: Any, grad: Any, mat2: Any) -> Any:
    """``mm_mat1_backward``: d(self @ mat2)/d(self) is ``grad.mm(mat2.t())``."""
    return at.Tensor.mm(grad, at.Tensor.t(mat2))


def mm_mat2_backward(at: Any, grad: Any, self: Any) -> Any:
    """``mm_mat2_backward``: d(self @ mat2)/d(mat2) is ``self.t().mm(grad)``."""
    return at.Tensor.mm(at.Tensor.t(self), grad)


def _to_copy_backward(at: Any, grad: Any, self_options: Any) -> Any:
    """``_to_copy_backward``: the gradient goes back to the input's dtype (``grad.to(self_options)``:
    the same tensor when the dtype already matches, else ``_to_copy``)."""
    if grad._dtype is self_options.dtype:
        return grad
    return at._to_copy(grad, self_options.dtype)


def _transposed(t: Any) -> Any:
    """A contiguous transposed copy of a matrix (numpy)."""
    data = None if t._data is None else np.ascontiguousarray(t._data.T)
    return type(t)._make(data, tuple(reversed(t._sizes)), t._dtype, t._device)


def mv_self_backward(at: Any, grad: Any, vec: Any) -> Any:
    """``grad.ger(vec)`` (PyTorch's formula for mv's matrix): the outer product (the lab has no ``ger``)."""
    data = None if grad._data is None else np.multiply.outer(grad._data, vec._data).astype(grad._data.dtype)
    return type(grad)._make(data, (grad._sizes[0], vec._sizes[0]), grad._dtype, grad._device)


def mv_vec_backward(at: Any, grad: Any, self: Any) -> Any:
    """``self.t().mv(grad)`` (PyTorch's formula for mv's vector)."""
    return at.Tensor.mv(at.Tensor.t(self), grad)


# --- views (FunctionsManual.cpp: select_backward, slice_backward_wrapper, unsqueeze_to, as_strided_backward)

def _zeros_like_sizes(grad: Any, sizes: Any) -> Any:
    """``at::zeros(sizes, grad.options())``: a fresh zero tensor of grad's type, dtype and device."""
    sizes = tuple(sizes)
    data = None if grad._data is None else np.zeros(sizes, dtype=grad._data.dtype)
    return type(grad)._make(data, sizes, grad._dtype, grad._device)


def select_backward_symint(at: Any, grad: Any, input_sizes: Any, dim: int, index: int) -> Any:
    """``at::select_backward_symint``: the operator (zeros of the input's sizes with ``grad`` copied into
    the selected row); a build without it runs the same body here."""
    if hasattr(at._functions, "select_backward"):
        return at.select_backward(grad, tuple(input_sizes), dim, index)
    grad_input = _zeros_like_sizes(grad, input_sizes)
    at.Tensor.copy_(at.Tensor.select(grad_input, dim, index), grad)
    return grad_input


def slice_backward_wrapper(at: Any, grad: Any, input_sizes: Any, dim: int, start: Any, end: Any, step: int) -> Any:
    """``slice_backward_wrapper``: fill in start (0) and end (INT64_MAX), then ``at::slice_backward``."""
    start = 0 if start is None else start
    end = 2**63 - 1 if end is None else end
    if hasattr(at._functions, "slice_backward"):
        return at.slice_backward(grad, tuple(input_sizes), dim, start, end, step)
    grad_input = _zeros_like_sizes(grad, input_sizes)
    at.Tensor.copy_(at.Tensor.slice(grad_input, dim, start, end, step), grad)
    return grad_input


def unsqueeze_to(at: Any, grad: Any, *args: Any) -> Any:
    """``unsqueeze_to(grad, sizes)`` / ``unsqueeze_to(grad, dim(s), sizes)``: put back the size-1 dims
    that squeeze removed (only those the input really had)."""
    if len(args) == 1:
        sizes = tuple(args[0])
        for d, n in enumerate(sizes):
            if n == 1:
                grad = at.Tensor.unsqueeze(grad, d)
        return grad
    dims, sizes = args
    sizes = tuple(sizes)
    ndim = len(sizes)
    if isinstance(dims, int):
        dims = [dims]
    wrapped = sorted({(d + ndim if d < 0 else d) for d in dims} if ndim else set())
    for d in wrapped:
        if sizes[d] == 1:
            grad = at.Tensor.unsqueeze(grad, d)
    return grad


class TensorGeometry:
    """``at::TensorGeometry``: the sizes, strides and storage offset autograd keeps of a tensor
    (instead of the tensor itself)."""

    __slots__ = ("sizes", "strides", "storage_offset")

    def __init__(self, t: Any) -> None:
        self.sizes = tuple(t._sizes)
        self.strides = tuple(t.stride())
        self.storage_offset = t.storage_offset()


def as_strided_backward(at: Any, grad: Any, input_geometry: Any, sizes: Any, strides: Any, storage_offset: Any) -> Any:
    """``as_strided_backward``, simplified: scatter-add ``grad`` into a zero buffer laid out like the
    input's storage window (so overlapping output elements add up), then read the input's elements
    back out of it. PyTorch does the same with as_strided views and ``index_add``-like steps."""
    geometry = input_geometry if isinstance(input_geometry, TensorGeometry) else TensorGeometry(input_geometry)
    offset = geometry.storage_offset if storage_offset is None else storage_offset
    in_sizes, in_strides = geometry.sizes, geometry.strides
    extent = max(
        offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1 if 0 not in tuple(sizes) else 0,
        geometry.storage_offset + sum((n - 1) * s for n, s in zip(in_sizes, in_strides)) + 1
        if 0 not in in_sizes else 0,
    )
    if grad._data is None:
        return type(grad)._make(None, in_sizes, grad._dtype, grad._device)
    buffer = np.zeros(max(extent, 1), dtype=grad._data.dtype)
    out_index = _flat_indices(tuple(sizes), tuple(strides), offset)
    np.add.at(buffer, out_index.ravel(), np.reshape(grad._data, out_index.shape).ravel())
    in_index = _flat_indices(in_sizes, in_strides, geometry.storage_offset)
    # Input elements that share a memory location (an expanded input) split its gradient evenly.
    count = np.zeros(buffer.shape, dtype=np.int64)
    np.add.at(count, in_index.ravel(), 1)
    shared = count > 1
    if shared.any():
        buffer[shared] /= count[shared]
    result = np.array(buffer[in_index])  # a fresh contiguous array (0-dim stays 0-dim)
    return type(grad)._make(result, in_sizes, grad._dtype, grad._device)


def _flat_indices(sizes: tuple[int, ...], strides: tuple[int, ...], offset: int) -> np.ndarray:
    index = np.full(sizes, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(sizes, strides)):
        shape = [1] * len(sizes)
        shape[d] = n
        index = index + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return index
