"""``TorchDispatchMode`` and the mode stack's Python API (stands for torch/utils/_python_dispatch.py).

A dispatch mode intercepts every operator call below autograd, for any tensors::

    class LoggingMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            print(func)                      # aten.add.Tensor, aten.sum.default, ...
            return func(*args, **(kwargs or {}))

    with LoggingMode():
        torch.add(a, b).sum().backward()

Entering a mode pushes it on the thread's stack (c10/core/impl/TorchDispatchModeTLS), which puts the
``Python`` and ``PythonTLSSnapshot`` keys in the TLS include set; the Python key's fallback
(labsupport/aten/python_fallback_kernel.py) then calls the innermost mode's ``__torch_dispatch__``
with that mode popped, so ``func(*args, **kwargs)`` inside it reaches the next mode, or the kernels.
"""

from __future__ import annotations

import warnings
from typing import Any

from labsupport.aten import python_fallback_kernel  # noqa: F401 -- installs the Python key's fallbacks
from labsupport.aten.tensor import TensorBase
from labsupport.c10.torch_dispatch_mode_tls import get_stack, pop_stack, push_onto_stack, stack_len


class TorchDispatchMode:
    """Subclass it and override ``__torch_dispatch__(self, func, types, args=(), kwargs=None)``.

    ``with Mode():`` pushes the mode for the block; modes entered inside it stack on top of it.
    """

    def __init__(self, _dispatch_key: Any = None) -> None:
        if _dispatch_key is not None:
            raise NotImplementedError("the lab has no per-key modes (PyTorch's pre-dispatch tracing)")

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise NotImplementedError()

    def __enter__(self) -> TorchDispatchMode:
        _push_mode(self)
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        _pop_mode()

    @classmethod
    def push(cls, *args: Any, **kwargs: Any) -> TorchDispatchMode:
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just `with Mode()`", stacklevel=2)
        return cls(*args, **kwargs)


def _get_current_dispatch_mode() -> Any:
    """The innermost active mode, or None."""
    return get_stack()[-1] if stack_len() else None


def _get_current_dispatch_mode_stack() -> list[Any]:
    """The active modes, outermost first."""
    return get_stack()


def _push_mode(mode: Any) -> None:
    """Push ``mode`` (``torch._C._push_on_torch_dispatch_stack``)."""
    push_onto_stack(mode)


def _pop_mode(k: Any = None) -> Any:
    """Pop and return the innermost mode; PyTorch's RuntimeError when there is none."""
    if k is not None:
        raise NotImplementedError("the lab's mode stack has no per-key modes")
    return pop_stack()


def _len_torch_dispatch_stack() -> int:
    return stack_len()


def is_traceable_wrapper_subclass(t: object) -> bool:
    """A tensor subclass that says how to flatten itself (``__tensor_flatten__`` / ``__tensor_unflatten__``),
    which is what torch.compile needs to trace through it."""
    return (
        isinstance(t, TensorBase)
        and getattr(type(t), "_user_subclass", False)
        and hasattr(t, "__tensor_flatten__")
        and hasattr(t, "__tensor_unflatten__")
    )


__all__ = [
    "TorchDispatchMode",
    "_get_current_dispatch_mode",
    "_get_current_dispatch_mode_stack",
    "_len_torch_dispatch_stack",
    "_pop_mode",
    "_push_mode",
    "is_traceable_wrapper_subclass",
]
