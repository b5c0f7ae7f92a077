"""The lab's grader: ``lab.grade("ex04")`` in a notebook, ``make grade EX=ex04`` (or
``.venv/bin/python -m labsupport.grade ex04``) in a shell.

Two parts, and the learner's code runs in only one of them:

* what the worker observes -- ``worker`` (the sandboxed process: ``sandbox`` confines it) calls each
  exercise's ``<exercise>/observe.py`` on the given inputs and reports plain JSON (``jsonable``);
* what the parent decides -- ``runner`` plans the inputs from the seed (``checking.check_rng``), runs the
  workers (``processes``: caps, deadlines, a fork server) and ``verdicts`` turns what came back into
  results with each ``<exercise>/decide.py`` (``deciding``: its shared readers), never seen by the worker.

``checking`` holds what exercises are written with (Exercise, Check, Verdict; GRADER_PROTOCOL.md),
``registry`` finds them, ``results`` writes the report and Gradescope's results.json, ``pristine`` gives
the untouched stubs to tests, ``release`` and ``gradescope`` write the student edition and the
Gradescope bundle.
"""

from __future__ import annotations

import json as _json
import sys as _sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from labsupport.grade.registry import REPO_ROOT
from labsupport.grade.results import CheckResult, ExerciseResult, GradeResult
from labsupport.grade.runner import DEFAULT_TIMEOUT, choose_seed, resolve_exercises, run_folders

NOT_DONE = "not done yet"


def grade(
    *exercises: str | Iterable[str],
    solutions: bool = False,
    folder: str | Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int | None = None,
    seed: int | None = None,
    json: str | Path | None = None,
    quiet: bool = False,
    show_times: bool = False,
) -> GradeResult:
    """Grade exercises (all when none are named) and print a report; returns the GradeResult.

    ``lab.grade("ex04")`` grades exercises/ex04_register.py; ``solutions=True`` grades solutions/;
    ``folder=`` grades another folder. ``json=`` also writes Gradescope's results.json there.
    The printed text is the same every run (no times, no seed) unless a check fails on random inputs,
    in which case the seed is shown so the same inputs can be used again (``seed=`` or LAB_GRADE_SEED).
    """
    names: list[str] = []
    for item in exercises:
        names.extend([item] if isinstance(item, str) else list(item))
    ids = resolve_exercises(names)
    root = Path(folder) if folder is not None else REPO_ROOT / ("solutions" if solutions else "exercises")
    chosen = choose_seed(seed)
    result = run_folders({"": root}, ids, seed=chosen, timeout=timeout, jobs=jobs)[""]
    if json is not None:
        Path(json).write_text(_json.dumps(result.to_gradescope(), indent=2))
    if not quiet:
        print(result.report(show_times=show_times, show_seed=needs_seed(result)))
    return result


def load_exercise(name: str, folder: str | Path | None = None) -> ModuleType:
    """The learner's exercise module, freshly imported from ``exercises/`` (works from ``notebooks/``):
    ``ex06 = lab.load_exercise("ex06")``. Re-running the cell picks up edits to the file."""
    from labsupport.grade.registry import load_exercise as _exercise
    from labsupport.grade.registry import resolve

    exercise = _exercise(resolve(name))
    path = (Path(folder) if folder is not None else REPO_ROOT / "exercises") / exercise.filename
    if not path.exists():
        raise FileNotFoundError(f"{path} was not found: the exercise file {exercise.filename} belongs in exercises/")
    from labsupport.grade.worker import module_from_source

    return module_from_source(path)


def needs_seed(result: GradeResult) -> bool:
    """True when some check failed for a reason other than "not done yet" (so inputs matter)."""
    return any(not c.passed and NOT_DONE not in c.hint for e in result.exercises for c in e.checks)


class _GradePackage(ModuleType):
    """``labsupport.grade`` is the grader's package and, called, ``grade()``: ``lab.grade("ex04")`` (DESIGN.md's
    contract) and ``import labsupport.grade.checking`` both work."""

    __call__ = staticmethod(grade)


_sys.modules[__name__].__class__ = _GradePackage

__all__ = ["CheckResult", "ExerciseResult", "GradeResult", "grade", "load_exercise"]
