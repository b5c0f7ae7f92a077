"""Resizing an ``out=`` tensor: ``at::native::resize_output``.

Stands for ``aten/src/ATen/native/Resize.cpp``. Resizing a non-empty out= tensor is allowed but
warned about, exactly as PyTorch does.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


def resize_output(out: Any, sizes: tuple[int, ...]) -> None:
    """Give ``out`` new sizes (and fresh storage), warning when it held elements."""
    if out.numel() != 0:
        warnings.warn(
            f"An output with one or more elements was resized since it had shape {list(out._sizes)}, which "
            f"does not match the required output shape {list(sizes)}. This behavior is deprecated, and in a "
            "future PyTorch release outputs will not be resized unless they have zero elements. You can "
            "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
            UserWarning,
            stacklevel=6,
        )
    out._sizes = tuple(sizes)
    if out._data is not None:
        out._data = np.empty(sizes, dtype=out._dtype.np)
