"""Worker side of ex04b: call the learner's ``fill_table`` on each scenario and report the answers as
plain JSON. No expected values and no verdicts live here.

While the learner's function runs, the lab's table builder is switched off (``engine_off``): the
exercise asks for the table to be worked out from the precedence rules, not read back from a
``lab.Dispatcher`` or ``lab.PythonDispatcher``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


@contextmanager
def engine_off(exercise: str, what: str) -> Iterator[None]:
    """Make every dispatch-table computation raise while the block runs (restored afterwards)."""
    from labsupport.c10.operator_entry import OperatorEntry

    saved = OperatorEntry._compute, OperatorEntry.update_table

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{exercise}: the grader switches the lab's dispatch-table builder off while {what} runs; "
            "work the answer out from the rules instead of building a lab.Dispatcher"
        )

    OperatorEntry._compute, OperatorEntry.update_table = refuse, refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        OperatorEntry._compute, OperatorEntry.update_table = saved  # type: ignore[method-assign]


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON data: tuples become lists, unknown objects their ``repr`` (shortened)."""
    if depth > 6:
        return "<too deep>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in list(value)[:200]]
    if isinstance(value, dict):
        return {str(k)[:80]: plain(v, depth + 1) for k, v in list(value.items())[:200]}
    name = getattr(value, "name", None)
    if isinstance(name, str):  # a DispatchKey
        return name
    return f"<{type(value).__name__}: {repr(value)[:80]}>"


def fill_tables(learner: ModuleType, inputs: Any) -> Any:
    """The learner's table for every scenario: ``[{key: [kernel, label]}, ...]``."""
    answers = []
    for scenario in inputs["scenarios"]:
        with engine_off("ex04b", "fill_table"):
            answer = learner.fill_table(
                list(scenario["registrations"]), dict(scenario["fallbacks"]), list(scenario["keys"])
            )
        answers.append(plain(answer))
    return answers
