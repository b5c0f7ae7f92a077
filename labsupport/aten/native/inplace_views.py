"""In-place view operators (stands for ``squeeze_`` in aten/src/ATen/native/TensorShape.cpp).

An in-place view (tag ``inplace_view``) changes ``self``'s own sizes and strides and returns ``self``;
no element moves. PyTorch's kernel computes the squeezed geometry and calls ``self.as_strided_``; the
lab has no ``as_strided_`` operator and sets the geometry directly (``set_sizes_and_strides``), which
is what ``as_strided_`` ends in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labsupport.aten.native.tensor_shape import _squeeze_dims, set_sizes_and_strides
from labsupport.aten.storage import tensor_strides
from labsupport.aten.tensor import TensorBase

__all__ = ["squeeze_"]


def squeeze_(at: Any, self: TensorBase, dim: int | Sequence[int] | None = None) -> TensorBase:
    """``at::native::squeeze_`` (three C++ overloads: no dim, one dim, a list): drop dims of size 1
    from ``self`` itself."""
    drop = _squeeze_dims(self, dim)
    strides = tensor_strides(self)
    sizes = [n for d, n in enumerate(self._sizes) if d not in drop]
    kept = [s for d, s in enumerate(strides) if d not in drop]
    return set_sizes_and_strides(self, sizes, kept)
