"""mm and matmul (stands for aten/src/ATen/native/LinearAlgebra.cpp: ``TORCH_META_FUNC(mm)``,
``TORCH_IMPL_FUNC(mm_out_cpu)`` with its ``addmm_impl_cpu_`` checks, and the
CompositeImplicitAutograd ``at::native::matmul``).

``mm`` is structured: ``structured_mm.meta()`` (labsupport/aten/meta/linear_algebra.py) checks ranks
and inner sizes and announces an output of ``self``'s dtype; ``impl()`` checks the dtypes (on CPU, as
PyTorch does, so a meta tensor pair of different dtypes passes) and multiplies with numpy.
Reduced-precision floats (float16, bfloat16) are multiplied in float32 and rounded once, as
PyTorch's CPU gemm accumulates them in float.

``matmul`` is a composite: it has no kernel of its own below Autograd; it calls ``at::dot`` (1-D x 1-D),
``at::mv`` (2-D x 1-D) or ``at::mm`` (2-D x 2-D), so autograd records ``DotBackward0`` / ``MvBackward0`` /
``MmBackward0`` and the profiler shows ``aten::matmul -> aten::mm``. PyTorch also handles 1-D x 2-D
(``unsqueeze + mm + squeeze_``) and batches (folding into ``mm`` or ``bmm``) with view operators the lab
does not have yet, so those ranks raise ``NotImplementedError`` naming the PyTorch path instead of
computing something that would trace differently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from labsupport.aten import _numpy_errors  # noqa: F401  (installs the warnings filter)
from labsupport.aten import dtype as dtypes
from labsupport.aten.dtype import round_to_bfloat16
from labsupport.aten.meta.linear_algebra import structured_mm

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = ["structured_mm_out_cpu", "structured_mm_out_cuda", "dot", "dot_cuda", "mv", "matmul"]

_float32 = np.dtype(np.float32)


class structured_mm_out_cpu(structured_mm):
    """at::native::structured_mm_out_cpu: ``out = self @ mat2`` (addmm_impl_cpu_ with beta 0)."""

    __slots__ = ()

    def impl(self, self_: TensorBase, mat2: TensorBase, out: TensorBase) -> None:
        if self_._dtype is not mat2._dtype:
            raise RuntimeError(
                "expected m1 and m2 to have the same dtype, but got: "
                f"{self_._dtype.typemeta_name} != {mat2._dtype.typemeta_name}"
            )
        dtype = self_._dtype
        if out._data.size == 0:
            return  # nothing to compute (checked before the dtype dispatch, as in addmm_impl_cpu_)
        if self_._sizes[1] == 0:
            out._data.fill(0)  # [n, 0] x [0, m]: a sum of nothing
            return
        if dtype is dtypes.bool:
            raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
        if dtype is dtypes.float16 or dtype is dtypes.bfloat16:
            result = np.matmul(self_._data.astype(_float32), mat2._data.astype(_float32))
        else:
            result = np.matmul(self_._data, mat2._data)
        np.copyto(out._data, result, casting="unsafe")
        if out._dtype is dtypes.bfloat16:
            round_to_bfloat16(out._data)


class structured_mm_out_cuda(structured_mm_out_cpu):
    """at::native::structured_mm_out_cuda - simulated: numpy memory, so the CPU math is reused."""

    __slots__ = ()


def _vector_kernel_checks(name: str, self: TensorBase, other: TensorBase) -> None:
    """``dot_check`` (Blas.cpp): ranks, then dtypes, then lengths."""
    if len(self._sizes) != 1 or len(other._sizes) != 1:
        raise RuntimeError(
            f"1D tensors expected, but got {len(self._sizes)}D and {len(other._sizes)}D tensors"
        )
    if self._dtype is not other._dtype:
        raise RuntimeError(
            f"{name} : expected both vectors to have same dtype, but found "
            f"{self._dtype.scalar_type_name} and {other._dtype.scalar_type_name}"
        )
    if self._sizes[0] != other._sizes[0]:
        n, m = self._sizes[0], other._sizes[0]
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same number of "
            f"elements, but got {n} and {m} elements respectively"
        )


def dot(self: TensorBase, tensor: TensorBase) -> TensorBase:
    """``at::native::dot`` (CPU, aten/src/ATen/native/Blas.cpp): the sum of the elementwise products,
    a 0-dim tensor of the inputs' dtype."""
    _vector_kernel_checks("dot", self, tensor)
    dtype = self._dtype
    if dtype is dtypes.bool:
        raise NotImplementedError("\"dot\" not implemented for 'Bool'")
    if dtype is dtypes.float16 or dtype is dtypes.bfloat16:
        value = np.asarray(np.dot(self._data.astype(_float32), tensor._data.astype(_float32)))
    else:
        value = np.asarray(np.dot(self._data, tensor._data))
    data = value.astype(dtype.np)
    if dtype is dtypes.bfloat16:
        round_to_bfloat16(data)
    return type(self)._make(data, (), dtype, self._device)


