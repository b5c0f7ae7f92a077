"""The two nodes autograd builds when a view is modified in place: ``CopySlices`` and ``AsStridedBackward0``.

Stands for ``torch/csrc/autograd/functions/tensor.h`` / ``tensor.cpp`` (``CopySlices``),
``ATen/TensorGeometry.h`` and the ``AsStridedBackward0`` that ``VariableHooks::grad_fn`` (variable.cpp)
builds for a view whose base changed.

The picture: ``v = h[0]; v.mul_(2)``. The multiplication is recorded as usual (``MulBackward0``), but it
wrote into ``h``'s storage, so ``h``'s history must change too. ``h.grad_fn`` becomes a ``CopySlices``
that holds ``h``'s and ``v``'s geometry (sizes, strides, storage offset) and the ``MulBackward0``. In
backward it copies the incoming gradient for ``h``, runs ``MulBackward0`` on the slice that ``v`` covers
and writes the result back into that slice. ``v.grad_fn`` becomes an ``AsStridedBackward0`` into ``h``.

``CopySlices`` dispatches its steps as PyTorch's does (``new_empty_strided`` + ``copy_``, ``as_strided``,
``clone``, ``copy_``); a build without those operators, and ``AsStridedBackward0``, do the strided
arithmetic with numpy index arrays (PyTorch's ``as_strided_backward`` uses operators on a buffer).
PyTorch's rebuilt node is ``generated::AsStridedBackward0``, the class ``x.as_strided(...)`` records; the
lab's is the hand-written class below with the same name, because each build generates its own node
classes while this autograd code is shared by all builds.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from labsupport.autograd.node import Node, collect_next_edges


class TensorGeometry(NamedTuple):
    """``at::TensorGeometry``: sizes, strides and storage offset (in elements), no data."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    storage_offset: int

    @classmethod
    def of(cls, tensor: Any) -> TensorGeometry:
        sizes = tuple(tensor._sizes)
        stride = getattr(tensor, "stride", None)
        if callable(stride):
            return cls(sizes, tuple(stride()), int(tensor.storage_offset()))
        return cls(sizes, _contiguous_strides(sizes), 0)  # a build without strides: every tensor is contiguous

    def indices(self) -> np.ndarray:
        """The storage index of every element, shaped like the tensor."""
        index = np.full(self.sizes, self.storage_offset, dtype=np.int64)
        for dim, (size, stride) in enumerate(zip(self.sizes, self.strides)):
            shape = [1] * len(self.sizes)
            shape[dim] = size
            index = index + (np.arange(size, dtype=np.int64) * stride).reshape(shape)
        return index

    def span(self) -> int:
        """One past the largest storage index the geometry touches."""
        if 0 in self.sizes:
            return self.storage_offset
        return self.storage_offset + sum((s - 1) * st for s, st in zip(self.sizes, self.strides)) + 1


def _contiguous_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _tensor_like(grad: Any, data: np.ndarray | None, sizes: tuple[int, ...]) -> Any:
    if data is not None:  # np.array, not np.ascontiguousarray: that one turns a 0-dim result into shape (1,)
        data = np.array(data, dtype=grad._dtype.np, order="C").reshape(sizes)
    return type(grad)._make(data, tuple(sizes), grad._dtype, grad._device)


