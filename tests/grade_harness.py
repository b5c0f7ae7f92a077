"""An in-process stand-in for the grader's runner, for testing an exercise's checks on their own.

For each two-part check it does what the runner and the sandboxed worker do together, in one process
and without a sandbox: ``plan(rng)`` -> JSON round trip -> import the learner file -> the observer
function -> JSON round trip -> ``decide(inputs, observed)`` -> a Verdict. An exception escaping the
observer becomes a failed check described by ``checking.describe_exception``, as the framework does
(the untouched stub's NotImplementedError gives "not done yet"). ``attempt`` selects which hint
the framework would show after that many earlier failures.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from labsupport.grade.checking import Verdict, describe_exception
from labsupport.grade.registry import load_exercise

_counter = itertools.count()


@dataclass
class Graded:
    number: str
    points: int
    verdict: Verdict
    inputs: Any = None
    observed: Any = None

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    @property
    def score(self) -> int:
        return self.points if self.verdict.passed else 0

    def hint(self, attempt: int = 0) -> str:
        hints = self.verdict.hints
        return hints[min(attempt, len(hints) - 1)] if hints else ""

    @property
    def text(self) -> str:
        """The message and every hint level, for assertions that look for words anywhere."""
        return "\n".join([self.verdict.message, *self.verdict.hints])


def import_learner(path: Path) -> ModuleType:
    """A fresh module object for the learner's file (a new name each time: no stale imports)."""
    name = f"{path.stem}_graded_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def exercise_number_hash(number: int | str) -> int:
    return number if isinstance(number, int) else sum(ord(c) * 31**i for i, c in enumerate(str(number)))


def grade(exercise_id: str, path: Path, *, seed: int = 0, only: str | None = None) -> dict[str, Graded]:
    """Grade ``path`` in-process; ``{check number: Graded}``."""
    exercise = load_exercise(exercise_id)
    observer = importlib.import_module(exercise.observer)
    learner = import_learner(path)
    graded: dict[str, Graded] = {}
    for index, check in enumerate(exercise.checks):
        if only is not None and check.number != only:
            continue
        assert check.plan is not None and check.decide is not None, f"{check.number} is not a two-part check"
        rng = np.random.default_rng([seed, exercise_number_hash(exercise.number), index])
        inputs = json.loads(json.dumps(check.plan(rng)))  # only plain JSON crosses to the worker
        try:
            observed = json.loads(json.dumps(getattr(observer, check.observe)(learner, inputs)))
        except Exception as error:
            message, hint = describe_exception(error, path, path.name)
            graded[check.number] = Graded(check.number, check.points, Verdict(False, message, (hint,)), inputs)
            continue
        verdict = check.decide(inputs, observed)
        assert isinstance(verdict, Verdict)
        graded[check.number] = Graded(check.number, check.points, verdict, inputs, observed)
    return graded


def score(graded: dict[str, Graded]) -> int:
    return sum(g.score for g in graded.values())
