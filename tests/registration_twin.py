"""The twin harness: one registration scenario, run on the lab and on PyTorch, compared.

A scenario is a list of *registrations*. Following PyTorch's own ``test/test_dispatch.py``
(``TestDispatch.run_ops`` / ``commute``), the harness runs the registrations in a given order, each one
in a library of its own, then drops the libraries in another order, and after every step records the
operator's ``dump`` and ``dump_table`` (or the error a registration raised). Results are keyed by the
set of registrations in effect, so running every order checks that registration commutes and that
deregistration inverts it; running the same scenario on both dispatchers checks that the lab says what
PyTorch says.

Two flavours of registration, as PyTorch has:

* ``cpp`` scenarios use the C++-style test module PyTorch's suite uses
  (``torch._C._dispatch_library(kind, ns, key)`` with ``def_``, ``impl_t_t``, ``def_name_t_t``,
  ``fallback_fallthrough``). On the lab they run on :class:`LabCppModule`, which does the same through
  ``lab.Library`` and C++-style ``KernelFunction`` objects (a debug name and an inferred signature).
* ``python`` scenarios use ``torch.library.Library`` / ``lab.Library`` with plain Python kernels: the
  same code on both sides, only the module differs. The lab side runs under ``lab.pytorch_dump_style()``.

The only difference tolerated between the two sides is the file:line of a registration site made in
these test files (PyTorch's C++ test module says ``/dev/null:0``); ``normalise`` replaces those with
``<site>`` and strips the build prefix PyTorch's own C++ files carry.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import labsupport as lab
from labsupport.c10.kernel_function import KernelFunction

_SITE = re.compile(r"[^\s()\[\]]+:\d+")
_TEST_FILES = ("/dev/null", "registration_twin.py", "twin_scenarios.py", "test_twin_registration.py")
_BUILD_PREFIX = re.compile(r"/__w/pytorch/pytorch/")


def normalise(text: str, ns: str | None = None) -> str:
    """Test namespace -> ``test``; registration sites in the test files -> ``<site>``."""
    if ns:
        text = text.replace(ns, "test")
    text = _BUILD_PREFIX.sub("", text)
    return _SITE.sub(_site, text)


def _site(match: re.Match[str]) -> str:
    path = match.group(0).rsplit(":", 1)[0]
    return "<site>" if path.endswith(_TEST_FILES) else match.group(0)


def first_message(error: BaseException) -> str:
    """The message PyTorch's suite compares (without C++'s "Exception raised from" trailer)."""
    return str(error).split("\nException raised from ")[0]


# ----------------------------------------------------------------------------------------------
# The lab's stand-in for PyTorch's C++ test module (torch/csrc/utils/python_dispatch.cpp)
# ----------------------------------------------------------------------------------------------


def _identity(x: Any) -> Any:
    return x


T_T = "(Tensor _0) -> Tensor _0"  # what C++ infers for ``Tensor (const Tensor&)``


class LabCppModule:
    """``torch._C._dispatch_library(kind, ns, key)`` for the lab: the same methods, on lab.Library."""

    def __init__(self, kind: str, ns: str, dispatch: str = "") -> None:
        self.lib = lab.Library(ns, kind, dispatch)

    def def_(self, schema: str, alias: str = "") -> LabCppModule:
        self.lib.define(schema, alias)
        return self

    def def_legacy(self, schema: str) -> LabCppModule:
        # RegisterOperators().op(schema): the lab has no legacy API; a define is what it amounts to here.
        self.lib.define(schema)
        return self

    def impl_t_t(self, name: str, dispatch: str = "", debug: str = "impl_t_t") -> LabCppModule:
        kernel = KernelFunction.from_unboxed(_identity, debug=debug, inferred_schema=T_T)
        self.lib.impl(name, kernel, dispatch)
        return self

    def def_name_t_t(self, name: str, dispatch: str = "", debug: str = "default_def_name_t_t") -> LabCppModule:
        # m.def("foo", fn): C++ infers the schema from fn and registers fn as its CompositeImplicitAutograd
        # kernel; an inferred schema gets CONSERVATIVE alias analysis.
        self.lib.define(f"{name}(Tensor _0) -> Tensor _0", "CONSERVATIVE")
        kernel = KernelFunction.from_unboxed(_identity, debug=debug, inferred_schema=T_T)
        self.lib.impl(name, kernel, dispatch or "CompositeImplicitAutograd")
        return self

    def fallback_fallthrough(self, dispatch: str = "") -> LabCppModule:
        self.lib.fallback(lab.fallthrough_kernel, dispatch)
        return self

    def reset(self) -> None:
        self.lib.close()


# ----------------------------------------------------------------------------------------------
# The two sides
# ----------------------------------------------------------------------------------------------


class Side:
    """What a scenario needs from one dispatcher."""

    name = ""

    def cpp_module(self, kind: str, ns: str, dispatch: str = "") -> Any:
        raise NotImplementedError

    def library(self, ns: str, kind: str, dispatch_key: str = "") -> Any:
        raise NotImplementedError

    fallthrough_kernel: Any = None

    def dump(self, name: str) -> str:
        raise NotImplementedError

    def dump_table(self, name: str) -> str:
        raise NotImplementedError

    def check_invariants(self, name: str) -> None:
        raise NotImplementedError

    def dangling(self) -> list[str]:
        raise NotImplementedError

    def find_schema_or_throw(self, name: str, overload: str = "") -> Any:
        raise NotImplementedError

    def registrations_for(self, key: str) -> list[str]:
        raise NotImplementedError

    def style(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    @staticmethod
    def close(library: Any) -> None:
        raise NotImplementedError


class LabSide(Side):
    name = "lab"

    def __init__(self) -> None:
        self.fallthrough_kernel = lab.fallthrough_kernel  # an instance attribute: not a bound method

    def cpp_module(self, kind: str, ns: str, dispatch: str = "") -> LabCppModule:
        return LabCppModule(kind, ns, dispatch)

    def library(self, ns: str, kind: str, dispatch_key: str = "") -> lab.Library:
        return lab.Library(ns, kind, dispatch_key)

    def dump(self, name: str) -> str:
        return lab.dispatcher.dump(name)

    def dump_table(self, name: str) -> str:
        return lab.dispatcher.dump_table(name)

    def check_invariants(self, name: str) -> None:
        lab.dispatcher.check_invariants(name)

    def dangling(self) -> list[str]:
        return lab.dispatcher.find_dangling_impls()

    def find_schema_or_throw(self, name: str, overload: str = "") -> Any:
        return lab.dispatcher.find_schema_or_throw(name, overload)

    def registrations_for(self, key: str) -> list[str]:
        return lab.dispatcher.registrations_for_dispatch_key(key)

    def style(self) -> contextlib.AbstractContextManager[Any]:
        return lab.pytorch_dump_style()

    @staticmethod
    def close(library: Any) -> None:
        (library.reset if isinstance(library, LabCppModule) else library.close)()


class TorchSide(Side):
    name = "torch"

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.C = torch._C
        self.fallthrough_kernel = torch.library.fallthrough_kernel

    def cpp_module(self, kind: str, ns: str, dispatch: str = "") -> Any:
        return self.C._dispatch_library(kind, ns, dispatch)

    def library(self, ns: str, kind: str, dispatch_key: str = "") -> Any:
        return self.torch.library.Library(ns, kind, dispatch_key)

    def dump(self, name: str) -> str:
        return self.C._dispatch_dump(name)

    def dump_table(self, name: str) -> str:
        return self.C._dispatch_dump_table(name)

    def check_invariants(self, name: str) -> None:
        self.C._dispatch_check_invariants(name)

    def dangling(self) -> list[str]:
        return list(self.C._dispatch_find_dangling_impls())

    def find_schema_or_throw(self, name: str, overload: str = "") -> Any:
        return self.C._dispatch_find_schema_or_throw(name, overload)

    def registrations_for(self, key: str) -> list[str]:
        return sorted(self.C._dispatch_get_registrations_for_dispatch_key(key))

    @staticmethod
    def close(library: Any) -> None:
        (library._destroy if hasattr(library, "_destroy") else library.reset)()


# ----------------------------------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------------------------------


class Maker:
    """What a registration receives: ways to make libraries that live as long as the registration."""

    def __init__(self, side: Side, ns: str, flavour: str) -> None:
        self.side, self.ns, self.flavour = side, ns, flavour
        self.made: list[Any] = []

    @property
    def m(self) -> Any:
        """A FRAGMENT module/library of the scenario's namespace (what TestDispatch gives each registration)."""
        if self.flavour == "cpp":
            made = self.side.cpp_module("FRAGMENT", self.ns, "")
        else:
            made = self.side.library(self.ns, "FRAGMENT")
        self.made.append(made)
        return made

    def cpp(self, kind: str, ns: str | None = None, dispatch: str = "") -> Any:
        made = self.side.cpp_module(kind, self.ns if ns is None else ns, dispatch)
        self.made.append(made)
        return made

    def library(self, kind: str, ns: str | None = None, dispatch_key: str = "") -> Any:
        made = self.side.library(self.ns if ns is None else ns, kind, dispatch_key)
        self.made.append(made)
        return made

    @property
    def fallthrough_kernel(self) -> Any:
        return self.side.fallthrough_kernel

    def close(self) -> None:
        while self.made:
            self.side.close(self.made.pop())


