"""vmap on the ``FuncTorchBatched`` key, with levels: the lab's ``aten/src/ATen/functorch``.

Modules, each named for the PyTorch file it stands for:

* ``batched_tensor``  BatchedTensorImpl.h: the (value, bdim, level) wrapper and its helpers
* ``dynamic_layer``   DynamicLayer.cpp / VmapInterpreter.cpp: the layer stack and the FrontMode /
                      BackMode fallbacks
* ``batch_rules``     BatchRules*.cpp + VmapGeneratedPlumbing.h: per-operator batching rules
* ``batched_fallback`` BatchedFallback.cpp: the boxed for-loop fallback and its warning
* ``vmap``            torch/_functorch/vmap.py: ``vmap`` itself, in_dims / out_dims, PyTorch's errors

``install(build)`` wires them into a build: the three fallbacks go to every dispatcher (as the
autograd fallback does, through ``provide_fallback_kernel``), the batching rules to the build's
operators. ``labsupport.torch`` installs them on the default build at import, so the dispatch
tables show the batching rules from the start, as PyTorch's do. Nothing here runs unless a tensor
carries FuncTorchBatched or a vmap is active: the common path pays nothing.
"""

from __future__ import annotations

from typing import Any

from labsupport.c10.backend_fallbacks import provide_fallback_kernel
from labsupport.functorch.batch_rules import register_batch_rules
from labsupport.functorch.batched_fallback import (
    batched_tensor_for_loop_fallback,
    is_vmap_fallback_enabled,
    is_vmap_fallback_warning_enabled,
    set_vmap_fallback_enabled,
    set_vmap_fallback_warning_enabled,
)
from labsupport.functorch.batched_tensor import (
    get_unwrapped,
    is_batchedtensor,
    maybe_get_bdim,
    maybe_get_level,
)
from labsupport.functorch.dynamic_layer import (
    dynamic_layer_back_fallback,
    dynamic_layer_front_fallback,
    get_dynamic_layer_stack,
    maybe_current_level,
)
from labsupport.functorch.vmap import add_batch_dim, remove_batch_dim, vmap

_installed: dict[int, list[Any]] = {}
_fallbacks_provided = False

# Which PyTorch frame each functorch function stands for (registered with lab.trace's frame table).
FRAME_RULES: tuple[tuple[str, str, str], ...] = (
    (r"dynamic_layer_front_fallback", "fallback", "at::functorch::dynamicLayerFrontFallback"),
    (r"dynamic_layer_back_fallback", "fallback", "at::functorch::dynamicLayerBackFallback"),
    (r"VmapInterpreter\.process", "fallback", "at::functorch::VmapInterpreterPtr::processImpl"),
    (r"VmapInterpreter\.send_to_next_interpreter", "fallback",
     "at::functorch::VmapInterpreterPtr::sendToNextInterpreterImpl"),
    (r"batched_tensor_for_loop_fallback", "fallback", "at::functorch::batchedTensorForLoopFallback"),
    (r"_inplace_for_loop_fallback", "fallback", "at::functorch::batchedTensorInplaceForLoopFallback"),
    (r"(?P<op>\w+)_generated_plumbing", "kernel", "at::functorch::{op}_generated_plumbing"),
    (r"binary_pointwise_batch_rule", "kernel", "at::functorch::binary_pointwise_batch_rule"),
    (r"binary_pointwise_inplace_batch_rule", "kernel", "at::functorch::binary_pointwise_inplace_batch_rule"),
    (r"basic_unary_batch_rule", "kernel", "at::functorch::BasicUnaryBatchRuleHelper::apply"),
    (r"unary_inplace_batch_rule", "kernel", "at::functorch::unary_inplace_batch_rule"),
    (r"boxed_reduction_batch_rule", "kernel", "at::functorch::boxed_reduction_batch_rule"),
    (r"sum_decomp", "kernel", "at::functorch::sum_decomp"),
    (r"expand_batch_rule", "kernel", "at::functorch::expand_batch_rule"),
    (r"copy__batch_rule", "kernel", "at::functorch::copy__batch_rule"),
    (r"mm_batch_rule", "kernel", "at::functorch::mm_batch_rule"),
    (r"mv_batch_rule", "kernel", "at::functorch::mv_batch_rule"),
    (r"dot_batch_rule", "kernel", "at::functorch::dot_batch_rule"),
    (r"bmm_batch_rule", "kernel", "at::functorch::bmm_batch_rule"),
    (r"_make_squeeze__kernel\.<locals>\.squeeze_dims__batching_rule", "kernel",
     "at::functorch::squeeze_dims__batching_rule"),
    (r"\w+\.<locals>\.(?P<f>randn|normal_)_?batching_rule", "kernel", "at::functorch::{f}_batching_rule"),
)  # fmt: skip


class _Owner:
    """Who registered the batching rules (dumps and undo need an owner)."""

    def __repr__(self) -> str:
        return "labsupport.functorch"


_OWNER = _Owner()


def provide_fallbacks() -> None:
    """The FrontMode, BackMode and FuncTorchBatched fallbacks, for every dispatcher (once)."""
    global _fallbacks_provided
    if not _fallbacks_provided:
        provide_fallback_kernel("functorch_front", dynamic_layer_front_fallback)
        provide_fallback_kernel("functorch_back", dynamic_layer_back_fallback)
        provide_fallback_kernel("functorch_batched", batched_tensor_for_loop_fallback)
        _fallbacks_provided = True


def install(build: Any) -> None:
    """Give ``build`` vmap: the functorch fallbacks and the build's batching rules."""
    provide_fallbacks()
    key = id(build.dispatcher)
    if key not in _installed:
        _installed[key] = register_batch_rules(build, owner=_OWNER)


def register_frame_names(lab_rules: dict[str, Any]) -> None:
    """Tell lab.trace which PyTorch frame each functorch function stands for."""
    lab_rules.setdefault("labsupport.functorch.", FRAME_RULES)


provide_fallbacks()


__all__ = [
    "add_batch_dim",
    "get_dynamic_layer_stack",
    "get_unwrapped",
    "install",
    "is_batchedtensor",
    "is_vmap_fallback_enabled",
    "is_vmap_fallback_warning_enabled",
    "maybe_current_level",
    "maybe_get_bdim",
    "maybe_get_level",
    "remove_batch_dim",
    "set_vmap_fallback_enabled",
    "set_vmap_fallback_warning_enabled",
    "vmap",
]
