"""Element conversions between dtypes the way PyTorch's CPU kernels do them (stands for
``c10::convert``/``static_cast_with_inter_type`` in c10/util/TypeCast.h).

numpy's ``astype`` already matches for almost every pair; the exceptions handled here are
* float64 -> float16 goes through float32 (c10::Half is only constructible from float), so a value
  can round twice: ``1 + 2**-11 + 2**-40`` becomes 1.0 in torch but 1.001 with a direct cast;
* float -> uint8 goes through int64 and wraps (-1.0 -> 255, 256.0 -> 0).
"""

from __future__ import annotations

import numpy as np

__all__ = ["cast_array", "copy_cast"]

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


def copy_cast(dst: np.ndarray, src: np.ndarray) -> None:
    """Write ``src`` (converted, broadcast) into ``dst``."""
    np.copyto(dst, cast_array(np.asarray(src), dst.dtype), casting="unsafe")
