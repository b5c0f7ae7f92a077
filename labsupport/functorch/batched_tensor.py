"""The BatchedTensor: a tensor that stands for a whole batch at one vmap level.

Stands for ``aten/src/ATen/functorch/BatchedTensorImpl.h`` (``BatchedTensorImpl``, ``makeBatched``,
``maybeGetBatchedImpl``, ``isBatchedAtLevel``) and the Python helpers of ``torch._C._functorch``
(``is_batchedtensor``, ``maybe_get_level``, ``maybe_get_bdim``, ``get_unwrapped``, ``_add_batch_dim``,
``_remove_batch_dim``).

A BatchedTensor holds ``value`` (a plain tensor, or a BatchedTensor of a lower level when vmaps
nest), ``bdim`` (which of value's dims is the batch dim; it is *not* moved to the front) and
``level`` (which vmap made it). Its own sizes are value's without the batch dim. Its key set is
value's plus ``FuncTorchBatched``: it keeps the backend keys (``CPU, ADInplaceOrView, AutogradCPU,
AutocastCPU, FuncTorchBatched`` in PyTorch 2.13), unlike the legacy ``Batched`` tensors of exercise
ex07, which have no backend key.

The lab moves batch dims with numpy (``move_bdim_to_front`` and friends below), where PyTorch's
batching rules call ``at::movedim`` / ``view``, which are dispatched ops of their own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import DispatchKeySet

BATCHED_KEY = DispatchKey.FuncTorchBatched  # kBatchedKey in BatchedTensorImpl.h
BATCHED_BIT = int(DispatchKeySet(BATCHED_KEY))

_BATCHED_CLASSES: dict[type, type] = {}


def batched_class(tensor_cls: type) -> type:
    """The BatchedTensor class for tensors of ``tensor_cls`` (a build's ``Tensor``): a subclass, so
    the Tensor methods (``x.sin()``, ``x + y``) work on batched tensors inside the vmapped function."""
    if getattr(tensor_cls, "_is_batched_class", False):
        return tensor_cls
    cls = _BATCHED_CLASSES.get(tensor_cls)
    if cls is None:
        cls = _BATCHED_CLASSES[tensor_cls] = type(
            "BatchedTensor",
            (BatchedTensorMixin, tensor_cls),
            {"__slots__": ("_bt_value", "_bt_bdim", "_bt_level"), "__module__": __name__},
        )
    return cls


class BatchedTensorMixin:
    """The behaviour every BatchedTensor class shares (``BatchedTensorImpl``)."""

    __slots__ = ()
    _is_batched_class = True

    def __repr__(self) -> str:
        inner = repr(self._bt_value).replace("\n", "\n    ")
        return f"BatchedTensor(lvl={self._bt_level}, bdim={self._bt_bdim}, value=\n    {inner}\n)"

    def item(self) -> Any:
        raise RuntimeError(
            "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling "
            ".item() on a Tensor, please try to rewrite what you're doing with other operations. If error "
            "is occurring somewhere inside PyTorch internals, please file a bug report."
        )

    def __bool__(self) -> bool:
        raise RuntimeError(
            "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. "
            "We don't support that yet, please file an issue at https://github.com/pytorch/pytorch/issues ."
        )

    def numpy(self) -> Any:
        raise RuntimeError(
            "vmap: Can't call .numpy() on a BatchedTensor (lab: a BatchedTensor has no data of its own; "
            "it wraps the whole batch, see get_unwrapped)"
        )

    def tolist(self) -> Any:
        return self.numpy()


def make_batched(value: Any, bdim: int, level: int) -> Any:
    """``makeBatched(tensor, bdim, level)``: wrap ``value`` with its batch dim ``bdim`` at ``level``."""
    cls = batched_class(type(value))
    sizes = value._sizes[:bdim] + value._sizes[bdim + 1 :]
    t = cls._make(None, sizes, value._dtype, value._device)
    t._ks = value._ks | BATCHED_BIT
    t._bt_value = value
    t._bt_bdim = bdim
    t._bt_level = level
    return t


def is_batchedtensor(t: Any) -> bool:
    """``torch._C._functorch.is_batchedtensor``."""
    return getattr(type(t), "_is_batched_class", False)


def maybe_get_level(t: Any) -> int:
    """``torch._C._functorch.maybe_get_level``: the level of a BatchedTensor, -1 for a plain tensor."""
    return t._bt_level if is_batchedtensor(t) else -1


def maybe_get_bdim(t: Any) -> int:
    """``torch._C._functorch.maybe_get_bdim``: the batch dim of a BatchedTensor, -1 for a plain tensor."""
    return t._bt_bdim if is_batchedtensor(t) else -1


def get_unwrapped(t: Any) -> Any:
    """``torch._C._functorch.get_unwrapped``: the tensor one level down."""
    if not is_batchedtensor(t):
        raise RuntimeError("get_unwrapped: expected a BatchedTensor (lab: this tensor is not batched)")
    return t._bt_value


def is_batched_at_level(t: Any, level: int) -> bool:
    """``isBatchedAtLevel``: is ``t`` a BatchedTensor of exactly this level?"""
    return is_batchedtensor(t) and t._bt_level == level


def unwrap_at_level(t: Any, level: int) -> tuple[Any, int | None]:
    """``unwrapTensorAtLevel``: (value, bdim) for a tensor batched at ``level``, else (t, None)."""
    if is_batchedtensor(t) and t._bt_level == level:
        value, bdim = t._bt_value, t._bt_bdim
        return value, bdim
    return t, None


# ---- moving dims (the lab's stand-ins for at::movedim / view / expand inside batching rules) -------


def _remake(t: Any, array: np.ndarray) -> Any:
    out = type(t)._make(array, tuple(array.shape), t._dtype, t._device)
    return out


def contiguous(t: Any) -> Any:
    """The lab keeps plain tensors' data C-contiguous: copy a moved view before handing it out."""
    if is_batchedtensor(t):
        return make_batched(contiguous(t._bt_value), t._bt_bdim, t._bt_level)
    if t._data is None or t._data.flags.c_contiguous:
        return t
    return _remake(t, np.ascontiguousarray(t._data))


def move_dim(t: Any, src: int, dst: int) -> Any:
    """``at::movedim(t, src, dst)`` as a view; for a BatchedTensor the logical dims move and its own
    batch dim follows (``BatchRulesViews.cpp`` does this through the dispatcher)."""
    if src == dst:
        return t
    if is_batchedtensor(t):
        value, bdim, level = t._bt_value, t._bt_bdim, t._bt_level
        order = [d for d in range(len(t._sizes))]
        order.insert(dst, order.pop(src))
        phys = [d if d < bdim else d + 1 for d in order]  # logical -> physical of value
        phys.insert(bdim, bdim)
        return make_batched(_permute(value, phys), bdim, level)
    return _remake(t, np.moveaxis(t._data, src, dst))


def _permute(t: Any, perm: list[int]) -> Any:
    if perm == sorted(perm):
        return t
    if is_batchedtensor(t):
        value, bdim, level = t._bt_value, t._bt_bdim, t._bt_level
        new_bdim_src = bdim
        # logical permutation of t: perm over t's logical dims
        phys = [d if d < bdim else d + 1 for d in perm]
        phys.insert(new_bdim_src, bdim)
        return make_batched(_permute(value, phys), bdim, level)
    return _remake(t, np.transpose(t._data, perm))


def unsqueeze(t: Any, dim: int) -> Any:
    """``at::unsqueeze`` (a view)."""
    if is_batchedtensor(t):
        value, bdim, level = t._bt_value, t._bt_bdim, t._bt_level
        phys = dim if dim < bdim else dim + 1
        new_bdim = bdim + 1 if phys <= bdim else bdim  # (was `dim <= bdim`: wrong when dim == bdim)
        return make_batched(unsqueeze(value, phys), new_bdim, level)
    return _remake(t, np.expand_dims(t._data, dim))


def expand_front(t: Any, batch_size: int) -> Any:
    """An unbatched tensor given a front batch dim of ``batch_size`` (``unsqueeze(0).expand``)."""
    u = unsqueeze(t, 0)
    return expand_dim(u, 0, batch_size)


def expand_dim(t: Any, dim: int, size: int) -> Any:
    if is_batchedtensor(t):
        value, bdim, level = t._bt_value, t._bt_bdim, t._bt_level
        phys = dim if dim < bdim else dim + 1
        return make_batched(expand_dim(value, phys, size), bdim, level)
    shape = list(t._data.shape)
    shape[dim] = size
    return _remake(t, np.ascontiguousarray(np.broadcast_to(t._data, shape)))


def select(t: Any, dim: int, index: int) -> Any:
    """``at::select(t, dim, index)``: a copy of one slice (the for-loop fallback's per-element input)."""
    if is_batchedtensor(t):
        value, bdim, level = t._bt_value, t._bt_bdim, t._bt_level
        phys = dim if dim < bdim else dim + 1
        return make_batched(select(value, phys, index), bdim if phys > bdim else bdim - 1, level)
    return _remake(t, np.ascontiguousarray(np.take(t._data, index, axis=dim)))


def select_view(t: Any, dim: int, index: int) -> Any:
    """``at::select`` as a view: writes through it land in ``t`` (the in-place for-loop fallback)."""
    if is_batchedtensor(t):
        value, bdim, level = t._bt_value, t._bt_bdim, t._bt_level
        phys = dim if dim < bdim else dim + 1
        return make_batched(select_view(value, phys, index), bdim if phys > bdim else bdim - 1, level)
    indexer = [slice(None)] * t._data.ndim
    indexer[dim] = index
    return _remake(t, t._data[tuple(indexer)])


def stack(tensors: list[Any], dim: int = 0) -> Any:
    """``at::stack(tensors, 0)`` for the for-loop fallback: plain tensors stack their data; batched
    ones (of a lower level) stack their values, keeping that level's batch dim."""
    first = tensors[0]
    if any(is_batchedtensor(t) for t in tensors):
        levels = {t._bt_level for t in tensors if is_batchedtensor(t)}
        level = max(levels)
        batch = next(t for t in tensors if t._bt_level == level)
        size = batch._bt_value._sizes[batch._bt_bdim]
        values = []
        for t in tensors:
            if is_batched_at_level(t, level):
                values.append(move_dim(t._bt_value, t._bt_bdim, 0))
            else:
                values.append(expand_front(t, size))
        return make_batched(stack(values, 1), 0, level)
    return _remake(first, np.stack([t._data for t in tensors], axis=dim))
