"""Exercise 02 -- compute the dispatch key set of a call, the way the dispatcher does.

Notebook: 02 (keys and key sets), the cells on the call's key set, TLS include/exclude and guards.
Grade it: ``python -m labsupport.grade ex02``, or ``lab.grade("ex02")`` in a notebook cell.

What PyTorch does (``DispatchKeyExtractor.h`` and ``Dispatcher::call``): before it can index an
operator's dispatch table, the dispatcher turns a call into one DispatchKeySet:

1. the union of the key sets of every tensor argument,
2. plus the thread-local *include* set (by default BackendSelect and ADInplaceOrView),
3. minus the thread-local *exclude* set (by default the Autocast keys; guards such as
   ``AutoDispatchBelowAutograd`` add the autograd keys to it),
4. restricted to the operator's *fallthrough mask*: keys whose kernel is a fallthrough are removed.

The kernel that runs is the one for the set's highest-priority key.

Watch out: a key set is *functionality bits x backend bits*. ``AutogradCPU`` is the Autograd
functionality bit plus the CPU backend bit. Removing ``AutogradCPU`` from a set must not remove the
CPU backend bit, or the CPU kernel could no longer be found. ``DispatchKeySet.__sub__`` (``-``) gets
this right: it clears functionality bits only. Plain integer arithmetic (``& ~``) does not.

The grader feeds your functions hundreds of seeded random calls (CPU, CUDA, XLA, Meta, sparse and
quantized tensors, Python and Functionalize keys, autocast keys, excluded per-backend keys,
fallthrough masks) and compares each answer with what the lab's real dispatcher computes.
"""

from __future__ import annotations

from collections.abc import Iterable

from labsupport import DispatchKey, DispatchKeySet


def compute_dispatch_key_set(
    tensor_key_sets: Iterable[DispatchKeySet],
    tls_include: DispatchKeySet,
    tls_exclude: DispatchKeySet,
    fallthrough_mask: DispatchKeySet,
) -> DispatchKeySet:
    """The key set the dispatcher computes for one call.

    ``tensor_key_sets`` holds one DispatchKeySet per tensor argument (possibly none at all).
    Return a ``DispatchKeySet``.
    """
    # TODO 1: start from the empty set, DispatchKeySet(), and OR in every tensor's key set.
    # TODO 2: add the TLS include set.
    # TODO 3: remove the TLS exclude set -- with `-`, which keeps backend bits (see the docstring).
    # TODO 4: keep only the keys in fallthrough_mask (`&`).
    raise NotImplementedError(
        "ex02: implement compute_dispatch_key_set in exercises/ex02_keyset.py: "
        "((union of tensor key sets | tls_include) - tls_exclude) & fallthrough_mask (notebook 02)"
    )


def dispatch_key_for(
    tensor_key_sets: Iterable[DispatchKeySet],
    tls_include: DispatchKeySet,
    tls_exclude: DispatchKeySet,
    fallthrough_mask: DispatchKeySet,
) -> DispatchKey:
    """The DispatchKey whose kernel runs for this call: the highest-priority key of the computed set.

    The highest functionality bit wins; for a per-backend functionality (Dense, AutogradFunctionality,
    Sparse, ...) the highest backend bit then picks the runtime key (Dense + CUDA -> CUDA).
    ``DispatchKeySet.highest_priority_key()`` does this for you; notebook 02 shows how.
    """
    # TODO: reuse compute_dispatch_key_set, then pick the highest-priority key.
    raise NotImplementedError(
        "ex02: implement dispatch_key_for in exercises/ex02_keyset.py: the highest-priority key of "
        "compute_dispatch_key_set(...) (notebook 02)"
    )
