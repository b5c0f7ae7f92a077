"""Grading runs: the trusted parent. One sandboxed worker per (folder, exercise), in parallel.

The parent makes each check's inputs (``plan(rng)`` from the seed) and sends
them to the worker (inputs only: never an expected value); ``processes`` runs the worker under caps
and a deadline and brings back its raw output; ``verdicts`` validates what came back and calls
``decide(inputs, observed)`` here. Progressive hints use the attempt history this process keeps
beside the graded folder.

``strict=True`` (instructor grading: ``--submissions``, the Gradescope bundle) fails closed: when the
kernel confinement (Landlock + seccomp) cannot be applied, every check is reported
"sandbox-unavailable" and no learner code runs.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from labsupport.grade.checking import Exercise, check_rng
from labsupport.grade.processes import Reaper, ZygotePool, kill_workers, spawn
from labsupport.grade.registry import REPO_ROOT, exercise_ids, load_exercise, resolve
from labsupport.grade.results import CheckResult, ExerciseResult, GradeResult
from labsupport.grade.sandbox import MiB, Policy
from labsupport.grade.verdicts import judge

DEFAULT_TIMEOUT = 60.0
SEED_ENV = "LAB_GRADE_SEED"
HISTORY = ".lab-grade-history.json"
# imported by the worker before confinement (labsupport/grade/ is not readable once it is confined):
# the lab's front end and tools, and the grader's shared helpers (instruments, tensors, ...), which hold
# no expected values; never an exercise's checks (``exNN_*``) and never a decide module
_PARENT_ONLY = {"__init__", "__main__", "runner", "release", "gradescope", "pristine", "registry", "results"}
PRELOAD = (
    "labsupport.torch",
    "labsupport.tools.profiler",
    "labsupport.tools.bench",
    "labsupport.codegen",
    "labsupport.codegen.build",
    *sorted(
        f"labsupport.grade.{p.stem}"
        for p in Path(__file__).resolve().parent.glob("*.py")
        if p.stem not in _PARENT_ONLY and not p.stem.startswith("ex")
    ),
)


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
class Settings:
    """How a run grades: time limit, confinement, and test-only switches."""

    timeout: float = DEFAULT_TIMEOUT
    strict: bool = False  # fail closed when the kernel sandbox is missing (instructor grading)
    history: bool = True  # keep the per-folder count of failed attempts (progressive hints)
    memory_bytes: int = 1024 * MiB
    simulate_missing: tuple[str, ...] = ()  # tests only: pretend "landlock"/"seccomp" are unavailable
    fork_server: bool | None = None  # fork workers from a zygote holding the public lab (None: Linux, >= 4 workers)


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
    strict: bool = False,
    settings: Settings | None = None,
) -> dict[str, GradeResult]:
    """Grade several folders (key -> folder); every (folder, exercise) pair runs in its own worker."""
    settings = settings or Settings(timeout=timeout, strict=strict, history=not strict)
    start = time.perf_counter()
    _prepare_default_build()
    tasks = [_Task(key, folder, ex) for key, folder in folders.items() for ex in exercises]
    reaper = Reaper()
    zygotes = _start_zygotes(tasks, settings, jobs or default_jobs(), reaper)
    with (
        tempfile.TemporaryDirectory(prefix="lab-grade-") as tmp,
        ThreadPoolExecutor(max_workers=jobs or default_jobs()) as pool,
    ):
        futures = [
            pool.submit(_safe_run_task, task, seed, settings, Path(tmp) / f"task{i}", reaper, zygotes)
            for i, task in enumerate(tasks)
        ]
        try:
            outcomes = [f.result() for f in futures]
        except BaseException:  # e.g. Ctrl-C, or an interrupted notebook kernel: stop every worker we started
            for future in futures:
                future.cancel()
            kill_workers()
            raise
        finally:
            if zygotes is not None:
                zygotes.close()
            reaper.close()
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
    """Generate build/torch once, here, so parallel workers never race to write it (they cannot write it)."""
    try:
        from labsupport.codegen.build import write_build

        write_build()
    except Exception:  # the workers will report whatever is wrong
        pass


def _start_zygotes(tasks: list[_Task], settings: Settings, jobs: int, reaper: Reaper) -> ZygotePool | None:
    """Fork servers for runs with several workers on Linux (``settings.fork_server``: None = automatic)."""
    wanted = settings.fork_server
    if wanted is None:
        wanted = sys.platform == "linux" and len(tasks) >= 4
    if not wanted or not hasattr(os, "fork"):
        return None
    modules: list[str] = list(PRELOAD)
    for exercise_id in dict.fromkeys(t.exercise_id for t in tasks):
        modules.append(load_exercise(exercise_id).observer)  # the worker side only: never a decide module
    try:
        return ZygotePool(min(jobs, len(tasks)), modules, reaper.token)
    except Exception:  # fall back to a fresh interpreter per worker
        return None


def _safe_run_task(
    task: _Task, seed: int, settings: Settings, tmp: Path, reaper: Reaper, zygotes: ZygotePool | None = None
) -> ExerciseResult:
    """``_run_task``, but a failure of the grader itself still gives a (failed) result per check."""
    try:
        return _run_task(task, seed, settings, tmp, reaper, zygotes)
    except Exception:
        exercise = load_exercise(task.exercise_id)
        note = "the grader could not run this exercise:\n" + traceback.format_exc(limit=6)
        result = ExerciseResult(
            exercise.id,
            exercise.number,
            exercise.title,
            exercise.filename,
            exercise.notebook,
            status="crashed",
            note=note,
        )
        for check in exercise.checks:
            result.checks.append(CheckResult(check.number, check.name, check.points, message="not run: grader error"))
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- one task --------------------------------------------------------------------------------------


def plan_inputs(exercise: Exercise, seed: int) -> dict[str, Any]:
    """Each check's inputs, made here from the seed (JSON round-tripped: exactly what the worker gets)."""
    return {
        check.number: json.loads(json.dumps(check.plan(check_rng(seed, exercise, index))))
        for index, check in enumerate(exercise.checks)
    }


