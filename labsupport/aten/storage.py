"""Storage, strides and storage offset (stands for c10/core/StorageImpl.h, the strides part of
c10/core/TensorImpl.h and the geometry helpers of ATen/TensorUtils.cpp and ATen/InferSize.h).

In PyTorch a tensor is a window onto a Storage: ``element(i, j) = storage[offset + i*stride0 + j*stride1]``.
A view (``t()``, ``x[1]``, ``expand``) is a new window onto the *same* storage: new sizes, strides
and offset, no data copied.

The lab keeps a tensor's ``_data`` a numpy array, so every existing kernel keeps working; a view's
``_data`` is a numpy strided view onto the same buffer. The *storage* of a tensor is the numpy array
that owns the memory (``_data``'s root ``base``). For an ordinary tensor nothing more is stored (so
creating one costs nothing extra): its strides are read off the numpy array when asked, and its
offset is 0. A view made by the view kernels also records its geometry in the ``_geometry`` slot,
``(strides, storage offset, storage elements)``: it is what a meta tensor (no data) and a view with
zero elements (numpy reports zero strides for those) could not tell otherwise, and it spares reading
addresses off numpy for every view.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = [
    "UntypedStorage", "storage_root", "tensor_strides", "tensor_storage_offset", "tensor_is_contiguous",
    "contiguous_strides", "strided_array", "compute_stride", "infer_size", "storage_nelements",
    "check_in_bounds_for_storage", "format_list",
]


def format_list(values: Sequence[int]) -> str:
    """``[2, 3]``: how c10 prints an IntArrayRef in an error message."""
    return "[" + ", ".join(str(v) for v in values) + "]"


def contiguous_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides (``c10::contiguous_strides``): a size-0 or size-1 dim counts as 1."""
    strides = [1] * len(sizes)
    running = 1
    for d in range(len(sizes) - 1, -1, -1):
        strides[d] = running
        running *= max(sizes[d], 1)
    return tuple(strides)


def storage_root(array: np.ndarray) -> np.ndarray:
    """The numpy array that owns ``array``'s memory: the lab's Storage."""
    while True:
        base = array.base
        if isinstance(base, np.ndarray):
            array = base
            continue
        return array


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def tensor_strides(t: TensorBase) -> tuple[int, ...]:
    """``TensorImpl::strides()``, in elements."""
    geometry = getattr(t, "_geometry", None)
    if geometry is not None:
        return geometry[0]
    data = t._data
    if data is None:
        value = getattr(t, "_bt_value", None)
        if value is not None:  # a functorch BatchedTensor: its value's strides, batch dim left out
            strides = tensor_strides(value)
            return strides[: t._bt_bdim] + strides[t._bt_bdim + 1 :]
        return contiguous_strides(t._sizes)
    if data.size == 0 or data.ndim != len(t._sizes):
        # numpy reports zero strides for empty arrays; and a kernel that stored a 0-dim result as a
        # 1-element array (np.ascontiguousarray makes 0-dim arrays 1-D) holds it contiguously anyway
        return contiguous_strides(t._sizes)
    itemsize = data.itemsize
    return tuple(s // itemsize for s in data.strides)


def tensor_storage_offset(t: TensorBase) -> int:
    """``TensorImpl::storage_offset()``: where element 0 sits in the storage, in elements."""
    geometry = getattr(t, "_geometry", None)
    if geometry is not None:
        return geometry[1]
    data = t._data
    if data is None:
        value = getattr(t, "_bt_value", None)  # a functorch BatchedTensor: its value's offset
        return 0 if value is None else tensor_storage_offset(value)
    if data.base is None:
        return 0
    return (_address(data) - _address(storage_root(data))) // data.itemsize


def storage_nelements(t: TensorBase) -> int:
    """How many elements the tensor's storage holds."""
    geometry = getattr(t, "_geometry", None)
    if geometry is not None:
        return geometry[2]
    if t._data is None:
        return math.prod(t._sizes)
    return storage_root(t._data).size


def tensor_is_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """``TensorImpl::compute_contiguous``: row-major, ignoring dims of size 1; no elements is contiguous."""
    if 0 in sizes:
        return True
    expected = 1
    for d in range(len(sizes) - 1, -1, -1):
        if sizes[d] != 1:
            if strides[d] != expected:
                return False
            expected *= sizes[d]
    return True


class UntypedStorage:
    """``torch.UntypedStorage``: the memory behind one or more tensors (c10::StorageImpl).

    Wraps the numpy array that owns the memory. Two tensors share storage exactly when their
    ``untyped_storage()`` compare equal (in PyTorch, ``a.untyped_storage() == b.untyped_storage()``
    is True for a tensor and its views too). ``nbytes`` counts PyTorch's element size
    (2 for bfloat16, which the lab stores in float32).
    """

    __slots__ = ("_root", "_itemsize")

    def __init__(self, root: np.ndarray | None, itemsize: int, nelements: int = 0) -> None:
        self._root = root
        self._itemsize = itemsize if root is not None else itemsize * nelements

    def data_ptr(self) -> int:
        """The address of the first byte (0 for a meta tensor, as in PyTorch)."""
        return 0 if self._root is None else _address(self._root)

    def nbytes(self) -> int:
        if self._root is None:
            return self._itemsize
        return self._root.size * self._itemsize

    def size(self) -> int:
        return self.nbytes()

    @property
    def device(self) -> str:
        return "meta" if self._root is None else "cpu"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UntypedStorage):
            return NotImplemented
        if self._root is None or other._root is None:
            return self is other
        return self._root is other._root

    def __hash__(self) -> int:
        return id(self._root)

    def __len__(self) -> int:
        return self.nbytes()

    def __repr__(self) -> str:
        return f"UntypedStorage(nbytes={self.nbytes()}, data_ptr={self.data_ptr():#x})"


