"""Grading runs: the trusted parent. One sandboxed worker per (folder, exercise), in parallel.

For a two-part exercise the parent makes each check's inputs (``plan(rng)`` from the seed), sends them
to the worker on stdin (inputs only), reads the worker's stdout, stderr and result fd with a select
loop (byte caps, a wall deadline, a cap on the files written), kills the worker's process group and
sweeps up any process that escaped it, parses the result lines as JSON (never pickle), validates them
and calls ``decide(inputs, observed)`` here. The worker never sees an expected value, and nothing it
writes is trusted: a line for a check that was not asked for is ignored, a duplicated line fails its
check, garbage is dropped.

``strict=True`` (instructor grading: ``--submissions``, the Gradescope bundle) fails closed: when the
kernel confinement (Landlock + seccomp) cannot be applied, every check is reported
"sandbox-unavailable" and no learner code runs.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from labsupport.grade.checking import Check, Exercise, Verdict, check_rng
from labsupport.grade.registry import REPO_ROOT, exercise_ids, load_exercise, module_name, resolve
from labsupport.grade.results import CheckResult, ExerciseResult, GradeResult
from labsupport.grade.sandbox import MiB, Policy

DEFAULT_TIMEOUT = 60.0
SEED_ENV = "LAB_GRADE_SEED"
HISTORY = ".lab-grade-history.json"
OUTPUT_CAP = 1 * MiB  # stdout + stderr bytes before the worker is stopped
KEEP_OUTPUT = 4000  # bytes of output kept to show
RESULT_CAP = 32 * MiB  # bytes on the result fd
DISK_CAP = 64 * MiB  # bytes of files in the worker's temporary folder
NOT_DONE = "not done yet"
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


@dataclass
class _Outcome:
    """What came back from one worker, before any verdict."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    garbage: int = 0
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    stopped: str = ""  # "", "timeout", "output", "result-flood", "disk"
    seconds: float = 0.0


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
    reaper = _Reaper()
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


def _start_zygotes(tasks: list[_Task], settings: Settings, jobs: int, reaper: _Reaper) -> _ZygotePool | None:
    """Fork servers for runs with several workers on Linux (``settings.fork_server``: None = automatic)."""
    wanted = settings.fork_server
    if wanted is None:
        wanted = sys.platform == "linux" and len(tasks) >= 4
    if not wanted or not hasattr(os, "fork"):
        return None
    modules: list[str] = list(PRELOAD)
    for exercise_id in dict.fromkeys(t.exercise_id for t in tasks):
        exercise = load_exercise(exercise_id)
        try:
            two_part = is_two_part(exercise)
        except ValueError:
            continue  # reported by its own task
        modules.append(exercise.observer if two_part else module_name(exercise_id))  # never a decide module
    try:
        return _ZygotePool(min(jobs, len(tasks)), modules, reaper.token)
    except Exception:  # fall back to a fresh interpreter per worker
        return None


