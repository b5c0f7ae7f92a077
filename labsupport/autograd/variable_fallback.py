"""Boxed autograd fallbacks: the one PyTorch installs for every Autograd key, and the opt-in one.

* ``autograd_fallback`` stands for ``basicAutogradNotImplementedFallback`` in PyTorch 2.13's default
  "warn" mode (``aten/src/ATen/core/VariableFallbackKernel.cpp``): an operator with no autograd kernel
  still runs; if an input requires grad, its outputs get a ``WarnNotImplemented`` grad_fn whose
  backward warns and produces no gradients.
* ``autograd_not_implemented_fallback()`` stands for ``torch::autograd::autogradNotImplementedFallback()``
  (``torch/csrc/autograd/autograd_not_implemented_fallback.cpp``), which operator authors register
  on the Autograd key themselves: backward raises instead of warning.

Both are *boxed*: written once, they work for every operator, whatever its signature.
"""

from __future__ import annotations

from typing import Any

from labsupport.autograd.node import NotImplemented, WarnNotImplemented, collect_next_edges, set_history
from labsupport.c10.backend_fallbacks import provide_fallback_kernel
from labsupport.c10.dispatch_key_set import DispatchKeySet, after_ADInplaceOrView_keyset, after_autograd_keyset
from labsupport.c10.kernel_function import KernelFunction
from labsupport.c10.tls import AutoDispatchBelowADInplaceOrView, AutoDispatchBelowAutograd


def _tensors(values: list[Any]) -> list[Any]:
    found: list[Any] = []
    for v in values:
        if isinstance(v, (list, tuple)):
            found.extend(x for x in v if hasattr(x, "_ks"))
        elif hasattr(v, "_ks"):
            found.append(v)
    return found


def _differentiable_outputs(op: Any, stack: list[Any]) -> list[Any]:
    n = len(op.schema.returns) if op.schema is not None else 0
    outputs = _tensors(stack[len(stack) - n :]) if n else []
    return [t for t in outputs if t._dtype.is_floating_point]


def _run(op: Any, ks: DispatchKeySet, stack: list[Any], node_type: type, skip_inplace_or_view: bool) -> None:
    from labsupport.autograd.node import compute_requires_grad

    n = len(op.schema.arguments) if op.schema is not None else len(stack)
    inputs = _tensors(stack[len(stack) - n :])
    needs_grad = compute_requires_grad(*inputs)
    mutates = op.schema is not None and (op.schema.is_mutable or any(r.annotation for r in op.schema.returns))
    # The basic (default) fallback always redispatches to ADInplaceOrView; the opt-in
    # autogradNotImplementedFallback lets functional ops skip it (in-place and view ops must reach it).
    if mutates or not skip_inplace_or_view:
        with AutoDispatchBelowAutograd():
            op.redispatch_boxed(ks & after_autograd_keyset, stack)
    else:
        with AutoDispatchBelowADInplaceOrView():
            op.redispatch_boxed(ks & after_ADInplaceOrView_keyset, stack)
    if needs_grad:
        node = node_type(op.full_name, len(inputs))
        node.next_functions = collect_next_edges(*inputs)
        set_history(_differentiable_outputs(op, stack), node)


def autograd_fallback(op: Any, ks: DispatchKeySet, stack: list[Any]) -> None:
    """The autograd fallback registered on AutogradCPU, AutogradCUDA, ... (warn mode). Like
    ``basicAutogradNotImplementedFallback`` it redispatches with ``ks & after_autograd_keyset`` under
    ``AutoDispatchBelowAutograd``, so an ADInplaceOrView kernel of the operator still runs."""
    _run(op, ks, stack, WarnNotImplemented, skip_inplace_or_view=False)


def _not_implemented(op: Any, ks: DispatchKeySet, stack: list[Any]) -> None:
    _run(op, ks, stack, NotImplemented, skip_inplace_or_view=True)


_not_implemented.__qualname__ = "autogradNotImplementedFallback"


def autograd_not_implemented_fallback() -> KernelFunction:
    """``autogradNotImplementedFallback()``: register it with ``lib.impl(name, ..., "Autograd")``."""
    return KernelFunction.from_boxed(_not_implemented, with_keyset=True, debug="autogradNotImplementedFallback")


def _inplace_or_view(op: Any, ks: DispatchKeySet, stack: list[Any]) -> None:
    """Run the op below ADInplaceOrView, then bump the version of every argument the schema marks
    as written (``Tensor(a!)``), as the generated ADInplaceOrView kernels do."""
    n = len(op.schema.arguments) if op.schema is not None else len(stack)
    written = [
        value
        for argument, value in zip(op.schema.arguments, stack[len(stack) - n :])
        if argument.annotation is not None and argument.annotation.is_write and hasattr(value, "_ks")
    ] if op.schema is not None else []  # fmt: skip
    with AutoDispatchBelowADInplaceOrView():
        op.redispatch_boxed(ks & after_ADInplaceOrView_keyset, stack)
    for tensor in written:
        tensor._version_counter.value += 1


_inplace_or_view.__qualname__ = "autogradNotImplementedInplaceOrViewFallback"


def autograd_not_implemented_inplace_or_view_fallback() -> KernelFunction:
    """``autogradNotImplementedInplaceOrViewFallback()``: register it with ``lib.impl(name, ...,
    "ADInplaceOrView")`` next to ``autograd_not_implemented_fallback()`` for in-place or view ops.

    The lab bumps version counters; it does not model views (PyTorch also sets up view metadata)."""
    return KernelFunction.from_boxed(
        _inplace_or_view, with_keyset=True, debug="autogradNotImplementedInplaceOrViewFallback"
    )


# Register the autograd fallback with c10 from this layer, as PyTorch registers its autograd fallback
# from torch/csrc/autograd (c10 itself imports nothing from autograd).
provide_fallback_kernel("autograd", autograd_fallback)
