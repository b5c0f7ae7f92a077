"""Grading runs: one worker process per (folder, exercise), in parallel, each with a time limit.

A hang becomes a failed check "timed out after N s"; a crash shows what the process printed; the
other exercises are graded regardless. Nothing is ever failed because something was written to
stderr: a worker's output is only looked at when the worker itself did not finish.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from labsupport.grade.registry import REPO_ROOT, exercise_ids, load_exercise, resolve
from labsupport.grade.results import CheckResult, ExerciseResult, GradeResult

DEFAULT_TIMEOUT = 60.0
SEED_ENV = "LAB_GRADE_SEED"


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def choose_seed(seed: int | None = None) -> int:
    """The given seed, else ``$LAB_GRADE_SEED``, else a fresh random one (so answers cannot be memorised)."""
    if seed is not None:
        return int(seed)
    env = os.environ.get(SEED_ENV, "").strip()
    if env:
        return int(env)
    return secrets.randbelow(2**31)


def resolve_exercises(names: list[str] | tuple[str, ...] | None) -> list[str]:
    """Exercise ids in the order given (all of them when none are named), without duplicates."""
    if not names:
        return exercise_ids()
    ids: list[str] = []
    for name in names:
        exercise_id = resolve(name)
        if exercise_id not in ids:
            ids.append(exercise_id)
    return ids


def exercises_folder(folder: Path) -> Path:
    """A student's folder may hold the files directly or in an ``exercises/`` sub-folder."""
    sub = folder / "exercises"
    return sub if sub.is_dir() else folder


def display_name(folder: Path) -> str:
    """How a graded folder is named in reports: relative to the lab when inside it."""
    try:
        return folder.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return folder.name


@dataclass
class _Task:
    key: str  # student name, or "" for a single folder
    folder: Path
    exercise_id: str


def run_folders(
    folders: dict[str, Path],
    exercises: list[str],
    *,
    seed: int,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int | None = None,
) -> dict[str, GradeResult]:
    """Grade several folders (key -> folder); every (folder, exercise) pair runs in its own process."""
    start = time.perf_counter()
    _prepare_default_build()
    tasks = [_Task(key, folder, ex) for key, folder in folders.items() for ex in exercises]
    with (
        tempfile.TemporaryDirectory(prefix="lab-grade-") as tmp,
        ThreadPoolExecutor(max_workers=jobs or default_jobs()) as pool,
    ):
        futures = [
            pool.submit(_safe_run_task, task, seed, timeout, Path(tmp) / f"task{i}") for i, task in enumerate(tasks)
        ]
        try:
            outcomes = [f.result() for f in futures]
        except BaseException:  # e.g. Ctrl-C, or an interrupted notebook kernel: stop every worker we started
            for future in futures:
                future.cancel()
            kill_workers()
            raise
    results: dict[str, GradeResult] = {}
    for key, folder in folders.items():
        results[key] = GradeResult(folder=display_name(folder), seed=seed, student=key)
    for task, outcome in zip(tasks, outcomes):
        results[task.key].exercises.append(outcome)
    elapsed = time.perf_counter() - start
    for result in results.values():
        result.seconds = elapsed
    return results


def _prepare_default_build() -> None:
    """Generate build/torch once, here, so parallel workers never race to write it."""
    try:
        from labsupport.codegen.build import write_build

        write_build()
    except Exception:  # the workers will report whatever is wrong
        pass


def _safe_run_task(task: _Task, seed: int, timeout: float, tmp: Path) -> ExerciseResult:
    """``_run_task``, but a failure of the grader itself still gives a (failed) result per check."""
    try:
        return _run_task(task, seed, timeout, tmp)
    except Exception:
        exercise = load_exercise(task.exercise_id)
        note = "the grader could not run this exercise:\n" + traceback.format_exc(limit=6)
        result = ExerciseResult(exercise.id, exercise.number, exercise.title, exercise.filename, exercise.notebook,
                                status="crashed", note=note)  # fmt: skip
        for check in exercise.checks:
            result.checks.append(CheckResult(check.number, check.name, check.points, message="not run: grader error"))
        return result


