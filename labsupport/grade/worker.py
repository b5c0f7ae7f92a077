"""Grade one exercise in this process: ``python -m labsupport.grade.worker --exercise ex04 ...``.

The parent (``labsupport.grade.runner``) starts one worker per exercise, with a time limit. The worker
imports the learner's file, runs the checks one by one, and after each check rewrites a small JSON
progress file. If the worker hangs or dies, the parent still knows which checks finished and which
one was running.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

from labsupport.grade.checking import Check, CheckFailed, Context, Exercise, describe_exception
from labsupport.grade.registry import load_exercise
from labsupport.grade.results import CheckResult


class Progress:
    """The JSON file the parent reads: finished checks, the running one, and whether all are done."""

    def __init__(self, path: Path, exercise: Exercise, seed: int) -> None:
        self.path = path
        self.state: dict[str, Any] = {
            "exercise": exercise.id,
            "seed": seed,
            "current": None,
            "checks": [],
            "done": False,
            "note": "",
        }
        self.write()

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.path)

    def start(self, check: Check) -> None:
        self.state["current"] = check.number
        self.write()

    def finish(self, result: dict[str, Any]) -> None:
        self.state["checks"].append(result)
        self.state["current"] = None
        self.write()


def import_learner(path: Path) -> ModuleType:
    """Import the learner's file as a module named after it (``ex04_register``)."""
    if not path.exists():
        raise FileNotFoundError(f"{path.name} was not found (looked for {path})")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # the learner's own helper modules, never in front of the lab's
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def run_check(check: Check, ctx: Context) -> dict[str, Any]:
    """Run one check; any exception becomes a failed result with a message and a hint."""
    ctx.check = check
    result = CheckResult(check.number, check.name, check.points)
    try:
        assert check.fn is not None
        message = check.fn(ctx)
    except CheckFailed as failure:
        result.message, result.hint = failure.message, failure.hint
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # the learner's code raised (SystemExit included)
        result.message, result.hint = describe_exception(error, ctx.path, ctx.display)
    else:
        result.score, result.passed, result.message = check.points, True, message or ""
    return asdict(result)


def grade_exercise(exercise: Exercise, path: Path, display: str, seed: int, progress: Progress) -> None:
    try:
        module = import_learner(path)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        if isinstance(error, FileNotFoundError) and not path.exists():
            message, hint = f"{display} is missing", "submit the file with the name of the stub"
        else:
            message, hint = describe_exception(error, path, display)
            message = f"importing {display} failed:\n{message}"
        for check in exercise.checks:
            progress.finish(asdict(CheckResult(check.number, check.name, check.points, message=message, hint=hint)))
        return
    ctx = Context(exercise, module, path, display, seed)
    for check in exercise.checks:
        progress.start(check)
        progress.finish(run_check(check, ctx))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labsupport.grade.worker")
    parser.add_argument("--exercise", required=True)
    parser.add_argument("--file", required=True, type=Path)
    parser.add_argument("--display", required=True)
    parser.add_argument("--seed", required=True, type=int)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tmp", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.tmp is not None:
        os.environ["LAB_GRADE_TMP"] = str(args.tmp)
    exercise = load_exercise(args.exercise)
    progress = Progress(args.out, exercise, args.seed)
    try:
        grade_exercise(exercise, args.file, args.display, args.seed, progress)
    except BaseException:
        progress.state["note"] = "the grader failed:\n" + traceback.format_exc(limit=8)
        progress.write()
        return 3
    progress.state["done"] = True
    progress.write()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # do not wait for threads the learner's code may have left running
