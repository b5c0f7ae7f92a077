"""View operators (stands for aten/src/ATen/native/TensorShape.cpp, ATen/ExpandUtils.cpp and
``alias_with_sizes_and_strides`` / ``as_strided_tensorimpl``).

A view kernel writes no data. It makes a new tensor that shares ``self``'s storage and differs only
in sizes, strides and storage offset. In PyTorch only ``view`` and ``as_strided`` have per-backend
kernels (CPU, CUDA, Meta); ``t``, ``transpose``, ``select``, ``slice``, ``expand``, ``unsqueeze`` and
``squeeze`` are CompositeExplicitAutograd: they compute the new geometry and call ``at::as_strided``
through the dispatcher, so the profiler shows ``aten::select -> aten::as_strided``. ``alias``,
``view`` and ``_unsafe_view`` build the view directly (no inner call).

What the lab simplifies: the view shares storage, but marking it as a view (``_base``, the shared
version counter) is the job of the ADInplaceOrView kernels, exactly as in PyTorch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from labsupport.aten.memory_overlap import is_non_overlapping_and_dense
from labsupport.aten.storage import (
    check_in_bounds_for_storage,
    compute_stride,
    format_list,
    infer_size,
    storage_nelements,
    storage_root,
    strided_array,
    tensor_is_contiguous,
    tensor_storage_offset,
    tensor_strides,
)
from labsupport.aten.tensor import TensorBase, make_tensor
from labsupport.aten.wrap_dim import maybe_wrap_dim

__all__ = [
    "alias_with_sizes_and_strides", "view", "as_strided_tensorimpl", "as_strided_tensorimpl_meta_symint",
    "expand", "transpose", "t", "select_symint", "slice", "unsqueeze", "squeeze", "alias", "clone",
    "reshape_symint", "_unsafe_view", "set_sizes_and_strides",
]

_INT64_MAX = 2**63 - 1


def alias_with_sizes_and_strides(
    self: TensorBase, sizes: Sequence[int], strides: Sequence[int], storage_offset: int | None = None
) -> TensorBase:
    """A new tensor on ``self``'s storage with the given geometry (``alias_with_sizes_and_strides``).

    The key set is ``self``'s, as PyTorch's ``TensorImpl(VIEW, storage, key_set, dtype)`` copies it.
    """
    sizes = tuple(sizes)
    strides = tuple(strides)
    if storage_offset is None:
        storage_offset = tensor_storage_offset(self)
    data = self._data
    if data is None:
        out = make_tensor(type(self), None, sizes, self._dtype, self._device)
        out._geometry = (strides, storage_offset, storage_nelements(self))
    else:
        root = storage_root(data)
        out = make_tensor(type(self), strided_array(data, sizes, strides, storage_offset, root), sizes,
                          self._dtype, self._device)
        out._geometry = (strides, storage_offset, root.size)
    out._ks = self._ks
    return out


def set_sizes_and_strides(
    self: TensorBase, sizes: Sequence[int], strides: Sequence[int], storage_offset: int | None = None
) -> TensorBase:
    """Give ``self`` itself a new geometry on the same storage (``TensorImpl::set_sizes_and_strides``,
    what ``as_strided_``, ``squeeze_`` and ``unsqueeze_`` do)."""
    view_ = alias_with_sizes_and_strides(self, sizes, strides, storage_offset)
    self._data = view_._data
    self._sizes = view_._sizes
    self._geometry = view_._geometry
    return self


# --- per-backend kernels (RegisterCPU / RegisterMeta) ------------------------------------------------

def view(self: TensorBase, size: Sequence[int]) -> TensorBase:
    """``at::native::view`` (CPU, CUDA, Meta): same elements, new shape, if strides allow it."""
    inferred = infer_size(size, self.numel())
    stride = compute_stride(self._sizes, tensor_strides(self), inferred)
    if stride is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead."
        )
    return alias_with_sizes_and_strides(self, inferred, stride)


def _set_strided_checks(
    self: TensorBase, size: Sequence[int], stride: Sequence[int], offset: int, check_bounds: bool = True
) -> None:
    """``setStrided`` (TensorShape.cpp): lengths, non-negative strides, bounds, then the offset."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(
            f"as_strided: Negative strides are not supported at the moment, got strides: {format_list(stride)}"
        )
    if check_bounds:
        check_in_bounds_for_storage(size, stride, offset, self._dtype.itemsize, storage_nelements(self))
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")


