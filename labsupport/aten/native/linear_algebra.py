"""mm and matmul (stands for aten/src/ATen/native/LinearAlgebra.cpp: ``TORCH_META_FUNC(mm)``,
``TORCH_IMPL_FUNC(mm_out_cpu)`` with its ``addmm_impl_cpu_`` checks, and the
CompositeImplicitAutograd ``at::native::matmul``).

``mm`` is structured: ``structured_mm.meta()`` (labsupport/aten/meta/linear_algebra.py) checks ranks
and inner sizes and announces an output of ``self``'s dtype; ``impl()`` checks the dtypes (on CPU, as
PyTorch does, so a meta tensor pair of different dtypes passes) and multiplies with numpy.
Reduced-precision floats (float16, bfloat16) are multiplied in float32 and rounded once, as
PyTorch's CPU gemm accumulates them in float.

``matmul`` is a composite: it has no kernel of its own below Autograd; for two matrices it calls
``at::mm``, so autograd records ``MmBackward0`` and the profiler shows ``aten::matmul -> aten::mm``.
PyTorch also handles 1-D operands (``dot``, ``mv``, ``unsqueeze + mm``) and batches (``bmm``, folding
into ``mm``); the lab has no view operators to fold with yet, so those ranks raise ``NotImplementedError``
naming the PyTorch path instead of computing something that would trace differently.
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

__all__ = ["structured_mm_out_cpu", "structured_mm_out_cuda", "matmul"]

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


def matmul(at: Any, self: TensorBase, other: TensorBase) -> TensorBase:
    """``at::native::matmul`` (CompositeImplicitAutograd): dispatch on the ranks, here to ``at::mm``."""
    dim1, dim2 = len(self._sizes), len(other._sizes)
    if dim1 == 0 or dim2 == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {dim1}D and {dim2}D"
        )
    if dim1 == 2 and dim2 == 2:
        return at.mm(self, other)
    path = {
        (1, 1): "at::dot", (2, 1): "at::mv", (1, 2): "unsqueeze(0) + at::mm + squeeze_(0)",
    }.get((dim1, dim2), "folding the batch dimensions into at::mm / at::bmm (views)")
    raise NotImplementedError(
        f"aten::matmul: the lab implements 2-D x 2-D only (got {dim1}D and {dim2}D). PyTorch computes "
        f"this case with {path}, which needs operators the lab does not have yet."
    )
