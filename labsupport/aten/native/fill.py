"""fill_/zero_ (stands for aten/src/ATen/native/Fill.cpp and ``c10::checked_convert`` in
c10/util/TypeCast.h, which turns a Scalar into the tensor's type and refuses values that overflow).

Like every native kernel, these do not bump the version counter: in PyTorch that is the job of the
ADInplaceOrView kernel that runs before them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten import dtype as dtypes
from labsupport.aten.cast import cast_array
from labsupport.aten.dtype import round_to_bfloat16
from labsupport.aten.tensor import TensorBase

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType

__all__ = ["fill_", "zero_", "checked_convert"]

# How the C++ type is spelled in "value cannot be converted to type ... without overflow".
_CPP_TYPE_NAMES = {
    "bool": "bool", "uint8": "uint8_t", "int32": "int", "int64": "int64_t",
    "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
}
# std::numeric_limits<c10::BFloat16>::max() (bfloat16 is stored as float32, whose limit is larger).
_BFLOAT16_MAX = 3.3895313892515355e38


def checked_convert(value: bool | int | float, dtype: DType) -> bool | int | float:
    """``value`` as a Python number that fits ``dtype`` (integers wrap for uint8 like c10 allows).

    Raises torch's "value cannot be converted to type T without overflow".
    """
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        raise OverflowError("int too big to convert")  # not even a c10::Scalar can hold it
    if dtype is dtypes.bool:
        return bool(value)
    cpp_name = _CPP_TYPE_NAMES[dtype.name]
    overflow = RuntimeError(f"value cannot be converted to type {cpp_name} without overflow")
    if isinstance(value, bool):
        return int(value) if not dtype.is_floating_point else float(value)
    if dtype.is_floating_point:
        # inf and nan pass; finite values must lie within the type's range (no rounding allowance)
        if isinstance(value, float) and not math.isfinite(value):
            return value
        limit = _BFLOAT16_MAX if dtype is dtypes.bfloat16 else float(np.finfo(dtype.np).max)
        if abs(value) > limit:
            raise overflow
        return float(value)
    info = np.iinfo(dtype.np)
    if isinstance(value, float):
        if math.isnan(value) or not info.min <= value <= info.max:
            raise overflow
        return int(value)  # truncation towards zero
    value = int(value)
    if dtype.is_signed:
        if not info.min <= value <= info.max:
            raise overflow
        return value
    if value > info.max or value < -int(info.max):  # c10 lets -max..-1 through for unsigned; they wrap
        raise overflow
    return value % (int(info.max) + 1)


def fill_(self: TensorBase, value: bool | int | float | TensorBase) -> TensorBase:
    """Set every element of ``self`` to ``value`` (a Python number or a 0-dim tensor)."""
    if isinstance(value, TensorBase):
        if value._sizes:
            raise RuntimeError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{len(value._sizes)} dimensions."
            )
        if value._data is None:
            return self  # torch routes this to the Meta kernel, which does nothing
        value = value._data.item()
    converted = checked_convert(value, self._dtype)
    if self._data is not None:
        if self._dtype is dtypes.float16:
            self._data[...] = cast_array(np.array(converted, dtype=np.float64), self._data.dtype)
        else:
            self._data.fill(converted)
            if self._dtype is dtypes.bfloat16:
                round_to_bfloat16(self._data)
    return self


def zero_(self: TensorBase) -> TensorBase:
    """Set every element to zero."""
    if self._data is not None:
        self._data.fill(0)
    return self