def _run_task(
    task: _Task, seed: int, settings: Settings, tmp: Path, reaper: Reaper, zygotes: ZygotePool | None = None
) -> ExerciseResult:
    exercise = load_exercise(task.exercise_id)
    folder = exercises_folder(task.folder.resolve())
    path = folder / exercise.filename
    display = f"{display_name(folder)}/{exercise.filename}"
    result = ExerciseResult(exercise.id, exercise.number, exercise.title, display, exercise.notebook)
    box = tmp / "box"
    box.mkdir(parents=True)
    inputs = plan_inputs(exercise, seed)
    policy = Policy(
        tmp=str(box),
        read=_read_paths(folder),
        cpu_seconds=max(1, int(settings.timeout + 0.999)),
        memory_bytes=settings.memory_bytes,
        simulate_missing=list(settings.simulate_missing),
    )
    job: dict[str, Any] = {
        "file": str(path),
        "display": display,
        "strict": settings.strict,
        "policy": asdict(policy),
        "preload": list(PRELOAD),
        "observer": exercise.observer,
        "checks": [{"check": c.number, "observe": c.observe, "inputs": inputs[c.number]} for c in exercise.checks],
    }
    outcome = spawn(job, box, settings.timeout, reaper, zygotes)
    result.seconds = outcome.seconds
    judge(exercise, inputs, outcome, result, strict=settings.strict, timeout=settings.timeout)
    if settings.history and result.status != "sandbox-unavailable":
        _update_history(folder, exercise, result)
    return result


def _read_paths(folder: Path) -> list[str]:
    """What the worker may read besides the system and the lab's engine: the learner's folder, ops.yaml,
    the generated build."""
    from labsupport.codegen.build import build_root

    paths = [str(folder), str(REPO_ROOT / "ops.yaml"), str(build_root())]
    paths += [str(p) for p in sorted((REPO_ROOT / "exercises").glob("*.yaml"))]  # given data, e.g. ex06's yaml
    return paths


# ---- progressive hints ------------------------------------------------------------------------------


def _update_history(folder: Path, exercise: Exercise, result: ExerciseResult) -> None:
    """Show ``hints[k]`` where k = earlier failed gradings of this check in this folder; then count this one.
    The file is written by the parent only (the worker cannot write the learner's folder)."""
    path = folder / HISTORY
    try:
        history = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(history, dict):
            history = {}
    except (OSError, ValueError):
        history = {}
    counts = history.setdefault(exercise.id, {})
    if not isinstance(counts, dict):
        counts = history[exercise.id] = {}
    changed = False
    for cr in result.checks:
        earlier = counts.get(cr.number, 0) if isinstance(counts.get(cr.number, 0), int) else 0
        if cr.passed or not cr.hints:  # passed, or not judged (not done, crashed): no attempt to count
            continue
        cr.hint = cr.hints[min(earlier, len(cr.hints) - 1)]
        counts[cr.number] = earlier + 1
        changed = True
    if not changed:
        return
    try:
        path.write_text(json.dumps(history, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only folder: hints stay at the first level


def student_folders(root: Path) -> dict[str, Path]:
    """The sub-folders of a submissions folder, by name (hidden folders skipped), in name order."""
    if not root.is_dir():
        raise FileNotFoundError(f"no submissions folder {root}")
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith((".", "_"))}
