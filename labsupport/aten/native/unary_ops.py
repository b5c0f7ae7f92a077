"""CPU kernels of neg/sin/cos (stands for ``TORCH_IMPL_FUNC(neg_out)``, ``sin_out``, ``cos_out`` in
aten/src/ATen/native/UnaryOps.cpp and their loops in aten/src/ATen/native/cpu/UnaryOpsKernel.cpp).

neg keeps the dtype (integers wrap: -INT64_MIN == INT64_MIN). sin/cos compute in ``common_dtype``
(the default float dtype for integer inputs; float16 goes through float32) and cast to the output.
Transcendental functions may differ from torch's SLEEF implementations in the last bit. bfloat16
(float32 storage) is computed in float32 and rounded to bfloat16; neg of a bfloat16 is exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten import _numpy_errors  # noqa: F401  (installs the warnings filter)
from labsupport.aten import dtype as dtypes
from labsupport.aten.cast import cast_array
from labsupport.aten.dtype import round_to_bfloat16
from labsupport.aten.meta.unary_ops import structured_cos, structured_neg, structured_sin

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = ["structured_neg_out", "structured_sin_out", "structured_cos_out"]

_np_negative, _np_sin, _np_cos = np.negative, np.sin, np.cos


def _unary_float_kernel(ufunc: np.ufunc, common: DType, a: TensorBase, out: TensorBase) -> None:
    """``out = ufunc(a)`` computed in ``common`` and converted to the output's dtype."""
    if a._dtype is out._dtype:
        ufunc(a._data, out._data)  # the fast path (then common is a's dtype)
    elif out._dtype is not dtypes.float16:
        ufunc(a._data, out=out._data, dtype=common.np, casting="unsafe")
    else:  # float64 -> float16 must round through float32
        result = ufunc(cast_array(a._data, common.np))
        np.copyto(out._data, cast_array(np.asarray(result), out._data.dtype))
    if out._dtype is dtypes.bfloat16:
        round_to_bfloat16(out._data)


class structured_neg_out(structured_neg):
    """at::native::structured_neg_out (CPU and CUDA)."""

    __slots__ = ()

    def impl(self, self_: TensorBase, out: TensorBase) -> None:
        dst = out._data
        if dst.flags.c_contiguous:
            _np_negative(self_._data, dst)
        else:
            # numpy 2.4's in-place np.negative on a strided float32 view reads the wrong elements
            # (a[:, 0] of a (3, 4) array gives [-1, -2, -3]): compute first, then write through the view
            dst[...] = _np_negative(self_._data)


class structured_sin_out(structured_sin):
    """at::native::structured_sin_out (CPU and CUDA)."""

    __slots__ = ()

    def impl(self, self_: TensorBase, out: TensorBase) -> None:
        _unary_float_kernel(_np_sin, self.common_dtype, self_, out)


class structured_cos_out(structured_cos):
    """at::native::structured_cos_out (CPU and CUDA)."""

    __slots__ = ()

    def impl(self, self_: TensorBase, out: TensorBase) -> None:
        _unary_float_kernel(_np_cos, self.common_dtype, self_, out)
