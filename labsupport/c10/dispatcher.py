"""The dispatcher: operator registry, key-set computation and the call paths.

Stands for ``aten/src/ATen/core/dispatch/Dispatcher.h`` (``c10::Dispatcher::call``, ``redispatch``,
``callBoxed``) and ``DispatchKeyExtractor.h``. A call is

    ks   = ((tensor keys | TLS include) - TLS exclude) & fallthrough mask
    kernel = op.table[slot_index(ks)]          # one index into a precomputed table

No per-call search happens: tables are rebuilt when registrations change. The profiler and the
tracer observe calls through one cheap check (``observers.active``) per dispatcher entry, the role
``RecordFunction`` plays in ``Dispatcher::call``; as in PyTorch, a redispatch is not profiled.

Each build of the lab's front end owns a Dispatcher, so a "before" and an "after" build can share
one Python process. ``labsupport.dispatcher`` is the default one.
"""

from __future__ import annotations

import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from labsupport.c10.dispatch_key import DispatchKey, parse_dispatch_key
from labsupport.c10.dispatch_key_set import (
    SLOT_KEYS,
    DispatchKeySet,
    highest_priority_key,
    runtime_keys_of_alias,
    slot_index,
)
from labsupport.c10.instantiate import instantiate
from labsupport.c10.kernel_function import KernelFunction
from labsupport.c10.operator_entry import OperatorEntry, Registration, describe_keys, dump_style
from labsupport.c10.tls import tls

_wrap = DispatchKeySet.from_raw
_SLOT_CACHE: dict[int, int] = {}
_slot_get = _SLOT_CACHE.get  # memo of slot_index, a pure function of the 64-bit set

# Where ipykernel compiles notebook cells (not ipykernel_launcher.py, which is the kernel itself).
_NOTEBOOK_CELL = re.compile(r"[/\\]ipykernel_\d+[/\\]")


def _slot(ks: int) -> int:
    """``getDispatchTableIndexForDispatchKeySet``, remembered for the next call with the same set."""
    index = slot_index(ks)
    if len(_SLOT_CACHE) < 65536:
        _SLOT_CACHE[ks] = index
    return index


class DispatchEvent:
    """What observers see for one dispatch: the parts of the key set and the chosen kernel."""

    __slots__ = (
        "boxed",
        "depth",
        "end",
        "entry",
        "excluded",
        "included",
        "key",
        "key_set",
        "mask",
        "op",
        "payload",
        "redispatch",
        "start",
        "tensor_keys",
    )  # fmt: skip

    def __init__(self, op: OperatorEntry, tensor_keys: int, included: int, excluded: int, mask: int,
                 key_set: int, redispatch: bool) -> None:  # fmt: skip
        self.op = op
        self.tensor_keys = tensor_keys
        self.included = included
        self.excluded = excluded
        self.mask = mask
        self.key_set = key_set
        self.entry = op.table[_slot(key_set)]
        self.key = self.entry.key
        self.redispatch = redispatch
        self.boxed = False  # callBoxed / redispatchBoxed
        self.start = self.end = 0.0
        self.depth = 0
        self.payload: dict[str, Any] = {}


class Observers:
    """Registered call observers (profiler, tracer). ``active`` is the one check on the hot path."""

    __slots__ = ("active", "depth", "items")

    def __init__(self) -> None:
        self.active = False
        self.items: list[Any] = []
        self.depth = 0

    def add(self, observer: Any) -> None:
        self.items.append(observer)
        self.active = True

    def remove(self, observer: Any) -> None:
        if observer in self.items:
            self.items.remove(observer)
        self.active = bool(self.items)


observers = Observers()


