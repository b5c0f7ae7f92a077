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


def _transposed(t: Any) -> Any:
    """A contiguous transposed copy of a matrix (the lab has no ``t()`` view yet)."""
    data = None if t._data is None else np.ascontiguousarray(t._data.T)
    return type(t)._make(data, tuple(reversed(t._sizes)), t._dtype, t._device)


def mm_mat1_backward(grad: Any, mat2: Any) -> Any:
    """``mm_mat1_backward``: d(self @ mat2)/d(self) is ``grad @ mat2.t()``."""
    return grad.mm(_transposed(mat2))


def mm_mat2_backward(grad: Any, self: Any) -> Any:
    """``mm_mat2_backward``: d(self @ mat2)/d(mat2) is ``self.t() @ grad``."""
    return _transposed(self).mm(grad)


def _to_copy_backward(grad: Any, self_options: Any) -> Any:
    """``_to_copy_backward``: the gradient goes back to the input's dtype (``grad.to(self_options)``)."""
    return grad.to(self_options.dtype)


def mv_self_backward(grad: Any, vec: Any) -> Any:
    """``grad.ger(vec)`` (PyTorch's formula for mv's matrix): the outer product (the lab has no ``ger``)."""
    data = None if grad._data is None else np.multiply.outer(grad._data, vec._data).astype(grad._data.dtype)
    return type(grad)._make(data, (grad._sizes[0], vec._sizes[0]), grad._dtype, grad._device)


def mv_vec_backward(grad: Any, self: Any) -> Any:
    """``self.t().mv(grad)`` (PyTorch's formula for mv's vector)."""
    return _transposed(self).mv(grad)