def _safe_run_task(
    task: _Task, seed: int, settings: Settings, tmp: Path, reaper: _Reaper, zygotes: _ZygotePool | None = None
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


def is_two_part(exercise: Exercise) -> bool:
    """True for plan/observe/decide checks, False for old-style ones; a mixture is an authoring error."""
    kinds = {check.plan is not None for check in exercise.checks}
    if len(kinds) > 1:
        raise ValueError(f"{exercise.id} mixes old-style checks (@EXERCISE.check) with two-part ones (add_check)")
    if True in kinds:
        if not exercise.observer:
            raise ValueError(f"{exercise.id}: two-part checks need Exercise(observer='<worker-side module>')")
        missing = [c.number for c in exercise.checks if not c.observe or c.decide is None]
        if missing:
            raise ValueError(f"{exercise.id}: checks {missing} need both observe= and decide=")
    return True in kinds


def plan_inputs(exercise: Exercise, seed: int) -> dict[str, Any]:
    """Each two-part check's inputs, made here from the seed (JSON round-tripped: what the worker gets)."""
    inputs: dict[str, Any] = {}
    for index, check in enumerate(exercise.checks):
        if check.plan is not None:
            inputs[check.number] = json.loads(json.dumps(check.plan(check_rng(seed, exercise, index))))
    return inputs


def _run_task(
    task: _Task, seed: int, settings: Settings, tmp: Path, reaper: _Reaper, zygotes: _ZygotePool | None = None
) -> ExerciseResult:
    exercise = load_exercise(task.exercise_id)
    two_part = is_two_part(exercise)
    folder = exercises_folder(task.folder.resolve())
    path = folder / exercise.filename
    display = f"{display_name(folder)}/{exercise.filename}"
    result = ExerciseResult(exercise.id, exercise.number, exercise.title, display, exercise.notebook)
    box = tmp / "box"
    box.mkdir(parents=True)
    inputs = plan_inputs(exercise, seed) if two_part else {}
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
    }
    if two_part:
        job.update(
            mode="observe",
            observer=exercise.observer,
            checks=[{"check": c.number, "observe": c.observe, "inputs": inputs[c.number]} for c in exercise.checks],
        )
    else:
        job.update(mode="legacy", module=module_name(exercise.id), seed=seed)
    outcome = _spawn(job, box, settings, reaper, zygotes)
    result.seconds = outcome.seconds
    _judge(exercise, inputs, outcome, result, settings)
    if settings.history and two_part and result.status != "sandbox-unavailable":
        _update_history(folder, exercise, result)
    return result


def _read_paths(folder: Path) -> list[str]:
    """What the worker may read besides the system and the lab's engine: the learner's folder, ops.yaml,
    the generated build."""
    from labsupport.codegen.build import build_root

    paths = [str(folder), str(REPO_ROOT / "ops.yaml"), str(build_root())]
    paths += [str(p) for p in sorted((REPO_ROOT / "exercises").glob("*.yaml"))]  # given data, e.g. ex06's yaml
    return paths


# ---- the worker process ------------------------------------------------------------------------------


def _spawn(
    job: dict[str, Any], box: Path, settings: Settings, reaper: _Reaper, zygotes: _ZygotePool | None = None
) -> _Outcome:
    """Start one worker, feed it the job, and read what it says under caps and a deadline."""
    if zygotes is not None:
        return _spawn_forked(job, box, settings, reaper, zygotes)
    read_fd, write_fd = os.pipe()
    os.set_inheritable(read_fd, False)
    job["result_fd"] = write_fd
    env = _worker_env(box, reaper.token)
    cmd = [sys.executable, "-m", "labsupport.grade.worker"]
    kwargs: dict[str, Any] = {}
    if os.name == "posix":
        kwargs.update(pass_fds=(write_fd,), start_new_session=True)
    else:  # pragma: no cover - Windows: an inherited handle instead of an fd
        import msvcrt

        handle = msvcrt.get_osfhandle(write_fd)
        os.set_handle_inheritable(handle, True)
        job["result_fd"], job["result_handle"] = -1, handle
        info = subprocess.STARTUPINFO()
        info.lpAttributeList = {"handle_list": [handle]}
        kwargs.update(startupinfo=info, creationflags=subprocess.CREATE_NEW_PROCESS_GROUP)
    started = time.perf_counter()
    outcome = _Outcome()
    with _spawn_lock:  # a sweep never sees a worker that is started but not yet registered
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(box), **kwargs
        )
        with _live_lock:
            _live.add(proc)
    os.close(write_fd)
    try:
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        raw = _read_all(proc, read_fd, started + settings.timeout, box, outcome)
    finally:
        _kill(proc)
        with _live_lock:
            _live.discard(proc)
        reaper.sweep()
        os.close(read_fd)
    outcome.returncode = proc.returncode
    outcome.seconds = time.perf_counter() - started
    _parse(raw, outcome)
    return outcome