def _run_task(task: _Task, seed: int, timeout: float, tmp: Path) -> ExerciseResult:
    exercise = load_exercise(task.exercise_id)
    folder = exercises_folder(task.folder.resolve())
    path = folder / exercise.filename
    display = f"{display_name(folder)}/{exercise.filename}"
    result = ExerciseResult(exercise.id, exercise.number, exercise.title, display, exercise.notebook)
    tmp.mkdir(parents=True)
    out = tmp / "progress.json"
    options = {"--exercise": exercise.id, "--file": str(path), "--display": display, "--seed": str(seed),
               "--out": str(out), "--tmp": str(tmp)}  # fmt: skip
    cmd = [sys.executable, "-m", "labsupport.grade.worker", *itertools.chain.from_iterable(options.items())]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ in the learner's folder
    env.pop(SEED_ENV, None)  # the worker gets the seed explicitly
    stdout_path, stderr_path = tmp / "stdout.txt", tmp / "stderr.txt"
    started = time.perf_counter()
    timed_out = False
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, env=env,
                                cwd=str(folder.parent), start_new_session=True)  # fmt: skip
        with _live_lock:
            _live.add(proc)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
        finally:
            with _live_lock:
                _live.discard(proc)
    result.seconds = time.perf_counter() - started
    progress = _read_progress(out)
    checks_done = {c["number"]: CheckResult.from_dict(c) for c in progress.get("checks", [])}
    current = progress.get("current")
    tail = _tail(stderr_path) or _tail(stdout_path)
    if progress.get("done"):  # every check finished (even if the process then lingered)
        result.status = "done"
    elif timed_out:
        result.status = "timeout"
        running = f"check {current}" if current else "start-up (importing your file)"
        result.note = f"grading timed out after {timeout:g} s while running {running}"
    else:
        result.status = "crashed"
        result.note = progress.get("note") or f"the grading process stopped unexpectedly (exit code {proc.returncode})"
        if tail and not progress.get("note"):
            result.note += "\nlast output:\n" + tail
    stopped_at = current
    for check in exercise.checks:
        if check.number in checks_done:
            result.checks.append(checks_done[check.number])
            continue
        if result.status == "done":  # cannot happen: a finished worker reports every check
            message, hint = "not run", ""
        elif stopped_at is None or stopped_at == check.number:
            stopped_at = check.number  # the first unfinished check is the one that hung or crashed
            if result.status == "timeout":
                message = f"timed out after {timeout:g} s"
                hint = "an endless loop? (a while loop that never ends, or a kernel that keeps calling itself)"
            else:
                message = f"{result.note.splitlines()[0]} while running this check"
                hint = "did your code call os._exit() or crash the interpreter?"
                if tail:
                    hint += " (the last output of the process is shown above)"
        else:
            what = "timed out" if result.status == "timeout" else "crashed"
            message, hint = f"not run: grading stopped when check {stopped_at} {what}", ""
        result.checks.append(CheckResult(check.number, check.name, check.points, message=message, hint=hint))
    shutil.rmtree(tmp, ignore_errors=True)
    return result


_live: set[subprocess.Popen[bytes]] = set()  # workers started and not yet finished
_live_lock = threading.Lock()


def kill_workers() -> None:
    """Stop every worker this process started that is still running."""
    with _live_lock:
        running = list(_live)
    for proc in running:
        _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Stop the worker we started and anything it started (its own process group)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_progress(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        text = path.read_bytes().decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return text if len(text) <= limit else "..." + text[-limit:]


def student_folders(root: Path) -> dict[str, Path]:
    """The sub-folders of a submissions folder, by name (hidden folders skipped), in name order."""
    if not root.is_dir():
        raise FileNotFoundError(f"no submissions folder {root}")
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith((".", "_"))}
