"""Helper functions used by the backward formulas in ops.yaml.

Stands for ``torch/csrc/autograd/FunctionsManual.cpp``. They run with grad mode off, on the build's
own tensors, and call its operators through ordinary Tensor methods where PyTorch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labsupport.autograd.engine import _sum_to


def maybe_multiply(grad: Any, alpha: Any) -> Any:
    """``grad * alpha``, skipping the multiply when alpha is 1 (``maybe_multiply``)."""
    if alpha == 1:
        return grad
    return grad.mul(alpha)


def sum_to(grad: Any, sizes: tuple[int, ...]) -> Any:
    """``at::sum_to``: reduce a broadcast gradient back to ``sizes``."""
    return _sum_to(grad, tuple(sizes))


def sum_backward(grad: Any, sizes: tuple[int, ...], dims: Any, keepdim: bool) -> Any:
    """``sum_backward``: put back the reduced dimensions, then expand to the input's sizes."""
    sizes = tuple(sizes)
    if not keepdim and sizes:
        if dims is None or len(dims) == 0:
            dims = range(len(sizes))
        kept = sorted(d % len(sizes) for d in dims)
        shape = list(grad._sizes)
        for d in kept:
            shape.insert(d, 1)
        data = None if grad._data is None else np.reshape(grad._data, shape)
        grad = type(grad)._make(data, tuple(shape), grad._dtype, grad._device)
    return grad.expand(sizes)
