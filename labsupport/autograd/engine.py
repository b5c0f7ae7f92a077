"""The backward engine: walks the grad_fn graph from the roots to the leaves.

Stands for ``torch/csrc/autograd/engine.cpp`` (``Engine::execute``, ``compute_dependencies``,
``validate_outputs``) and ``torch/autograd/__init__.py`` (``_make_grads``). Nodes run in dependency
order (higher ``sequence_nr`` first among the ready ones, as PyTorch's ready queue does); gradients that
reach the same input are summed (``InputBuffer::accumulate``: ``add``); a gradient whose shape or dtype
differs from the tensor it is for is reduced (``at::sum_to``: ``sum.dim_IntList`` + ``view``) or cast
(``_to_copy``), as ``validate_outputs`` does after broadcasting or type promotion.

Every one of those steps is an operator call through the build's C++ API (``at``, found on the
tensor's class), so a dispatch mode, a tensor subclass and the profiler see them as on PyTorch; and
each node runs inside the two ``RECORD_FUNCTION`` scopes PyTorch's engine opens
(``autograd::engine::evaluate_function: <name>`` and the node's own ``<name>``). A build without these
operators (a small test yaml) falls back to numpy.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

import numpy as np

from labsupport.autograd.grad_mode import no_grad
from labsupport.autograd.node import AccumulateGrad, Node, gradient_edge
from labsupport.c10.dispatcher import observers


def cpp_api(t: Any, name: str) -> Any:
    """The build's C++ API (``at``) when it has the operator ``name``, else None (numpy fallback)."""
    at = getattr(type(t), "_cpp_api", None)
    return at if at is not None and (hasattr(at._functions, name) or hasattr(at.Tensor, name)) else None


def sum_to(grad: Any, sizes: tuple[int, ...], at: Any = None) -> Any:
    """``at::sum_to`` (ExpandUtils.h): sum the leading dims and the dims broadcast from 1
    (``sum.dim_IntList`` with keepdim), then ``view`` away the leading ones."""
    sizes = tuple(sizes)
    if tuple(grad._sizes) == sizes:
        return grad
    at = at if at is not None else cpp_api(grad, "view")
    if at is None:
        return _sum_to_numpy(grad, sizes)
    lead = len(grad._sizes) - len(sizes)
    if lead < 0:
        raise RuntimeError(f"sum_to: gradient of shape {list(grad._sizes)} cannot be reduced to {list(sizes)}")
    dims = list(range(lead)) + [lead + i for i, n in enumerate(sizes) if n == 1 and grad._sizes[lead + i] != 1]
    if dims:
        grad = at.Tensor.sum_dim_IntList(grad, dims, True)  # at::Tensor::sum(dims, keepdim=true)
    return at.Tensor.view(grad, sizes) if lead else grad


def _sum_to_numpy(grad: Any, sizes: tuple[int, ...]) -> Any:
    data = grad._data
    if data is not None:
        lead = data.ndim - len(sizes)
        if lead < 0:
            raise RuntimeError(f"sum_to: gradient of shape {list(grad._sizes)} cannot be reduced to {list(sizes)}")
        if lead:
            data = data.sum(axis=tuple(range(lead)))
        axes = tuple(i for i, n in enumerate(sizes) if n == 1 and data.shape[i] != 1)
        if axes:
            data = data.sum(axis=axes, keepdims=True)
        data = np.ascontiguousarray(data, dtype=grad._dtype.np)
    return type(grad)._make(data, tuple(sizes), grad._dtype, grad._device)


_sum_to = sum_to


def _cast(grad: Any, dtype: Any) -> Any:
    """``validate_outputs``: ``grad.to(dtype)``."""
    if grad._dtype is dtype:
        return grad
    at = cpp_api(grad, "_to_copy")
    if at is not None:
        return at._to_copy(grad, dtype)
    data = None if grad._data is None else grad._data.astype(dtype.np)
    return type(grad)._make(data, grad._sizes, dtype, grad._device)


def _accumulate(a: Any, b: Any) -> Any:
    """``InputBuffer::accumulate``: the first gradient is kept, the next ones are added (``add``)."""
    if a is None:
        return b
    if b is None:
        return a
    at = cpp_api(a, "add")
    if at is not None:
        return at.Tensor.add(a, b)
    data = None if a._data is None else a._data + b._data
    return type(a)._make(data, a._sizes, a._dtype, a._device)


