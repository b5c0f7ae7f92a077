"""One operator's registrations and its precomputed dispatch table.

Stands for ``aten/src/ATen/core/dispatch/OperatorEntry.cpp``. Every registration change rebuilds the
whole table (137 slots: Undefined plus one per runtime key) with PyTorch's precedence:

1. a kernel registered directly to the slot's key                       ``[kernel]``
2. CompositeExplicitAutogradNonFunctional, then CompositeExplicitAutograd ``[default backend kernel]``
3. CompositeImplicitAutogradNestedTensor                                  ``[nested kernel]``
4. CompositeImplicitAutograd (unless a backend kernel exists; AutogradOther
   may become ambiguous)                                                  ``[math kernel]``
5. the Autograd alias                                                     ``[autograd kernel]``
6. FuncTorchBatchedDecomposition                                          ``[batched kernel]``
7. the dispatcher-wide backend fallback for the slot                      ``[backend fallback]``
8. nothing: calling raises "Could not run ..."                            (missing, never printed)

PyTorch 2.13 updates tables incrementally and can leave stale entries for a few registration
orders; the lab always rebuilds, which gives the canonical table that ``_dispatch_dump_table`` shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from labsupport.c10.dispatch_key import RUNTIME_SPLIT, DispatchKey
from labsupport.c10.dispatch_key_set import (
    AUTOGRAD_OTHER_BACKENDS,
    FULL,
    NUM_RUNTIME_ENTRIES,
    SLOT_KEYS,
    DispatchKeySet,
    backend_key_set_from_autograd,
    functionality_bit,
    is_included_in_alias,
    keys_of,
    slot_index,
)
from labsupport.c10.kernel_function import KernelFunction, make_boxed_adapter

if TYPE_CHECKING:
    from labsupport.c10.dispatcher import Dispatcher
    from labsupport.c10.schema import FunctionSchema

K = DispatchKey
CEANF, CEA = K.CompositeExplicitAutogradNonFunctional, K.CompositeExplicitAutograd
CIA, CIANT = K.CompositeImplicitAutograd, K.CompositeImplicitAutogradNestedTensor
AUTOGRAD, FTBD = K.Autograd, K.FuncTorchBatchedDecomposition


class DumpStyle:
    """How dumps name a plain Python kernel (one ``Library.impl`` made from a callable).

    ``pytorch = False`` (the lab's default): by the function's name and the signature the lab calls it
    with, ``CPU: myadd_cpu :: (Tensor _0, Tensor _1) -> Tensor _0 [ boxed unboxed ]``; notebooks and
    tools show which function runs. ``pytorch = True``: as PyTorch prints a ``torch.library`` kernel,
    ``CPU: registered at <file>:<line> :: (none) [ boxed ]``. Kernels that name themselves (C++-style
    ``KernelFunction`` with a ``debug``, fallbacks) print the same either way.
    """

    __slots__ = ("pytorch",)

    def __init__(self) -> None:
        self.pytorch = False


dump_style = DumpStyle()


class Registration:
    """One kernel registered for one key, with where it came from (``AnnotatedKernel``)."""

    __slots__ = ("debug", "kernel", "owner", "site")

    def __init__(self, kernel: KernelFunction, debug: str, owner: object = None, site: str = "") -> None:
        self.kernel = kernel
        self.debug = debug  # what dumps print: the kernel's name, or "registered at file:line"
        self.owner = owner
        self.site = site or debug  # "registered at file:line" of the Library that made it

    @property
    def shown(self) -> str:
        """The name dumps print for this kernel (see DumpStyle)."""
        return self.site if self.kernel.python and dump_style.pytorch else self.debug


class TableEntry:
    """A dispatch-table slot: what to call and how (mode 0: fn(*args); 1: fn(keyset, *args);
    2: fn(raw_keyset, *args), used by boxing adapters and error reporters)."""

    __slots__ = ("fn", "key", "label", "mode", "registration")

    def __init__(
        self, fn: Callable[..., Any], mode: int, registration: Registration | None, label: str, key: DispatchKey
    ) -> None:
        self.fn = fn
        self.mode = mode
        self.registration = registration
        self.label = label
        self.key = key

    @property
    def is_fallthrough(self) -> bool:
        return self.registration is not None and self.registration.kernel.is_fallthrough

    @property
    def is_valid(self) -> bool:
        return self.label != "missing"

    @property
    def kernel_name(self) -> str:
        if self.label == "ambiguous autogradother":
            return "ambiguous_autogradother"
        return self.registration.shown if self.registration else "(missing)"

    def __repr__(self) -> str:
        return f"<{self.key.name}: {self.kernel_name} [{self.label}]>"


# Precomputed alias membership per slot key (the table builder asks these for every slot).
_IN: dict[DispatchKey, frozenset[DispatchKey]] = {
    alias: frozenset(k for k in SLOT_KEYS if is_included_in_alias(k, alias))
    for alias in (CEANF, CEA, CIA, CIANT, AUTOGRAD, FTBD)
}
_SLOT_OF = {key: i for i, key in enumerate(SLOT_KEYS)}
# Per slot: is the key in CEANF, CEA, CIANT, CIA, Autograd, and which backends its autograd key serves.
# (Undefined takes CEANF/CEA/CIA kernels but never nested or autograd ones.)
_SLOT_FLAGS = [
    (
        k is K.Undefined or k in _IN[CEANF],
        k is K.Undefined or k in _IN[CEA],
        k is not K.Undefined and k in _IN[CIANT],
        k is K.Undefined or k in _IN[CIA],
        k in _IN[AUTOGRAD],
        backend_key_set_from_autograd(k),
    )
    for k in SLOT_KEYS
]
_AUTOGRAD_OTHER_SLOT = _SLOT_OF[K.AutogradOther]
_FUNCTORCH_BATCHED_SLOT = _SLOT_OF[K.FuncTorchBatched]


_RAW: dict[DispatchKey, int] = {k: int(DispatchKeySet(k)) for k in SLOT_KEYS if k is not K.Undefined}


class OperatorEntry:
    """An operator known to a dispatcher: schema, registrations, table and fallthrough masks.

    Also the operator *handle* (``c10::OperatorHandle``): ``op(*args)`` calls it through the dispatcher.
    """

    def __init__(self, dispatcher: Dispatcher, name: str, overload_name: str) -> None:
        self.dispatcher = dispatcher
        self.name = name  # "aten::add"
        self.overload_name = overload_name  # "Tensor" ("" when none)
        self.schema: FunctionSchema | None = None
        self.schema_debug = ""
        self.schema_owner: object = None
        self.alias_analysis = "FROM_SCHEMA"  # c10::AliasAnalysisKind of the def
        self.kernels: dict[DispatchKey, list[Registration]] = {}
        self.dispatch_arg_indices: tuple[int, ...] = ()
        self.table: list[TableEntry] = []
        self.mask = FULL  # nonFallthroughKeys_
        self.backend_masks: list[int] | None = None  # nonFallthroughKeysPerBackend_, when needed
        self.update_table()

    # ---- naming ----
    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload_name}" if self.overload_name else self.name

    def __repr__(self) -> str:
        return f"OperatorHandle({self.full_name})"

    # ---- registration bookkeeping ----
    def add_kernel(self, key: DispatchKey, registration: Registration) -> None:
        self.kernels.setdefault(key, []).append(registration)
        self.update_table()

    def remove_kernel(self, key: DispatchKey, registration: Registration, *, update: bool = True) -> None:
        registrations = self.kernels.get(key, [])
        if registration in registrations:
            registrations.remove(registration)
            if not registrations:
                del self.kernels[key]
        if update:
            self.update_table()

    # ---- table computation (computeDispatchTableEntryWithDebug) ----
    def compute_entry(self, key: DispatchKey) -> tuple[Registration | None, str]:
        """The (registration, label) PyTorch's precedence picks for one slot key."""
        return self._compute(key, *self._summary())

    def _summary(self) -> tuple[Any, list[int]]:
        """The newest kernel per key, as (direct kernels by slot index, the six alias kernels), and the
        raw key sets of the runtime keys that have kernels. Slot indices keep enum hashing off the loop."""
        newest = {k: regs[-1] for k, regs in self.kernels.items() if regs}
        backend_raws = [_RAW[k] for k in newest if not k.is_alias]
        direct = {_SLOT_OF[k]: r for k, r in newest.items() if not k.is_alias}
        aliases = tuple(newest.get(a) for a in (CEANF, CEA, CIANT, CIA, AUTOGRAD, FTBD))
        return (direct, aliases), backend_raws

    def _compute(self, key: DispatchKey, newest: Any, backend_raws: list[int]) -> tuple[Registration | None, str]:
        return self._compute_slot(_SLOT_OF[key], newest, backend_raws)

    def _compute_slot(self, slot: int, newest: Any, backend_raws: list[int]) -> tuple[Registration | None, str]:
        direct_by_slot, (ceanf, cea, ciant, cia, autograd, ftbd) = newest
        in_ceanf, in_cea, in_ciant, in_cia, in_autograd, served = _SLOT_FLAGS[slot]
        if slot:  # not Undefined
            direct = direct_by_slot.get(slot)
            if direct is not None:
                return direct, "kernel"
        if in_ceanf and ceanf is not None:
            return ceanf, "default backend kernel"
        if in_cea and cea is not None:
            return cea, "default backend kernel"
        if in_ciant and ciant is not None:
            return ciant, "nested kernel"
        if in_cia and cia is not None:
            if slot == _AUTOGRAD_OTHER_SLOT and any(AUTOGRAD_OTHER_BACKENDS & r == r for r in backend_raws):
                return None, "ambiguous autogradother"
            has_backend_kernel = cea is not None or any(served & r == r for r in backend_raws)
            if not has_backend_kernel:
                return cia, "math kernel"
        if in_autograd and autograd is not None:
            return autograd, "autograd kernel"
        if slot == _FUNCTORCH_BATCHED_SLOT and ftbd is not None:
            return ftbd, "batched kernel"
        fallback = self.dispatcher.fallbacks[slot]
        if fallback is not None:
            return fallback, "backend fallback"
        return None, "missing"

    def _make_entry(self, key: DispatchKey, registration: Registration | None, label: str) -> TableEntry:
        if registration is None:
            reporter = _ambiguous_reporter(self) if label != "missing" else _missing_reporter(self)
            return TableEntry(reporter, 2, None, label, key)
        kernel = registration.kernel
        if kernel.unboxed is not None:
            mode = 2 if kernel.with_keyset == "raw" else 1 if kernel.with_keyset else 0
            return TableEntry(kernel.unboxed, mode, registration, label, key)
        return TableEntry(make_boxed_adapter(kernel, self), 2, registration, label, key)

    def update_table(self) -> None:
        """Recompute every slot and the fallthrough masks (``updateDispatchTableFull_``)."""
        table: list[TableEntry] = []
        newest, backend_raws = self._summary()
        for slot, key in enumerate(SLOT_KEYS):
            registration, label = self._compute_slot(slot, newest, backend_raws)
            table.append(self._make_entry(key, registration, label))
        assert len(table) == NUM_RUNTIME_ENTRIES
        self.table = table
        self.mask, self.backend_masks = _masks_of(table)

    def check_invariants(self) -> None:
        """``OperatorEntry::checkInvariants``: the stored table and masks are what a rebuild computes now."""
        if self.schema is not None and self.dispatch_arg_indices != self.schema.dispatch_arg_indices:
            raise RuntimeError(f"{self.full_name}: dispatch argument positions do not match the schema {self.schema}")
        for key, registrations in self.kernels.items():
            if not registrations:
                raise RuntimeError(f"{self.full_name}: an empty kernel list is left for {key.name}")
        newest, backend_raws = self._summary()
        for slot, (key, entry) in enumerate(zip(SLOT_KEYS, self.table)):
            registration, label = self._compute_slot(slot, newest, backend_raws)
            if entry.key is not key or entry.registration is not registration or entry.label != label:
                expected = registration.shown if registration is not None else label
                raise RuntimeError(
                    f"{self.full_name}: the dispatch table entry for {key.name} (slot {slot}) is stale: it holds "
                    f"{entry.kernel_name} [{entry.label}] but the registrations give {expected} [{label}]"
                )
        if _masks_of(self.table) != (self.mask, self.backend_masks):
            raise RuntimeError(f"{self.full_name}: the fallthrough mask does not match the table's fallthrough entries")

    def fallthrough_mask(self, ks: int) -> int:
        """The mask a call with (pre-mask) key set ``ks`` uses; per backend when needed."""
        if self.backend_masks is None:
            return self.mask
        backend = (ks & 0xFFFF).bit_length()
        return self.backend_masks[backend - 1] if backend else self.mask

    def lookup(self, ks: int) -> TableEntry:
        """``OperatorEntry::lookup``: the entry a (final) key set selects."""
        return self.table[slot_index(int(ks))]

    # ---- inspection ----
    def dump_table(self) -> str:
        """The computed table, as ``torch._C._dispatch_dump_table`` prints it."""
        lines = []
        for entry in self.table:
            if not entry.is_valid:
                continue
            prefix = "fallthrough " if entry.is_fallthrough else ""
            lines.append(f"{entry.key.name}: {prefix}{entry.kernel_name} [{entry.label}]\n")
        return "".join(lines)

    def dump_state(self) -> str:
        """The registrations, as ``torch._C._dispatch_dump`` prints them (``OperatorEntry::dumpState``).

        An operator that has kernels but no schema yet (an ``impl`` ran before its ``define``) prints
        ``schema: (none)`` and no ``debug`` / ``alias analysis kind`` lines, as PyTorch does.
        """
        lines = [f"name: {self.full_name}\n"]
        if self.schema is None:
            lines.append("schema: (none)\n")
        else:
            lines.append(f"schema: {self.schema}\n")
            lines.append(f"debug: {self.schema_debug or '(none)'}\n")
            lines.append(f"alias analysis kind: {self.alias_analysis}\n")
        # PyTorch's kernel map iterates in DispatchKey enum order; so does this dump.
        for key, registrations in sorted(self.kernels.items(), key=lambda item: item[0].value):
            label = f"{key.name}[alias]" if key.is_alias else key.name
            for i, registration in enumerate(reversed(registrations)):
                suffix = "" if i == 0 else " (inactive)"
                lines.append(f"{label}{suffix}: {self.describe_kernel(registration)}\n")
        return "".join(lines)

    def describe_kernel(self, registration: Registration) -> str:
        """``<debug> :: <inferred signature> [ boxed unboxed ]``: one kernel as dumps print it."""
        kernel = registration.kernel
        if kernel.python and dump_style.pytorch:
            return f"{registration.site} :: (none) [ boxed ]"
        unboxed = kernel.unboxed is not None and not kernel.is_fallthrough
        signature = (kernel.inferred_schema or self.inferred_signature()) if unboxed else "(none)"
        return f"{registration.debug} :: {signature} {kernel.tags()}"

    def inferred_signature(self) -> str:
        """What C++ infers from an unboxed kernel's type, e.g. ``(Tensor _0, Scalar _1) -> Tensor _0``."""
        if self.schema is None:
            return "(none)"
        args = ", ".join(f"{a.type} _{i}" for i, a in enumerate(self.schema.arguments))
        rets = [f"{r.type} _{i}" for i, r in enumerate(self.schema.returns)]
        ret = rets[0] if len(rets) == 1 else "(" + ", ".join(rets) + ")"
        return f"({args}) -> {ret}"

    def registered_keys(self) -> list[DispatchKey]:
        """Keys with a valid table entry, in table order (what errors list as "available")."""
        return [e.key for e in self.table if e.is_valid and e.key is not K.Undefined]

    # ---- calling (the handle side) ----
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call through the dispatcher, binding Python arguments to the schema first."""
        bound = self.bind(args, kwargs)
        return self.dispatcher.call(self, self.dispatch_key_set_of(bound), *bound)

    def no_schema_error(self) -> RuntimeError:
        """``findSchemaOrThrow``'s error for an operator that has kernels but was never defined."""
        ns, _, short = self.full_name.partition("::")
        return RuntimeError(
            f"Could not find schema for {self.name}.{self.overload_name} but we found an implementation; did "
            f"you forget to def() the operator? (lab) {self.full_name} has kernels but no schema: define it first, "
            f"with Library({ns!r}, 'DEF' or 'FRAGMENT').define(\"{short}(...) -> ...\"); "
            "lab.dispatcher.find_dangling_impls() lists every such operator."
        )

    def call(self, *args: Any) -> Any:
        """``TypedOperatorHandle::call`` with every argument given positionally in schema order."""
        if self.schema is None:
            raise self.no_schema_error()
        return self.dispatcher.call(self, self.dispatch_key_set_of(args), *args)

    def redispatch(self, ks: DispatchKeySet | int, *args: Any) -> Any:
        """``TypedOperatorHandle::redispatch``: skip key-set computation; use ``ks`` as given."""
        return self.dispatcher.redispatch(self, ks, *args)

    def call_boxed(self, stack: list[Any]) -> None:
        """``OperatorHandle::callBoxed``: arguments on a stack, results pushed back onto it."""
        if self.schema is None:
            raise self.no_schema_error()
        self.dispatcher.call_boxed(self, stack)

    def redispatch_boxed(self, ks: DispatchKeySet | int, stack: list[Any]) -> None:
        self.dispatcher.redispatch_boxed(self, ks, stack)

    def dispatch_key_set_of(self, args: tuple[Any, ...] | list[Any]) -> int:
        """``DispatchKeyExtractor``: OR of the key sets of every tensor argument."""
        ks = 0
        for i in self.dispatch_arg_indices:
            value = args[i] if i < len(args) else None
            if value is None:
                continue
            if isinstance(value, (list, tuple)):
                for item in value:
                    if item is not None:
                        ks |= item._ks
            else:
                ks |= value._ks
        return ks

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Match Python arguments to the schema: positionals, keywords, then defaults."""
        if self.schema is None:
            raise self.no_schema_error()
        from labsupport.c10.schema import parse_default

        schema_args = self.schema.arguments
        bound: list[Any] = []
        positional = [a for a in schema_args if not a.kwarg_only]
        if len(args) > len(positional):
            raise TypeError(
                f"{self.full_name}() takes {len(positional)} positional argument(s) but {len(args)} were given"
            )
        remaining = dict(kwargs)
        for i, argument in enumerate(schema_args):
            if i < len(args) and not argument.kwarg_only:
                bound.append(args[i])
            elif argument.name in remaining:
                bound.append(remaining.pop(argument.name))
            elif argument.default is not None:
                bound.append(parse_default(argument.default, argument.type))
            elif argument.type.is_optional:
                bound.append(None)
            else:
                raise TypeError(f"{self.full_name}() missing required argument '{argument.name}'")
        if remaining:
            raise TypeError(f"{self.full_name}() got unexpected keyword argument(s) {sorted(remaining)}")
        return tuple(bound)




def _masks_of(table: list[TableEntry]) -> tuple[int, list[int] | None]:
    """``nonFallthroughKeys_`` and, when a per-backend key is a fallthrough, ``nonFallthroughKeysPerBackend_``."""
    mask = FULL
    per_backend = [FULL] * 16
    needs_per_backend = False
    for entry in table:
        if entry.is_fallthrough:
            functionality, backend = RUNTIME_SPLIT[entry.key]
            bit = functionality_bit(functionality)
            if backend is None:
                mask &= ~bit
                per_backend = [m & ~bit for m in per_backend]
            else:
                per_backend[backend] &= ~bit
                needs_per_backend = True
    return mask, (per_backend if needs_per_backend else None)


def _missing_reporter(op: OperatorEntry) -> Callable[..., Any]:
    def report_missing_kernel(ks: int, *args: Any) -> Any:
        from labsupport.c10.dispatcher import missing_kernel_error

        raise missing_kernel_error(op, ks)

    return report_missing_kernel


def _ambiguous_reporter(op: OperatorEntry) -> Callable[..., Any]:
    def ambiguous_autogradother(ks: int, *args: Any) -> Any:
        raise RuntimeError(
            f"{op.full_name} has kernels registered to both CompositeImplicitAutograd and a backend mapped "
            "to AutogradOther (FPGA, MkldnnCPU, Quantized*, Sparse*, ...). The dispatcher cannot tell which "
            "autograd behaviour you want for that backend. Register a kernel to AutogradOther as well, or "
            "move the CompositeImplicitAutograd kernel to CompositeExplicitAutograd."
        )

    return ambiguous_autogradother


def describe_keys(raw: int) -> str:
    return ", ".join(k.name for k in keys_of(raw))