def _spawn_forked(
    job: dict[str, Any], box: Path, settings: Settings, reaper: _Reaper, zygotes: _ZygotePool
) -> _Outcome:
    """The same, with a worker forked from a zygote (a fork server holding only the public lab)."""
    pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, result
    env = {"HOME": str(box), "TMPDIR": str(box), "LAB_GRADE_TMP": str(box)}
    outcome = _Outcome()
    zygote = zygotes.take()
    started = time.perf_counter()
    child: _ZygoteChild | None = None
    try:
        with _spawn_lock:
            child = zygote.fork(job, env, [w for _r, w in pipes], [r for r, _w in pipes])
            with _live_lock:
                _live.add(child)  # type: ignore[arg-type]
        for _r, w in pipes:
            os.close(w)
        raw = _read_all(child, pipes[2][0], started + settings.timeout, box, outcome)  # type: ignore[arg-type]
    except BaseException:
        zygote.broken = True
        raise
    finally:
        if child is not None:
            _kill(child)  # type: ignore[arg-type]
            with _live_lock:
                _live.discard(child)  # type: ignore[arg-type]
        else:
            for r, w in pipes:
                for fd in (r, w):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
        zygotes.give_back(zygote)
        try:
            os.close(pipes[2][0])
        except OSError:
            pass
    outcome.returncode = child.returncode
    outcome.seconds = time.perf_counter() - started
    _parse(raw, outcome)
    return outcome


class _ZygoteChild:
    """A worker forked by a zygote, seen through the part of ``Popen``'s interface the runner uses."""

    def __init__(self, zygote: _Zygote, pid: int, stdout_fd: int, stderr_fd: int) -> None:
        self.zygote, self.pid = zygote, pid
        self.stdout = os.fdopen(stdout_fd, "rb", buffering=0)
        self.stderr = os.fdopen(stderr_fd, "rb", buffering=0)
        self.stdin = None
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = "Z"
        return -1 if state in ("Z", "X") else None  # exited; the real code comes from wait()

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.reap(self.pid)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


class _Zygote:
    """A fork server: ``python -m labsupport.grade.worker --zygote`` with the public lab imported."""

    def __init__(self, preload: list[str], token: str) -> None:
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = _worker_env(Path(tempfile.gettempdir()), token)
        env["LAB_GRADE_ZYGOTE_FD"] = str(theirs.fileno())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labsupport.grade.worker", "--zygote"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env, pass_fds=(theirs.fileno(),), start_new_session=True,
        )  # fmt: skip
        theirs.close()
        self.sock = ours
        self.sock.settimeout(120)
        self.broken = False
        from labsupport.grade.worker import recv_message, send_message

        self._send, self._recv = send_message, recv_message
        self._send(self.sock, {"preload": preload})
        if not self._recv(self.sock)[0].get("ready"):
            raise RuntimeError("the grading fork server did not start")

    def fork(self, job: dict[str, Any], env: dict[str, str], fds: list[int], read_fds: list[int]) -> _ZygoteChild:
        self._send(self.sock, {"job": job, "env": env}, fds)
        pid = int(self._recv(self.sock)[0]["pid"])
        return _ZygoteChild(self, pid, read_fds[0], read_fds[1])

    def reap(self, pid: int) -> int | None:
        try:
            self._send(self.sock, {"reap": pid})
            status = self._recv(self.sock)[0].get("status")
        except (OSError, EOFError, ValueError):
            self.broken = True
            return None
        return status if isinstance(status, int) else None

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            _kill(self.proc)


class _ZygotePool:
    """One zygote per parallel job; a zygote that failed is replaced."""

    def __init__(self, size: int, preload: list[str], token: str) -> None:
        import queue

        self.preload, self.token = preload, token
        self.idle: queue.Queue[_Zygote] = queue.Queue()
        self.all: list[_Zygote] = []
        for _ in range(size):
            self._add()

    def _add(self) -> None:
        zygote = _Zygote(self.preload, self.token)
        self.all.append(zygote)
        self.idle.put(zygote)

    def take(self) -> _Zygote:
        return self.idle.get()

    def give_back(self, zygote: _Zygote) -> None:
        if zygote.broken or zygote.proc.poll() is not None:
            zygote.close()
            self._add()
        else:
            self.idle.put(zygote)

    def close(self) -> None:
        for zygote in self.all:
            zygote.close()


