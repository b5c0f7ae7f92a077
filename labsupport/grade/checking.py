"""What an exercise's checks are made of: ``Exercise``, ``Check`` and ``Verdict`` (GRADER_PROTOCOL.md).

Every check has two halves that never share a process with each other's trust:

* the worker (``<exercise>/observe.py``) calls the learner's functions on the check's inputs and
  reports what happened, as plain JSON: it decides nothing;
* the parent (``<exercise>/decide.py``) makes the inputs (``plan(rng)``), computes the expected values
  with the lab's engine and decides (``decide(inputs, observed) -> Verdict``).

This module is imported by the parent (to know the checks and their points) and stays light: no
numpy at import, no builds.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """What the parent decides for one check: passed or not, a message,
    and hints from gentle (a pointer to the notebook) to specific (never the answer's code)."""

    passed: bool
    message: str
    hints: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One graded check: ``plan(rng)`` (parent) makes JSON inputs, the observer function named
    ``observe`` (worker) returns JSON observations, ``decide(inputs, observed)`` (parent) returns a Verdict."""

    number: str  # "4.2"
    name: str
    points: int
    plan: Callable[[Any], Any]
    observe: str
    decide: Callable[[Any, Any], Verdict]


@dataclass
class Exercise:
    """An exercise: the learner's file, the notebook that teaches it, its observer module and its checks."""

    id: str  # "ex04", "ex04b"
    number: int | str  # 4, or "4b"
    title: str
    filename: str  # "ex04_register.py"
    notebook: str  # "04 (registering operators)"
    observer: str  # the worker-side module, "labsupport.grade.ex04b_fill_table.observe"
    checks: list[Check] = field(default_factory=list)

    @property
    def max_points(self) -> int:
        return sum(c.points for c in self.checks)

    def add_check(
        self,
        number: str,
        name: str,
        points: int,
        *,
        plan: Callable[[Any], Any],
        observe: str,
        decide: Callable[[Any, Any], Verdict],
    ) -> Check:
        """Add check ``number``: ``plan`` and ``decide`` run in the parent, the observer function
        ``observe`` in the sandboxed worker."""
        if not observe or plan is None or decide is None:
            raise ValueError(f"{self.id} check {number}: plan=, observe= and decide= are all needed")
        check = Check(number, name, points, plan=plan, observe=observe, decide=decide)
        self.checks.append(check)
        return check


def check_rng(seed: int, exercise: Exercise, index: int) -> Any:
    """The Generator check ``index`` plans with: ``default_rng([seed, crc32(exercise number), index])``
    (a number like "4b" works as well as 4)."""
    import numpy as np

    return np.random.default_rng([int(seed), zlib.crc32(str(exercise.number).encode()), int(index)])
