"""Exercise 02 -- compute the dispatch key set of a call (reference solution).

Notebook 02 (keys and key sets) shows the one line at the heart of ``Dispatcher::call``::

    ks = ((tensor keys | TLS include) - TLS exclude) & fallthrough mask

and that the operator's table slot is chosen by the *highest-priority* key of that set.
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
    """The key set the dispatcher computes for one call (``DispatchKeyExtractor`` + ``Dispatcher::call``)."""
    ks = DispatchKeySet()  # the empty set
    for tensor_ks in tensor_key_sets:  # 1. union of every tensor argument's keys
        ks = ks | tensor_ks
    ks = ks | tls_include  # 2. thread-local keys that are always on (BackendSelect, ADInplaceOrView)
    ks = ks - tls_exclude  # 3. `-` clears functionality bits only: backend bits survive
    return ks & fallthrough_mask  # 4. keys whose kernel is a fallthrough are skipped


def dispatch_key_for(
    tensor_key_sets: Iterable[DispatchKeySet],
    tls_include: DispatchKeySet,
    tls_exclude: DispatchKeySet,
    fallthrough_mask: DispatchKeySet,
) -> DispatchKey:
    """The key whose kernel the call runs: the highest-priority key of the computed set."""
    ks = compute_dispatch_key_set(tensor_key_sets, tls_include, tls_exclude, fallthrough_mask)
    return ks.highest_priority_key()
