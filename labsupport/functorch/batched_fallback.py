"""The boxed for-loop fallback of the ``FuncTorchBatched`` key.

Stands for ``aten/src/ATen/functorch/BatchedFallback.cpp`` (``batchedTensorForLoopFallback``,
``batchedTensorInplaceForLoopFallback``, ``warnFallback``) and the switches of
``torch._C._functorch`` (``_set_vmap_fallback_warning_enabled``, ``_set_vmap_fallback_enabled``,
``_is_vmap_fallback_enabled``). In PyTorch 2.13 it is registered once for every operator
(``TORCH_LIBRARY_IMPL(_, FuncTorchBatched, m)``, LegacyBatchingRegistrations.cpp:730) and runs for an
operator that has no batching rule: it slices every argument batched at the current level, calls the
operator once per batch element and stacks the results. Each call warns (``TORCH_WARN``, not once):
"There is a performance drop because we have not yet implemented the batching rule for <op>."

Not to be confused with exercise ex07's fallback: that one sits on the *legacy* ``Batched`` key
(``LegacyBatchedFallback.cpp``, used by ``torch._vmap_internals``), has no levels and runs below the
Batched key by excluding it; this one sits on ``FuncTorchBatched`` and works per vmap level.
"""

from __future__ import annotations

import warnings
from typing import Any

from labsupport.c10.dispatch_key_set import FUNCTIONALITY_BITS
from labsupport.c10.tls import ExcludeDispatchKeyGuard
from labsupport.functorch.batched_tensor import (
    BATCHED_BIT,
    BATCHED_KEY,
    is_batched_at_level,
    is_batchedtensor,
    make_batched,
    select,
    select_view,
    stack,
)
from labsupport.functorch.dynamic_layer import current_layer

_switches = {"warning": True, "enabled": True}


def set_vmap_fallback_warning_enabled(enabled: bool) -> None:
    """``torch._C._functorch._set_vmap_fallback_warning_enabled`` (on by default in 2.13)."""
    _switches["warning"] = bool(enabled)


def is_vmap_fallback_warning_enabled() -> bool:
    return _switches["warning"]


def set_vmap_fallback_enabled(enabled: bool) -> None:
    """``torch._C._functorch._set_vmap_fallback_enabled``: False turns the fallback into an error."""
    _switches["enabled"] = bool(enabled)


def is_vmap_fallback_enabled() -> bool:
    """``torch._C._functorch._is_vmap_fallback_enabled``."""
    return _switches["enabled"]


def _operator_name(op: Any) -> str:
    return op.full_name


def warn_fallback(op: Any) -> None:
    """``warnFallback``: PyTorch's words, as a UserWarning, on every call."""
    if not _switches["warning"]:
        return
    warnings.warn(
        f"There is a performance drop because we have not yet implemented the batching rule for "
        f"{_operator_name(op)}. Please file us an issue on GitHub so that we can prioritize its implementation.",
        UserWarning,
        stacklevel=2,
    )


def _is_inplace(schema: Any) -> bool:
    """``isInplaceOp``: the first argument is written and returned; no other argument is written."""
    args = schema.arguments
    if not args or not args[0].is_write or len(schema.returns) != 1:
        return False
    if any(a.is_write for a in args[1:]):
        return False
    ret = schema.returns[0]
    return ret.alias_info is not None and ret.alias_info.alias_set == args[0].alias_info.alias_set


def _has_alias_info(schema: Any) -> bool:
    return any(a.alias_info is not None for a in schema.arguments) or any(
        r.alias_info is not None for r in schema.returns
    )


def batched_tensor_for_loop_fallback(op: Any, ks: Any, stack_: list[Any]) -> None:
    """``batchedTensorForLoopFallback``: run ``op`` once per batch element and stack the results."""
    schema = op.schema
    if not _switches["enabled"]:
        raise RuntimeError(f"{_operator_name(op)} hit the vmap fallback which is currently disabled")
    if _is_inplace(schema):
        _inplace_for_loop_fallback(op, stack_)
        return
    if schema.is_mutable or _has_alias_info(schema):
        raise RuntimeError(
            f"Batching rule not implemented for {_operator_name(op)}; "
            "the fallback path doesn't work on out= or view ops."
        )
    warn_fallback(op)
    n = len(schema.arguments)
    args = stack_[len(stack_) - n :]
    del stack_[len(stack_) - n :]
    level = current_layer().level
    batched = [i for i, a in enumerate(args) if is_batched_at_level(a, level)]
    if not batched:  # nothing of this level: step past FuncTorchBatched
        with ExcludeDispatchKeyGuard(BATCHED_KEY):
            stack_.extend(args)
            op.call_boxed(stack_)
        return
    batch_size = args[batched[0]]._bt_value._sizes[args[batched[0]]._bt_bdim]
    per_element: list[list[Any]] = []
    for index in range(batch_size):
        call = list(args)
        for i in batched:
            t = args[i]
            call[i] = select(t._bt_value, t._bt_bdim, index)
        op.call_boxed(call)
        per_element.append(call[len(call) - len(schema.returns) :])
    for r in range(len(schema.returns)):
        stacked = stack([outs[r] for outs in per_element], 0)
        stack_.append(make_batched(stacked, 0, level))


def _inplace_for_loop_fallback(op: Any, stack_: list[Any]) -> None:
    """``batchedTensorInplaceForLoopFallback``: write each element's result into ``self``'s slice."""
    schema = op.schema
    warn_fallback(op)
    n = len(schema.arguments)
    args = stack_[len(stack_) - n :]
    del stack_[len(stack_) - n :]
    level = current_layer().level
    self_ = args[0]
    batched = [i for i, a in enumerate(args) if is_batched_at_level(a, level)]
    if not batched:
        with ExcludeDispatchKeyGuard(BATCHED_KEY):
            stack_.extend(args)
            op.call_boxed(stack_)
        return
    if not is_batched_at_level(self_, level):
        raise RuntimeError(
            f"vmap: {_operator_name(op)}(self, *extra_args) is not possible because there exists a Tensor "
            "`other` in extra_args that has more elements than `self`. This happened due to `other` being "
            f"vmapped over but `self` not being vmapped over at level {level}. Please try to use out-of-place "
            f"operators instead of {_operator_name(op)}. If said operator is being called inside the PyTorch "
            "framework, "
            "please file a bug report instead."
        )
    batch_size = self_._bt_value._sizes[self_._bt_bdim]
    for index in range(batch_size):
        call = list(args)
        for i in batched:
            t = args[i]
            call[i] = (select_view if i == 0 else select)(t._bt_value, t._bt_bdim, index)
        op.call_boxed(call)
    stack_.append(self_)


assert BATCHED_BIT & FUNCTIONALITY_BITS  # the key is a functionality key
__all__ = [
    "batched_tensor_for_loop_fallback",
    "is_batchedtensor",
    "is_vmap_fallback_enabled",
    "is_vmap_fallback_warning_enabled",
    "set_vmap_fallback_enabled",
    "set_vmap_fallback_warning_enabled",
    "warn_fallback",
]