def strided_array(
    data: np.ndarray, sizes: Sequence[int], strides: Sequence[int], offset: int, root: np.ndarray | None = None
) -> np.ndarray:
    """A numpy view of ``data``'s storage (``root``, found when not given) with the given sizes,
    strides and offset (in elements).

    Stands for ``TensorImpl::set_sizes_and_strides`` on a tensor that shares ``data``'s Storage.
    The caller has checked that the window lies inside the storage.
    """
    if root is None:
        root = storage_root(data)
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        flat = root.ravel(order="K")
        if not np.shares_memory(flat, root):  # pragma: no cover - a storage is always one dense block
            raise RuntimeError("the lab cannot view a numpy array that does not own a dense buffer")
        root = flat
    itemsize = data.itemsize
    if 0 in sizes:  # no element to reach: numpy refuses offsets past the end, so anchor at 0
        offset = 0  # (the caller keeps the real offset in ``_geometry``)
    return np.ndarray(
        tuple(sizes), dtype=data.dtype, buffer=root, offset=offset * itemsize,
        strides=tuple(s * itemsize for s in strides),
    )


def check_in_bounds_for_storage(
    sizes: Sequence[int], strides: Sequence[int], offset: int, itemsize: int, storage_elements: int
) -> None:
    """``checkInBoundsForStorage`` (TensorShape.cpp): the window must lie inside the storage."""
    if any(s < 0 for s in sizes):
        raise RuntimeError(
            f"Storage size calculation overflowed with sizes={format_list(sizes)} and "
            f"strides={format_list(strides)}"
        )
    if 0 in sizes:
        return
    needed = (1 + sum((n - 1) * s for n, s in zip(sizes, strides))) * itemsize
    if needed == 0:
        return
    needed += offset * itemsize
    have = storage_elements * itemsize
    if needed > have:
        raise RuntimeError(
            f"setStorage: sizes {format_list(sizes)}, strides {format_list(strides)}, storage offset "
            f"{offset}, and itemsize {itemsize} requiring a storage size of {needed} are out of bounds "
            f"for storage of size {have}"
        )


def infer_size(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    """``infer_size_impl`` (ATen/InferSize.h): fill in the one ``-1`` of a view/reshape shape."""
    newsize = 1
    infer_dim: int | None = None
    for dim, s in enumerate(shape):
        if s == -1:
            if infer_dim is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer_dim = dim
        elif s >= 0:
            newsize *= s
        else:
            raise RuntimeError(f"invalid shape dimension {s} at index {dim} of shape {format_list(shape)}")
    result = list(shape)
    if numel == newsize or (infer_dim is not None and newsize > 0 and numel % newsize == 0):
        if infer_dim is not None:
            if newsize == 0:
                raise RuntimeError(
                    f"cannot reshape tensor of 0 elements into shape {format_list(shape)} because the "
                    "unspecified dimension size -1 can be any value and is ambiguous"
                )
            result[infer_dim] = numel // newsize
        return tuple(result)
    raise RuntimeError(f"shape '{format_list(shape)}' is invalid for input of size {numel}")


def compute_stride(
    oldshape: Sequence[int], oldstride: Sequence[int], newshape: Sequence[int]
) -> tuple[int, ...] | None:
    """``computeStride`` (ATen/TensorUtils.cpp): strides that let ``newshape`` view the same
    elements as (oldshape, oldstride), or None when no view can (then ``view`` refuses and
    ``reshape`` copies). Dimensions are merged chunk by chunk: a chunk is a run of dims that are
    contiguous with each other."""
    if len(oldshape) == 0:
        return (1,) * len(newshape)
    numel = math.prod(oldshape)
    if numel == 0 and tuple(oldshape) == tuple(newshape):
        return tuple(oldstride)
    newstride = [0] * len(newshape)
    if numel == 0:
        for view_d in range(len(newshape) - 1, -1, -1):
            if view_d == len(newshape) - 1:
                newstride[view_d] = 1
            else:
                newstride[view_d] = max(newshape[view_d + 1], 1) * newstride[view_d + 1]
        return tuple(newstride)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (
            oldshape[tensor_d - 1] != 1 and oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


def untyped_storage_of(t: Any) -> UntypedStorage:
    """``Tensor.untyped_storage()``."""
    if t._data is None:
        return UntypedStorage(None, t._dtype.itemsize, storage_nelements(t))
    return UntypedStorage(storage_root(t._data), t._dtype.itemsize)
