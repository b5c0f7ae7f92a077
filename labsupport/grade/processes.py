"""Worker processes, seen from the trusted parent: start one (a fresh interpreter, or a child of a
fork server), feed it its job, read its stdout, stderr and result fd with a select loop under byte
caps, a wall deadline and a cap on the files it writes, then kill its process group and sweep up any
process that escaped it. Only bytes come back (``Outcome``); what they mean is decided elsewhere
(``verdicts``).
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labsupport.grade.registry import REPO_ROOT
from labsupport.grade.sandbox import MiB

OUTPUT_CAP = 1 * MiB  # stdout + stderr bytes before the worker is stopped
KEEP_OUTPUT = 4000  # bytes of output kept to show
RESULT_CAP = 32 * MiB  # bytes on the result fd
DISK_CAP = 64 * MiB  # bytes of files in the worker's temporary folder


@dataclass
class Outcome:
    """What came back from one worker, before any verdict."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    garbage: int = 0
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    stopped: str = ""  # "", "timeout", "output", "result-flood", "disk"
    seconds: float = 0.0


def spawn(job: dict[str, Any], box: Path, timeout: float, reaper: Reaper, zygotes: ZygotePool | None = None) -> Outcome:
    """Start one worker, feed it the job, and read what it says under caps and a deadline."""
    if zygotes is not None:
        return _spawn_forked(job, box, timeout, reaper, zygotes)
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
    outcome = Outcome()
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
        raw = _read_all(proc, read_fd, started + timeout, box, outcome)
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


def _spawn_forked(job: dict[str, Any], box: Path, timeout: float, reaper: Reaper, zygotes: ZygotePool) -> Outcome:
    """The same, with a worker forked from a zygote (a fork server holding only the public lab)."""
    pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, result
    env = {"HOME": str(box), "TMPDIR": str(box), "LAB_GRADE_TMP": str(box)}
    outcome = Outcome()
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
        raw = _read_all(child, pipes[2][0], started + timeout, box, outcome)  # type: ignore[arg-type]
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


class ZygotePool:
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


def _read_all(proc: subprocess.Popen[bytes], result_fd: int, deadline: float, box: Path, outcome: Outcome) -> bytes:
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
    proc: subprocess.Popen[bytes], result_fd: int, deadline: float, outcome: Outcome
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


def _parse(raw: bytes, outcome: Outcome) -> None:
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


class Reaper:
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
