"""Exercise 07 -- a boxed fallback that batches *every* operator with a for loop.

Notebook: 07 (boxing, fallbacks, BackendSelect), sections 1 (unboxed and boxed kernels), 3 (a boxed
fallback for every operator) and 4 (the batched for-loop fallback); notebook 02, section 6 for the
thread-local exclude set.
Grade it: ``make grade EX=ex07`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex07``),
or ``lab.grade("ex07")`` in a notebook cell.

What PyTorch does (seed 001, "boxing + batched fallback"): a *boxed* kernel has one signature for
every operator, ``fn(op, ks, stack)``, so it can be registered once as the *fallback* of a whole
dispatch key. PyTorch's ``batchedTensorForLoopFallback`` (aten/src/ATen/LegacyBatchedFallback.cpp)
makes vmap work for operators that have no batching rule: it runs the operator once per batch element
and stacks the results. The grader registers your fallback for the Batched key of a fresh dispatcher
(``lab.Library("_", "IMPL").fallback(batched_for_loop_fallback, "Batched", with_keyset=True)``), then
calls random operators (binary with and without alpha, with batched and plain arguments, unary,
reductions with and without a dim) on random batches, traces the dispatches they make, and makes boxed
calls whose stack holds more than the operator's arguments.

What the lab gives you (names you could not guess):

* ``BatchedTensor``, ``make_batched``, ``is_batched``, ``unwrap_batched`` and ``batch_size`` below;
* a tensor's numpy data is ``t._data`` (None for a BatchedTensor: it has no data of its own), its
  sizes ``t._sizes``, dtype ``t._dtype``, device ``t._device``; ``type(t)._make(array, sizes, dtype,
  device)`` makes a tensor of the same class around a numpy array;
* ``op.schema.arguments`` and ``op.schema.returns`` list the operator's arguments and returns;
  ``op.call_boxed(stack)`` calls it through the dispatcher on a stack;
* the guards of notebook 02 are on ``lab`` (``import labsupport as lab``).

Try it in a notebook cell::

    ex07 = lab.load_exercise("ex07")          # your exercises/ex07_boxed_fallback.py, freshly imported
    from labsupport.grade.ex07_boxed_fallback.observe import fresh_build_with_fallback
    build, library = fresh_build_with_fallback(ex07.batched_for_loop_fallback, "try-ex07")
    x = ex07.make_batched(torch.randn([3, 2]))
    build.functions.sin(x)
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
    """Element ``index`` of the batch, as an ordinary tensor of the wrapped tensor's class (no Batched
    key), with its own copy of the data; a batch of scalars gives 0-dim elements (notebook 07, §4)."""
    raise NotImplementedError(
        "ex07: write select_batch_element in exercises/ex07_boxed_fallback.py (notebook 07, section 4)"
    )


def stack_results(results: list[Any]) -> BatchedTensor:
    """The per-element results, stacked along a new first dimension, as one BatchedTensor (notebook 07, §4)."""
    raise NotImplementedError("ex07: write stack_results in exercises/ex07_boxed_fallback.py (notebook 07, section 4)")


def batched_for_loop_fallback(op: Any, ks: lab.DispatchKeySet, stack: list[Any]) -> None:
    """The boxed fallback of the Batched key, for any operator ``op``: the operator run once per batch
    element, below the Batched key, with its results stacked -- and the stack left as a boxed call must
    leave it (notebook 07, sections 1, 3 and 4)."""
    raise NotImplementedError(
        "ex07: write batched_for_loop_fallback in exercises/ex07_boxed_fallback.py (notebook 07, sections 1, 3, 4)"
    )
