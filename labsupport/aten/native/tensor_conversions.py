"""``to`` and ``_to_copy`` (stands for aten/src/ATen/native/TensorConversions.cpp).

``to.dtype`` is CompositeImplicitAutograd: it returns ``self`` itself when nothing changes (and
``copy=False``), else calls ``at::_to_copy``. ``_to_copy`` is CompositeExplicitAutograd with its own
derivative (``ToCopyBackward0``): it allocates with ``at::empty`` and fills with ``copy_``, so the
profiler shows ``aten::_to_copy -> aten::empty, aten::copy_`` (PyTorch allocates with
``empty_strided``; the lab has no strides). This is the cast autocast's ``cached_cast`` performs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = ["to", "_to_copy"]


def _to_copy(
    at: Any, self: TensorBase, dtype: DType | None = None, layout: Any = None, device: Any = None,
    pin_memory: bool | None = None, non_blocking: bool = False, memory_format: Any = None,
) -> TensorBase:
    """``at::native::_to_copy``: a new tensor with the requested dtype/device holding self's values."""
    dtype = self._dtype if dtype is None else dtype
    device = self._device if device is None else device
    result = at.empty(self._sizes, dtype, layout, device, pin_memory, None)
    return at.Tensor.copy_(result, self, non_blocking)


def to(
    at: Any, self: TensorBase, dtype: DType, non_blocking: bool = False, copy: bool = False,
    memory_format: Any = None,
) -> TensorBase:
    """``at::native::to`` (the dtype overload): self when it already has the dtype, else ``_to_copy``."""
    if self._dtype is dtype and not copy:
        return self
    return at._to_copy(self, dtype, None, None, None, non_blocking, memory_format)
