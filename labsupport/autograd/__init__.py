"""Autograd in miniature: grad mode, graph nodes, the backward engine and the autograd fallbacks.

Mirrors ``torch/csrc/autograd`` (``function.h``, ``engine.cpp``, ``VariableTypeManual.cpp``) and
``aten/src/ATen/core/VariableFallbackKernel.cpp``.
"""

from labsupport.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]
