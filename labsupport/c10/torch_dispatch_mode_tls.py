"""The stack of ``__torch_dispatch__`` modes, one per thread.

Stands for ``c10/core/impl/TorchDispatchModeTLS.h`` / ``.cpp``. A mode is any Python object with a
``__torch_dispatch__`` method (``torch.utils._python_dispatch.TorchDispatchMode``); c10 only keeps
the stack. The one thing the dispatcher needs to know is whether the stack is empty:

* pushing the first mode adds ``Python`` and ``PythonTLSSnapshot`` to the TLS include set, so every
  call, even one without a tensor subclass among its arguments, reaches the Python key's fallback;
* popping the last mode takes both keys out again. ``PreDispatch`` is never added (PyTorch adds it
  only for pre-dispatch export tracing, which the lab does not model).

What the lab simplifies: PyTorch also keeps "infra modes" (FakeTensorMode, ProxyTorchDispatchMode, ...)
in fixed slots beside the user stack; the lab has only the user stack.
"""

from __future__ import annotations

import threading
from typing import Any

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import DispatchKeySet
from labsupport.c10.tls import tls

PYTHON_KEYS = int(DispatchKeySet([DispatchKey.Python, DispatchKey.PythonTLSSnapshot]))


class TorchDispatchModeTLS(threading.local):
    """``c10::impl::TorchDispatchModeTLS``: this thread's mode stack (innermost mode last)."""

    def __init__(self) -> None:
        self.stack: list[Any] = []


_state = TorchDispatchModeTLS()


def push_onto_stack(mode: Any) -> None:
    """``TorchDispatchModeTLS::push_onto_stack``: the first mode switches the Python keys on."""
    stack = _state.stack
    if not stack:
        tls.included = tls.included | PYTHON_KEYS
    stack.append(mode)


def pop_stack() -> Any:
    """``TorchDispatchModeTLS::pop_stack``: remove and return the innermost mode; the last one out
    switches the Python keys off. PyTorch's error for an empty stack."""
    stack = _state.stack
    if not stack:
        raise RuntimeError("trying to pop from empty mode stack")
    mode = stack.pop()
    if not stack:
        tls.included = tls.included & ~PYTHON_KEYS
    return mode


def stack_len() -> int:
    """``TorchDispatchModeTLS::stack_len``."""
    return len(_state.stack)


def get_stack_at(index: int) -> Any:
    """``TorchDispatchModeTLS::get_stack_at`` (0 is the outermost mode)."""
    return _state.stack[index]


def get_stack() -> list[Any]:
    """A copy of the stack, outermost first (``_get_current_dispatch_mode_stack``)."""
    return list(_state.stack)


class StashTorchDispatchModeGuard:
    """``torch::torch_dispatch_mode::StashTorchDispatchModeGuard``: pop the innermost mode for the
    ``with`` block and push it back afterwards. The Python key's fallback runs a mode's handler inside
    it, so that calls the handler makes reach the next mode, or the kernels, and not the same mode."""

    __slots__ = ("mode",)

    def __enter__(self) -> Any:
        self.mode = pop_stack()
        return self.mode

    def __exit__(self, *exc: object) -> None:
        push_onto_stack(self.mode)
