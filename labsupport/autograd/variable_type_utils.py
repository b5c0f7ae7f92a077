"""Helpers the generated autograd kernels call.

Stands for ``torch/csrc/autograd/VariableTypeUtils.h`` (``check_inplace``, ``rebase_history``,
``increment_version``) and ``SavedVariable``.
"""

from __future__ import annotations

from typing import Any

from labsupport.autograd.node import Node


def check_inplace(tensor: Any, requires_grad: bool) -> None:
    """An in-place op may not overwrite a leaf that requires grad (its .grad would be meaningless)."""
    if requires_grad and tensor.requires_grad and tensor.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def rebase_history(tensor: Any, grad_fn: Node) -> None:
    """After an in-place op, the tensor's history is the new node."""
    tensor.grad_fn = grad_fn
    tensor._output_nr = 0
    tensor.requires_grad = True
    grad_fn.input_metadata = [(tuple(tensor._sizes), tensor._dtype)]


def increment_version(tensor: Any) -> None:
    """Bump the version counter of a tensor an op wrote to (``VariableVersion::bump``)."""
    tensor._version_counter.value += 1


def saved_copy(tensor: Any) -> Any:
    """A copy of ``tensor`` kept for backward, taken before an in-place op overwrites it."""
    data = None if tensor._data is None else tensor._data.copy()
    return type(tensor)._make(data, tensor._sizes, tensor._dtype, tensor._device)