def _worker_env(box: Path, token: str) -> dict[str, str]:
    """A small environment: nothing secret, one BLAS thread, the lab on the path."""
    env = {
        "PATH": os.defpath,
        "HOME": str(box),
        "TMPDIR": str(box),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONPATH": str(REPO_ROOT),
        "LAB_GRADE_TMP": str(box),
        "LAB_GRADE_WORKER": token,
    }
    for name in ("LAB_BUILD_DIR", "SYSTEMROOT", "LANG", "LC_ALL"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _read_all(proc: subprocess.Popen[bytes], result_fd: int, deadline: float, box: Path, outcome: _Outcome) -> bytes:
    """The select loop: result fd into memory (capped), stdout/stderr tails kept (capped), a deadline,
    and a cap on the bytes the worker writes into its folder."""
    assert proc.stdout is not None and proc.stderr is not None
    if os.name != "posix":  # pragma: no cover - Windows pipes do not work with select()
        return _read_all_threads(proc, result_fd, deadline, outcome)
    streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr", result_fd: "result"}
    buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray(), "result": bytearray()}
    printed = 0
    next_disk_check = 0.0
    exited_at: float | None = None
    while streams:
        now = time.perf_counter()
        if now >= deadline:
            outcome.stopped = "timeout"
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.5:  # something else holds the pipes open
            break
        if now >= next_disk_check:
            next_disk_check = now + 0.2
            if _folder_bytes(box) > DISK_CAP:
                outcome.stopped = "disk"
                break
        ready, _, _ = select.select(list(streams), [], [], min(0.2, deadline - now))
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            name = streams[fd]
            if not chunk:
                del streams[fd]
                continue
            if name == "result":
                buffers["result"] += chunk
                if len(buffers["result"]) > RESULT_CAP:
                    outcome.stopped = "result-flood"
            else:
                printed += len(chunk)
                buffers[name] += chunk
                del buffers[name][: max(0, len(buffers[name]) - KEEP_OUTPUT)]
                if printed > OUTPUT_CAP:
                    outcome.stopped = "output"
        if outcome.stopped:
            break
    if not outcome.stopped and proc.poll() is None:  # the pipes closed but the worker has not exited yet
        try:
            proc.wait(timeout=max(0.0, min(1.0, deadline - time.perf_counter())))
        except subprocess.TimeoutExpired:
            outcome.stopped = "timeout"
    outcome.stdout = buffers["stdout"].decode("utf-8", "replace")
    outcome.stderr = buffers["stderr"].decode("utf-8", "replace")
    return bytes(buffers["result"][:RESULT_CAP])