def _validate(grad: Any, edge_node: Node, input_nr: int) -> Any:
    if grad is None or input_nr >= len(edge_node.input_metadata):
        return grad
    sizes, dtype = edge_node.input_metadata[input_nr]
    grad = _sum_to(grad, sizes)
    return _cast(grad, dtype)


def run_backward(tensors: list[Any], grad_tensors: list[Any | None]) -> None:
    """``Engine::execute`` for ``torch.autograd.backward(tensors, grad_tensors)``."""
    roots: list[tuple[Node, int, Any]] = []
    given = [g is not None for g in grad_tensors]
    held: set[int] = set()
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            at = cpp_api(t, "ones_like")  # _make_grads: torch.ones_like(out, memory_format=preserve_format)
            if at is not None:
                g = at.ones_like(t)
            else:
                data = None if t._data is None else np.ones(t._sizes, dtype=t._dtype.np)
                g = type(t)._make(data, t._sizes, t._dtype, t._device)
        elif tuple(g._sizes) != tuple(t._sizes):
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of torch.Size({list(g._sizes)}) and "
                f"output[{i}] has a shape of torch.Size({list(t._sizes)})."
            )
        node, nr = gradient_edge(t)
        roots.append((node, nr, g))
        if given[i]:
            held.add(id(g))  # the caller holds it: AccumulateGrad may not steal it (use_count > 1)

    # compute_dependencies: how many edges point at each node.
    dependencies: dict[Node, int] = {}
    seen: set[int] = set()
    stack = [node for node, _, _ in roots]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for next_node, _ in node.next_functions:
            if next_node is not None:
                dependencies[next_node] = dependencies.get(next_node, 0) + 1
                stack.append(next_node)

    buffers: dict[Node, list[Any]] = {}
    for node, nr, g in roots:
        buf = buffers.setdefault(node, [None] * max(len(node.input_metadata), nr + 1))
        buf[nr] = _accumulate(buf[nr], _validate(g, node, nr))

    pushes = itertools.count()  # ties (AccumulateGrad sinks share UINT64_MAX) pop in push order
    ready = [(-node.sequence_nr, next(pushes), node) for node, _, _ in roots if dependencies.get(node, 0) == 0]
    heapq.heapify(ready)
    queued = {id(entry[2]) for entry in ready}
    with no_grad():
        while ready:
            _, _, node = heapq.heappop(ready)
            inputs = buffers.pop(node, [])
            if isinstance(node, AccumulateGrad):
                # use_count of the gradient: other buffers still holding the same tensor, or the caller
                shared = any(b is not None and any(x is g for x in b) for b in buffers.values() for g in inputs)
                node.stealable = not shared and not any(g is not None and id(g) in held for g in inputs)
            grads = _evaluate(node, inputs)
            if isinstance(node, AccumulateGrad):
                continue
            for (next_node, nr), grad in zip(node.next_functions, grads):
                if next_node is None:
                    continue
                buf = buffers.setdefault(next_node, [None] * max(len(next_node.input_metadata), nr + 1))
                buf[nr] = _accumulate(buf[nr], _validate(grad, next_node, nr))
                dependencies[next_node] -= 1
                if dependencies[next_node] == 0 and id(next_node) not in queued:
                    queued.add(id(next_node))
                    heapq.heappush(ready, (-next_node.sequence_nr, next(pushes), next_node))


def _evaluate(node: Node, inputs: list[Any]) -> list[Any]:
    """``Engine::evaluate_function`` + ``Node::operator()``: the two RECORD_FUNCTION scopes around
    ``apply`` (one cheap check when no profiler listens)."""
    if not observers.active:
        return node.apply(inputs)
    name = node.name()
    scopes = (f"autograd::engine::evaluate_function: {name}", name)
    listeners = [item for item in observers.items if hasattr(item, "on_record_function")]
    for scope in scopes:
        for listener in listeners:
            listener.on_record_function(scope, True)
    try:
        return node.apply(inputs)
    finally:
        for scope in reversed(scopes):
            for listener in reversed(listeners):
                listener.on_record_function(scope, False)


def backward(tensor: Any, gradient: Any | None = None) -> None:
    """``Tensor.backward(gradient=None)``."""
    run_backward([tensor], [gradient])
