"""``x[i]`` and ``x[i] = v`` (stands for torch/csrc/autograd/python_variable_indexing.cpp and the
basic-indexing half of ATen/TensorIndexing.h).

Basic indexing is a chain of view operators, called through the C++ Tensor API (so each goes through
the dispatcher, and shows up in ``lab.trace()`` and the profiler):

    x[i]        -> select(dim, i)          an integer removes a dim
    x[a:b:c]    -> slice(dim, a, b, c)     a slice keeps it (``x[:]`` still calls slice; in a tuple,
                                           a slice that keeps the whole dim is skipped)
    x[None]     -> unsqueeze(dim)          None inserts a dim of size 1
    x[...]      -> alias()                 Ellipsis stands for all the dims not named
                                           (a result that would be ``x`` itself becomes ``alias(x)``)

``x[idx] = v`` indexes the same way, then writes into the view: ``copy_`` when the shapes match,
``fill_`` for a 0-dim CPU value, otherwise ``view`` (leading 1s dropped) + ``expand`` + ``copy_``.

What the lab leaves out: advanced indexing (tensors, lists and bools as indices: ``aten::index.Tensor``
and ``index_put_``) raises NotImplementedError. The lab has no ``fill_.Tensor`` overload: a Python
number assigned with ``x[i] = 2`` is written with ``fill_.Scalar`` (PyTorch makes a 0-dim tensor,
``lift_fresh``, and calls ``fill_.Tensor``), and a 0-dim tensor value with ``copy_``, which broadcasts
it the same way and keeps its gradient.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from labsupport.aten import dtype as dtypes
from labsupport.aten.dtype import round_to_bfloat16
from labsupport.aten.memory_overlap import assert_no_internal_overlap
from labsupport.aten.native.fill import checked_convert
from labsupport.aten.tensor import TensorBase, tensor_device
from labsupport.overrides import _is_torch_function_mode_enabled, collect_overloaded, handle_binding_torch_function

__all__ = ["THPVariable_getitem", "THPVariable_setitem", "THPVariable_delitem"]

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_ADVANCED = (
    "advanced indexing (a tensor, list or bool as an index: aten::index.Tensor / aten::index_put_) is not "
    "implemented in the lab; basic indexing takes integers, slices, None and ..."
)
_CPU = tensor_device("cpu")
_cpp_classes: dict[type, type] = {}


def _cpp(t: TensorBase) -> Any:
    """The build's at::Tensor class (TensorBody): its methods are the C++ API, which PyTorch's indexing
    code calls (``self.select(...)``) without going back through the Python bindings."""
    cls = type(t)
    found = _cpp_classes.get(cls)
    if found is None:
        found = next((c for c in cls.__mro__ if c.__name__ == "TensorBody"), cls)
        _cpp_classes[cls] = found
    return found


def _is_long(obj: object) -> bool:
    """``THPUtils_checkLong``: a Python or numpy integer, not a bool."""
    if isinstance(obj, bool):
        return False
    if isinstance(obj, int):
        return True
    return type(obj).__module__ == "numpy" and hasattr(obj, "dtype") and obj.dtype.kind in "iu"


def _unpack_long(obj: Any) -> int:
    value = int(obj)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError("Overflow when unpacking long long")
    return value


def _is_index_tensor(obj: object) -> bool:
    """A 0-dim integer tensor (not bool or uint8) indexes like an integer (select with its item)."""
    return (
        isinstance(obj, TensorBase) and not obj._sizes and not obj._dtype.is_floating_point
        and obj._dtype is not dtypes.bool and obj._dtype is not dtypes.uint8
    )


def _slice_index(value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        index = operator.index(value)
    except TypeError:
        raise TypeError("slice indices must be integers or None or have an __index__ method") from None
    return max(_INT64_MIN, min(_INT64_MAX, index))


def _unpack_slice(obj: slice) -> tuple[int, int, int]:
    """``__PySlice_Unpack``: None becomes 0 / INT64_MAX; a step of 0 or below is refused."""
    step = 1 if obj.step is None else _slice_index(obj.step, 1)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise ValueError("step must be greater than zero")
    return _slice_index(obj.start, 0), _slice_index(obj.stop, _INT64_MAX), step


def _apply_select(self: TensorBase, dim: int, index: int, real_dim: int) -> TensorBase:
    """``impl::applySelect``: check the index against the dim, then ``select``."""
    sizes = self._sizes
    if index == 0 and dim == 0 and not sizes:
        raise IndexError(
            "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to "
            "convert a 0-dim tensor to a number"
        )
    size = sizes[dim] if dim < len(sizes) else 0
    if not (size >= -index and size > index):
        raise IndexError(f"index {index} is out of bounds for dimension {real_dim} with size {size}")
    return _cpp(self).select(self, dim, index)


def _apply_slice(
    self: TensorBase, dim: int, start: int, stop: int, step: int, disable_slice_optimization: bool
) -> TensorBase:
    """``impl::applySlice``: a slice that keeps the whole dim is skipped unless told otherwise."""
    sizes = self._sizes
    if (not disable_slice_optimization and dim < len(sizes) and start == 0 and sizes[dim] <= stop
            and step == 1):
        return self
    return _cpp(self).slice(self, dim, start, stop, step)


def _count_specified_dimensions(index: tuple) -> int:
    """``count_specified_dimensions``: the dims the index consumes (None, ... and bools consume none)."""
    count = 0
    for obj in index:
        if isinstance(obj, TensorBase):
            count += 1 if _is_index_tensor(obj) else max(len(obj._sizes), 1)
        elif _is_long(obj) or isinstance(obj, slice) or isinstance(obj, (list, tuple)):
            count += 1
    return count


def _apply_slicing(self: TensorBase, index: tuple, disable_slice_optimization: bool) -> TensorBase:
    """``applySlicing``: walk the index left to right, keeping track of the dim it points at."""
    ndim = len(self._sizes)
    specified = _count_specified_dimensions(index)
    if specified > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    result = self
    dim = 0
    for real_dim, obj in enumerate(index):
        if _is_long(obj):
            result = _apply_select(result, dim, _unpack_long(obj), real_dim)
        elif isinstance(obj, slice):
            start, stop, step = _unpack_slice(obj)
            result = _apply_slice(result, dim, start, stop, step, disable_slice_optimization)
            dim += 1
        elif obj is Ellipsis:
            dim += ndim - specified
        elif obj is None:
            result = _cpp(result).unsqueeze(result, dim)
            dim += 1
        elif _is_index_tensor(obj):
            result = _apply_select(result, dim, int(obj.item()), real_dim)
        elif isinstance(obj, (bool, TensorBase, list, tuple)):
            raise NotImplementedError(_ADVANCED)
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                f"indices (got {type(obj).__name__})"
            )
    return result


def _indexing_overloaded(self: TensorBase, index: Any, value: Any = None) -> list[Any] | None:
    """``check_has_torch_function`` on self (and the value), then ``handle_torch_function_indexing``'s
    list of overloaded arguments: self, the tensors in the index, the value. None when no
    ``__torch_function__`` applies (no mode on, no argument of a class with its own)."""
    items = index if isinstance(index, tuple) else (index,)
    overloaded = collect_overloaded((self, *items, value))
    if overloaded or _is_torch_function_mode_enabled():
        return overloaded
    return None


def THPVariable_getitem(self: TensorBase, index: Any) -> TensorBase:  # noqa: N802 - PyTorch's name
    """``Tensor.__getitem__``: ``__torch_function__`` first (a mode, or a subclass among self and the
    index), then the single-item fast paths, then the general walk."""
    overloaded = _indexing_overloaded(self, index)
    if overloaded is not None:
        return handle_binding_torch_function(overloaded, THPVariable_getitem, (self, index), None, "torch.Tensor")
    if index is None:
        return _cpp(self).unsqueeze(self, 0)
    if index is Ellipsis:
        return _cpp(self).alias(self)
    if _is_long(index):
        return _apply_select(self, 0, _unpack_long(index), 0)
    if isinstance(index, slice):
        start, stop, step = _unpack_slice(index)
        return _apply_slice(self, 0, start, stop, step, disable_slice_optimization=True)
    if isinstance(index, str):
        raise TypeError("new(): invalid data type 'str'")
    result = _apply_slicing(self, index if isinstance(index, tuple) else (index,), False)
    if result is self:  # x[()] or x[:, 0:n]: still a new tensor, "a shallow copy"
        result = _cpp(self).alias(self)
    return result


def _type_string(t: TensorBase) -> str:
    prefix = "torch.cuda." if t._device.type == "cuda" else "torch."
    return f"{prefix}{t._dtype.scalar_type_name}Tensor"


def _value_to_tensor(self: TensorBase, value: Any) -> tuple[TensorBase, bool | int | float | None]:
    """``valueToTensor``: a tensor stays as it is; a Python number becomes a 0-dim CPU tensor of self's
    dtype, made without dispatching (``scalar_tensor_static``); anything else is refused with
    PyTorch's TypeError. Also returns the number, for the fill_ the lab uses instead of fill_.Tensor."""
    if isinstance(value, TensorBase):
        return value, None
    if not (isinstance(value, (bool, int, float)) or _is_long(value)):
        raise TypeError(f"can't assign a {type(value).__name__} to a {_type_string(self)}")
    number = checked_convert(value.item() if hasattr(value, "item") else value, self._dtype)
    data = np.array(number, dtype=self._dtype.np)
    if self._dtype is dtypes.bfloat16:
        round_to_bfloat16(data)
    return type(self)._make(data, (), self._dtype, _CPU), value