class DispatchRecursionError(RuntimeError):
    """A kernel re-entered the dispatcher for the same operator and key until the stack ran out.

    The classic cause (seed 003): an autograd kernel calls the operator again without excluding
    the autograd keys, so the dispatcher picks the same autograd kernel forever.
    """

    def __str__(self) -> str:
        counts: dict[tuple[str, str, str], int] = {}
        seen: set[int] = set()
        # The frames between the outermost dispatcher call and the point where the stack ran out:
        # this error's own traceback (outer frames) and its cause's (the innermost ones).
        for tb in (self.__traceback__, self.__cause__.__traceback__ if self.__cause__ else None):
            while tb is not None:
                frame = tb.tb_frame
                if frame.f_code in _DISPATCH_CODES and id(frame) not in seen:
                    seen.add(id(frame))
                    local = frame.f_locals
                    op, ks = local.get("op"), local.get("ks")
                    if isinstance(op, OperatorEntry) and isinstance(ks, int):
                        entry = op.table[_slot(ks)]
                        key = (op.full_name, entry.key.name, entry.kernel_name)
                        counts[key] = counts.get(key, 0) + 1
                tb = tb.tb_next
        if not counts:
            return "maximum recursion depth exceeded inside a dispatched kernel"
        (name, key, kernel), n = max(counts.items(), key=lambda item: item[1])
        advice = ""
        if key.startswith("Autograd"):
            advice = (
                " Calling the operator from its autograd kernel starts a new dispatch on the same tensors, whose "
                "key set still holds the autograd key, so the dispatcher lands on this kernel again. PyTorch's "
                "autograd kernels (VariableType) first step below autograd, so that the next dispatch skips the "
                "autograd keys and reaches the backend kernel: notebook 04, section 6 (an autograd kernel that "
                "redispatches) shows the two ways."
            )
        return (
            f"{name} re-entered its {key} kernel '{kernel}' again and again ({n} times before Python's "
            "recursion limit) without the key set changing, "
            f"so the dispatcher chose the same kernel every time (infinite recursion).{advice}"
        )


def missing_kernel_error(op: OperatorEntry, ks: int) -> NotImplementedError:
    """PyTorch's "Could not run ... with arguments from the ... backend" error."""
    available = ", ".join(k.name for k in op.registered_keys())
    if ks == 0 or highest_priority_key(ks) is DispatchKey.Undefined:
        return NotImplementedError(
            f"There were no tensor arguments to this function (e.g., you passed an empty list of Tensors), "
            f"but no fallback function is registered for schema {op.full_name}. This usually means that this "
            f"function requires a non-empty list of Tensors, or that you (the operator writer) forgot to "
            f"register a fallback function (e.g. a CompositeExplicitAutograd or BackendSelect kernel). "
            f"Available functions are [{available}].\n\n{op.dump_table()}"
        )
    key = highest_priority_key(ks)
    return NotImplementedError(
        f"Could not run '{op.full_name}' with arguments from the '{key.name}' backend. The dispatch key set "
        f"of this call was DispatchKeySet({describe_keys(ks)}); its highest-priority key, {key.name}, has no "
        f"kernel and no fallback. '{op.full_name}' is only available for these backends: [{available}].\n\n"
        f"{op.dump_table()}"
    )


