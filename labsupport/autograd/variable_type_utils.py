"""Helpers the generated autograd kernels call.

Stands for ``torch/csrc/autograd/VariableTypeUtils.h`` (``check_inplace``, ``rebase_history``,
``increment_version``, ``as_view``) and ``impl::rebase_history`` in ``variable.cpp``.
"""

from __future__ import annotations

from typing import Any

from labsupport.autograd.node import Node
from labsupport.autograd.variable import (
    _VIEW_META,
    CreationMeta,
    as_view,
    creation_meta_for_mode,
    handle_view_on_rebase,
    refresh_views,
)

__all__ = ["as_view", "check_inplace", "creation_meta_for_mode", "increment_version", "rebase_history", "saved_copy"]


def check_inplace(tensor: Any, requires_grad: bool) -> None:
    """``check_inplace``: may ``tensor`` be overwritten by an op whose result will require grad?

    Refused, with PyTorch's words: a leaf that requires grad (its ``.grad`` would be meaningless), a view
    of such a leaf, and a view created in no_grad / inference mode (``handle_view_on_rebase``).
    ``requires_grad`` is the kernel's ``_any_requires_grad``, which already includes grad mode."""
    if not requires_grad:
        return
    meta = _VIEW_META.get(id(tensor))
    if meta is not None:
        if meta.creation_meta != CreationMeta.DEFAULT:
            handle_view_on_rebase(tensor, meta)
        if tensor.requires_grad and meta.base.grad_fn is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if tensor.requires_grad and tensor.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def rebase_history(tensor: Any, grad_fn: Node | None) -> None:
    """After an in-place op, ``grad_fn`` is the tensor's new history.

    On a view, the history that changes is the *base's*: it gets a ``CopySlices`` wrapping ``grad_fn``,
    and the view's own ``grad_fn`` is rebuilt as an ``AsStridedBackward0`` into the base. Every other
    live view of the same base is brought up to date too (the lab's eager ``grad_fn`` refresh)."""
    if grad_fn is not None:
        grad_fn.input_metadata = [(tuple(tensor._sizes), tensor._dtype)]
        meta = _VIEW_META.get(id(tensor))
        if meta is not None:
            from labsupport.autograd.copy_slices import CopySlices

            base = meta.base
            copy_slices = CopySlices(base, tensor, grad_fn)
            base.grad_fn = copy_slices
            base._output_nr = 0
            base.requires_grad = True
            # the view's own grad_fn is rebuilt below with the others (`self.grad_fn()` in C++)
        else:
            tensor.grad_fn = grad_fn
            tensor._output_nr = 0
            tensor.requires_grad = True
        refresh_views(tensor, rebased=True)


def increment_version(tensor: Any) -> None:
    """Bump the version counter of a tensor an op wrote to (``VariableVersion::bump``), then refresh the
    live views on that counter (lab-only: PyTorch refreshes a view when its ``grad_fn`` is next read)."""
    tensor._version_counter.value += 1
    refresh_views(tensor)


def saved_copy(tensor: Any) -> Any:
    """A copy of ``tensor`` kept for backward, taken before an in-place op overwrites it."""
    data = None if tensor._data is None else tensor._data.copy()
    return type(tensor)._make(data, tensor._sizes, tensor._dtype, tensor._device)