class AsStridedBackward0(Node):
    """The ``grad_fn`` a view gets after it, its base or another view of its base was modified in place:
    its gradient is scattered into a zero tensor shaped like the base (``as_strided_backward``)."""

    def __init__(self) -> None:
        super().__init__()
        self.self_geometry: TensorGeometry | None = None
        self.size: tuple[int, ...] = ()
        self.stride: tuple[int, ...] = ()
        self.storage_offset = 0

    @classmethod
    def regenerate(cls, base: Any, view: Any) -> AsStridedBackward0:
        """What ``VariableHooks::grad_fn`` builds: geometry of the base and the view, edge to the base."""
        fn = cls()
        fn.self_geometry = TensorGeometry.of(base)
        geometry = TensorGeometry.of(view)
        fn.size, fn.stride, fn.storage_offset = geometry
        fn.next_functions = collect_next_edges(base)
        # Note in variable.cpp: the view's sizes, not the base's, describe the gradient this node receives.
        fn.input_metadata = [(tuple(view._sizes), base._dtype)]
        return fn

    def apply(self, grads: list[Any]) -> list[Any]:
        grad = grads[0]
        if grad is None or self.next_functions[0][0] is None:
            return [None]
        base = self.self_geometry
        assert base is not None
        if grad._data is None:
            return [_tensor_like(grad, None, base.sizes)]
        view = TensorGeometry(self.size, self.stride, self.storage_offset)
        storage = np.zeros(max(base.span(), view.span()), dtype=grad._data.dtype)
        # np.add.at sums the gradients of elements that share a storage location (expand's stride 0).
        np.add.at(storage, view.indices().ravel(), np.asarray(grad._data).ravel())
        return [_tensor_like(grad, storage[base.indices()], base.sizes)]


class CopySlices(Node):
    """``torch::autograd::CopySlices``: the base's ``grad_fn`` after an in-place op on one of its views.

    ``fn`` is the in-place op's own backward node. Edge 0 goes to the base's previous history; edges
    1.. are ``fn``'s edges for the op's other inputs."""

    def __init__(self, base: Any, view: Any, fn: Node) -> None:
        super().__init__()
        self.base = TensorGeometry.of(base)
        self.view = TensorGeometry.of(view)
        self.fn = fn
        self.input_metadata = [(tuple(base._sizes), base._dtype)]
        self.next_functions = collect_next_edges(base) + tuple(fn.next_functions[1:])

    def name(self) -> str:
        return "torch::autograd::CopySlices"

    def __repr__(self) -> str:
        return "<CopySlices object>"

    def apply(self, grads: list[Any]) -> list[Any]:
        grad = grads[0]
        n = len(self.next_functions)
        if grad is None:
            return [None] * n
        base, view = self.base, self.view
        at = getattr(type(grad), "_cpp_api", None)
        if at is not None and grad._data is not None and hasattr(at.Tensor, "new_empty_strided"):
            return self._apply_dispatched(at, grad, n)
        if grad._data is None:  # meta tensors: shapes only
            res = self.fn.apply([_tensor_like(grad, None, view.sizes)])
            return [_tensor_like(grad, None, base.sizes), *res[1:n]]
        # result = grad laid out like the base; grad_slice = the part the view covers (as_strided).
        storage = np.zeros(max(base.span(), view.span()), dtype=grad._data.dtype)
        base_index, view_index = base.indices(), view.indices()
        storage[base_index] = grad._data
        grad_slice = _tensor_like(grad, storage[view_index].copy(), view.sizes)
        res = self.fn.apply([grad_slice])
        out: list[Any] = [None] * n
        if self.next_functions[0][0] is not None:
            slice_grad = res[0]
            storage[view_index] = 0 if slice_grad is None else np.asarray(slice_grad._data)
            out[0] = _tensor_like(grad, storage[base_index], base.sizes)
        for i in range(1, n):
            out[i] = res[i] if i < len(res) else None
        return out

    def _apply_dispatched(self, at: Any, grad: Any, n: int) -> list[Any]:
        """``CopySlices::apply_impl`` step by step, each step an operator call as in PyTorch:
        ``result = grad.new_empty_strided(base)`` + ``copy_``, ``grad_slice = result.as_strided(view)``,
        ``fn(grad_slice.clone())``, then ``grad_slice.copy_(res[0])`` writes the view's gradient back."""
        base, view = self.base, self.view
        result = at.Tensor.new_empty_strided(grad, base.sizes, base.strides)
        at.Tensor.copy_(result, grad)
        offset = view.storage_offset - base.storage_offset
        grad_slice = at.Tensor.as_strided(result, view.sizes, view.strides, offset)
        res = self.fn.apply([at.Tensor.clone(grad_slice)])
        out: list[Any] = [None] * n
        for i in range(min(n, len(res))):
            if res[i] is None:
                continue
            if i == 0:
                at.Tensor.copy_(grad_slice, res[0])
                out[0] = result
            else:
                out[i] = res[i]
        return out