class Dispatcher:
    """``c10::Dispatcher``: operators by name, backend fallbacks per slot, and the call paths."""

    def __init__(self, name: str = "default", *, install_fallbacks: bool = True) -> None:
        self.name = name
        self.operators: dict[str, OperatorEntry] = {}
        self.fallbacks: list[Registration | None] = [None] * len(SLOT_KEYS)
        self.namespace_owners: dict[str, object] = {}
        if install_fallbacks:
            from labsupport.c10.backend_fallbacks import install_backend_fallbacks

            install_backend_fallbacks(self)

    def __repr__(self) -> str:
        return f"<Dispatcher {self.name!r}: {len(self.operators)} operators>"

    # ---------------------------------------------------------------- calls
    def call(self, op: OperatorEntry, tensor_ks: int, *args: Any) -> Any:
        """``Dispatcher::call``: compute the key set, index the table, run the kernel.

        ``tensor_ks`` is the OR of the tensor arguments' key sets (``DispatchKeyExtractor``);
        generated operator handles compute it inline because they know where the tensors are.
        """
        included, keep, _ = tls.sets
        ks = (tensor_ks | included) & keep
        ks &= op.mask if op.backend_masks is None else op.fallthrough_mask(ks)
        entry = op.table[_slot_get(ks) or _slot(ks)]
        if observers.active:
            return self._call_observed(op, tensor_ks, ks, entry, args, False)
        try:
            fn = entry.fn
            if entry.mode == 2:  # raw key set: generated kernels, boxed adapters
                return fn(ks, *args)
            if entry.mode == 0:  # a kernel that takes no key set
                return fn(*args)
            return fn(_wrap(ks), *args)  # a kernel that takes a DispatchKeySet
        except RecursionError as error:
            raise DispatchRecursionError() from error

    def redispatch(self, op: OperatorEntry, ks: int, *args: Any) -> Any:
        """``Dispatcher::redispatch``: use the key set the caller computed (no TLS, no mask, no profiling)."""
        entry = op.table[_slot_get(ks) or _slot(ks)]
        if observers.active:
            return self._call_observed(op, ks, ks, entry, args, True)
        fn = entry.fn
        if entry.mode == 2:
            return fn(ks, *args)
        if entry.mode == 0:
            return fn(*args)
        return fn(_wrap(ks), *args)

    def typed(self, arity: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """``call`` and ``redispatch`` for exactly ``arity`` arguments, bound to this dispatcher.

        C++ instantiates these templates once per operator signature, so arguments are never
        packed; the generated ``_ops`` handles use the lab's instantiations (see instantiate.py).
        Subclasses get instantiations of their own ``call`` / ``redispatch``.
        """
        cls = type(self)
        key = (cls, arity)
        pair = _TYPED.get(key)
        if pair is None:
            pair = _TYPED[key] = (instantiate(cls.call, arity), instantiate(cls.redispatch, arity))
            _DISPATCH_CODES.update(fn.__code__ for fn in pair)
        return pair[0].__get__(self), pair[1].__get__(self)

    def call_boxed(self, op: OperatorEntry, stack: list[Any]) -> None:
        """``Dispatcher::callBoxed``: arguments on a stack; the key set comes from its tensors."""
        tensor_ks = op.dispatch_key_set_of(stack[len(stack) - len(op.schema.arguments):] if op.schema else stack)
        included, keep, _ = tls.sets
        ks = (tensor_ks | included) & keep
        ks &= op.mask if op.backend_masks is None else op.fallthrough_mask(ks)
        self._run_boxed(op, tensor_ks, ks, stack, False)

    def redispatch_boxed(self, op: OperatorEntry, ks: int, stack: list[Any]) -> None:
        """``Dispatcher::redispatchBoxed``."""
        self._run_boxed(op, int(ks), int(ks), stack, True)

    def _run_boxed(self, op: OperatorEntry, tensor_ks: int, ks: int, stack: list[Any], redispatch: bool) -> None:
        entry = op.table[_slot(ks)]
        registration = entry.registration
        if registration is None:  # missing or ambiguous: let the reporter raise
            entry.fn(ks)
            return
        if observers.active:
            def run() -> None:
                registration.kernel.call_boxed(op, ks, stack)

            self._observe(op, tensor_ks, ks, redispatch, run, boxed=True)
            return
        registration.kernel.call_boxed(op, ks, stack)

    def _call_observed(
        self, op: OperatorEntry, tensor_ks: int, ks: int, entry: Any, args: tuple[Any, ...], redispatch: bool
    ) -> Any:
        """``callWithDispatchKeySlowPath``: the same call, with observers told before and after."""
        mode = entry.mode
        if mode == 0:
            return self._observe(op, tensor_ks, ks, redispatch, lambda: entry.fn(*args))
        if mode == 1:
            return self._observe(op, tensor_ks, ks, redispatch, lambda: entry.fn(_wrap(ks), *args))
        return self._observe(op, tensor_ks, ks, redispatch, lambda: entry.fn(ks, *args))

    def _observe(
        self, op: OperatorEntry, tensor_ks: int, ks: int, redispatch: bool, run: Callable[[], Any], boxed: bool = False
    ) -> Any:
        mask = op.fallthrough_mask(tensor_ks | tls.included)
        event = DispatchEvent(op, tensor_ks, tls.included, tls.excluded, mask, ks, redispatch)
        event.boxed = boxed
        event.depth = observers.depth
        items = list(observers.items)
        for observer in items:
            observer.on_enter(event)
        observers.depth += 1
        event.start = time.perf_counter()
        try:
            return run()
        except RecursionError as error:
            raise DispatchRecursionError() from error
        finally:
            event.end = time.perf_counter()
            observers.depth -= 1
            for observer in reversed(items):
                observer.on_exit(event)

    # ---------------------------------------------------------------- lookup
    def find_op(self, name: str, overload_name: str | None = None) -> OperatorEntry | None:
        """Find ``"ns::name.overload"`` (or name + overload) if it exists."""
        if overload_name is None:
            return self.operators.get(name)
        return self.operators.get(f"{name}.{overload_name}" if overload_name else name)

    def find_schema_or_throw(self, name: str, overload_name: str = "") -> OperatorEntry:
        """``findSchemaOrThrow``: the handle for a defined operator, or PyTorch's error and a hint."""
        if not overload_name and "." in name.partition("::")[2]:
            name, _, overload_name = name.rpartition(".")
        op = self.find_op(name, overload_name)
        full = f"{name}.{overload_name}" if overload_name else name
        if op is not None and op.schema is None:
            raise op.no_schema_error()
        if op is None:
            import difflib

            close = difflib.get_close_matches(full, [k for k, v in self.operators.items() if v.schema], n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise RuntimeError(
                f"Could not find schema for {name}.{overload_name} (lab) in dispatcher {self.name!r}.{hint}"
            )
        return op

    def _entry(self, full_name: str) -> OperatorEntry:
        op = self.operators.get(full_name)
        if op is None:
            name, _, overload = full_name.partition(".")
            op = self.operators[full_name] = OperatorEntry(self, name, overload)
        return op

    # ---------------------------------------------------------------- registration
    def register_def(
        self, schema: Any, debug: str, owner: object, alias_analysis: str = "FROM_SCHEMA"
    ) -> Callable[[], None]:
        """Define an operator (``Dispatcher::registerDef``); returns a function that undoes it.

        The operator may already exist without a schema (an ``impl`` came first, as static
        initialisers in PyTorch run in any order); the schema then completes it.
        """
        full_name = schema.full_name
        existing = self.operators.get(full_name)
        if existing is not None and existing.schema is not None:
            raise RuntimeError(
                f"Tried to register an operator ({schema}) with the same name and overload name multiple "
                f"times. Each overload's schema should only be registered with a single call to def(). "
                f"Duplicate registration: {debug}. Original registration: {existing.schema_debug}"
            )
        if existing is not None:
            for registrations in existing.kernels.values():
                for registration in registrations:
                    check_inferred_schema(schema, debug, registration)
        op = self._entry(full_name)
        op.schema = schema
        op.schema_debug = debug
        op.schema_owner = owner
        op.alias_analysis = alias_analysis
        op.dispatch_arg_indices = schema.dispatch_arg_indices
        op.update_table()

        def undo() -> None:
            if op.schema_owner is owner:
                op.schema = None
                op.schema_debug = ""
                op.schema_owner = None
                op.alias_analysis = "FROM_SCHEMA"
                op.dispatch_arg_indices = ()
                self._forget_if_empty(op)

        return undo

    def register_impl(
        self, full_name: str, key: DispatchKey | str, kernel: KernelFunction, debug: str, owner: object,
        site: str = "",
    ) -> Callable[[], None]:
        """Register a kernel for one key (runtime or alias); returns a function that undoes it.

        The operator need not be defined yet: it then exists with ``schema: (none)`` until its
        ``define`` arrives (``Dispatcher::registerImpl`` creates the OperatorEntry).
        """
        key = parse_dispatch_key(key)
        if not (key.is_runtime or key.is_alias) or key is DispatchKey.Undefined:
            raise ValueError(
                f"cannot register {full_name} to {key.name}: it is neither a runtime key nor an alias key "
                f"(per-backend building blocks such as {key.name} need a backend, e.g. AutogradCPU)"
            )
        registration = Registration(kernel, debug, owner, site)
        existing_op = self.operators.get(full_name)
        if existing_op is not None and existing_op.schema is not None:
            check_inferred_schema(existing_op.schema, existing_op.schema_debug, registration)
        op = self._entry(full_name)
        existing = op.kernels.get(key)
        if existing:
            _warn_override(op, key, existing[-1], registration)
        op.add_kernel(key, registration)

        def undo() -> None:
            op.remove_kernel(key, registration, update=False)
            self._forget_if_empty(op)  # drops the operator, or rebuilds its table

        return undo

    def register_fallback(
        self, key: DispatchKey | str, kernel: KernelFunction, debug: str, owner: object, site: str = ""
    ) -> Callable[[], None]:
        """A backend fallback for every operator (``registerFallback``); alias keys expand to their keys."""
        key = parse_dispatch_key(key)
        keys = runtime_keys_of_alias(key) if key.is_alias else (key,)
        registration = Registration(kernel, debug, owner, site)
        slots = []
        for runtime_key in keys:
            slot = SLOT_KEYS.index(runtime_key)
            previous = self.fallbacks[slot]
            if previous is not None:
                raise RuntimeError(
                    f"Tried to register multiple backend fallbacks for the same dispatch key {runtime_key.name}; "
                    f"previous registration {previous.shown}, new registration {registration.shown}"
                )
            slots.append(slot)
        for slot in slots:
            self.fallbacks[slot] = registration
        self._refresh_all()

        def undo() -> None:
            for slot in slots:
                if self.fallbacks[slot] is registration:
                    self.fallbacks[slot] = None
            self._refresh_all()

        return undo

    def _refresh_all(self) -> None:
        for op in self.operators.values():
            op.update_table()

    def _forget_if_empty(self, op: OperatorEntry) -> None:
        if op.schema is None and not op.kernels:
            self.operators.pop(op.full_name, None)
        else:
            op.update_table()

    # ---------------------------------------------------------------- inspection
    def dump(self, name: str) -> str:
        """The registrations of an operator (``torch._C._dispatch_dump``); ``""`` if it does not exist."""
        op = self.operators.get(name)
        return op.dump_state() if op is not None else ""

    def dump_table(self, name: str) -> str:
        """The computed dispatch table of an operator (``torch._C._dispatch_dump_table``); ``""`` if none."""
        op = self.operators.get(name)
        return op.dump_table() if op is not None else ""

    # ---------------------------------------------------------------- debugging tools
    def check_invariants(self, name: str | None = None) -> None:
        """``torch._C._dispatch_check_invariants(name)`` (``_dispatch_check_all_invariants`` without a name).

        Checks what ``OperatorEntry::checkInvariants`` checks: every stored table entry equals the one
        the precedence rules compute now, the fallthrough masks match the table, and the schema's
        dispatch arguments are the ones the key extractor uses. An unknown name passes, as in PyTorch.
        Raises ``RuntimeError`` naming the operator and the first slot that is wrong.
        """
        ops = [self.operators[name]] if name is not None and name in self.operators else []
        if name is None:
            ops = list(self.operators.values())
        for op in ops:
            op.check_invariants()

    def find_dangling_impls(self) -> list[str]:
        """``torch._C._dispatch_find_dangling_impls()``: dumps of operators with kernels but no schema.

        Such an operator is usually a typo: ``Library("myop", "IMPL", "CPU").impl("myadd", ...)`` when
        the namespace is ``myops``. PyTorch keeps it (its ``def`` may simply not have run yet) and so
        does the lab; this lists them.
        """
        return [op.dump_state() for op in self.operators.values() if op.schema is None and op.kernels]

    def registrations_for_dispatch_key(self, dispatch_key: str | DispatchKey = "") -> list[str]:
        """``torch._C._dispatch_get_registrations_for_dispatch_key(key)``: operators with a kernel
        registered directly to ``dispatch_key`` (every operator for ``""``), sorted by name (PyTorch's
        order is its hash map's)."""
        if dispatch_key == "" or dispatch_key is None:
            return sorted(self.operators)
        key = parse_dispatch_key(dispatch_key)
        return sorted(name for name, op in self.operators.items() if op.kernels.get(key))

    def print_registrations_for_dispatch_key(self, dispatch_key: str | DispatchKey = "") -> None:
        """``torch._C._dispatch_print_registrations_for_dispatch_key(key)``: one name per line."""
        for name in self.registrations_for_dispatch_key(dispatch_key):
            print(name)

    def all_operator_names(self) -> list[str]:
        return sorted(name for name, op in self.operators.items() if op.schema is not None)


_DISPATCH_CODES = {Dispatcher.call.__code__, Dispatcher.redispatch.__code__}
_TYPED: dict[tuple[type, int], tuple[Callable[..., Any], Callable[..., Any]]] = {}

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pretty_source(filename: str, lineno: int) -> str:
    """A stable, short "file:line" for debug strings: notebook cells and repo-relative paths."""
    base = os.path.basename(filename)
    if _NOTEBOOK_CELL.search(filename) or filename.startswith("<ipython-input"):
        return f"<notebook cell>:{lineno}"
    if filename.startswith(_REPO_ROOT + os.sep):
        return f"{os.path.relpath(filename, _REPO_ROOT)}:{lineno}"
    if filename.startswith("<"):
        return f"{filename}:{lineno}"
    return f"{base}:{lineno}"


def check_inferred_schema(schema: Any, schema_debug: str, registration: Registration) -> None:
    """``OperatorEntry::assertSignatureIsCorrect``: a kernel whose signature was inferred (a C++
    function; in the lab, a KernelFunction made with ``inferred_schema``) must match the schema."""
    inferred = registration.kernel.inferred_schema
    if inferred is None:
        return
    from labsupport.c10.schema import FunctionSchema

    parsed = FunctionSchema.parse("f" + inferred)
    reason = ""
    if len(parsed.arguments) != len(schema.arguments):
        reason = f"The number of arguments is different. {len(schema.arguments)} vs {len(parsed.arguments)}."
    elif len(parsed.returns) != len(schema.returns):
        reason = f"The number of returns is different. {len(schema.returns)} vs {len(parsed.returns)}."
    else:
        for i, (expected, got) in enumerate(zip(schema.arguments, parsed.arguments)):
            if str(expected.type) != str(got.type):
                reason = f"Type mismatch in argument {i + 1}: {got.type} vs. {expected.type}"
                break
    if reason:
        raise RuntimeError(
            "Inferred operator schema for a C++ kernel function doesn't match the expected function schema.\n"
            f"  operator: {schema.full_name}\n"
            f"  expected schema: {schema}\n"
            f"    {schema_debug}\n"
            f"  inferred schema: {inferred}\n"
            f"    {registration.debug}\n"
            f"  reason: {reason}"
        )


class _OverrideWarning:
    """PyTorch warns about an overriding kernel once per process (``TORCH_WARN_ONCE``)."""

    warned = False


def _warn_override(op: OperatorEntry, key: DispatchKey, previous: Registration, new: Registration) -> None:
    """``OperatorEntry::registerKernel``'s warning, in PyTorch's words (once per process).

    PyTorch skips it for Meta and MTIA (kernels there are overridden on purpose); so does the lab.
    """
    if _OverrideWarning.warned or key in (DispatchKey.Meta, DispatchKey.MTIA):
        return
    _OverrideWarning.warned = True
    if op.schema is not None:
        operator = f"{op.schema}\n    {op.schema_debug}"
    else:
        operator = f"{op.full_name}\n    no debug info"
    warnings.warn(
        "Warning only once for all operators,  other operators may also be overridden.\n"
        "  Overriding a previously registered kernel for the same operator and the same dispatch key\n"
        f"  operator: {operator}\n"
        f"  dispatch key: {key.name}\n"
        f"  previous kernel: {_warning_name(previous, previous=True)}\n"
        f"       new kernel: {_warning_name(new)}",
        UserWarning,
        stacklevel=_stacklevel_outside_c10(),
    )


def _warning_name(registration: Registration, previous: bool = False) -> str:
    if registration.kernel.python and dump_style.pytorch:
        # PyTorch 2.13 names an overridden Python kernel "no debug info" in this warning (its dump
        # still shows the site); the PyTorch style copies that.
        return "no debug info" if previous else registration.site
    return registration.debug


def reset_override_warning() -> None:
    """Let the next override warn again (PyTorch cannot; handy for tests and for re-running a cell)."""
    _OverrideWarning.warned = False


def _stacklevel_outside_c10() -> int:
    """The ``warnings.warn`` stacklevel that points at the first caller outside labsupport/c10."""
    here = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    return level


def caller_site(depth: int = 2) -> str:
    """``registered at <file>:<line>`` for the code that called a registration API."""
    frame = sys._getframe(depth)
    here = os.path.dirname(os.path.abspath(__file__))
    while frame.f_back is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame = frame.f_back
    return f"registered at {pretty_source(frame.f_code.co_filename, frame.f_lineno)}"


dispatcher = Dispatcher("default")
