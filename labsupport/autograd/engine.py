"""The backward engine: walks the grad_fn graph from the roots to the leaves.

Stands for ``torch/csrc/autograd/engine.cpp`` (``Engine::execute``, ``compute_dependencies``,
``validate_outputs``). Nodes run in dependency order (higher ``sequence_nr`` first among the ready
ones, as PyTorch's ready queue does); gradients that reach the same input are summed; a gradient
whose shape or dtype differs from the tensor it is for is reduced (``sum_to``) or cast, as
``validate_outputs`` does after broadcasting or type promotion.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from labsupport.autograd.grad_mode import no_grad
from labsupport.autograd.node import AccumulateGrad, Node, gradient_edge


def _sum_to(grad: Any, sizes: tuple[int, ...]) -> Any:
    """``at::sum_to``: reduce a broadcast gradient back to ``sizes``."""
    if tuple(grad._sizes) == tuple(sizes):
        return grad
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


def _cast(grad: Any, dtype: Any) -> Any:
    if grad._dtype is dtype:
        return grad
    data = None if grad._data is None else grad._data.astype(dtype.np)
    return type(grad)._make(data, grad._sizes, dtype, grad._device)


def _accumulate(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
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
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            data = None if t._data is None else np.ones(t._sizes, dtype=t._dtype.np)
            g = type(t)._make(data, t._sizes, t._dtype, t._device)
        elif tuple(g._sizes) != tuple(t._sizes):
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of torch.Size({list(g._sizes)}) and "
                f"output[{i}] has a shape of torch.Size({list(t._sizes)})."
            )
        node, nr = gradient_edge(t)
        roots.append((node, nr, g))

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

    ready = [(-node.sequence_nr, id(node), node) for node, _, _ in roots if dependencies.get(node, 0) == 0]
    heapq.heapify(ready)
    queued = {id(entry[2]) for entry in ready}
    with no_grad():
        while ready:
            _, _, node = heapq.heappop(ready)
            grads = node.apply(buffers.pop(node, []))
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
                    heapq.heappush(ready, (-next_node.sequence_nr, id(next_node), next_node))


def backward(tensor: Any, gradient: Any | None = None) -> None:
    """``Tensor.backward(gradient=None)``."""
    run_backward([tensor], [gradient])