def dot_cuda(self: TensorBase, tensor: TensorBase) -> TensorBase:
    """``at::native::dot_cuda`` - simulated: the CPU math on numpy memory."""
    return dot(self, tensor)


def mv(at: Any, self: TensorBase, vec: TensorBase) -> TensorBase:
    """``at::native::mv`` (CompositeExplicitAutograd): ``result = at::empty({n}, vec.options())``, then
    ``at::addmv_(result, self, vec, 0, 1)``. The lab has no addmv, so the matrix-vector product is
    computed here into the new tensor (the profiler shows ``aten::mv -> aten::empty`` where PyTorch
    also shows ``aten::addmv_``)."""
    if len(self._sizes) != 2 or len(vec._sizes) != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {len(self._sizes)}, {len(vec._sizes)}")
    n, k = self._sizes
    if vec._sizes[0] != k:
        raise RuntimeError(f"size mismatch, got input ({n}), mat ({n}x{k}), vec ({vec._sizes[0]})")
    result = at.empty((n,), vec._dtype, None, vec._device, None, None)
    if self._dtype is not vec._dtype:
        name = vec._dtype.scalar_type_name
        raise RuntimeError(
            f"addmv input tensors must have the same dtype, but got {name}, {self._dtype.scalar_type_name}, and {name}"
        )
    if result._data is None or n == 0:
        return result  # nothing to compute: addmv returns before its dtype dispatch
    if k == 0:
        result._data.fill(0)
        return result
    if vec._dtype is dtypes.bool:
        raise NotImplementedError("\"addmv_impl_cpu\" not implemented for 'Bool'")
    if vec._dtype is dtypes.float16 or vec._dtype is dtypes.bfloat16:
        product = np.matmul(self._data.astype(_float32), vec._data.astype(_float32))
    else:
        product = np.matmul(self._data, vec._data)
    np.copyto(result._data, product, casting="unsafe")
    if vec._dtype is dtypes.bfloat16:
        round_to_bfloat16(result._data)
    return result


def matmul(at: Any, self: TensorBase, other: TensorBase) -> TensorBase:
    """``at::native::matmul`` (CompositeImplicitAutograd): dispatch on the ranks, to ``at::dot``
    (1-D x 1-D), ``at::mv`` (2-D x 1-D) or ``at::mm`` (2-D x 2-D)."""
    dim1, dim2 = len(self._sizes), len(other._sizes)
    if dim1 == 0 or dim2 == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {dim1}D and {dim2}D"
        )
    if dim1 == 1 and dim2 == 1:
        return at.dot(self, other)
    if dim1 == 2 and dim2 == 1:
        return at.mv(self, other)
    if dim1 == 2 and dim2 == 2:
        return at.mm(self, other)
    path = "unsqueeze(0) + at::mm + squeeze_(0)" if (dim1, dim2) == (1, 2) else (
        "folding the batch dimensions into at::mm / at::bmm (views)"
    )
    raise NotImplementedError(
        f"aten::matmul: the lab implements the 1-D x 1-D, 2-D x 1-D and 2-D x 2-D cases (got {dim1}D and "
        f"{dim2}D). PyTorch computes this case with {path}, which needs view operators the lab does not "
        "have yet."
    )
