"""Resizing an ``out=`` tensor: ``at::native::resize_output``.

Stands for ``aten/src/ATen/native/Resize.cpp``. Resizing a non-empty out= tensor is allowed but
warned about, exactly as PyTorch does.

Like ``resize_``, the tensor keeps its storage and storage offset and gets contiguous strides, so an
out= view that is resized still writes into its base. When the storage is too small PyTorch grows
the storage object itself (every tensor on it sees the new memory); numpy cannot grow a buffer in
place, so the lab gives the out= tensor a new, larger storage holding a copy of the old one, and
other tensors on the old storage stop sharing with it.
"""

from __future__ import annotations

import math
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
    from labsupport.aten.native.tensor_shape import set_sizes_and_strides
    from labsupport.aten.storage import contiguous_strides, storage_root, tensor_storage_offset

    sizes = tuple(sizes)
    offset = tensor_storage_offset(out)
    data = out._data
    if data is not None:
        root = storage_root(data)
        needed = offset + math.prod(sizes)
        if needed > root.size:  # maybe_resize_storage_cpu: a bigger storage, old bytes copied over
            grown = np.empty(needed, dtype=data.dtype)
            grown[: root.size] = root.ravel(order="K")
            out._data = grown
    set_sizes_and_strides(out, sizes, contiguous_strides(sizes), offset)
