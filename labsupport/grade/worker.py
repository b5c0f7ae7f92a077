"""The grading worker: ``python -m labsupport.grade.worker`` with a job on stdin (JSON).

It is the only process that runs the learner's code, and it decides nothing. In order:

1. (trusted bootstrap) read the job from stdin, import the lab, numpy and the exercise's observer module;
2. confine itself (``labsupport.grade.sandbox``: rlimits, a temporary cwd, Landlock, seccomp) and write
   one ``{"sandbox": ...}`` line on the result fd; in strict mode (instructor grading) stop there when
   the kernel part could not be applied;
3. import the learner's file, then for each check call the observer function on the given inputs and
   write one JSON line: ``{"check": "4b.1", "observed": ...}`` or ``{"check": ..., "error": {...}}``.

The result fd is a pipe passed by the parent (``pass_fds``); only JSON goes through it. The learner's
code can write on it too, which is why the parent validates every line and computes every verdict.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

MAX_LINE = 4 << 20  # bytes of one observation

PROCESS_EVENTS = {
    "os.system": "os.system()",
    "os.fork": "os.fork()",
    "os.forkpty": "os.forkpty()",
    "os.posix_spawn": "os.posix_spawn()",
    "os.exec": "os.exec*()",
    "os.spawn": "os.spawn*()",
    "subprocess.Popen": "subprocess",
    "pty.spawn": "pty.spawn()",
}
NETWORK_EVENTS = {"socket.connect": "socket.connect()", "socket.bind": "socket.bind()"}
SIGNAL_EVENTS = {"os.kill": "os.kill()", "os.killpg": "os.killpg()"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Refused(PermissionError):
    """What the grader's audit hook raises for a process, a socket or a signal (the kernel refuses
    them too where seccomp is available; the hook only makes the message clear everywhere)."""


class Attempts:
    """Refused or suspicious actions seen by the audit hook since the last report (logging only:
    audit hooks are not a boundary, the kernel is)."""

    def __init__(self, tmp: str) -> None:
        self.tmp = os.path.realpath(tmp)
        self.items: list[dict[str, str]] = []
        self.armed = False

    def take(self) -> list[dict[str, str]]:
        items, self.items = self.items[:8], []
        return items

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.armed:
            return
        if event in PROCESS_EVENTS:
            self.items.append({"kind": "process", "what": PROCESS_EVENTS[event]})
            raise Refused(f"the grader does not allow starting a process ({PROCESS_EVENTS[event]})")
        if (
            event == "socket.__new__"
            and len(args) >= 2
            and args[1] not in (getattr(__import__("socket"), "AF_UNIX", 1), -1)
        ):
            self.items.append({"kind": "network", "what": "socket.socket()"})
            raise Refused("the grader does not allow network access (socket.socket())")
        if event in NETWORK_EVENTS:
            self.items.append({"kind": "network", "what": NETWORK_EVENTS[event]})
            raise Refused(f"the grader does not allow network access ({NETWORK_EVENTS[event]})")
        if event in SIGNAL_EVENTS and args and args[0] != os.getpid():
            self.items.append({"kind": "signal", "what": SIGNAL_EVENTS[event]})
            raise Refused(f"the grader does not allow signalling other processes ({SIGNAL_EVENTS[event]})")
        if event == "open" and len(args) >= 3 and isinstance(args[0], (str, bytes)):
            path, mode, flags = args[0], args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS
            )
            if writing:
                try:
                    real = os.path.realpath(os.fsdecode(path))
                except (OSError, ValueError):
                    return
                if real != os.devnull and not (real == self.tmp or real.startswith(self.tmp + os.sep)):
                    self.items.append({"kind": "write", "what": real})


def describe(error: BaseException, path: Path, display: str, attempts: list[dict[str, str]]) -> dict[str, Any]:
    """An exception as plain data: type, message, where in the learner's file, and why it matters."""
    from labsupport.grade.jsonable import learner_frame, short_path

    kind = type(error).__name__
    try:
        text = str(getattr(error, "_lab_message", None) or error).strip()
    except BaseException:  # a learner's exception whose __str__ raises
        text = "<the exception's message could not be computed>"
    data: dict[str, Any] = {
        "type": kind,
        "message": text[:20000],
        "learner_line": None,
        "code": "",
        "function": "",
        "location": "",
        "kind": "",
    }
    try:
        frame = learner_frame(error, path)
    except BaseException:
        frame = None
    if frame is not None:
        data.update(learner_line=frame.lineno, code=(frame.line or "").strip(), function=frame.name)
    else:
        last = traceback.extract_tb(error.__traceback__)
        if last and not isinstance(error, SyntaxError):
            data["location"] = f"{short_path(last[-1].filename)}:{last[-1].lineno} ({last[-1].name})"
    if isinstance(error, NotImplementedError) and text.startswith("ex"):
        data["kind"] = "not-done"
    elif kind == "DispatchRecursionError" or isinstance(error, RecursionError):
        data["kind"] = "recursion"
    elif isinstance(error, MemoryError):
        data["kind"] = "memory"
    elif isinstance(error, (SystemExit, KeyboardInterrupt)):
        data["kind"] = "exit"
    elif isinstance(error, OSError) and getattr(error, "errno", None) in (1, 13):
        data["kind"] = "refused"
        if isinstance(getattr(error, "filename", None), str):
            data["filename"] = error.filename[:500]
    if attempts:
        data["attempts"] = attempts
    return data


