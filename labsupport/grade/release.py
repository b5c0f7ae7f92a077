"""The student edition of the course: ``make student-edition`` (``.venv/bin/python -m
labsupport.grade.release --out DIR``).

nbgrader's release step, in spirit: the instructor edition is the repository; the student edition is
a copy of it without what only instructors may see:

* ``solutions/`` (the reference answers);
* the per-exercise grader tests ``tests/test_grade_*.py`` (they hold the answers and their wrong
  variants; the framework's own ``test_grade.py``, ``_hostile`` and ``_editions`` stay) and any
  file named ``*.instructor.*`` or under an ``instructor/`` folder;
* the outputs of the notebooks' grading and exercise cells (cells calling ``lab.grade(`` or
  ``lab.load_exercise(``, or tagged ``exercise``), which show the instructor's own grades, when nbval
  does not compare them (``NBVAL_SKIP`` / ``NBVAL_IGNORE_OUTPUT`` / tags): their execution counts stay,
  so the notebooks still read as run top to bottom;
* local state: ``.venv``, ``build/``, ``dist/``, caches, grade histories.

It adds ``tests/data/pristine_exercises/``, the untouched stubs, which the stub-grading tests use once
the learner has edited ``exercises/`` (``labsupport.grade.pristine``). The checks themselves stay: a
learner grades their own work with them, and they hold no expected values (those are computed from
the seed by the lab's engine at grading time).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from labsupport.grade.registry import REPO_ROOT

NEVER = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"}
INSTRUCTOR_ONLY = ("solutions/",)
FRAMEWORK_TESTS = {"test_grade_hostile.py", "test_grade_editions.py"}  # they skip what needs solutions/
GRADE_CALLS = ("lab.grade(", "load_exercise(")
NOT_COMPARED = ("NBVAL_SKIP", "NBVAL_IGNORE_OUTPUT")
NOT_COMPARED_TAGS = {"nbval-skip", "nbval-ignore-output"}


def course_files(root: Path = REPO_ROOT) -> list[str]:
    """Files of the course, relative to ``root``: git's tracked and unignored files, else a walk."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, timeout=60, check=True,
        )  # fmt: skip
        names = [n for n in done.stdout.decode().split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        names = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return sorted(n for n in names if (root / n).is_file() and not set(Path(n).parts) & NEVER)


def instructor_only(name: str) -> bool:
    """True for a file the student edition leaves out."""
    path = Path(name)
    if name.startswith(INSTRUCTOR_ONLY) or "instructor" in path.parts or ".instructor." in path.name:
        return True
    if path.parent.as_posix() == "tests" and path.name.startswith("test_grade_") and path.name not in FRAMEWORK_TESTS:
        return True  # per-exercise grader tests: they hold the answers and their wrong variants
    return path.name == ".lab-grade-history.json"


def clear_grading_outputs(notebook: dict) -> list[int]:
    """Empty the outputs of grading/exercise cells nbval does not compare; returns their indices."""
    cleared = []
    for index, cell in enumerate(notebook.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", []))
        tags = set(cell.get("metadata", {}).get("tags", []))
        grading = any(call in source for call in GRADE_CALLS) or "exercise" in tags
        uncompared = any(f"# {marker}" in source for marker in NOT_COMPARED) or bool(tags & NOT_COMPARED_TAGS)
        if grading and uncompared and cell.get("outputs"):
            cell["outputs"] = []
            cleared.append(index)
    return cleared


def write_student_edition(out: Path, root: Path = REPO_ROOT) -> dict[str, list[str]]:
    """Write the student edition into ``out`` (which must not exist or be empty); returns what was done."""
    from labsupport.grade.pristine import pristine_exercises

    out = out.resolve()
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; choose a new folder for the student edition")
    try:
        inside = out.relative_to(root.resolve()).parts
    except ValueError:
        inside = None
    if inside is not None and (not inside or inside[0] not in NEVER):  # dist/... is fine: never copied
        raise ValueError(f"write the student edition outside the course, or under dist/ ({out} is inside {root})")
    report: dict[str, list[str]] = {"copied": [], "left out": [], "cleared cells": []}
    for name in course_files(root):
        if instructor_only(name):
            report["left out"].append(name)
            continue
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".ipynb"):
            notebook = json.loads((root / name).read_text())
            cleared = clear_grading_outputs(notebook)
            report["cleared cells"] += [f"{name}#{i}" for i in cleared]
            target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
        else:
            shutil.copy2(root / name, target)
        report["copied"].append(name)
    pristine_exercises(out / "tests" / "data" / "pristine_exercises", root=root)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m labsupport.grade.release", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="an empty or new folder")
    args = parser.parse_args(argv)
    try:
        report = write_student_edition(args.out)
    except (FileExistsError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"student edition written to {args.out}: {len(report['copied'])} files")
    print(f"left out ({len(report['left out'])}): " + ", ".join(report["left out"]))
    print(f"grading cells cleared: {len(report['cleared cells'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
