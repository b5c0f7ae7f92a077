"""Registration scenarios for the twin harness (tests/registration_twin.py).

``CPP`` holds PyTorch's own ``test/test_dispatch.py::TestDispatch`` scenarios, translated one for one
(same registrations, same names, same debug strings). ``PYTHON`` holds scenarios written with
``torch.library`` / ``lab.Library`` and plain Python kernels, from what PyTorch 2.13 does when run.

Each scenario: ``ops`` (registrations, each given a :class:`registration_twin.Maker`), and options for
``registration_twin.commute``. ``global_module`` makes a library that lives for the whole scenario,
as some of PyTorch's tests do (``global_m = C._dispatch_library("IMPL", "_", "AutogradCPU")``).
``invariants=False`` marks scenarios whose registration orders leave PyTorch 2.13's *stored* table
stale (its ``_dispatch_check_invariants`` then fails; see pytorch-dispatcher-facts.md section 3.3);
dumps and computed tables are still compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from registration_twin import Maker, Registration, reversed_and_forward

X_T = "foo(Tensor x) -> Tensor"
XY_T = "foo(Tensor x, Tensor y) -> Tensor"


@dataclass
class Scenario:
    ops: list[Registration]
    ctor_orders: list[tuple[int, ...]] | None = None
    dtor_orders: Any = None
    expect_raises: bool = False
    global_module: tuple[str, str, str] | None = None
    invariants: bool = True
    flavour: str = "cpp"
    options: dict[str, Any] = field(default_factory=dict)


def _cpu(x: Any) -> Any:
    return x


def _cpu2(x: Any) -> Any:
    return x


def _autograd(x: Any) -> Any:
    return x


def _fallback(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("registration-only scenario: never called")


CPP: dict[str, Scenario] = {
    "test_def": Scenario(
        [
            lambda m: m.m.def_(X_T),
            lambda m: m.m.impl_t_t("foo"),
            lambda m: m.m.impl_t_t("foo", dispatch="CPU"),
            lambda m: m.m.impl_t_t("foo", dispatch="Autograd"),
            lambda m: m.m.impl_t_t("foo", dispatch="AutogradCPU"),
        ],
        dtor_orders=reversed_and_forward,
    ),
    "test_def_impl_schema_mismatch": Scenario(
        [lambda m: m.m.def_(XY_T), lambda m: m.m.impl_t_t("foo")], expect_raises=True
    ),
    "test_def_with_inference": Scenario(
        [
            lambda m: m.m.def_name_t_t("foo"),
            lambda m: m.m.impl_t_t("foo", "CPU"),
            lambda m: m.m.impl_t_t("foo", "Autograd"),
            lambda m: m.m.impl_t_t("foo", "AutogradCPU"),
        ]
    ),
    "test_def_only": Scenario([lambda m: m.m.def_(XY_T)]),
    "test_impl_only": Scenario(
        [
            lambda m: m.m.impl_t_t("foo"),
            lambda m: m.m.impl_t_t("foo", "CPU"),
            lambda m: m.m.impl_t_t("foo", "Autograd"),
            lambda m: m.m.impl_t_t("foo", "AutogradCPU"),
        ]
    ),
    "test_computed_table": Scenario(
        [
            lambda m: m.m.def_name_t_t("foo"),
            lambda m: m.m.impl_t_t("foo", "CPU", debug="fn_cpu"),
            lambda m: m.m.impl_t_t("foo", "XLA", debug="fn_xla"),
            lambda m: m.m.impl_t_t("foo", "Autograd", debug="fn_autograd"),
            lambda m: m.m.impl_t_t("foo", "AutogradCPU", debug="fn_autogradcpu"),
        ],
        dtor_orders=reversed_and_forward,
    ),
    "test_computed_table_with_cpu_math_autogradcpu_fallthrough": Scenario(
        [lambda m: m.m.def_name_t_t("foo"), lambda m: m.m.impl_t_t("foo", "CPU")],
        global_module=("IMPL", "_", "AutogradCPU"),
    ),
    "test_computed_table_with_math": Scenario(
        [lambda m: m.m.def_(X_T), lambda m: m.m.impl_t_t("foo", "CompositeImplicitAutograd")],
        global_module=("IMPL", "_", "AutogradCPU"),
    ),
    "test_computed_table_with_cpu_math": Scenario(
        [
            lambda m: m.m.def_(X_T),
            lambda m: m.m.impl_t_t("foo", "CPU", debug="fn_cpu"),
            lambda m: m.m.impl_t_t("foo", "CompositeImplicitAutograd", debug="fn_math"),
        ],
        global_module=("IMPL", "_", "AutogradCPU"),
    ),
    "test_computed_table_with_autograd": Scenario(
        [lambda m: m.m.def_(X_T), lambda m: m.m.impl_t_t("foo", "Autograd")],
        global_module=("IMPL", "_", "AutogradCPU"),
    ),
    "test_computed_table_with_cpu_autograd_math": Scenario(
        [
            lambda m: m.m.def_(X_T),
            lambda m: m.m.impl_t_t("foo", "CPU", debug="fn_cpu"),
            lambda m: m.m.impl_t_t("foo", "Autograd", debug="fn_autograd"),
            lambda m: m.m.impl_t_t("foo", "CompositeImplicitAutograd", debug="fn_math"),
        ]
    ),
    "test_computed_table_with_ambiguous_autogradother": Scenario(
        [
            lambda m: m.m.def_(X_T),
            lambda m: m.m.impl_t_t("foo", "CompositeImplicitAutograd", debug="fn_math"),
            lambda m: m.m.impl_t_t("foo", "QuantizedCPU", debug="fn_quantizedcpu"),
        ],
        invariants=False,  # CIA registered before QuantizedCPU leaves 2.13's AutogradOther entry stale
    ),
    "test_computed_table_with_cpu_defaultbackend": Scenario(
        [
            lambda m: m.m.def_(X_T),
            lambda m: m.m.impl_t_t("foo", "CPU", debug="fn_cpu"),
            lambda m: m.m.impl_t_t("foo", "CompositeExplicitAutograd", debug="fn_defaultbackend"),
        ]
    ),
    "test_computed_table_with_cpu_autograd_defaultbackend": Scenario(
        [
            lambda m: m.m.def_(X_T),
            lambda m: m.m.impl_t_t("foo", "CPU", debug="fn_cpu"),
            lambda m: m.m.impl_t_t("foo", "Autograd", debug="fn_autograd"),
            lambda m: m.m.impl_t_t("foo", "CompositeExplicitAutograd", debug="fn_defaultbackend"),
        ]
    ),
    "test_computed_table_with_cpu_autograd_math_defaultbackend": Scenario(
        [
            lambda m: m.m.def_(X_T),
            lambda m: m.m.impl_t_t("foo", "CPU", debug="fn_cpu"),
            lambda m: m.m.impl_t_t("foo", "Autograd", debug="fn_autograd"),
            lambda m: m.m.impl_t_t("foo", "CompositeImplicitAutograd", debug="fn_math"),
            lambda m: m.m.impl_t_t("foo", "CompositeExplicitAutograd", debug="fn_defaultbackend"),
        ],
        dtor_orders=reversed_and_forward,
        invariants=False,  # CIA registered before CEA leaves 2.13's autograd entries stale
    ),
    "test_multiple_def_error": Scenario([lambda m: m.m.def_(XY_T), lambda m: m.m.def_(XY_T)], expect_raises=True),
    "test_def_with_explicit_alias": Scenario([lambda m: m.m.def_(XY_T, alias="PURE_FUNCTION")]),
    "test_multiple_def_alias_mismatch": Scenario(
        [lambda m: m.m.def_(X_T, alias="PURE_FUNCTION"), lambda m: m.m.def_(X_T, alias="CONSERVATIVE")],
        expect_raises=True,
    ),
    "test_overwrite_math": Scenario(
        [lambda m: m.m.impl_t_t("foo", debug="fn1"), lambda m: m.m.impl_t_t("foo", debug="fn2")],
        ctor_orders=[(0, 1)],  # not commutative: the newest kernel wins
    ),
}


def _impl_library(key: str) -> Registration:
    def register(m: Maker) -> None:
        m.library("IMPL", dispatch_key=key).impl("foo", _cpu)

    return register


def _fallback_on(key: str, fallthrough: bool) -> Registration:
    def register(m: Maker) -> None:
        m.library("IMPL", ns="_").fallback(m.fallthrough_kernel if fallthrough else _fallback, key)

    return register


PYTHON: dict[str, Scenario] = {
    # impl before define, per-key kernels, a per-op fallthrough: every order of 4, two dtor orders each
    "impl_before_define_and_fallthrough": Scenario(
        [
            lambda m: m.m.define(X_T),
            lambda m: m.m.impl("foo", _cpu, "CPU"),
            lambda m: m.m.impl("foo", _autograd, "Autograd"),
            lambda m: m.m.impl("foo", m.fallthrough_kernel, "AutogradCPU"),
        ],
        dtor_orders=reversed_and_forward,
        flavour="python",
    ),
    # every order of 3, every dtor order: alias analysis, a library-wide key, a catch-all kernel
    "conservative_def_impl_library_and_catch_all": Scenario(
        [
            lambda m: m.m.define(X_T, alias_analysis="CONSERVATIVE"),
            _impl_library("CPU"),
            lambda m: m.m.impl("foo", _cpu2),
        ],
        flavour="python",
    ),
    # an override: the older kernel stays, "(inactive)", and comes back when the newer one goes
    "override_and_restore": Scenario(
        [lambda m: m.m.define(X_T), lambda m: m.m.impl("foo", _cpu, "CPU"), lambda m: m.m.impl("foo", _cpu2, "CPU")],
        ctor_orders=[(0, 1, 2), (1, 2, 0), (1, 0, 2)],
        flavour="python",
    ),
    # backend fallbacks (global, one slot each) next to an operator's own kernels
    "fallbacks_and_kernels": Scenario(
        [
            lambda m: m.m.define(X_T),
            lambda m: m.m.impl("foo", _cpu, "CPU"),
            _fallback_on("FPGA", fallthrough=False),
            _fallback_on("XLA", fallthrough=True),
        ],
        dtor_orders=reversed_and_forward,
        flavour="python",
    ),
    # CIA + AutogradCPU + CPU: the math kernel loses the CPU backend's autograd slot
    "math_cpu_autogradcpu": Scenario(
        [
            lambda m: m.m.define(X_T),
            lambda m: m.m.impl("foo", _cpu2, "CompositeImplicitAutograd"),
            lambda m: m.m.impl("foo", _cpu, "CPU"),
            lambda m: m.m.impl("foo", _autograd, "AutogradCPU"),
        ],
        dtor_orders=reversed_and_forward,
        flavour="python",
    ),
}