def import_learner(path: Path) -> ModuleType:
    """Import the learner's file as a module named after it (``ex04_register``)."""
    if not path.exists():
        raise FileNotFoundError(f"{path.name} was not found (looked for {path})")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # the learner's own helper modules, never in front of the lab's
    return module_from_source(path)


def module_from_source(path: Path) -> ModuleType:
    """Run ``path`` as a module named after it, compiled from the source itself: never from a cached
    ``__pycache__`` file, which can be stale when the file was edited twice within one second."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
    return module


class Channel:
    """The result fd: one JSON line per message, written with ``os.write`` (no buffering to forge into)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict[str, Any]) -> None:
        try:
            line = json.dumps(message, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            check = message.get("check")
            line = json.dumps(
                {
                    "check": check,
                    "error": {
                        "type": "TypeError",
                        "kind": "bad-observation",
                        "message": f"the observation is not plain data: {error}",
                    },
                }
            )
        if len(line) > MAX_LINE:
            line = json.dumps(
                {
                    "check": message.get("check"),
                    "error": {
                        "type": "ValueError",
                        "kind": "bad-observation",
                        "message": "the observation is too large",
                    },
                }
            )
        data = (line + "\n").encode()
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            pass  # the learner's code closed or replaced the fd: the parent sees the missing lines


def run_observed(job: dict[str, Any], channel: Channel, attempts: Attempts) -> None:
    """Call each check's observer function on its inputs and report what it returned (or raised)."""
    observer = importlib.import_module(job["observer"])
    path, display = Path(job["file"]), job["display"]
    module = _import_or_report(path, display, channel, attempts)
    if module is None:
        return
    for item in job["checks"]:
        number = item["check"]
        channel.send({"start": number})
        attempts.take()
        try:
            fn = getattr(observer, item["observe"])
            observed = fn(module, item["inputs"])
        except BaseException as error:  # the learner's code raised (SystemExit included)
            _freeze(error)
            channel.send({"check": number, "error": describe(error, path, display, attempts.take())})
            continue
        message: dict[str, Any] = {"check": number, "observed": observed}
        refused = attempts.take()
        if refused:
            message["attempts"] = refused
        channel.send(message)


def _import_or_report(path: Path, display: str, channel: Channel, attempts: Attempts) -> ModuleType | None:
    attempts.armed = True
    try:
        module = import_learner(path)
    except BaseException as error:
        _freeze(error)
        if isinstance(error, FileNotFoundError) and not path.exists():
            channel.send({"import_error": {"type": "FileNotFoundError", "kind": "missing", "message": str(error)}})
        else:
            channel.send({"import_error": describe(error, path, display, attempts.take())})
        return None
    channel.send({"imported": True, "attempts": attempts.take()})
    return module


def _freeze(error: BaseException) -> None:
    """Compute an exception's message now: some are built lazily from live state (the
    DispatchRecursionError reads the dispatch table), which the observer may undo before reporting."""
    try:
        error._lab_message = str(error)  # type: ignore[attr-defined]
    except BaseException:
        pass


def preload(names: list[str]) -> None:
    """The trusted imports, before confinement (they read files the sandbox will hide)."""
    import numpy  # noqa: F401

    import labsupport  # noqa: F401
    from labsupport.grade import checking, sandbox  # noqa: F401

    for name in names:
        importlib.import_module(name)


def run_job(job: dict[str, Any], channel: Channel) -> int:
    """Confine this process, then run the learner's code for one exercise (the job is already read)."""
    from labsupport.grade.sandbox import Policy, apply

    preload([*job.get("preload", []), job["observer"]])
    policy = Policy(**job["policy"])
    report = apply(policy)
    report["strict"] = bool(job.get("strict"))
    channel.send({"sandbox": report})
    if job.get("strict") and not report["ok"]:
        return 4  # fail closed: not one learner byte runs
    attempts = Attempts(policy.tmp)
    sys.addaudithook(attempts.hook)
    run_observed(job, channel, attempts)
    attempts.armed = False
    channel.send({"done": True})
    return 0


def main() -> int:
    if sys.argv[1:] == ["--zygote"]:
        return serve()
    job = json.loads(sys.stdin.buffer.read())
    fd = int(job["result_fd"])
    if job.get("result_handle") is not None:  # pragma: no cover - Windows
        import msvcrt

        fd = msvcrt.open_osfhandle(int(job["result_handle"]), 0)
    sys.stdin = open(os.devnull)  # the job has been read; the learner gets nothing
    return run_job(job, Channel(fd))


# ---- fork server -------------------------------------------------------------------------------------
# A zygote: a fresh interpreter started by the grader that imports only the public lab and the
# worker-side modules (never a decide module, never an expected value), then forks one child per job.
# The child is exactly a worker after its imports: it confines itself before any learner byte runs.


def _recv_exact(sock: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def send_message(sock: Any, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """A length-prefixed JSON message on a unix socket, with file descriptors attached to its prefix."""
    import socket

    body = json.dumps(message).encode()
    prefix = len(body).to_bytes(8, "big")
    if fds:
        socket.send_fds(sock, [prefix], fds)
    else:
        sock.sendall(prefix)
    sock.sendall(body)


def recv_message(sock: Any, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    import socket

    if max_fds:
        prefix, fds, _flags, _addr = socket.recv_fds(sock, 8, max_fds)
        if len(prefix) < 8:
            prefix += _recv_exact(sock, 8 - len(prefix))
    else:
        prefix, fds = _recv_exact(sock, 8), []
    if not prefix:
        raise EOFError
    return json.loads(_recv_exact(sock, int.from_bytes(prefix, "big"))), list(fds)


def serve() -> int:
    """The zygote loop: ``{"preload": [...]}`` once, then per job ``{"job": ...}`` with the child's stdout,
    stderr and result fds attached (answered with the child's pid), or ``{"reap": pid}`` (answered with
    its exit status)."""
    import socket

    from labsupport.grade.sandbox import set_parent_death_signal

    set_parent_death_signal()
    sock = socket.socket(fileno=int(os.environ.pop("LAB_GRADE_ZYGOTE_FD")))
    config, _ = recv_message(sock)
    preload(config.get("preload", []))
    sys.stdin = open(os.devnull)
    send_message(sock, {"ready": True})
    while True:
        try:
            message, fds = recv_message(sock, max_fds=3)
        except (EOFError, OSError):
            return 0
        if "reap" in message:
            try:
                _pid, status = os.waitpid(int(message["reap"]), 0)
                code = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                code = None
            send_message(sock, {"status": code})
            continue
        job = message["job"]
        stdout_w, stderr_w, result_w = fds
        pid = os.fork()
        if pid == 0:  # the worker
            code = 3
            try:
                os.setsid()
                sock.close()
                os.dup2(stdout_w, 1)
                os.dup2(stderr_w, 2)
                os.close(stdout_w)
                os.close(stderr_w)
                os.environ.update(message.get("env", {}))
                job["result_fd"] = result_w
                set_parent_death_signal()  # the zygote; it dies with the grader
                code = run_job(job, Channel(result_w))
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                except BaseException:
                    pass
                os._exit(code)
        for fd in fds:
            os.close(fd)
        send_message(sock, {"pid": pid})


if __name__ == "__main__":
    try:
        code = main()
    except BaseException:
        traceback.print_exc()
        code = 3
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)  # do not wait for threads the learner's code may have left running
