"""Meta function of sum over dims (stands for ``TORCH_META_FUNC2(sum, dim_IntList)`` in
aten/src/ATen/native/ReduceOps.cpp and the reduction helpers of ATen/native/ReduceOpsUtils.h).

Reductions are not TensorIterator ops in their meta function: the class derives from MetaBase only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from labsupport.aten import dtype as dtypes
from labsupport.aten.tensor import TensorOptions
from labsupport.aten.tensor_meta import MetaBase
from labsupport.aten.wrap_dim import maybe_wrap_dim

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = [
    "structured_sum_dim_IntList", "make_dim_mask", "reduced_shape", "resize_reduction",
    "get_dtype_from_self", "infer_dtype_from_optional",
]


def make_dim_mask(dims: Sequence[int] | None, ndim: int) -> list[bool]:
    """Which dims are reduced; no dims (None or []) means all of them. Repeated dims are an error."""
    if not dims:
        return [True] * ndim
    mask = [False] * max(ndim, 1)
    for dim in dims:
        pos = maybe_wrap_dim(dim, ndim)
        if mask[pos]:
            raise RuntimeError(f"dim {pos} appears multiple times in the list of dims")
        mask[pos] = True
    return mask[:ndim]


def reduced_shape(sizes: tuple[int, ...], mask: list[bool], keepdim: bool) -> tuple[int, ...]:
    """Reduced dims become 1 (keepdim) or disappear."""
    if keepdim:
        return tuple(1 if reduced else size for size, reduced in zip(sizes, mask))
    return tuple(size for size, reduced in zip(sizes, mask) if not reduced)


def _as_dim_list(dim: int | Sequence[int] | None) -> tuple[int, ...] | None:
    """``int[1]? dim``: a single int means a one-element list."""
    if dim is None:
        return None
    if isinstance(dim, int):
        return (dim,)
    return tuple(dim)


def get_dtype_from_self(self: TensorBase, dtype: DType | None, promote_integers: bool) -> DType:
    """The explicit dtype, else self's, with integers (and bool) promoted to int64 for sum/prod."""
    if dtype is not None:
        return dtype
    if promote_integers and not self._dtype.is_floating_point:
        return dtypes.int64
    return self._dtype


def infer_dtype_from_optional(self: TensorBase, dtype: DType | None, result: TensorBase | None) -> DType:
    """``dtype=`` wins; else an ``out=`` tensor's dtype; else self's dtype (integers -> int64)."""
    if result is not None:
        return dtype if dtype is not None else result._dtype
    return get_dtype_from_self(self, dtype, promote_integers=True)


def resize_reduction(
    meta: MetaBase, self: TensorBase, dim: int | Sequence[int] | None, keepdim: bool, out_dtype: DType
) -> tuple[int, ...]:
    """Announce the reduction's output; returns the reduced dims (sorted) for the kernel."""
    ndim = len(self._sizes)
    mask = make_dim_mask(_as_dim_list(dim), ndim)
    shape = reduced_shape(self._sizes, mask, keepdim)
    meta.set_output_raw_strided(0, shape, None, TensorOptions(out_dtype, self._device), None)
    return tuple(i for i, reduced in enumerate(mask) if reduced)


class structured_sum_dim_IntList(MetaBase):
    """at::meta::structured_sum_dim_IntList:
    ``sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)``.

    After ``meta()``, ``reduce_dims`` holds the reduced dimensions (all of them for ``dim=None``/``[]``).
    """

    __slots__ = ("reduce_dims",)

    def meta(
        self,
        self_: TensorBase,
        dim: int | Sequence[int] | None = None,
        keepdim: bool = False,
        dtype: DType | None = None,
    ) -> None:
        out_dtype = infer_dtype_from_optional(self_, dtype, self.maybe_get_output(0))
        self.reduce_dims = resize_reduction(self, self_, dim, keepdim, out_dtype)