Registration = Callable[[Maker], Any]


@dataclass
class Result:
    state: str
    table: str
    provenance: str


@dataclass
class Outcome:
    """Everything one side produced for one scenario: a result per set of registrations in effect."""

    results: dict[frozenset[int], Result] = field(default_factory=dict)
    final: Result | None = None


_counter = itertools.count()


def run_ops(
    side: Side,
    name: str,
    ops: list[Registration],
    ctor_order: Iterable[int],
    dtor_order: Iterable[int],
    results: dict[frozenset[int], Result],
    *,
    flavour: str = "cpp",
    expect_raises: bool = False,
    tables: bool = True,
    invariants: bool = True,
) -> frozenset[int]:
    """``TestDispatch.run_ops``: run the registrations, then the deregistrations, checking every state.

    Each state is compared with the one recorded for the same set of registrations in effect (on this
    side), which is what makes every order a check of commutativity. Returns the set to report.
    """
    ns = f"__twin{next(_counter)}__"
    qualified = f"{ns}::{name}"
    makers: list[Maker | None] = [None] * len(ops)
    active: set[int] = set()
    ctor_order, dtor_order = list(ctor_order), list(dtor_order)

    def check(provenance: str) -> None:
        if invariants:
            side.check_invariants(qualified)
        state = normalise(side.dump(qualified), ns)
        table = normalise(side.dump_table(qualified), ns) if tables else ""
        expected = results.setdefault(frozenset(active), Result(state, table, provenance))
        assert expected.state == state, f"{side.name}: expected from {expected.provenance}; actual from {provenance}"
        assert expected.table == table, f"{side.name}: expected from {expected.provenance}; actual from {provenance}"

    results.setdefault(frozenset(), Result("", "", "hardcoded initial state"))
    check("initial state")
    report = frozenset(range(len(ops)))
    done: list[int] = []
    for i in ctor_order:
        maker = makers[i] = Maker(side, ns, flavour)
        active.add(i)
        try:
            ops[i](maker)
            done.append(i)
            check(f"running ctors {done}")
        except (RuntimeError, AssertionError, ValueError) as error:
            if not expect_raises or (isinstance(error, AssertionError) and str(error).startswith(side.name)):
                raise
            message = normalise(first_message(error), ns)
            expected = results.setdefault(frozenset(active), Result(message, "", f"error after ctors {[*done, i]}"))
            assert expected.state == message, f"{side.name}: {expected.provenance}"
            report = frozenset(active)
            active.discard(i)
            maker.close()
            check(f"running ctors {done} and then failing to run ctor {i}")
            break
    if expect_raises and len(active) == len(ops):
        raise AssertionError(f"{side.name}: expected an exception, but ctors {ctor_order} all ran")
    for j in dtor_order:
        if makers[j] is not None:
            makers[j].close()
            makers[j] = None
        active.discard(j)
        check(f"running ctors {done}, then dtors up to {j}")
    return report


