"""An in-process stand-in for the grader's runner, for testing an exercise's checks on their own.

For each check it does what the runner and the sandboxed worker do together, in one process and
without a sandbox, with the framework's own pieces: ``plan(checking.check_rng(...))`` -> JSON round
trip -> import the learner file -> the observer function -> JSON round trip -> ``decide(inputs,
observed)``. An exception escaping the observer is described by ``worker.describe`` and
``verdicts.describe_error``, exactly as the grader reports it (the untouched stub's
NotImplementedError gives "not done yet"). ``hint(attempt)`` selects the hint the framework shows
after that many earlier failures.
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

from labsupport.grade.checking import Verdict, check_rng
from labsupport.grade.pristine import pristine_exercises
from labsupport.grade.registry import REPO_ROOT, load_exercise
from labsupport.grade.verdicts import describe_error
from labsupport.grade.worker import describe

SOLUTIONS = REPO_ROOT / "solutions"
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


def grade(exercise_id: str, path: Path, *, seed: int = 0, only: str | None = None) -> dict[str, Graded]:
    """Grade ``path`` in-process with the inputs the grader plans for ``seed``; ``{check number: Graded}``."""
    exercise = load_exercise(exercise_id)
    observer = importlib.import_module(exercise.observer)
    learner = import_learner(path)
    graded: dict[str, Graded] = {}
    for index, check in enumerate(exercise.checks):
        if only is not None and check.number != only:
            continue
        inputs = json.loads(json.dumps(check.plan(check_rng(seed, exercise, index))))  # what the worker gets
        try:
            observed = json.loads(json.dumps(getattr(observer, check.observe)(learner, inputs)))
        except Exception as error:
            message, hint = describe_error(describe(error, path, path.name, []), path.name)
            graded[check.number] = Graded(check.number, check.points, Verdict(False, message, (hint,)), inputs)
            continue
        verdict = check.decide(inputs, observed)
        assert isinstance(verdict, Verdict)
        graded[check.number] = Graded(check.number, check.points, verdict, inputs, observed)
    return graded


def score(graded: dict[str, Graded]) -> int:
    return sum(g.score for g in graded.values())


def solution(exercise_id: str) -> Path:
    return SOLUTIONS / load_exercise(exercise_id).filename


def pristine_stub(exercise_id: str, folder: Path) -> Path:
    """The untouched stub of ``exercise_id`` (``labsupport.grade.pristine``: never the learner's edited file)."""
    return pristine_exercises(folder / "pristine") / load_exercise(exercise_id).filename