def _read_all_threads(
    proc: subprocess.Popen[bytes], result_fd: int, deadline: float, outcome: _Outcome
) -> bytes:  # pragma: no cover - Windows
    """Windows: one reader thread per pipe, same caps."""
    kept: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray(), "result": bytearray()}

    def pump(read: Any, name: str, cap: int) -> None:
        total = 0
        while True:
            chunk = read(1 << 16)
            if not chunk:
                return
            total += len(chunk)
            kept[name] += chunk
            if name != "result":
                del kept[name][: max(0, len(kept[name]) - KEEP_OUTPUT)]
            if total > cap:
                outcome.stopped = outcome.stopped or ("result-flood" if name == "result" else "output")
                _kill(proc)
                return

    threads = [
        threading.Thread(target=pump, args=(proc.stdout.read1, "stdout", OUTPUT_CAP), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=pump, args=(proc.stderr.read1, "stderr", OUTPUT_CAP), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=pump, args=(lambda n: os.read(result_fd, n), "result", RESULT_CAP), daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
    except subprocess.TimeoutExpired:
        outcome.stopped = outcome.stopped or "timeout"
    _kill(proc)
    for t in threads:
        t.join(timeout=1.0)
    outcome.stdout = kept["stdout"].decode("utf-8", "replace")
    outcome.stderr = kept["stderr"].decode("utf-8", "replace")
    return bytes(kept["result"])


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _parse(raw: bytes, outcome: _Outcome) -> None:
    """JSON lines into dicts; anything else counts as garbage."""
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            outcome.garbage += 1
            continue
        if isinstance(message, dict):
            outcome.messages.append(message)
        else:
            outcome.garbage += 1


_live: set[subprocess.Popen[bytes]] = set()  # workers started and not yet finished
_live_lock = threading.Lock()
_spawn_lock = threading.RLock()


def kill_workers() -> None:
    """Stop every worker this process started that is still running."""
    with _live_lock:
        running = list(_live)
    for proc in running:
        _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Stop the worker we started and anything in its process group."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        pass
    if isinstance(proc, _ZygoteChild):  # it may not have called setsid() yet; its pid is not reaped yet
        proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


class _Reaper:
    """Nothing outlives a worker: on Linux this process becomes a child subreaper for the run, so a
    process that left the worker's group (``setsid``) is re-parented here, and ``sweep`` kills and reaps
    every such orphan that carries this run's marker. (Under seccomp no such process can exist.)"""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.enabled = False
        self.previous = 0
        if sys.platform == "linux":
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                flag = ctypes.c_int(0)
                libc.prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
                self.previous = flag.value
                self.enabled = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
                self._libc = libc
            except (OSError, AttributeError):
                self.enabled = False

    def sweep(self) -> int:
        if sys.platform != "linux":
            return 0
        with _spawn_lock:
            return self._sweep()

    def _sweep(self) -> int:
        killed = 0
        me = str(os.getpid())
        with _live_lock:
            live = {p.pid for p in _live}
        marker = f"LAB_GRADE_WORKER={self.token}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in live:
                continue
            try:
                status = Path(f"/proc/{entry}/status").read_text()
                ppid = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
                if ppid != me or marker not in Path(f"/proc/{entry}/environ").read_bytes():
                    continue
                os.kill(int(entry), signal.SIGKILL)
                os.waitpid(int(entry), 0)
                killed += 1
            except (OSError, StopIteration, ChildProcessError):
                continue
        return killed

    def close(self) -> None:
        self.sweep()
        if self.enabled and not self.previous:
            self._libc.prctl(36, 0, 0, 0, 0)


# ---- verdicts ---------------------------------------------------------------------------------------

REFUSALS = {
    "process": "your code tried to start a process ({what}); the grader does not allow that",
    "network": "your code tried to use the network ({what}); the grader does not allow that",
    "signal": "your code tried to send a signal to another process ({what}); the grader does not allow that",
    "write": "your code tried to write {what}, outside its temporary folder; the grader does not allow that",
}
RECURSION_POINTER = "notebook 04 (seed 003) shows an Autograd kernel stepping below autograd before calling again"
STOPPED = {
    "timeout": "timed out after {timeout:g} s",
    "output": f"stopped: your code printed more than {OUTPUT_CAP // MiB} MiB",
    "result-flood": "stopped: more than 32 MiB were written on the grader's result channel",
    "disk": f"stopped: your code wrote more than {DISK_CAP // MiB} MiB of files",
}


def _judge(
    exercise: Exercise, inputs: dict[str, Any], outcome: _Outcome, result: ExerciseResult, settings: Settings
) -> None:
    """Turn the worker's messages into one CheckResult per check (verdicts are decided here)."""
    messages = outcome.messages
    sandbox = messages[0].get("sandbox") if messages else None  # written before any learner byte ran
    if settings.strict and isinstance(sandbox, dict) and sandbox.get("ok") is not True:
        missing = ", ".join(map(str, sandbox.get("missing", [])))
        result.status = "sandbox-unavailable"
        result.note = (
            "sandbox-unavailable: the grader could not confine the worker on this machine "
            f"(missing: {missing}), so it ran none of this code. Grade on Linux >= 5.13 with Landlock "
            "and seccomp enabled."
        )
        for check in exercise.checks:
            result.checks.append(
                CheckResult(
                    check.number,
                    check.name,
                    check.points,
                    message="sandbox-unavailable: not run",
                    status="sandbox-unavailable",
                )
            )
        return
    if not isinstance(sandbox, dict):  # the worker stopped in its own start-up: no learner code ran
        messages = []
    asked = {c.number for c in exercise.checks}
    per_check: dict[str, list[dict[str, Any]]] = {}
    import_message: dict[str, Any] | None = None
    started: list[str] = []
    done = False
    for message in messages[1:]:
        number = message.get("check")
        if isinstance(number, str):
            if number in asked:
                per_check.setdefault(number, []).append(message)
            continue  # a check that was not asked for: ignored
        if "start" in message and message["start"] in asked:
            started.append(message["start"])
        elif import_message is None and ("import_error" in message or "imported" in message):
            import_message = message
        elif message.get("done") is True:
            done = True
    stopped_at: str | None = None
    for check in exercise.checks:
        cr = CheckResult(check.number, check.name, check.points)
        result.checks.append(cr)
        if import_message is not None and "import_error" in import_message:
            _fail_error(cr, _as_dict(import_message["import_error"]), result.file, importing=True)
            continue
        if import_message is not None and import_message.get("attempts"):
            _fail_attempts(cr, import_message["attempts"], "while your file was being imported")
            continue
        lines = per_check.get(check.number, [])
        if len(lines) > 1:
            cr.message = (
                "failed: more than one result arrived for this check "
                "(something other than the grader wrote on its result channel)"
            )
            continue
        if not lines:
            _fail_missing(cr, check, result, outcome, started, stopped_at, import_message, settings)
            stopped_at = stopped_at or check.number
            continue
        line = lines[0]
        if line.get("attempts"):
            _fail_attempts(cr, line["attempts"], "")
            continue
        if "error" in line:
            _fail_error(cr, _as_dict(line["error"]), result.file)
            continue
        if check.plan is None:
            _legacy(cr, line.get("legacy"))
            continue
        if "observed" not in line:
            cr.message = "failed: the grader received no observation for this check"
            continue
        _decide(cr, check, inputs[check.number], line["observed"], result)
    if done and not outcome.stopped:
        result.status = "done"
    elif outcome.stopped == "timeout":
        result.status = "timeout"
    else:
        result.status = "done" if done else "crashed"
    if outcome.garbage or any(len(v) > 1 for v in per_check.values()):
        result.note = (
            result.note + "\n" if result.note else ""
        ) + "some lines on the result channel were not the grader's and were ignored"


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"type": "Error", "message": str(value)[:2000]}


def _decide(cr: CheckResult, check: Check, inputs: Any, observed: Any, result: ExerciseResult) -> None:
    assert check.decide is not None
    try:
        verdict = check.decide(inputs, observed)
        if not isinstance(verdict, Verdict):
            raise TypeError(f"decide() returned {type(verdict).__name__}, not a Verdict")
    except Exception as error:  # garbage the observer's shape checks did not catch
        cr.message = (
            f"failed: the grader could not make sense of what your code returned ({type(error).__name__}: {error})"
        )
        return
    cr.passed = bool(verdict.passed)
    cr.score = check.points if cr.passed else 0
    cr.message = str(verdict.message)
    cr.hints = tuple(str(h) for h in verdict.hints)
    cr.hint = cr.hints[0] if cr.hints and not cr.passed else ""


def _legacy(cr: CheckResult, verdict: Any) -> None:
    """An old-style check's own verdict (computed in the worker: removed once every exercise is ported)."""
    if not isinstance(verdict, dict):
        cr.message = "failed: the worker's report for this check was not understood"
        return
    cr.passed = verdict.get("passed") is True
    cr.score = cr.points if cr.passed else 0
    cr.message = str(verdict.get("message", ""))[:20000]
    cr.hint = str(verdict.get("hint", ""))[:5000]
    error = verdict.get("error")
    if isinstance(error, dict) and error.get("type") == "DispatchRecursionError":
        cr.hint = RECURSION_POINTER  # the error's own message already explains the fix: say it once


def _fail_attempts(cr: CheckResult, attempts: Any, when: str) -> None:
    items = attempts if isinstance(attempts, list) else []
    texts = []
    for item in items[:3]:
        if isinstance(item, dict) and item.get("kind") in REFUSALS:
            texts.append(REFUSALS[item["kind"]].format(what=str(item.get("what", ""))[:300]))
    cr.message = "; ".join(dict.fromkeys(texts)) or "your code tried something the grader does not allow"
    if when:
        cr.message += f" ({when})"
    cr.hint = "the checks call your functions and read what they return: no processes, network or files are needed"


def _fail_error(cr: CheckResult, error: dict[str, Any], display: str, importing: bool = False) -> None:
    kind = str(error.get("kind", ""))
    if kind == "missing":
        cr.message = f"{display} is missing"
        cr.hint = "submit the file with the name of the stub"
        return
    text = str(error.get("message", ""))
    name = str(error.get("type", "Error"))
    message = f"{name}: {text}" if text else name
    line = error.get("learner_line")
    if isinstance(line, int):
        code = str(error.get("code", ""))
        message += f"\nraised at {display}:{line} in {error.get('function', '')}" + (f": {code}" if code else "")
    elif error.get("location"):
        message += f"\nraised in {error['location']}"
    if importing:
        message = f"importing {display} failed:\n{message}"
    if error.get("attempts"):
        _fail_attempts(cr, error["attempts"], "")
        cr.message = f"{cr.message}\n{message}"
        return
    cr.message = message
    if kind == "recursion" and name == "DispatchRecursionError":  # its message already explains the fix
        cr.hint = RECURSION_POINTER
        return
    cr.hint = {
        "not-done": f"{NOT_DONE}: this is the stub's NotImplementedError; the message above says what to write",
        "recursion": (
            "an Autograd kernel must step below autograd before calling the operator again: "
            "`with lab.AutoDispatchBelowADInplaceOrView(): op.call(...)`, or redispatch with "
            "`ks & lab.after_autograd_keyset` (notebook 04, seed 003)"
        ),
        "memory": "your code used more memory than the grader allows (about 1 GiB)",
        "exit": "your code called sys.exit() or raised SystemExit; return a value instead",
        "refused": (
            "the grader does not allow that: exercise code may read only its own folder and the lab, "
            "and write only in its temporary folder (the current directory)"
        ),
    }.get(kind, "")
    if kind == "refused" and error.get("filename"):
        cr.hint = f"your code tried to open {error['filename']}; " + cr.hint


def _fail_missing(
    cr: CheckResult,
    check: Check,
    result: ExerciseResult,
    outcome: _Outcome,
    started: list[str],
    stopped_at: str | None,
    import_message: dict[str, Any] | None,
    settings: Settings,
) -> None:
    """No line for this check: the worker stopped (timeout, crash, cap) before reporting it."""
    if stopped_at is not None:
        what = "timed out" if outcome.stopped == "timeout" else "stopped"
        cr.message = f"not run: grading stopped when check {stopped_at} {what}"
        return
    where = (
        f"check {check.number}"
        if check.number in started
        else ("start-up (importing your file)" if import_message is None else f"check {check.number}")
    )
    if outcome.stopped:
        cr.message = STOPPED[outcome.stopped].format(timeout=settings.timeout)
        if outcome.stopped == "timeout":
            cr.hint = "an endless loop? (a while loop that never ends, or a kernel that keeps calling itself)"
            result.note = f"grading timed out after {settings.timeout:g} s while running {where}"
        else:
            result.note = f"{cr.message} while running {where}"
        return
    code = outcome.returncode
    why = (
        "killed by the CPU-time limit"
        if code in (-signal.SIGXCPU, -signal.SIGKILL) and hasattr(signal, "SIGXCPU")
        else f"exit code {code}"
    )
    result.note = f"the grading process stopped unexpectedly ({why}) while running {where}"
    tail = (outcome.stderr or outcome.stdout).strip()
    if tail:
        result.note += "\nlast output:\n" + tail[-1500:]
    cr.message = f"the grading process stopped unexpectedly ({why}) while running this check"
    cr.hint = "did your code call os._exit() or crash the interpreter?"


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
