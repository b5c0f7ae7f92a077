"""Autograd graph nodes (``grad_fn``) and the helpers autograd kernels use to build the graph.

Stands for ``torch/csrc/autograd/function.h`` (``Node``, edges, ``sequence_nr``),
``functions/accumulate_grad.h`` and ``VariableTypeUtils.h`` (``collect_next_edges``, ``set_history``).
Generated nodes such as ``AddBackward0`` subclass ``Node`` and implement ``apply``.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
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
    """``torch::autograd::AccumulateGrad``: the sink for a leaf tensor, puts the incoming gradient into
    ``leaf.grad`` (functions/accumulate_grad.h ``accumulateGrad``, grad mode off):

    * no ``.grad`` yet, and nobody else holds the gradient (``stealable``: the engine's stand-in for
      ``use_count() <= 1``) and it obeys the layout contract (strides like the leaf's): keep it, as
      ``new_grad.detach()``;
    * no ``.grad`` yet otherwise: clone it into the leaf's layout (``new_empty_strided`` + ``copy_``);
    * a ``.grad`` already: add in place (``variable_grad += new_grad``, ``add_``).
    """

    def __init__(self, variable: Any) -> None:
        super().__init__()
        self.sequence_nr = 2**64 - 1  # UINT64_MAX: a sink runs as soon as it is ready (accumulate_grad.cpp)
        self.variable = variable
        self.input_metadata = [(tuple(variable._sizes), variable._dtype)]
        self.stealable = True  # set by the engine before each apply

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    def __repr__(self) -> str:
        return "<AccumulateGrad object>"

    def apply(self, grads: list[Any]) -> list[Any]:
        grad = grads[0]
        if grad is None:
            return []
        var = self.variable
        at = getattr(type(grad), "_cpp_api", None)
        if at is None or not hasattr(at.Tensor, "new_empty_strided"):
            self._apply_numpy(var, grad)
        elif var.grad is None:
            if self.stealable and obeys_layout_contract(grad, var):
                var.grad = at.detach(grad)
            else:
                var.grad = clone_obey_contract(at, grad, var)
        else:
            at.Tensor.add_(var.grad, grad)
        return []

    @staticmethod
    def _apply_numpy(var: Any, grad: Any) -> None:
        """A build without the operators above (a small test yaml): the same result, with numpy."""
        if var.grad is None:
            var.grad = type(var)._make(
                None if grad._data is None else grad._data.copy(), grad._sizes, grad._dtype, grad._device
            )
        elif var.grad._data is not None and grad._data is not None:
            var.grad = type(var)._make(var.grad._data + grad._data, var.grad._sizes, var.grad._dtype, var.grad._device)


def obeys_layout_contract(grad: Any, variable: Any) -> bool:
    """``utils::obeys_layout_contract`` (grad_layout_contract.h): for a non-overlapping and dense leaf,
    the gradient has the leaf's strides (size-1 dims aside, but never stride 0); otherwise it is contiguous."""
    from labsupport.aten.memory_overlap import is_non_overlapping_and_dense
    from labsupport.aten.storage import contiguous_strides

    sizes, var_strides, grad_strides = tuple(grad._sizes), tuple(variable.stride()), tuple(grad.stride())
    if is_non_overlapping_and_dense(tuple(variable._sizes), var_strides):
        for n, gs, vs in zip(sizes, grad_strides, var_strides):
            if (n != 1 and gs != vs) or (n == 1 and gs == 0):
                return False
        return True
    return all(n == 1 or gs == cs for n, gs, cs in zip(sizes, grad_strides, contiguous_strides(sizes)))


def clone_obey_contract(at: Any, grad: Any, variable: Any) -> Any:
    """``utils::clone_obey_contract``: ``new_empty_strided`` in the leaf's layout, then ``copy_``; a leaf
    that is not non-overlapping and dense gets a contiguous ``clone``."""
    from labsupport.aten.memory_overlap import is_non_overlapping_and_dense

    if is_non_overlapping_and_dense(tuple(variable._sizes), tuple(variable.stride())):
        fresh = at.Tensor.new_empty_strided(grad, tuple(variable._sizes), tuple(variable.stride()), grad._dtype)
        return at.Tensor.copy_(fresh, grad)
    return at.clone(grad)


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
    return (grad_accumulator(tensor), 0)


_GRAD_ACCUMULATORS: dict[int, weakref.ref[AccumulateGrad]] = {}


def grad_accumulator(tensor: Any) -> AccumulateGrad:
    """``impl::grad_accumulator``: one AccumulateGrad per leaf while a graph uses it (the leaf keeps a weak
    reference, the graph the node), so two edges to the same leaf meet in one input buffer and add there."""
    ref = _GRAD_ACCUMULATORS.get(id(tensor))
    node = ref() if ref is not None else None
    if node is None or node.variable is not tensor:
        node = AccumulateGrad(tensor)
        key = id(tensor)
        _GRAD_ACCUMULATORS[key] = weakref.ref(node, lambda _ref, key=key: _drop_accumulator(key, _ref))
    return node


def _drop_accumulator(key: int, ref: Any) -> None:
    if _GRAD_ACCUMULATORS.get(key) is ref:
        del _GRAD_ACCUMULATORS[key]


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
