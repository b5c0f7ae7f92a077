"""Exercise 07 -- a boxed fallback that batches *every* operator with a for loop (reference solution).

Mirrors PyTorch's ``batchedTensorForLoopFallback`` (aten/src/ATen/LegacyBatchedFallback.cpp): one
boxed kernel, registered for the Batched key of every operator, that unbatches its arguments, runs
the operator once per batch element below the Batched key, and stacks the results.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


# ---- the fallback ---------------------------------------------------------------------------------


def select_batch_element(value: BatchedTensor, index: int) -> Any:
    """Element ``index`` of the batch, as an ordinary tensor (no Batched key)."""
    full = value._batched_value
    data = None if full._data is None else np.array(full._data[index])  # a copy; 0-dim stays 0-dim
    return type(full)._make(data, full._sizes[1:], full._dtype, full._device)


def stack_results(results: list[Any]) -> BatchedTensor:
    """Stack per-element results along a new first dimension and wrap them as a BatchedTensor."""
    first = results[0]
    data = None if first._data is None else np.stack([r._data for r in results])
    full = type(first)._make(data, (len(results), *first._sizes), first._dtype, first._device)
    return make_batched(full)


def batched_for_loop_fallback(op: Any, ks: lab.DispatchKeySet, stack: list[Any]) -> None:
    """Boxed fallback for the Batched key: run ``op`` once per batch element and stack the results."""
    num_arguments = len(op.schema.arguments)
    num_returns = len(op.schema.returns)
    arguments = stack[len(stack) - num_arguments :]
    del stack[len(stack) - num_arguments :]  # a boxed kernel pops its arguments...

    sizes = {batch_size(a) for a in arguments if is_batched(a)}
    if len(sizes) != 1:
        raise RuntimeError(f"{op.full_name}: batched arguments must share one batch size, got {sorted(sizes)}")
    (size,) = sizes

    per_element: list[list[Any]] = []
    with lab.ExcludeDispatchKeyGuard(BATCHED_KEY_SET):  # run below Batched
        for index in range(size):
            element_stack = [select_batch_element(a, index) if is_batched(a) else a for a in arguments]
            op.call_boxed(element_stack)  # leaves the returns on element_stack
            per_element.append(element_stack[len(element_stack) - num_returns :])

    for i in range(num_returns):  # ...and pushes its results
        stack.append(stack_results([returns[i] for returns in per_element]))
