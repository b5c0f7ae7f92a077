"""The Gradescope autograder bundle: ``make gradescope`` (``.venv/bin/python -m
labsupport.grade.gradescope --out autograder.zip``), and what its ``run_autograder`` runs:
``python -m labsupport.grade.gradescope run`` (with the bundle's own venv).

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once when the image is built,
then for each submission copies the student's files to ``/autograder/submission`` and runs
``/autograder/run_autograder``, which must leave ``/autograder/results/results.json``. The bundle holds
the student edition of the lab (no ``solutions/``: the expected values come from the lab's engine),
``setup.sh`` (a venv with the lab installed), ``run_autograder`` and ``gradescope.json`` (which
exercises to grade, the time limit). Grading is strict: where the kernel sandbox cannot be applied,
every check is reported "sandbox-unavailable" and no student code runs. The paths come from
``AUTOGRADER_ROOT`` (default ``/autograder``) so the bundle can be tried in any folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

from labsupport.grade.registry import REPO_ROOT

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-pip > /dev/null
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$ROOT/source"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission; it always leaves results/results.json.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${LAB_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source" || exit 1
export PYTHONPATH="$ROOT/source${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m labsupport.grade.gradescope run --root "$ROOT"
"""


def build_bundle(out: Path, exercises: list[str] | None = None, timeout: float = 60.0) -> Path:
    """Write the autograder zip: setup.sh, run_autograder, gradescope.json and the student edition."""
    from labsupport.grade.release import write_student_edition
    from labsupport.grade.runner import resolve_exercises

    ids = resolve_exercises(exercises or [])
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lab-gradescope-") as tmp:
        source = Path(tmp) / "source"
        write_student_edition(source)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
            for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
                info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
                info.external_attr = 0o100755 << 16  # executable
                bundle.writestr(info, text)
            bundle.writestr("gradescope.json", json.dumps({"exercises": ids, "timeout": timeout}, indent=1))
            for path in sorted(source.rglob("*")):
                if path.is_file():
                    bundle.write(path, path.relative_to(source).as_posix())
    return out


def run(root: Path) -> int:
    """``run_autograder``: grade ``root/submission`` strictly, write ``root/results/results.json``."""
    from labsupport.grade.results import crash_results
    from labsupport.grade.runner import choose_seed, run_folders

    start = time.perf_counter()
    results_path = root / "results" / "results.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    seed = choose_seed(None)
    try:
        config_path = root / "source" / "gradescope.json"
        config = json.loads(config_path.read_text()) if config_path.exists() else {}
        ids = config.get("exercises") or None
        from labsupport.grade.runner import resolve_exercises

        folder = _submission_folder(root / "submission")
        result = run_folders({"": folder}, resolve_exercises(ids), seed=seed,
                             timeout=float(config.get("timeout", 60.0)), jobs=None, strict=True)[""]  # fmt: skip
        data = result.to_gradescope()
        print(result.report(show_seed=True))
    except Exception:
        data = crash_results(traceback.format_exc(limit=6), seed=seed, seconds=time.perf_counter() - start)
        print(data["output"], file=sys.stderr)
    results_path.write_text(json.dumps(data, indent=2))
    return 0  # Gradescope reads results.json; a non-zero exit would only hide it


def _submission_folder(folder: Path) -> Path:
    """Students upload the files, a folder holding them, or the whole course: find the exercise files."""
    from labsupport.grade.registry import exercise_ids, load_exercise

    names = {load_exercise(i).filename for i in exercise_ids()}
    for candidate in (folder, folder / "exercises", *sorted(p for p in folder.rglob("*") if p.is_dir())):
        if any((candidate / n).is_file() for n in names):
            return candidate
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m labsupport.grade.gradescope", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command")
    runner = sub.add_parser("run", help="what run_autograder runs")
    runner.add_argument("--root", type=Path, default=Path(os.environ.get("AUTOGRADER_ROOT", "/autograder")))
    parser.add_argument("--out", type=Path, help="the zip to write (default dist/gradescope_autograder.zip)")
    parser.add_argument("--exercise", action="append", dest="exercises", help="grade only these (repeatable)")
    parser.add_argument("--timeout", type=float, default=60.0, help="time limit per exercise in seconds")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.root)
    out = build_bundle(args.out or REPO_ROOT / "dist" / "gradescope_autograder.zip", args.exercises, args.timeout)
    print(f"Gradescope autograder bundle: {out} ({out.stat().st_size // 1024} KiB); upload it as the "
          "assignment's autograder (see exercises/README.md, For instructors)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
