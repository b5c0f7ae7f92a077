"""Exercise 02 -- compute the dispatch key set of a call, the way the dispatcher does.

Notebook: 02 (keys and key sets), sections 3 (functionality bits x backend bits), 6 (thread-local
include and exclude sets) and 7 (the key set of a call).
Grade it: ``make grade EX=ex02`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex02``),
or ``lab.grade("ex02")`` in a notebook cell.

Before it can index an operator's dispatch table, PyTorch's dispatcher (``DispatchKeyExtractor.h`` and
``Dispatcher::call``) turns a call into one DispatchKeySet, from four things: the key sets of the
call's tensor arguments, the thread-local include set, the thread-local exclude set, and the
operator's fallthrough mask. Then the kernel of one key of that set runs.

The grader feeds your functions hundreds of seeded random calls (CPU, CUDA, XLA, Meta, sparse,
quantized and nested tensors, Python and Functionalize keys, autocast, guards, excluded per-backend
keys, operators with fallthrough kernels, calls with no tensors at all) and compares each answer with
what the lab's dispatcher computes for the same call.

Try it in a notebook cell::

    ex02 = lab.load_exercise("ex02")        # your exercises/ex02_keyset.py, freshly imported
    x = torch.tensor([1.0])
    ex02.compute_dispatch_key_set([lab.dispatch_keys(x)], lab.tls_include_set(), lab.tls_exclude_set(),
                                  lab.DispatchKeySet.full())
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
    """The DispatchKeySet the dispatcher computes for one call (notebook 02, section 7).

    ``tensor_key_sets`` holds one DispatchKeySet per tensor argument, possibly none at all.
    ``fallthrough_mask`` is the operator's mask: the keys whose kernel is a fallthrough are not in it.
    Return a ``DispatchKeySet``.
    """
    raise NotImplementedError(
        "ex02: write compute_dispatch_key_set in exercises/ex02_keyset.py (notebook 02, section 7)"
    )


def dispatch_key_for(
    tensor_key_sets: Iterable[DispatchKeySet],
    tls_include: DispatchKeySet,
    tls_exclude: DispatchKeySet,
    fallthrough_mask: DispatchKeySet,
) -> DispatchKey:
    """The runtime DispatchKey whose kernel runs for this call (notebook 02, sections 4 and 8).

    Same arguments as ``compute_dispatch_key_set``. Return one ``DispatchKey`` (a runtime key such as
    ``CUDA`` or ``AutogradCPU``).
    """
    raise NotImplementedError(
        "ex02: write dispatch_key_for in exercises/ex02_keyset.py (notebook 02, sections 4 and 8)"
    )
