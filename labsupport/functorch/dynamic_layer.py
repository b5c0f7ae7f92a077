"""The DynamicLayer stack and the two fallbacks that bracket every transform.

Stands for ``aten/src/ATen/functorch/DynamicLayer.cpp`` (``pushDynamicLayer``, ``popDynamicLayer``,
``dynamicLayerFrontFallback``, ``dynamicLayerBack``), ``Interpreter.cpp``
(``setup_dispatch_key_tls``, ``Interpreter::process`` / ``sendToNextInterpreter``) and
``VmapInterpreter.cpp`` (``VmapInterpreterPtr::processImpl`` / ``sendToNextInterpreterImpl``).

How a call travels while ``vmap`` is active (PyTorch 2.13, checked on the wheel):

1. vmap pushes a layer. The first layer adds ``FuncTorchDynamicLayerFrontMode`` and
   ``FuncTorchDynamicLayerBackMode`` to the TLS *include* set; popping the last one removes them.
   Tensors never carry these two keys.
2. Every operator called meanwhile first reaches the FrontMode fallback. It saves the TLS and lets
   the top layer's interpreter process the call: the vmap interpreter excludes every key between
   FrontMode and BackMode except ``FuncTorchBatched`` / ``BatchedNestedTensor`` (the autocast keys and
   ``FuncTorchVmapMode`` are left alone), includes ``FuncTorchVmapMode`` and calls the op again.
3. The op now reaches ``FuncTorchBatched`` (a batching rule, or the for-loop fallback) if an
   argument is a BatchedTensor; the rule unwraps this level's tensors and calls the op on the values.
4. That call reaches the BackMode fallback: it restores the TLS saved by the front, pops the top
   layer for the duration of the call and sends the op to the next interpreter. With a lower vmap
   level, that is FrontMode again (step 2 for that level); with none, the ordinary keys (Autograd,
   CPU, ...) run.
"""

from __future__ import annotations

import threading
from typing import Any

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import (
    FULL,
    FUNCTIONALITY_BITS,
    DispatchKeySet,
    autocast_dispatch_keyset,
)
from labsupport.c10.tls import tls

FRONT = DispatchKey.FuncTorchDynamicLayerFrontMode
BACK = DispatchKey.FuncTorchDynamicLayerBackMode
FRONT_BACK_BITS = int(DispatchKeySet([FRONT, BACK]))
VMAP_MODE_BIT = int(DispatchKeySet(DispatchKey.FuncTorchVmapMode))


def _all_dynlayer_keyset() -> int:
    """``get_all_dynlayer_keyset()`` (Interpreter.cpp): FrontMode and the keys below it, down to but
    not including BackMode, less the autocast keys and FuncTorchVmapMode. (Checked on 2.13: inside a
    FuncTorchBatched kernel the exclude set holds FrontMode, Autograd, ADInplaceOrView, Tracer, ...,
    and not BackMode.)"""
    between = DispatchKeySet.full_after(FRONT) - DispatchKeySet.full_after(BACK)
    keys = (between | DispatchKeySet(FRONT)) - autocast_dispatch_keyset
    keys = keys.remove(DispatchKey.FuncTorchVmapMode).remove(BACK)  # BackMode itself stays reachable
    return int(keys) & FUNCTIONALITY_BITS


_VMAP_EXCLUDE = _all_dynlayer_keyset() & ~int(
    DispatchKeySet([DispatchKey.FuncTorchBatched, DispatchKey.BatchedNestedTensor])
)


class VmapInterpreter:
    """One vmap level: ``DynamicLayer`` + ``VmapInterpreterPtr`` (level, batch size, randomness)."""

    __slots__ = ("batch_size", "level", "randomness", "saved_tls")

    def __init__(self, level: int, batch_size: int, randomness: str) -> None:
        self.level = level
        self.batch_size = batch_size
        self.randomness = randomness
        self.saved_tls: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        return f"Vmap(level={self.level}, batch_size={self.batch_size}, randomness={self.randomness})"

    def process(self, op: Any, stack: list[Any]) -> None:
        """``VmapInterpreterPtr::processImpl``: ``setup_dispatch_key_tls(Vmap, {FuncTorchVmapMode})``,
        then ``op.callBoxed(stack)``."""
        sets = tls.sets
        excluded = sets[2] | _VMAP_EXCLUDE
        tls.restore((sets[0] | VMAP_MODE_BIT, FULL & ~(excluded & FUNCTIONALITY_BITS), excluded))
        op.call_boxed(stack)

    def send_to_next_interpreter(self, op: Any, stack: list[Any]) -> None:
        """``VmapInterpreterPtr::sendToNextInterpreterImpl``: ``op.callBoxed(stack)``."""
        op.call_boxed(stack)


class _LayerStack(threading.local):
    def __init__(self) -> None:
        self.layers: list[VmapInterpreter] = []


_stack = _LayerStack()


def get_dynamic_layer_stack() -> list[VmapInterpreter]:
    """``getDynamicLayerStack()``: the current thread's layers, outermost first (a copy)."""
    return list(_stack.layers)


def maybe_current_level() -> int | None:
    """``torch._C._functorch.maybe_current_level()``: the top layer's level, None outside transforms."""
    layers = _stack.layers
    return layers[-1].level if layers else None


def current_layer() -> VmapInterpreter:
    """``maybeCurrentDynamicLayer()`` where one must exist."""
    layers = _stack.layers
    if not layers:
        raise RuntimeError("INTERNAL ASSERT FAILED: maybe_layer.has_value() (lab: no vmap is active)")
    return layers[-1]


def push_dynamic_layer(layer: VmapInterpreter) -> None:
    """``pushDynamicLayer``: the first layer puts FrontMode and BackMode in the TLS include set."""
    layers = _stack.layers
    if not layers:
        tls.sets[0] |= FRONT_BACK_BITS
    layers.append(layer)


def pop_dynamic_layer() -> VmapInterpreter:
    """``popDynamicLayer``: the last layer takes FrontMode and BackMode out of the TLS include set."""
    layers = _stack.layers
    layer = layers.pop()
    if not layers:
        tls.sets[0] &= ~FRONT_BACK_BITS
    return layer


def dynamic_layer_front_fallback(op: Any, ks: Any, stack: list[Any]) -> None:
    """``dynamicLayerFrontFallback`` (DynamicLayer.cpp): save the TLS, let the top interpreter
    process the call, restore the TLS afterwards (``SaveLocalDispatchKeySet``)."""
    layer = current_layer()
    saved = tls.snapshot()
    previous, layer.saved_tls = layer.saved_tls, saved
    try:
        layer.process(op, stack)
    finally:
        layer.saved_tls = previous
        tls.restore(saved)


def dynamic_layer_back_fallback(op: Any, ks: Any, stack: list[Any]) -> None:
    """``dynamicLayerBackFallback`` -> ``dynamicLayerBack``: restore the TLS the front saved, pop the
    top layer for the call (``WithoutTop``) and send the op to the next interpreter."""
    layer = current_layer()
    current = tls.snapshot()
    if layer.saved_tls is not None:
        tls.restore(layer.saved_tls)
    pop_dynamic_layer()
    try:
        layer.send_to_next_interpreter(op, stack)
    finally:
        push_dynamic_layer(layer)
        tls.restore(current)
