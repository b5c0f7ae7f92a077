"""Exercise 07 -- a boxed fallback that batches *every* operator with a for loop.

Notebook: 07 (boxing, fallbacks, BackendSelect), the cells on boxed kernels, the stack and boxed
fallbacks. Grade it: ``python -m labsupport.grade ex07``, or ``lab.grade("ex07")``.

What PyTorch does (seed 001, "boxing + batched fallback"): a *boxed* kernel has one signature for
every operator, ``fn(op, ks, stack)``: the arguments sit on a list (the stack); the kernel pops them,
and pushes the results. Because it works for any operator, it can be registered once as a
*fallback* for a whole dispatch key::

    TORCH_LIBRARY_IMPL(_, Batched, m) {
      m.fallback(torch::CppFunction::makeFromBoxedFunction<&batchedTensorForLoopFallback>());
    }

(lab: ``lab.Library("_", "IMPL").fallback(batched_for_loop_fallback, "Batched", with_keyset=True)``).
PyTorch's ``batchedTensorForLoopFallback`` (aten/src/ATen/LegacyBatchedFallback.cpp) makes vmap work
for operators that have no batching rule: it slices the batch apart, calls the operator once per
element, and stacks the results.

Given below: ``BatchedTensor`` and ``make_batched(tensor)``, which wraps a tensor whose first dimension
is the batch dimension and adds the ``Batched`` key to its key set (plus ``is_batched``,
``unwrap_batched``, ``batch_size``). You write:

* ``select_batch_element(batched, i)``: element ``i`` of the batch as an ordinary tensor (no Batched
  key): slice the wrapped tensor's numpy data (``unwrap_batched(b)._data[i]``) and build a tensor of
  the same class with ``type(full)._make(data, sizes, dtype, device)``;
* ``stack_results(results)``: ``np.stack`` the per-element results' data and wrap the stacked tensor
  with ``make_batched``;
* ``batched_for_loop_fallback(op, ks, stack)``: pop the operator's arguments from the stack
  (``len(op.schema.arguments)`` of them, the last ones), find the batch size, then for each element
  call ``op.call_boxed(element_stack)`` *below the Batched key* (``lab.ExcludeDispatchKeyGuard``),
  where ``element_stack`` holds the arguments with every BatchedTensor replaced by its element
  (other arguments -- unbatched tensors, ``alpha``, ``dim`` -- are passed as they are); finally push
  one stacked result per schema return (``len(op.schema.returns)``).

The grader registers your fallback on a fresh build and dispatcher, then calls add, mul, sin, neg
and sum (full and over a dim) on batched tensors and compares with numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np  # noqa: F401

import labsupport as lab
from labsupport.aten.tensor import TensorBase

BATCHED_KEY_SET = lab.DispatchKeySet(lab.DispatchKey.Batched)


# ---- the batched tensor (given, the same in exercises/ and solutions/) ----------------------------


class BatchedTensor(TensorBase):
    """A tensor that stands for a whole batch (``BatchedTensorImpl``, simplified).

    It wraps ``value``, whose first dimension is the batch dimension; its own sizes are those of one
    batch element. Its key set is value's plus the ``Batched`` key, so the dispatcher sends every
    operator called on it to the Batched kernel (or fallback) first. It has no data of its own.
    """

    __slots__ = ("_batched_value",)

    def __repr__(self) -> str:
        return f"BatchedTensor(batch_size={batch_size(self)}, value={self._batched_value!r})"


def make_batched(value: Any) -> BatchedTensor:
    """Wrap ``value`` (batch dimension first) as a BatchedTensor carrying the Batched key."""
    if not value._sizes:
        raise ValueError("make_batched needs a tensor with at least one dimension (the batch dimension)")
    wrapper = BatchedTensor._make(None, value._sizes[1:], value._dtype, value._device)
    wrapper._ks = value._ks | int(BATCHED_KEY_SET)
    wrapper._batched_value = value
    return wrapper


def is_batched(value: Any) -> bool:
    """True for a BatchedTensor."""
    return isinstance(value, BatchedTensor)


def unwrap_batched(value: BatchedTensor) -> Any:
    """The full tensor a BatchedTensor wraps (batch dimension first)."""
    return value._batched_value


def batch_size(value: BatchedTensor) -> int:
    """How many elements the batch holds."""
    return value._batched_value._sizes[0]


# ---- the fallback: your part ----------------------------------------------------------------------


def select_batch_element(value: BatchedTensor, index: int) -> Any:
    """Element ``index`` of the batch, as an ordinary tensor (no Batched key)."""
    # TODO 1: full = unwrap_batched(value); take full._data[index] as a new array (np.array(...) copies
    #         it and keeps a 0-dim element 0-dim; np.ascontiguousarray would make it 1-dim) and wrap it
    #         with type(full)._make(...) using the element's sizes full._sizes[1:], full's dtype and device.
    raise NotImplementedError(
        "ex07: implement select_batch_element in exercises/ex07_boxed_fallback.py: slice the wrapped "
        "tensor's data at `index` and wrap it with type(full)._make(...) (notebook 07)"
    )


def stack_results(results: list[Any]) -> BatchedTensor:
    """Stack per-element results along a new first dimension and wrap them as a BatchedTensor."""
    # TODO 2: np.stack the results' ._data, build one tensor of sizes (len(results), *results[0]._sizes)
    #         with type(results[0])._make(...), and return make_batched(that tensor).
    raise NotImplementedError(
        "ex07: implement stack_results in exercises/ex07_boxed_fallback.py: np.stack the data and "
        "wrap the result with make_batched (notebook 07)"
    )


def batched_for_loop_fallback(op: Any, ks: lab.DispatchKeySet, stack: list[Any]) -> None:
    """Boxed fallback for the Batched key: run ``op`` once per batch element and stack the results."""
    # TODO 3: pop the arguments: the last len(op.schema.arguments) entries of `stack`.
    # TODO 4: the batch size: batch_size(a) of the arguments that are batched (they must agree).
    # TODO 5: with lab.ExcludeDispatchKeyGuard(BATCHED_KEY_SET): for each index, build an
    #         element stack (batched arguments replaced by select_batch_element(a, index)),
    #         call op.call_boxed(element_stack) and keep the returns it leaves on the stack.
    # TODO 6: push one stack_results(...) per return of the schema onto `stack`.
    raise NotImplementedError(
        "ex07: implement batched_for_loop_fallback in exercises/ex07_boxed_fallback.py: pop the arguments, "
        "call op.call_boxed once per batch element below Batched, push the stacked results (notebook 07)"
    )
