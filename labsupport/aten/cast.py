"""Element conversions between dtypes the way PyTorch's CPU kernels do them (stands for
``c10::convert``/``static_cast_with_inter_type`` in c10/util/TypeCast.h).

numpy's ``astype`` already matches for almost every pair; the exceptions handled here are
* float64 -> float16 goes through float32 (c10::Half is only constructible from float), so a value
  can round twice: ``1 + 2**-11 + 2**-40`` becomes 1.0 in torch but 1.001 with a direct cast;
* float -> uint8 goes through int64 and wraps (-1.0 -> 255, 256.0 -> 0);
* bfloat16 has no numpy type: it is stored as float32 and every conversion to it rounds the float32
  value to bfloat16 (nearest, ties to even); a double goes through float first, as c10::BFloat16's
  constructor takes a float (``cast_to`` and ``copy_cast(..., dtype)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten.dtype import bfloat16 as _bfloat16
from labsupport.aten.dtype import round_to_bfloat16

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType

__all__ = ["cast_array", "cast_to", "copy_cast"]

_float16 = np.dtype(np.float16)
_float32 = np.dtype(np.float32)
_float64 = np.dtype(np.float64)
_int64 = np.dtype(np.int64)


def cast_array(data: np.ndarray, target: np.dtype) -> np.ndarray:
    """``data`` converted to ``target`` (returns ``data`` itself when nothing changes)."""
    source = data.dtype
    if source == target:
        return data
    # Conversions are never on the hot path, so the robust np.errstate is affordable here: torch
    # converts nan/inf/overflowing values silently.
    with np.errstate(all="ignore"):
        if target == _float16 and source == _float64:
            return data.astype(_float32).astype(_float16)
        if target.kind == "u" and source.kind == "f":
            return data.astype(_int64).astype(target)
        return data.astype(target)


def cast_to(data: np.ndarray, target: DType) -> np.ndarray:
    """``data`` converted to the lab dtype ``target``: ``cast_array`` plus bfloat16's rounding.
    For bfloat16 the result is always a new array (``data`` is never rounded in place)."""
    if target is _bfloat16:
        result = cast_array(data, target.np)
        return round_to_bfloat16(result.copy() if result is data else result)
    return cast_array(data, target.np)


def copy_cast(dst: np.ndarray, src: np.ndarray, dtype: DType | None = None) -> None:
    """Write ``src`` (converted, broadcast) into ``dst``; ``dtype`` is the lab dtype of ``dst``
    (needed for bfloat16, whose float32 storage does not say it is bfloat16)."""
    np.copyto(dst, cast_array(np.asarray(src), dst.dtype), casting="unsafe")
    if dtype is _bfloat16:
        round_to_bfloat16(dst)
