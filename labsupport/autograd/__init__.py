"""Autograd in miniature: grad mode, graph nodes, the backward engine and the autograd fallbacks.

Mirrors ``torch/csrc/autograd`` (``function.h``, ``engine.cpp``, ``VariableTypeManual.cpp``) and
``aten/src/ATen/core/VariableFallbackKernel.cpp``.
"""

from labsupport.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]

# Tensor._base / Tensor._is_view() come from the autograd layer, as in torch/csrc/autograd/python_variable.cpp.
from labsupport.aten.tensor import TensorBase as _TensorBase
from labsupport.autograd.variable import install_tensor_properties as _install

_install(_TensorBase)