def as_strided_tensorimpl(
    self: TensorBase, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> TensorBase:
    """``at::native::as_strided_tensorimpl`` (CPU, CUDA): any window onto self's storage."""
    offset = tensor_storage_offset(self) if storage_offset is None else storage_offset
    size, stride = tuple(size), tuple(stride)
    _set_strided_checks(self, size, stride, offset)
    return alias_with_sizes_and_strides(self, size, stride, offset)


def as_strided_tensorimpl_meta_symint(
    self: TensorBase, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> TensorBase:
    """``at::native::as_strided_tensorimpl_meta_symint`` (Meta): the same checks except the storage
    bounds (a meta storage has no memory to overrun, and PyTorch 2.13 does not check them), no data."""
    offset = tensor_storage_offset(self) if storage_offset is None else storage_offset
    size, stride = tuple(size), tuple(stride)
    _set_strided_checks(self, size, stride, offset, check_bounds=False)
    return alias_with_sizes_and_strides(self, size, stride, offset)


# --- CompositeExplicitAutograd kernels (take the build's API ``at`` first) ---------------------------

def expand(at: Any, self: TensorBase, size: Sequence[int], implicit: bool = False) -> TensorBase:
    """``at::native::expand``: a view with stride 0 along the broadcast dims (``inferExpandGeometry``)."""
    size = tuple(size)
    tensor_sizes = self._sizes
    if len(size) < len(tensor_sizes):
        raise RuntimeError(
            f"expand(torch.{self._dtype.scalar_type_name}Tensor{{{format_list(tensor_sizes)}}}, size="
            f"{format_list(size)}): the number of sizes provided ({len(size)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(tensor_sizes)})"
        )
    tensor_strides_ = tensor_strides(self)
    ndim, tensor_dim = len(size), len(tensor_sizes)
    if tensor_dim == 0:
        return at.Tensor.as_strided(self, size, (0,) * ndim, None)
    sizes_out = [0] * ndim
    strides_out = [0] * ndim
    for i in range(ndim - 1, -1, -1):
        dim = tensor_dim - 1 - (ndim - 1 - i)
        have = tensor_sizes[dim] if dim >= 0 else 1
        stride = tensor_strides_[dim] if dim >= 0 else sizes_out[i + 1] * strides_out[i + 1]
        target = size[i]
        if target == -1:
            if dim < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({target}) isn't allowed in a leading, non-existing "
                    f"dimension {i}"
                )
            target = have
        if have != target:
            if have != 1:
                raise RuntimeError(
                    f"The expanded size of the tensor ({target}) must match the existing size ({have}) at "
                    f"non-singleton dimension {i}.  Target sizes: {format_list(size)}.  Tensor sizes: "
                    f"{format_list(tensor_sizes)}"
                )
            have, stride = target, 0
        sizes_out[i], strides_out[i] = have, stride
    return at.Tensor.as_strided(self, sizes_out, strides_out, None)


def transpose(at: Any, self: TensorBase, dim0: int, dim1: int) -> TensorBase:
    """``at::native::transpose``: swap two dims' sizes and strides."""
    ndim = len(self._sizes)
    dim0 = maybe_wrap_dim(dim0, ndim)
    dim1 = maybe_wrap_dim(dim1, ndim)
    if dim0 == dim1:
        return at.Tensor.alias(self)
    sizes = list(self._sizes)
    strides = list(tensor_strides(self))
    sizes[dim0], sizes[dim1] = sizes[dim1], sizes[dim0]
    strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
    return at.Tensor.as_strided(self, sizes, strides, tensor_storage_offset(self))


def t(at: Any, self: TensorBase) -> TensorBase:
    """``at::native::t``: transpose a matrix; vectors and scalars come back as they are."""
    ndim = len(self._sizes)
    if ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {ndim}D")
    return at.Tensor.transpose(self, 0, 0 if ndim < 2 else 1)


def select_symint(at: Any, self: TensorBase, dim: int, index: int) -> TensorBase:
    """``at::native::select_symint``: drop ``dim``, moving the offset to element ``index``."""
    ndim = len(self._sizes)
    if ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = maybe_wrap_dim(dim, ndim)
    size = self._sizes[dim]
    if index < -size or index >= size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {format_list(self._sizes)} at dimension {dim}"
        )
    if index < 0:
        index += size
    strides = list(tensor_strides(self))
    sizes = list(self._sizes)
    offset = tensor_storage_offset(self) + index * strides[dim]
    del sizes[dim], strides[dim]
    return at.Tensor.as_strided(self, sizes, strides, offset)


