"""Thread-local include/exclude key sets and the RAII guards that change them.

Stands for ``c10/core/impl/LocalDispatchKeySet.h``. Every thread starts with PyTorch's defaults:
include = {BackendSelect, ADInplaceOrView}, exclude = every Autocast key. A call's key set is

    ((tensor keys | TLS include) - TLS exclude) & fallthrough mask

Guards are context managers; they restore the previous sets on exit, also when the body raises, and
they only touch the current thread.
"""

from __future__ import annotations

import threading
from types import TracebackType

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import (
    FULL,
    FUNCTIONALITY_BITS,
    DispatchKeySet,
    autocast_dispatch_keyset,
    autograd_dispatch_keyset,
)

DEFAULT_INCLUDED = DispatchKeySet([DispatchKey.BackendSelect, DispatchKey.ADInplaceOrView])
DEFAULT_EXCLUDED = autocast_dispatch_keyset


class LocalDispatchKeySet(threading.local):
    """The per-thread state, kept in one three-item list ``sets = [included, keep, excluded]``.

    ``keep`` is ``~(excluded & functionality bits)``: "a - b" on key sets clears only functionality
    bits. Each thread gets its own list once and keeps it; guards change its items in place and put
    them back on exit. Reading a ``threading.local`` attribute is the slow part (tens of ns, where
    C++ reads a ``thread_local`` in one instruction), so the hot paths read ``tls.sets`` once per
    call and then work on the list.
    """

    sets: list[int]

    def __init__(self) -> None:
        excluded = int(DEFAULT_EXCLUDED)
        self.sets = [int(DEFAULT_INCLUDED), FULL & ~(excluded & FUNCTIONALITY_BITS), excluded]

    @property
    def included(self) -> int:
        return self.sets[0]

    @included.setter
    def included(self, raw: int) -> None:
        self.sets[0] = raw

    @property
    def excluded(self) -> int:
        return self.sets[2]

    def set_excluded(self, raw: int) -> None:
        sets = self.sets
        sets[1] = FULL & ~(raw & FUNCTIONALITY_BITS)
        sets[2] = raw

    def snapshot(self) -> tuple[int, ...]:
        """The three values, for a guard that puts them back later with ``restore``."""
        return tuple(self.sets)

    def restore(self, saved: tuple[int, ...]) -> None:
        self.sets[:] = saved


tls = LocalDispatchKeySet()


def tls_include_set() -> DispatchKeySet:
    """The current thread's local include set (``torch._C._dispatch_tls_local_include_set()``)."""
    return DispatchKeySet.from_raw(tls.included)


def tls_exclude_set() -> DispatchKeySet:
    """The current thread's local exclude set (``torch._C._dispatch_tls_local_exclude_set()``)."""
    return DispatchKeySet.from_raw(tls.excluded)


def _as_raw(keys: DispatchKeySet | DispatchKey | str) -> int:
    return int(keys if isinstance(keys, DispatchKeySet) else DispatchKeySet(keys))


class ExcludeDispatchKeyGuard:
    """``c10::impl::ExcludeDispatchKeyGuard``: add keys to the exclude set for the ``with`` block."""

    __slots__ = ("_keys", "_keep", "_saved")

    def __init__(self, keys: DispatchKeySet | DispatchKey | str) -> None:
        self._keys = _as_raw(keys)
        self._keep = ~(self._keys & FUNCTIONALITY_BITS)

    def __enter__(self) -> ExcludeDispatchKeyGuard:
        sets = tls.sets
        self._saved = (sets[1], sets[2])
        sets[1] &= self._keep
        sets[2] |= self._keys
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        sets = tls.sets
        sets[1], sets[2] = self._saved


class IncludeDispatchKeyGuard:
    """``c10::impl::IncludeDispatchKeyGuard``: add keys to the include set for the ``with`` block."""

    __slots__ = ("_keys", "_saved")

    def __init__(self, keys: DispatchKeySet | DispatchKey | str) -> None:
        self._keys = _as_raw(keys)

    def __enter__(self) -> IncludeDispatchKeyGuard:
        sets = tls.sets
        self._saved = sets[0]
        sets[0] |= self._keys
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        tls.sets[0] = self._saved


class ForceDispatchKeyGuard:
    """``c10::impl::ForceDispatchKeyGuard``: replace both sets wholesale for the ``with`` block."""

    __slots__ = ("_exclude", "_include", "_saved")

    def __init__(self, include: DispatchKeySet, exclude: DispatchKeySet) -> None:
        self._include, self._exclude = int(include), int(exclude)

    def __enter__(self) -> ForceDispatchKeyGuard:
        self._saved = tls.snapshot()
        tls.restore((self._include, FULL & ~(self._exclude & FUNCTIONALITY_BITS), self._exclude))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        tls.restore(self._saved)


_BELOW_AUTOGRAD = int(autograd_dispatch_keyset)
_BELOW_AD_INPLACE_OR_VIEW = _BELOW_AUTOGRAD | int(DispatchKeySet(DispatchKey.ADInplaceOrView))


class _FixedExcludeGuard(ExcludeDispatchKeyGuard):
    """An exclude guard whose keys are fixed by its class (no per-use set-up: it is on hot paths).
    The class attributes stand in for the instance's ``_keys`` / ``_keep``; no ``__init__`` runs."""

    __slots__ = ()
    _keys = 0
    _keep = -1

    def __init__(self) -> None:
        pass


class AutoDispatchBelowAutograd(_FixedExcludeGuard):
    """``at::AutoDispatchBelowAutograd``: exclude the autograd keys, so calls skip autograd kernels."""

    __slots__ = ()
    _keys = _BELOW_AUTOGRAD
    _keep = ~(_BELOW_AUTOGRAD & FUNCTIONALITY_BITS)


class AutoDispatchBelowADInplaceOrView(_FixedExcludeGuard):
    """``at::AutoDispatchBelowADInplaceOrView``: exclude autograd *and* ADInplaceOrView."""

    __slots__ = ()
    _keys = _BELOW_AD_INPLACE_OR_VIEW
    _keep = ~(_BELOW_AD_INPLACE_OR_VIEW & FUNCTIONALITY_BITS)


class AutoNonVariableTypeMode(AutoDispatchBelowAutograd):
    """The seed tutorials' older name for AutoDispatchBelowAutograd (``at::AutoNonVariableTypeMode``).

    PyTorch keeps it for old code and prints a one-time deprecation warning in C++ pointing to
    AutoDispatchBelowADInplaceOrView or InferenceMode; the lab keeps the name without the warning.
    """

    __slots__ = ()