def commute(
    side: Side,
    name: str,
    ops: list[Registration],
    *,
    ctor_orders: Iterable[tuple[int, ...]] | None = None,
    dtor_orders: Callable[[tuple[int, ...]], Iterable[tuple[int, ...]]] | None = None,
    flavour: str = "cpp",
    expect_raises: bool = False,
    tables: bool = True,
    invariants: bool = True,
    global_module: tuple[str, str, str] | None = None,
) -> Outcome:
    """``TestDispatch.commute``: every registration order x every deregistration order (by default).

    ``dtor_orders`` maps a ctor order to the dtor orders to try (default: all permutations).
    """
    outcome = Outcome()
    n = len(ops)
    orders = list(ctor_orders) if ctor_orders is not None else list(itertools.permutations(range(n)))
    report = frozenset(range(n))
    held = side.cpp_module(*global_module) if global_module else None
    try:
        with side.style():
            for ctor in orders:
                for dtor in (dtor_orders(ctor) if dtor_orders else itertools.permutations(range(n))):
                    report = run_ops(side, name, ops, ctor, dtor, outcome.results, flavour=flavour,
                                     expect_raises=expect_raises, tables=tables, invariants=invariants)  # fmt: skip
    finally:
        if held is not None:
            side.close(held)
    outcome.final = outcome.results.get(frozenset(range(n))) or outcome.results.get(report)
    return outcome


def reversed_and_forward(ctor: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Two deregistration orders per registration order: the reverse (LIFO) and the same order (FIFO)."""
    yield tuple(reversed(ctor))
    yield tuple(ctor)


def extract_rows(table: str, keys: Iterable[str]) -> str:
    """``extract_dispatch_table_with_keys`` from PyTorch's suite: the rows of these keys, in this order."""
    rows = table.split("\n")
    out = ""
    for key in keys:
        for row in rows:
            if row.startswith(key + ":"):
                out += row + "\n"
    return out
