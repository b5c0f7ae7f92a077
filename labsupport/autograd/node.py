"""Autograd graph nodes (``grad_fn``) and the helpers autograd kernels use to build the graph.

Stands for ``torch/csrc/autograd/function.h`` (``Node``, edges, ``sequence_nr``),
``functions/accumulate_grad.h`` and ``VariableTypeUtils.h`` (``collect_next_edges``, ``set_history``).
Generated nodes such as ``AddBackward0`` subclass ``Node`` and implement ``apply``.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

from labsupport.autograd.variable import _VIEW_META, refresh_view

Edge = tuple["Node | None", int]
_sequence = itertools.count()


class Node:
    """A backward function: ``apply(grads_of_outputs) -> grads_of_inputs``, one per next edge."""

    next_functions: tuple[Edge, ...] = ()

    def __init__(self) -> None:
        self.sequence_nr = next(_sequence)
        self.next_functions = ()
        # (sizes, dtype) of each forward output this node receives a gradient for (InputMetadata).
        self.input_metadata: list[tuple[tuple[int, ...], Any]] = []

    def name(self) -> str:
        """``Node::name()``: what ``grad_fn=<...>`` prints."""
        return type(self).__name__

    def apply(self, grads: list[Any]) -> list[Any]:
        raise NotImplementedError(f"{self.name()}.apply is not implemented")

    def __repr__(self) -> str:
        return f"<{self.name()} object>"


class AccumulateGrad(Node):
    """The sink for a leaf tensor: adds the incoming gradient into ``leaf.grad``."""

    def __init__(self, variable: Any) -> None:
        super().__init__()
        self.variable = variable
        self.input_metadata = [(tuple(variable._sizes), variable._dtype)]

    def apply(self, grads: list[Any]) -> list[Any]:
        grad = grads[0]
        if grad is None:
            return []
        var = self.variable
        if var.grad is None:
            var.grad = type(var)._make(
                None if grad._data is None else grad._data.copy(), grad._sizes, grad._dtype, grad._device
            )
        elif var.grad._data is not None and grad._data is not None:
            var.grad = type(var)._make(var.grad._data + grad._data, var.grad._sizes, var.grad._dtype, var.grad._device)
        return []


def gradient_edge(tensor: Any) -> Edge:
    """``impl::gradient_edge``: where a gradient for ``tensor`` must flow.

    A view is brought up to date first (``VariableHooks::grad_fn``). A view with no ``grad_fn`` whose
    base requires grad (made in no_grad mode) reports ``requires_grad`` but has no gradient accumulator
    of its own, so no gradient flows to it."""
    meta = _VIEW_META.get(id(tensor))
    if meta is not None:
        refresh_view(tensor, meta)
        if tensor.grad_fn is None and meta.base.requires_grad:
            return (None, 0)
    if tensor.grad_fn is not None:
        return (tensor.grad_fn, tensor._output_nr)
    return (AccumulateGrad(tensor), 0)


def collect_next_edges(*tensors: Any) -> tuple[Edge, ...]:
    """``collect_next_edges``: one edge per input; inputs that need no gradient get ``(None, 0)``."""
    edges: list[Edge] = []
    for t in tensors:
        if t is None or not getattr(t, "requires_grad", False):
            edges.append((None, 0))
        else:
            edges.append(gradient_edge(t))
    return tuple(edges)


def compute_requires_grad(*tensors: Any) -> bool:
    """``compute_requires_grad``: grad mode is on and some input requires grad."""
    from labsupport.autograd.grad_mode import is_grad_enabled

    if not is_grad_enabled():
        return False
    return any(t is not None and getattr(t, "requires_grad", False) for t in tensors)


def set_history(outputs: Any, grad_fn: Node) -> None:
    """``set_history``: make ``grad_fn`` the creator of each output tensor."""
    if not isinstance(outputs, (tuple, list)):
        outputs = (outputs,)
    for nr, out in enumerate(outputs):
        if out is None or not hasattr(out, "_sizes"):
            continue
        out.grad_fn = grad_fn
        out._output_nr = nr
        out.requires_grad = True
        grad_fn.input_metadata.append((tuple(out._sizes), out._dtype))


class WarnNotImplemented(Node):
    """What PyTorch's default autograd fallback attaches: backward warns and returns no gradients."""

    def __init__(self, op_name: str, num_inputs: int) -> None:
        super().__init__()
        self.op_name = op_name
        self.num_inputs = num_inputs

    def apply(self, grads: list[Any]) -> list[Any]:
        warnings.warn(
            f"{self.op_name}: an autograd kernel was not registered to the Autograd key(s) but we are trying "
            "to backprop through it. This may lead to silently incorrect behavior. This behavior is "
            "deprecated and will be removed in a future version of PyTorch. If your operator is "
            "differentiable, please ensure you have registered an autograd kernel to the correct Autograd "
            "key (e.g. DispatchKey::Autograd, DispatchKey::CompositeImplicitAutograd).",
            UserWarning,
            stacklevel=2,
        )
        return [None] * self.num_inputs


class NotImplemented(Node):
    """What ``autogradNotImplementedFallback`` attaches: backward raises."""

    def __init__(self, op_name: str, num_inputs: int) -> None:
        super().__init__()
        self.op_name = op_name
        self.num_inputs = num_inputs

    def apply(self, grads: list[Any]) -> list[Any]:
        raise RuntimeError(f"derivative for {self.op_name} is not implemented")
