"""copy_ (stands for ``copy_`` / ``copy_impl`` in aten/src/ATen/native/Copy.cpp and the dtype
conversions of aten/src/ATen/native/cpu/CopyKernel.cpp).

``src`` is broadcast to ``self``'s shape (never the other way round) and converted to ``self``'s
dtype. Copies between cpu and (simulated) cuda are plain numpy copies.
"""

from __future__ import annotations

import numpy as np

from labsupport.aten.cast import copy_cast
from labsupport.aten.memory_overlap import check_mem_overlaps
from labsupport.aten.tensor import TensorBase
from labsupport.aten.tensor_iterator import infer_size
from labsupport.aten.wrap_dim import format_sizes

__all__ = ["copy_"]


def copy_(self: TensorBase, src: TensorBase, non_blocking: bool = False) -> TensorBase:
    """Copy ``src``'s values into ``self`` in place; returns ``self``."""
    if self is src:
        return self
    check_mem_overlaps(self, src)  # the TensorIterator copy_ builds checks these first
    shape = self._sizes if self._sizes == src._sizes else infer_size(self._sizes, src._sizes)
    if shape != self._sizes:
        raise RuntimeError(
            f"output with shape {format_sizes(self._sizes)} doesn't match the broadcast shape "
            f"{format_sizes(shape)}"
        )
    if self._data is None:
        return self  # copying into a meta tensor only checks shapes
    if src._data is None:
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    if np.shares_memory(self._data, src._data):
        copy_cast(self._data, src._data.copy(), self._dtype)
    else:
        copy_cast(self._data, src._data, self._dtype)
    return self
