"""``.venv/bin/python -m labsupport.grade [EXERCISE ...] [--solutions] [--json FILE] [--timeout S] [--jobs N]
[--submissions DIR] [--strict] [--seed N]`` (``make grade`` runs it with the lab's venv).

Exit code: 0 when every check passed, 1 when some check failed, 2 when grading itself could not run
(a results.json is written anyway when --json was given).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from labsupport.grade.registry import REPO_ROOT, exercise_ids
from labsupport.grade.results import crash_results
from labsupport.grade.runner import DEFAULT_TIMEOUT, choose_seed, resolve_exercises, run_folders, student_folders


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m labsupport.grade",
        description="Grade the Dispatcher Lab exercises (`make grade` or `make grade EX=ex04` run this with the "
        "lab's venv). Each exercise runs in its own sandboxed process with a time limit; verdicts are decided here.",
        epilog=f"Exercises: {', '.join(exercise_ids())}. Set LAB_GRADE_SEED to repeat a run's random inputs.",
    )
    parser.add_argument("exercises", nargs="*", metavar="EXERCISE", help="e.g. ex04 or 4 (default: all)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--solutions", action="store_true", help="grade solutions/ instead of exercises/")
    source.add_argument("--folder", type=Path, help="grade the exercise files in this folder")
    source.add_argument(
        "--submissions",
        type=Path,
        metavar="DIR",
        help="grade every student folder in DIR (each holding exercises/ or the files)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="write Gradescope's results.json (with --submissions: one dict keyed by student)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit per exercise (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="exercises graded in parallel")
    parser.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default: random)")
    parser.add_argument("--times", action="store_true", help="show how long each exercise took")
    parser.add_argument("--failures", action="store_true", help="list failed checks only")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="instructor grading: refuse to run learner code unless the kernel sandbox (Landlock + seccomp) "
        "can be applied (always on with --submissions)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # a usage error: argparse printed it; still leave a results.json
        if stop.code not in (0, None):
            _write_crash_json(argv, "invalid command line: " + " ".join(argv))
        raise
    start = time.perf_counter()
    seed = 0
    try:
        seed = choose_seed(args.seed)
        ids = resolve_exercises(args.exercises)
        if args.submissions is not None:
            folders = student_folders(args.submissions)
            if not folders:
                raise FileNotFoundError(f"{args.submissions} holds no student folders")
        elif args.folder is not None:
            folders = {"": args.folder}
        else:
            folders = {"": REPO_ROOT / ("solutions" if args.solutions else "exercises")}
        strict = args.strict or args.submissions is not None
        results = run_folders(folders, ids, seed=seed, timeout=args.timeout, jobs=args.jobs, strict=strict)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        message = "".join(traceback.format_exception_only(type(error), error)).strip()
        if not isinstance(error, (ValueError, FileNotFoundError)):
            message = traceback.format_exc()
        print(f"error: {message}", file=sys.stderr)
        if args.json is not None:
            args.json.write_text(
                json.dumps(crash_results(message, seed=seed, seconds=time.perf_counter() - start), indent=2)
            )
        return 2

    for result in results.values():
        print(result.report(show_times=args.times, show_seed=True, only_failures=args.failures))
        print()
    if args.submissions is not None:
        print("Summary")
        for name, result in results.items():
            print(f"  {name:<24} {result.score:>3}/{result.max_score}")
        if args.json is not None:
            data = {name: r.to_gradescope() for name, r in results.items()}
            args.json.write_text(json.dumps(data, indent=2))
        else:
            for name, result in results.items():
                (args.submissions / name / "results.json").write_text(json.dumps(result.to_gradescope(), indent=2))
    elif args.json is not None:
        args.json.write_text(json.dumps(results[""].to_gradescope(), indent=2))
    return 0 if all(r.passed for r in results.values()) else 1


def _write_crash_json(argv: list[str], message: str) -> None:
    """Find --json in a command line argparse rejected, and write a crash results.json there."""
    for i, arg in enumerate(argv):
        path = argv[i + 1] if arg == "--json" and i + 1 < len(argv) else arg.partition("=")[2]
        if arg == "--json" or arg.startswith("--json="):
            try:
                Path(path).write_text(json.dumps(crash_results(message), indent=2))
            except OSError:
                pass
            return


if __name__ == "__main__":
    sys.exit(main())
