"""Autograd state that c10 owns: grad mode and the inference-mode flag.

Stands for ``c10/core/AutogradState.h`` (the thread-local ``AutogradState``: ``grad_mode``,
``inference_mode``, ...) and ``c10/core/GradMode.h``. The state lives at the bottom, in c10, because
``c10::InferenceMode`` must switch it; the autograd layer (``labsupport.autograd.grad_mode``) builds
``torch.no_grad`` and friends on top of it, and aten reads the inference flag when it makes a tensor.

One lab simplification: PyTorch keeps ``inference_mode`` thread-local; the lab keeps it process-wide,
and layers that need a fast copy of it (aten's tensor factory) subscribe with
``on_inference_mode_change`` instead of c10 importing them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class _GradMode(threading.local):
    enabled: bool = True


_state = _GradMode()  # GradMode::is_enabled(), per thread


def is_grad_enabled() -> bool:
    """``torch.is_grad_enabled()`` (``c10::GradMode::is_enabled``)."""
    return _state.enabled


def set_grad_enabled_flag(enabled: bool) -> None:
    """``c10::GradMode::set_enabled``."""
    _state.enabled = enabled


class _InferenceFlag:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = False


_inference = _InferenceFlag()
_inference_listeners: list[Callable[[bool], None]] = []


def is_inference_mode_enabled() -> bool:
    """``torch.is_inference_mode_enabled()`` (``c10::InferenceMode::is_enabled``)."""
    return _inference.enabled


def set_inference_mode_enabled(enabled: bool) -> None:
    """Set the flag and tell every subscriber (aten's tensor factory keeps a fast copy)."""
    _inference.enabled = bool(enabled)
    for listener in _inference_listeners:
        listener(_inference.enabled)


def on_inference_mode_change(listener: Callable[[bool], None]) -> None:
    """Subscribe a layer above c10 to the inference flag; ``listener`` is called with the current value now."""
    _inference_listeners.append(listener)
    listener(_inference.enabled)
