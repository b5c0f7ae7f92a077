"""The lab's grader: ``lab.grade("ex04")`` in a notebook, ``python -m labsupport.grade`` in a shell.

Each exercise is graded in its own process with a time limit, on seeded random inputs, against the
lab's own engine; see ``python -m labsupport.grade --help``. The pieces:

* ``checking``  -- Exercise / Check / Context, what exercise graders are written with
* ``ex02_keyset``, ``ex04_register``, ... -- the checks of each exercise
* ``worker``    -- grades one exercise inside one process
* ``runner``    -- starts the workers (in parallel, with time limits) and collects their results
* ``results``   -- the report text and Gradescope's results.json
"""

from __future__ import annotations

import json as _json
from collections.abc import Iterable
from pathlib import Path

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


def needs_seed(result: GradeResult) -> bool:
    """True when some check failed for a reason other than "not done yet" (so inputs matter)."""
    return any(not c.passed and NOT_DONE not in c.hint for e in result.exercises for c in e.checks)


__all__ = ["CheckResult", "ExerciseResult", "GradeResult", "grade"]
