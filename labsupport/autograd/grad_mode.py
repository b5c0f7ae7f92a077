"""Grad mode: a thread-local switch that says whether operators record autograd history.

Stands for ``c10/core/GradMode.h`` (``GradMode::is_enabled``, ``AutoGradMode``) and
``torch.no_grad`` / ``torch.enable_grad``. Grad mode is autograd state, not dispatcher state:
turning it off does not change any key set; the autograd kernels still run and simply record nothing.
"""

from __future__ import annotations

from types import TracebackType

# The state itself lives in c10 (c10/core/AutogradState.h, GradMode.h): InferenceMode switches it.
from labsupport.c10.autograd_state import _state, is_grad_enabled

__all__ = ["_state", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]


class set_grad_enabled:
    """``torch.set_grad_enabled(mode)``: a context manager that sets grad mode for its block."""

    __slots__ = ("_mode", "_saved")

    def __init__(self, mode: bool) -> None:
        self._mode = mode

    def __enter__(self) -> None:
        self._saved = _state.enabled
        _state.enabled = self._mode

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _state.enabled = self._saved


class no_grad(set_grad_enabled):
    """``torch.no_grad()``."""

    __slots__ = ()

    def __init__(self) -> None:
        self._mode = False


class enable_grad(set_grad_enabled):
    """``torch.enable_grad()``."""

    __slots__ = ()

    def __init__(self) -> None:
        self._mode = True
