"""DispatchKeySet: a 64-bit set of functionality bits crossed with backend-component bits.

Stands for ``c10/core/DispatchKeySet.h`` (the layout PyTorch has used since early 2022, 2.13's numbering):

* bits 0..15  -- backend components (CPU = bit 0 ... Meta = bit 15)
* bits 16..61 -- functionality keys 1..46 (Dense = bit 16 ... PythonDispatcher = bit 61)

A runtime per-backend key such as ``AutogradCUDA`` sets two bits (AutogradFunctionality and CUDA), so
a set is a *cross product*: ``{CPU} | {AutogradCUDA}`` also contains ``CUDA`` and ``AutogradCPU``.

The class is an ``int`` subclass: its integer value *is* the raw 64-bit representation
(``raw_repr()`` in C++). The dispatcher's hot path works on plain ints and wraps them only when a
kernel or a learner wants to look at the set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from labsupport.c10.dispatch_key import (
    BACKENDS,
    FUNCTIONALITIES,
    NUM_BACKENDS,
    PER_BACKEND_PREFIX,
    RUNTIME_KEYS,
    RUNTIME_SPLIT,
    BackendComponent,
    DispatchKey,
    parse_dispatch_key,
    to_functionality_key,
)

BACKEND_BITS = (1 << NUM_BACKENDS) - 1  # 0xffff
FULL = (1 << (NUM_BACKENDS + len(FUNCTIONALITIES))) - 1  # 2**62 - 1
FUNCTIONALITY_BITS = FULL & ~BACKEND_BITS


def functionality_bit(key: DispatchKey) -> int:
    """The bit of a functionality key (Dense -> 1 << 16); 0 for Undefined."""
    return 0 if key.value == 0 else 1 << (NUM_BACKENDS + key.value - 1)


def backend_bit(index: int) -> int:
    """The bit of backend number ``index`` (0 = CPU ... 15 = Meta)."""
    return 1 << index


_PER_BACKEND_VALUES = frozenset(DispatchKey[name].value for name in PER_BACKEND_PREFIX)


def _raw_of_key(key: DispatchKey) -> int:
    """Raw bits of one key. Alias keys expand to their runtime keys (see ``runtime_key_set``)."""
    if key.value == 0:
        return 0
    if key.is_alias:
        return runtime_key_set(key)
    pair = RUNTIME_SPLIT.get(key)
    if pair is not None:
        functionality, backend = pair
        return functionality_bit(functionality) | (0 if backend is None else backend_bit(backend))
    if key.name in PER_BACKEND_PREFIX:  # a bare building block such as AutogradFunctionality
        return functionality_bit(key)
    if key.name.startswith("StartOf") or key.name.startswith("EndOf"):
        return 0
    raise ValueError(f"{key!r} cannot be put in a DispatchKeySet")


class DispatchKeySet(int):
    """``c10::DispatchKeySet``. Build from keys: ``DispatchKeySet([DispatchKey.CPU, DispatchKey.AutogradCPU])``.

    Supports ``|``, ``&``, ``-`` (which, as in C++, removes functionality bits only and keeps
    backend bits), ``has``, ``highest_priority_key()`` and iteration from lowest to highest priority.
    """

    __slots__ = ()

    def __new__(cls, keys: DispatchKey | str | Iterable[DispatchKey | str] = ()) -> DispatchKeySet:
        if isinstance(keys, DispatchKeySet):
            return int.__new__(cls, int(keys))
        if isinstance(keys, (DispatchKey, str)):
            keys = (keys,)
        elif isinstance(keys, int):
            raise TypeError(
                "DispatchKeySet(int) is ambiguous; use DispatchKeySet.from_raw(bits) for a raw 64-bit value"
            )
        raw = 0
        for key in keys:
            raw |= _raw_of_key(parse_dispatch_key(key))
        return int.__new__(cls, raw)

    @classmethod
    def from_raw(cls, raw: int) -> DispatchKeySet:
        """Wrap a raw 64-bit value (what ``raw_repr()`` returns)."""
        return int.__new__(cls, raw)

    @classmethod
    def full(cls) -> DispatchKeySet:
        """``DispatchKeySet(FULL)``: every functionality and backend bit."""
        return int.__new__(cls, FULL)

    @classmethod
    def full_after(cls, key: DispatchKey | str) -> DispatchKeySet:
        """``DispatchKeySet(FULL_AFTER, k)``: backends, functionalities strictly below k, and PythonDispatcher."""
        functionality = to_functionality_key(parse_dispatch_key(key))
        below = (1 << (NUM_BACKENDS + functionality.value - 1)) - 1  # every bit under k's own bit
        return int.__new__(cls, below | BACKEND_BITS | functionality_bit(DispatchKey.PythonDispatcher))

    def raw_repr(self) -> int:
        """The raw 64-bit representation."""
        return int(self)

    # ---- set algebra ----
    def __or__(self, other: object) -> DispatchKeySet:
        return int.__new__(DispatchKeySet, int(self) | _as_raw(other))

    __ror__ = __or__

    def __and__(self, other: object) -> DispatchKeySet:
        return int.__new__(DispatchKeySet, int(self) & _as_raw(other))

    __rand__ = __and__

    def __sub__(self, other: object) -> DispatchKeySet:
        """Remove the *functionality* bits of ``other``; backend bits always survive (as in C++)."""
        return int.__new__(DispatchKeySet, int(self) & ~(_as_raw(other) & FUNCTIONALITY_BITS))

    def __invert__(self) -> DispatchKeySet:
        return int.__new__(DispatchKeySet, ~int(self) & FULL)

    def add(self, key: DispatchKey | str) -> DispatchKeySet:
        """A copy with ``key`` added."""
        return self | DispatchKeySet(key)

    def remove(self, key: DispatchKey | str) -> DispatchKeySet:
        """A copy without ``key``'s functionality bit (``DispatchKeySet::remove``)."""
        return self - DispatchKeySet(key)

    def remove_backend(self, backend: BackendComponent) -> DispatchKeySet:
        """A copy without one backend bit (``remove_backend``)."""
        return int.__new__(DispatchKeySet, int(self) & ~backend_bit(int(backend) - 1))

    def has(self, key: DispatchKey | str) -> bool:
        """True when every bit of ``key`` is present."""
        raw = _raw_of_key(parse_dispatch_key(key))
        return raw != 0 and int(self) & raw == raw

    def has_all(self, other: DispatchKeySet) -> bool:
        return int(self) & int(other) == int(other)

    def has_any(self, other: DispatchKeySet) -> bool:
        return int(self) & int(other) != 0

    def empty(self) -> bool:
        return int(self) == 0

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (DispatchKey, str)) and self.has(key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DispatchKeySet):
            return int(self) == int(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        if isinstance(other, DispatchKeySet):
            return int(self) != int(other)
        return NotImplemented

    __hash__ = int.__hash__

    # ---- priority ----
    def highest_priority_key(self) -> DispatchKey:
        """``highestPriorityTypeId()``: the runtime key whose kernel a call with this set runs."""
        return highest_priority_key(int(self))

    def highest_functionality_key(self) -> DispatchKey:
        functionality = (int(self) >> NUM_BACKENDS).bit_length()
        return _FUNCTIONALITY_BY_VALUE[functionality]

    def highest_backend(self) -> BackendComponent:
        return BackendComponent((int(self) & BACKEND_BITS).bit_length())

    # ---- iteration and printing ----
    def __iter__(self) -> Iterator[DispatchKey]:
        """Runtime keys from lowest to highest priority (backends ascending within a building block)."""
        return iter(keys_of(int(self)))

    def __len__(self) -> int:
        return len(keys_of(int(self)))

    def __bool__(self) -> bool:
        return int(self) != 0

    def __repr__(self) -> str:
        return "DispatchKeySet(" + ", ".join(key.name for key in keys_of(int(self))) + ")"

    __str__ = __repr__

    def compact(self) -> str:
        """A short form for reading, not PyTorch's: the Autocast keys folded into one item.

        ``repr(ks)`` is exactly what PyTorch prints; ``ks.compact()`` writes the same keys in the same
        order but folds two or more Autocast keys into ``Autocast{...}``: ``Autocast{all 10}``,
        ``Autocast{all but CPU}`` (the exclude set inside ``torch.autocast("cpu")``) or a list such as
        ``Autocast{CPU,CUDA}``. A single Autocast key is left as it is. (``Autocast`` alone is also
        C++'s old name for ``AutocastCUDA``; in ``Autocast{...}`` it only names the family.)
        """
        return compact_repr(int(self))

    def _repr_html_(self) -> str | None:
        # The HTML view lives in labsupport/tools and registers itself (register_html_view): c10
        # imports nothing above it. Without a view, Jupyter shows the repr.
        return _HTML_VIEW[0](self) if _HTML_VIEW else None


_HTML_VIEW: list[Callable[[DispatchKeySet], str]] = []


def register_html_view(view: Callable[[DispatchKeySet], str]) -> None:
    """Let a layer above c10 (the lab's tools) render key sets as HTML in notebooks."""
    _HTML_VIEW[:] = [view]


def _as_raw(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if isinstance(value, DispatchKeySet) or type(value) is int:
            return int(value)
    if isinstance(value, (DispatchKey, str)):
        return _raw_of_key(parse_dispatch_key(value))
    raise TypeError(f"expected a DispatchKeySet or DispatchKey, got {type(value).__name__}")


_FUNCTIONALITY_BY_VALUE: dict[int, DispatchKey] = {0: DispatchKey.Undefined}
for _value, _name in enumerate(FUNCTIONALITIES, start=1):
    _FUNCTIONALITY_BY_VALUE[_value] = DispatchKey[_name]

# For each functionality value: the runtime keys it yields per backend index (per-backend) or itself.
_RUNTIME_BY_FUNCTIONALITY: dict[int, tuple[DispatchKey, ...]] = {}
for _value, _name in enumerate(FUNCTIONALITIES, start=1):
    if _name in PER_BACKEND_PREFIX:
        _prefix = PER_BACKEND_PREFIX[_name]
        _RUNTIME_BY_FUNCTIONALITY[_value] = tuple(DispatchKey[_prefix + b] for b in BACKENDS)
    else:
        _RUNTIME_BY_FUNCTIONALITY[_value] = (DispatchKey[_name],)

_KEYS_CACHE: dict[int, tuple[DispatchKey, ...]] = {}


def keys_of(raw: int) -> tuple[DispatchKey, ...]:
    """The runtime keys of a raw set, lowest priority first (``DispatchKeySet::iterator``)."""
    cached = _KEYS_CACHE.get(raw)
    if cached is not None:
        return cached
    keys: list[DispatchKey] = []
    backends = raw & BACKEND_BITS
    for value in range(1, len(FUNCTIONALITIES) + 1):
        if raw >> (NUM_BACKENDS + value - 1) & 1:
            runtime = _RUNTIME_BY_FUNCTIONALITY[value]
            if value in _PER_BACKEND_VALUES:
                keys.extend(runtime[i] for i in range(NUM_BACKENDS) if backends >> i & 1)
            else:
                keys.append(runtime[0])
    result = tuple(keys)
    if len(_KEYS_CACHE) < 4096:
        _KEYS_CACHE[raw] = result
    return result


AUTOCAST_KEYS: tuple[DispatchKey, ...] = tuple(
    DispatchKey[name] for name in FUNCTIONALITIES if name.startswith("Autocast")
)  # the ten Autocast<Backend> functionality keys, lowest priority first


def compact_repr(raw: int) -> str:
    """``DispatchKeySet.compact()`` on a raw set: PyTorch's printed form with the Autocast keys folded."""
    keys = keys_of(raw)
    autocast = [key for key in keys if key in AUTOCAST_KEYS]
    if len(autocast) < 2:
        return "DispatchKeySet(" + ", ".join(key.name for key in keys) + ")"
    present = [key.name.removeprefix("Autocast") for key in autocast]
    if len(autocast) == len(AUTOCAST_KEYS):
        folded = f"Autocast{{all {len(AUTOCAST_KEYS)}}}"
    elif 2 * len(autocast) > len(AUTOCAST_KEYS):
        missing = [key.name.removeprefix("Autocast") for key in AUTOCAST_KEYS if key not in autocast]
        folded = "Autocast{all but " + ",".join(missing) + "}"
    else:
        folded = "Autocast{" + ",".join(present) + "}"
    names: list[str] = []
    for key in keys:
        if key in AUTOCAST_KEYS:
            if key is autocast[0]:
                names.append(folded)  # the Autocast bits are contiguous, so the family keeps its place
        else:
            names.append(key.name)
    return "DispatchKeySet(" + ", ".join(names) + ")"


_START_OF: dict[int, DispatchKey] = {
    DispatchKey[name].value: DispatchKey[f"StartOf{name}Backends"] for name in PER_BACKEND_PREFIX
}


def highest_priority_key(raw: int) -> DispatchKey:
    """``highestPriorityTypeId`` on a raw set (see DispatchKeySet.highest_priority_key)."""
    functionality = (raw >> NUM_BACKENDS).bit_length()
    if functionality == 0:
        return DispatchKey.Undefined
    if functionality in _PER_BACKEND_VALUES:
        backend = (raw & BACKEND_BITS).bit_length()
        if backend == 0:
            return _START_OF[functionality]
        return _RUNTIME_BY_FUNCTIONALITY[functionality][backend - 1]
    return _RUNTIME_BY_FUNCTIONALITY[functionality][0]


# ---- dispatch-table slots (DispatchKeySet::getDispatchTableIndexForDispatchKeySet) ----

def _slot_layout() -> tuple[list[int], list[DispatchKey]]:
    offsets = [0] * (len(FUNCTIONALITIES) + 1)
    slot_keys: list[DispatchKey] = [DispatchKey.Undefined]
    for value in range(1, len(FUNCTIONALITIES) + 1):
        offsets[value] = len(slot_keys)
        slot_keys.extend(_RUNTIME_BY_FUNCTIONALITY[value])
    return offsets, slot_keys


SLOT_OFFSETS, SLOT_KEYS = _slot_layout()
NUM_RUNTIME_ENTRIES = len(SLOT_KEYS)  # 137, as num_runtime_entries in C++
SLOT_OF_KEY: dict[DispatchKey, int] = {key: i for i, key in enumerate(SLOT_KEYS)}
_IS_PER_BACKEND = [value in _PER_BACKEND_VALUES for value in range(len(FUNCTIONALITIES) + 1)]


def slot_index(raw: int) -> int:
    """The table slot a raw set indexes: the offset of its highest functionality (+ backend index)."""
    functionality = (raw >> NUM_BACKENDS).bit_length()
    if _IS_PER_BACKEND[functionality]:
        backend = (raw & BACKEND_BITS).bit_length()
        # No backend bit: offset + 0 (the CPU slot), a quirk of the C++ arithmetic.
        return SLOT_OFFSETS[functionality] + (backend - 1 if backend else 0)
    return SLOT_OFFSETS[functionality]


# ---- alias keys (c10/core/DispatchKeySet.cpp) ----

def _keyset(*names: str) -> int:
    return int(DispatchKeySet(names))


def _all_backends_of(functionality: str) -> int:
    return functionality_bit(DispatchKey[functionality]) | BACKEND_BITS


AUTOGRAD_OTHER_BACKENDS = (
    _keyset("FPGA", "Vulkan", "Metal", "CustomRNGKeyId", "MkldnnCPU")
    | _all_backends_of("Quantized")
    | _all_backends_of("Sparse")
    | _all_backends_of("SparseCsr")
)
AUTOGRAD_KEYS = (
    _keyset("AutogradOther", "AutogradNestedTensor") | _all_backends_of("AutogradFunctionality")
)
BACKEND_DISPATCH_KEYSET = AUTOGRAD_OTHER_BACKENDS | _all_backends_of("Dense")
NON_FUNCTIONAL_BACKEND_KEYSET = (
    BACKEND_DISPATCH_KEYSET
    & ~functionality_bit(DispatchKey.Sparse)
    & ~backend_bit(BackendComponent.XLABit - 1)
    & ~backend_bit(BackendComponent.LazyBit - 1)
)
NESTED_KEYSET = _keyset("AutogradNestedTensor") | _all_backends_of("NestedTensor")
MATH_KEYSET = BACKEND_DISPATCH_KEYSET | AUTOGRAD_KEYS | _all_backends_of("NestedTensor")

_ALIAS_RUNTIME_SETS: dict[str, int] = {
    "Autograd": AUTOGRAD_KEYS,
    "CompositeImplicitAutograd": MATH_KEYSET,
    "CompositeImplicitAutogradNestedTensor": NESTED_KEYSET,
    "CompositeExplicitAutograd": BACKEND_DISPATCH_KEYSET,
    "CompositeExplicitAutogradNonFunctional": NON_FUNCTIONAL_BACKEND_KEYSET,
    "FuncTorchBatchedDecomposition": 0,  # filled below (needs functionality_bit)
}
_ALIAS_RUNTIME_SETS["FuncTorchBatchedDecomposition"] = functionality_bit(DispatchKey.FuncTorchBatched)


def runtime_key_set(alias: DispatchKey) -> int:
    """``getRuntimeDispatchKeySet(alias)`` as a raw set (a runtime key maps to itself)."""
    if alias.is_alias:
        return _ALIAS_RUNTIME_SETS[alias.name]
    return _raw_of_key(alias)


def runtime_keys_of_alias(alias: DispatchKey) -> tuple[DispatchKey, ...]:
    """The runtime keys an alias stands for, in priority order (``isIncludedInAlias`` over all keys)."""
    raw = runtime_key_set(alias)
    return tuple(k for k in keys_of(raw) if is_included_in_alias(k, alias))


def is_included_in_alias(key: DispatchKey, alias: DispatchKey) -> bool:
    """``isIncludedInAlias(k, alias)``: is runtime key ``k`` one of the keys ``alias`` stands for?"""
    if key.value == 0 or key not in RUNTIME_KEYS:
        return False
    raw = _raw_of_key(key)
    return runtime_key_set(alias) & raw == raw


def backend_key_set_from_autograd(key: DispatchKey) -> int:
    """``getBackendKeySetFromAutograd``: which backend keys an autograd key serves (raw set)."""
    if key is DispatchKey.AutogradOther:
        return AUTOGRAD_OTHER_BACKENDS
    if key is DispatchKey.AutogradNestedTensor:
        return _all_backends_of("NestedTensor")
    pair = RUNTIME_SPLIT.get(key)
    if pair is None or pair[0] is not DispatchKey.AutogradFunctionality or pair[1] is None:
        return 0
    backend = BACKENDS[pair[1]]
    if backend in ("HIP", "VE", "MTIA"):  # these three have no mapping in 2.13
        return 0
    return int(DispatchKeySet(backend))


# ---- named sets used by kernels and guards (c10/core/DispatchKeySet.h) ----
autograd_dispatch_keyset = DispatchKeySet.from_raw(
    _keyset("AutogradOther", "AutogradNestedTensor") | functionality_bit(DispatchKey.AutogradFunctionality)
)
after_autograd_keyset = DispatchKeySet.full_after(DispatchKey.AutogradOther)
after_ADInplaceOrView_keyset = DispatchKeySet.full_after(DispatchKey.ADInplaceOrView)
after_func_keyset = DispatchKeySet.full_after(DispatchKey.Functionalize).remove(DispatchKey.ADInplaceOrView)
autocast_dispatch_keyset = DispatchKeySet(
    [
        "AutocastCPU", "AutocastMTIA", "AutocastMAIA", "AutocastXPU", "AutocastIPU",
        "AutocastHPU", "AutocastXLA", "AutocastMPS", "AutocastCUDA", "AutocastPrivateUse1",
    ]
)  # fmt: skip
autogradother_backends = DispatchKeySet.from_raw(AUTOGRAD_OTHER_BACKENDS)

__all__ = [
    "DispatchKeySet",
    "after_ADInplaceOrView_keyset",
    "after_autograd_keyset",
    "after_func_keyset",
    "autocast_dispatch_keyset",
    "autograd_dispatch_keyset",
    "autogradother_backends",
    "highest_priority_key",
    "is_included_in_alias",
    "keys_of",
    "runtime_key_set",
    "slot_index",
]
assert NUM_RUNTIME_ENTRIES == 137 and len(RUNTIME_KEYS) == 136
