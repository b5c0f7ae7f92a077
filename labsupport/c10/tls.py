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
    """The per-thread state. ``keep`` caches ``~(excluded & functionality bits)`` for the hot path."""

    # ``sets`` is (included, keep), read in one step by the dispatcher's hot path, where ``keep`` is
    # ``~(excluded & functionality bits)``: "a - b" on key sets clears only functionality bits.
    sets: tuple[int, int]
    excluded: int

    def __init__(self) -> None:
        self.excluded = int(DEFAULT_EXCLUDED)
        self.sets = (int(DEFAULT_INCLUDED), FULL & ~(self.excluded & FUNCTIONALITY_BITS))

    @property
    def included(self) -> int:
        return self.sets[0]

    @included.setter
    def included(self, raw: int) -> None:
        self.sets = (raw, self.sets[1])

    def set_excluded(self, raw: int) -> None:
        self.excluded = raw
        self.sets = (self.sets[0], FULL & ~(raw & FUNCTIONALITY_BITS))


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

    __slots__ = ("_keys", "_saved")

    def __init__(self, keys: DispatchKeySet | DispatchKey | str) -> None:
        self._keys = _as_raw(keys)

    def __enter__(self) -> ExcludeDispatchKeyGuard:
        self._saved = tls.excluded
        tls.set_excluded(self._saved | self._keys)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        tls.set_excluded(self._saved)


class IncludeDispatchKeyGuard:
    """``c10::impl::IncludeDispatchKeyGuard``: add keys to the include set for the ``with`` block."""

    __slots__ = ("_keys", "_saved")

    def __init__(self, keys: DispatchKeySet | DispatchKey | str) -> None:
        self._keys = _as_raw(keys)

    def __enter__(self) -> IncludeDispatchKeyGuard:
        self._saved = tls.included
        tls.included = self._saved | self._keys
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        tls.included = self._saved


class ForceDispatchKeyGuard:
    """``c10::impl::ForceDispatchKeyGuard``: replace both sets wholesale for the ``with`` block."""

    __slots__ = ("_exclude", "_include", "_saved")

    def __init__(self, include: DispatchKeySet, exclude: DispatchKeySet) -> None:
        self._include, self._exclude = int(include), int(exclude)

    def __enter__(self) -> ForceDispatchKeyGuard:
        self._saved = (tls.included, tls.excluded)
        tls.included = self._include
        tls.set_excluded(self._exclude)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        tls.included = self._saved[0]
        tls.set_excluded(self._saved[1])


_BELOW_AUTOGRAD = int(autograd_dispatch_keyset)
_BELOW_AD_INPLACE_OR_VIEW = _BELOW_AUTOGRAD | int(DispatchKeySet(DispatchKey.ADInplaceOrView))


class AutoDispatchBelowAutograd(ExcludeDispatchKeyGuard):
    """``at::AutoDispatchBelowAutograd``: exclude the autograd keys, so calls skip autograd kernels."""

    __slots__ = ()

    def __init__(self) -> None:
        self._keys = _BELOW_AUTOGRAD


class AutoDispatchBelowADInplaceOrView(ExcludeDispatchKeyGuard):
    """``at::AutoDispatchBelowADInplaceOrView``: exclude autograd *and* ADInplaceOrView."""

    __slots__ = ()

    def __init__(self) -> None:
        self._keys = _BELOW_AD_INPLACE_OR_VIEW


class AutoNonVariableTypeMode(AutoDispatchBelowAutograd):
    """The seed tutorials' older name for AutoDispatchBelowAutograd (``at::AutoNonVariableTypeMode``).

    PyTorch keeps it for old code and prints a one-time deprecation warning in C++ pointing to
    AutoDispatchBelowADInplaceOrView or InferenceMode; the lab keeps the name without the warning.
    """

    __slots__ = ()