def slice(  # PyTorch's name (shadows the builtin in this module only)
    at: Any, self: TensorBase, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> TensorBase:
    """``at::native::slice``: every ``step``-th element of ``[start, end)`` along ``dim``, clamped."""
    ndim = len(self._sizes)
    if ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    dim = maybe_wrap_dim(dim, ndim)
    sizes = list(self._sizes)
    strides = list(tensor_strides(self))
    start_val = 0 if start is None else start
    end_val = _INT64_MAX if end is None else end
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    length = sizes[dim]
    if start_val < 0:
        start_val += length
    if end_val < 0:
        end_val += length
    if start_val < 0:
        start_val = 0
    elif start_val >= length:
        start_val = length
    if end_val < start_val:
        end_val = start_val
    elif end_val >= length:
        end_val = length
    offset = tensor_storage_offset(self) + start_val * strides[dim]
    sizes[dim] = (end_val - start_val + step - 1) // step
    strides[dim] *= step
    return at.Tensor.as_strided(self, sizes, strides, offset)


def unsqueeze(at: Any, self: TensorBase, dim: int) -> TensorBase:
    """``at::native::unsqueeze``: insert a dim of size 1 (``inferUnsqueezeGeometry``)."""
    ndim = len(self._sizes)
    dim = maybe_wrap_dim(dim, ndim + 1)
    sizes = list(self._sizes)
    strides = list(tensor_strides(self))
    new_stride = 1 if dim >= ndim else sizes[dim] * strides[dim]
    sizes.insert(dim, 1)
    strides.insert(dim, new_stride)
    return at.Tensor.as_strided(self, sizes, strides, None)


def _squeeze_dims(self: TensorBase, dim: int | Sequence[int] | None) -> set[int]:
    ndim = len(self._sizes)
    if dim is None:
        return {d for d, n in enumerate(self._sizes) if n == 1}
    if isinstance(dim, int):
        d = maybe_wrap_dim(dim, ndim)
        return {d} if ndim and self._sizes[d] == 1 else set()
    seen: set[int] = set()
    for d in dim:
        wrapped = maybe_wrap_dim(d, ndim)
        if wrapped in seen:
            raise RuntimeError(f"dim {wrapped} appears multiple times in the list of dims")
        seen.add(wrapped)
    return {d for d in seen if ndim and self._sizes[d] == 1}


def squeeze(at: Any, self: TensorBase, dim: int | Sequence[int] | None = None) -> TensorBase:
    """``at::native::squeeze`` (three C++ overloads: no dim, one dim, a list): drop dims of size 1."""
    drop = _squeeze_dims(self, dim)
    strides = tensor_strides(self)
    sizes = [n for d, n in enumerate(self._sizes) if d not in drop]
    kept = [s for d, s in enumerate(strides) if d not in drop]
    return at.Tensor.as_strided(self, sizes, kept, None)


def alias(at: Any, self: TensorBase) -> TensorBase:
    """``at::native::alias``: a new tensor with self's exact geometry (no inner call)."""
    return alias_with_sizes_and_strides(self, self._sizes, tensor_strides(self))


def _unsafe_view(at: Any, self: TensorBase, size: Sequence[int]) -> TensorBase:
    """``at::native::_unsafe_view``: a view autograd treats as a fresh tensor (reshape's copy path)."""
    return view(self, size)


def clone(at: Any, self: TensorBase, memory_format: Any = None) -> TensorBase:
    """``at::native::clone``: a copy in new storage. The preserve format (the default) keeps a dense
    tensor's stride order (``t().clone()`` has strides (1, n)); otherwise the copy is contiguous.

    PyTorch allocates with ``at::empty_strided`` or ``at::empty_like``; the lab has neither op, so it
    calls ``at::empty`` and, to preserve a permuted layout, re-lays the fresh buffer out in numpy.
    """
    result = at.empty(self._sizes, self._dtype, None, self._device, None, None)
    preserve = memory_format is None or str(memory_format).endswith("preserve_format")
    if preserve and self._data is not None and result._data is not None:
        strides = tensor_strides(self)
        if not tensor_is_contiguous(self._sizes, strides) and is_non_overlapping_and_dense(self._sizes, strides):
            result._data = np.empty_like(self._data, order="K")
    at.Tensor.copy_(result, self, False)
    return result


def reshape_symint(at: Any, self: TensorBase, shape: Sequence[int]) -> TensorBase:
    """``at::native::reshape_symint`` (CompositeImplicitAutograd): a view when the strides allow one,
    otherwise a contiguous clone viewed with ``_unsafe_view``."""
    inferred = infer_size(shape, self.numel())
    if compute_stride(self._sizes, tensor_strides(self), inferred) is not None:
        return at.Tensor.view(self, shape)
    copy = at.Tensor.clone(self, "contiguous_format")
    return at._unsafe_view(copy, inferred)
