"""CompositeExplicitAutograd kernels: one implementation for every backend, written in terms of
other operators.

Stands for the kernels ``native_functions.yaml`` lists under ``CompositeExplicitAutograd`` (``randn``
in TensorFactories.cpp, ``sum`` in ReduceOps.cpp, ...; the view ops of TensorShape.cpp are in
tensor_shape.py). Each takes the
build's functions API as ``at`` first: the lab can hold several builds in one process, and a
composite kernel must call the operators of its own build (so those calls are dispatched again and
show up in the profiler, as ``aten::randn -> aten::empty, aten::normal_`` do in PyTorch).
"""

from __future__ import annotations

from typing import Any

from labsupport.aten.native.copy import copy_ as _copy_impl


class CppApi:
    """What a composite kernel calls ``at::``: the build's functions API (``at::empty``) and, as
    ``at.Tensor``, its C++ Tensor methods (``at::Tensor::normal_``), not the Python bindings."""

    def __init__(self, functions: Any, tensor_body: type) -> None:
        self._functions = functions
        self.Tensor = tensor_body

    def __getattr__(self, name: str) -> Any:
        return getattr(self._functions, name)


def sum(at: Any, self: Any, dtype: Any = None) -> Any:
    """``at::native::sum``: the sum over every dimension is sum.dim_IntList with no dims."""
    return at.sum_dim_IntList(self, None, False, dtype)


def randn(at: Any, size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    """``at::native::randn``: allocate, then fill with N(0, 1) samples."""
    result = at.empty(size, dtype, layout, device, pin_memory)
    return at.Tensor.normal_(result, 0.0, 1.0, None)


def zeros_symint(
    at: Any, size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> Any:
    """``at::native::zeros_symint``: allocate, then zero."""
    result = at.empty(size, dtype, layout, device, pin_memory)
    return at.zero_(result)


def ones(at: Any, size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    """``at::native::ones``: allocate, then fill with 1."""
    result = at.empty(size, dtype, layout, device, pin_memory)
    return at.fill_(result, 1)


def copy_(at: Any, self: Any, src: Any, non_blocking: bool = False) -> Any:
    """``at::native::copy_``: copy src into self (broadcasting, converting dtype)."""
    return _copy_impl(self, src, non_blocking)

