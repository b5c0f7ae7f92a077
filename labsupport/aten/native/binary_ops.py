"""CPU kernels of add/sub/mul (stands for ``TORCH_IMPL_FUNC(sub_out)``/``mul_out`` in
aten/src/ATen/native/BinaryOps.cpp, the generated ufunc kernel of ``add`` (UfuncCPU_add.cpp) and the
loops of aten/src/ATen/native/cpu/BinaryOpsKernel.cpp).

The meta half (TensorIteratorBase) has already chosen ``self.common_dtype``; the inputs are converted
to it, the arithmetic happens in it (or in a wider "opmath" type, see below) and the result is cast
to the output's dtype, writing into ``out._data`` in place.

Rounding, as in PyTorch on CPU:
* float16 math is done in float32 and rounded once at the end; a Python-number (or other one-element)
  ``other`` of ``mul`` is read straight into float32, while ``add``/``sub`` first round it to half;
* ``a + alpha * b`` is a fused multiply-add (one rounding) in torch's CPU loops. The lab reproduces
  that exactly for float32 (see ``_fused_multiply_add_float32``) and for float16 (computed in float32,
  as torch's vectorized loop does). Known differences: float64 uses a plain multiply and add (may
  differ from torch's FMA in the last bit), and torch's float16 *scalar* loop (small tensors, loop
  tails) rounds ``alpha * b`` to half before adding, so for an alpha that is not a power of two torch
  itself gives position-dependent results that can differ from the lab's by one half-precision step;
* integer arithmetic wraps around on overflow;
* bfloat16 (stored as float32, see labsupport/aten/dtype.py) is computed in float32 and the result
  rounded once to bfloat16, as PyTorch's reduced-precision loops do (float32 "opmath").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten import _numpy_errors  # noqa: F401  (installs the warnings filter)
from labsupport.aten import dtype as dtypes
from labsupport.aten.cast import cast_array, cast_to
from labsupport.aten.dtype import round_to_bfloat16
from labsupport.aten.meta.binary_ops import (
    structured_add_Tensor,
    structured_mul_Tensor,
    structured_sub_Tensor,
)

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = [
    "structured_ufunc_add_CPU", "structured_ufunc_add_CUDA", "structured_sub_out", "structured_mul_out",
    "add_kernel", "mul_kernel",
]

# Module-level aliases: looking a ufunc up on the numpy module costs more than calling it on tiny arrays.
_np_add = np.add
_np_multiply = np.multiply

_float16 = np.dtype(np.float16)
_float32 = np.dtype(np.float32)
_float64 = np.dtype(np.float64)
# The type the arithmetic of an alpha-add is carried out in (see the module docstring).
_ALPHA_OPMATH = {_float16: _float32, _float64: _float64}
_bfloat16 = dtypes.bfloat16


def _simple_casts(common: DType, out: TensorBase) -> bool:
    """True when numpy's own casting (``dtype=common, casting='unsafe'``) matches torch's conversions,
    i.e. no float64 -> float16 step is involved (see labsupport.aten.cast) and no input has to be
    rounded to bfloat16 first."""
    return common is not dtypes.float16 and out._dtype is not dtypes.float16 and common is not _bfloat16


def _to_common(data: np.ndarray, common: DType) -> np.ndarray:
    """An input converted to the common dtype, as TensorIterator converts it (bfloat16: rounded)."""
    return cast_to(data, common) if common is _bfloat16 else cast_array(data, common.np)


def _store(out: TensorBase, result: np.ndarray) -> None:
    """Write a result computed in the common dtype into the output, converting like torch."""
    np.copyto(out._data, cast_array(result, out._data.dtype), casting="unsafe")


def _integral_alpha(alpha: object, target: np.dtype) -> np.ndarray:
    """alpha as the integer computation type (wrapping like a C++ cast)."""
    return np.array(int(alpha), dtype=np.int64).astype(target)


def _binary_ufunc(ufunc: np.ufunc, common: DType, a: TensorBase, b: TensorBase, out: TensorBase) -> None:
    """``out = ufunc(a, b)`` with inputs converted to, and the arithmetic done in, ``common``."""
    if a._dtype is common and b._dtype is common and out._dtype is common:
        ufunc(a._data, b._data, out._data)  # the fast path: nothing to convert
    elif _simple_casts(common, out):
        ufunc(a._data, b._data, out=out._data, dtype=common.np, casting="unsafe")
    else:
        _store(out, ufunc(_to_common(a._data, common), _to_common(b._data, common)))


def add_kernel(common: DType, a: TensorBase, b: TensorBase, alpha: object, out: TensorBase) -> None:
    """``out = a + alpha * b`` computed in ``common`` (add_stub; sub calls it with ``-alpha``)."""
    if alpha == 1:
        _binary_ufunc(np.add, common, a, b, out)
        return
    cnp = common.np
    if common is dtypes.bool:
        # C++ bool arithmetic: a + alpha * b is nonzero iff a, or (alpha and b).
        result = np.logical_or(a._data, b._data) if alpha else np.broadcast_to(a._data, out._data.shape)
        _store(out, result)
        return
    a_c = _to_common(a._data, common)
    b_c = _to_common(b._data, common)
    if not common.is_floating_point:
        result = np.add(a_c, np.multiply(b_c, _integral_alpha(alpha, cnp)))
    elif cnp == _float32:
        result = _fused_multiply_add_float32(a_c, np.float32(alpha), b_c)
    else:
        # alpha is first converted to the computation dtype (alpha.to<scalar_t>()). float16 works in
        # float32, where alpha * b is exact, and rounds to float32 then to half, as torch does.
        opmath = _ALPHA_OPMATH[cnp]
        alpha_op = opmath.type(cnp.type(alpha))
        result = (a_c.astype(opmath) + alpha_op * b_c.astype(opmath)).astype(cnp)
    _store(out, result)


def _fused_multiply_add_float32(a: np.ndarray, alpha: np.float32, b: np.ndarray) -> np.ndarray:
    """``a + alpha * b`` rounded once to float32, like a hardware FMA.

    In float64 the product of two float32 values is exact; the sum is not, and rounding it first to
    float64 and then to float32 can round twice the wrong way. "Round to odd" avoids that: when the
    float64 sum is inexact, move it to the neighbour with an odd last bit, then round to float32.
    """
    a64 = a.astype(_float64)
    product = np.float64(alpha) * b.astype(_float64)
    total = a64 + product
    # TwoSum: ``error`` is exactly what the float64 addition lost.
    b_virtual = total - a64
    error = (a64 - (total - b_virtual)) + (product - b_virtual)
    even = (np.asarray(total).view(np.int64) & 1) == 0
    fix = (error != 0) & np.isfinite(error) & even
    if np.any(fix):
        total = np.where(fix, np.nextafter(total, np.copysign(np.inf, error)), total)
    return np.asarray(total).astype(_float32)


def mul_kernel(common: DType, a: TensorBase, b: TensorBase, out: TensorBase) -> None:
    """``out = a * b`` computed in ``common`` (mul_stub)."""
    if (common is dtypes.float16 or common is _bfloat16) and b._data.size == 1 \
            and not (a._dtype is b._dtype is out._dtype):
        # BinaryOpsKernel.cpp: for reduced-precision floats a scalar `other` is read from the *original*
        # tensor straight into float (so a Python 0.1 is not rounded to half first); a * b is done in
        # float and rounded once (bfloat16: by the caller, see structured_mul_out).
        scalar = np.float32(b._data.item())
        product = _to_common(a._data, common).astype(_float32) * scalar
        _store(out, product.astype(_float16) if common is dtypes.float16 else product)
        return
    _binary_ufunc(np.multiply, common, a, b, out)


class structured_ufunc_add_CPU(structured_add_Tensor):
    """at::native::structured_ufunc_add_CPU (add is declared as a ufunc in native_functions.yaml)."""

    __slots__ = ()

    def impl(self, self_: TensorBase, other: TensorBase, alpha: object, out: TensorBase) -> None:
        if alpha == 1 and self.direct:
            _np_add(self_._data, other._data, out._data)  # the hot path, inlined
        else:
            add_kernel(self.common_dtype, self_, other, alpha, out)
            if out._dtype is _bfloat16:
                round_to_bfloat16(out._data)  # computed in float32: round once to bfloat16


class structured_ufunc_add_CUDA(structured_ufunc_add_CPU):
    """at::native::structured_ufunc_add_CUDA - simulated: the data is in numpy, so the CPU math is reused."""

    __slots__ = ()


class structured_sub_out(structured_sub_Tensor):
    """at::native::structured_sub_out (CPU and CUDA): ``self - alpha * other`` is add with ``-alpha``."""

    __slots__ = ()

    def impl(self, self_: TensorBase, other: TensorBase, alpha: object, out: TensorBase) -> None:
        if alpha == 1:
            _binary_ufunc(np.subtract, self.common_dtype, self_, other, out)
        else:
            add_kernel(self.common_dtype, self_, other, -alpha, out)
        if out._dtype is _bfloat16:
            round_to_bfloat16(out._data)


class structured_mul_out(structured_mul_Tensor):
    """at::native::structured_mul_out (CPU and CUDA)."""

    __slots__ = ()

    def impl(self, self_: TensorBase, other: TensorBase, out: TensorBase) -> None:
        if self.direct:
            _np_multiply(self_._data, other._data, out._data)  # the hot path, inlined
        else:
            mul_kernel(self.common_dtype, self_, other, out)
            if out._dtype is _bfloat16:
                round_to_bfloat16(out._data)