def _copy_to(dst: TensorBase, src: TensorBase, number: bool | int | float | None = None) -> None:
    """``at::indexing::copy_to``: copy_ when shapes match, fill_ for a 0-dim CPU value (see the module
    docstring), else view (leading 1s dropped) + expand + copy_."""
    api = _cpp(dst)
    if dst._sizes == src._sizes:
        api.copy_(dst, src, False)
        return
    if not src._sizes and src._device.type == "cpu":
        if number is not None:
            # PyTorch: fill_.Tensor(dst, src), whose CPU kernel is a copy_ (so it refuses to write an
            # expanded dst, which fill_.Scalar would allow)
            assert_no_internal_overlap(dst)
            api.fill_(dst, number)
        else:
            api.copy_(dst, src, False)  # PyTorch: fill_.Tensor; copy_ broadcasts the same value
        return
    sizes = list(src._sizes)
    while sizes and sizes[0] == 1:
        del sizes[0]
    src_view = api.view(src, sizes)
    if src_view._sizes != dst._sizes:
        src_view = api.expand(src_view, dst._sizes, False)
    api.copy_(dst, src_view, False)


def THPVariable_setitem(self: TensorBase, index: Any, value: Any) -> None:  # noqa: N802 - PyTorch's name
    """``Tensor.__setitem__``: ``__torch_function__`` first (a mode, or a subclass among self, the index
    and the value), then index (slices that keep a whole dim are skipped) and write."""
    overloaded = _indexing_overloaded(self, index, value)
    if overloaded is not None:
        handle_binding_torch_function(overloaded, THPVariable_setitem, (self, index, value), None, "torch.Tensor")
        return
    value, number = _value_to_tensor(self, value)
    if index is Ellipsis:
        dst = self
    elif index is None:
        dst = _cpp(self).unsqueeze(self, 0)
    elif _is_long(index):
        dst = _apply_select(self, 0, _unpack_long(index), 0)
    elif isinstance(index, slice):
        start, stop, step = _unpack_slice(index)
        dst = _apply_slice(self, 0, start, stop, step, disable_slice_optimization=False)
    elif isinstance(index, str):
        raise TypeError("new(): invalid data type 'str'")
    else:
        dst = _apply_slicing(self, index if isinstance(index, tuple) else (index,), False)
    _copy_to(dst, value, number)


def THPVariable_delitem(self: TensorBase, index: Any) -> None:  # noqa: N802 - the lab's name
    """``del x[i]``: PyTorch's ``THPVariable_setitem`` is called with no value and refuses."""
    raise TypeError("Tensor does not support deleting items")
