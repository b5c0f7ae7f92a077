"""Confining a grading worker before any learner byte runs: rlimits, Landlock and seccomp.

This is the worker's trusted bootstrap (notes/grading-sandbox.md §4 steps 8-9). Python audit hooks are
not a boundary, so the kernel does the refusing:

* ``rlimits``: address space, CPU seconds, file size, open files, no core dumps;
* Landlock (Linux >= 5.13, ctypes over three syscalls): read/exec only on an allow-list (the system,
  the Python prefix and venv, the lab's package without its grader, the build folder, the learner's
  folder), write only in the task's temporary folder, TCP bind/connect denied (ABI >= 4), signals
  and abstract unix sockets scoped (ABI >= 6);
* seccomp (a hand-written BPF filter installed with ``prctl(PR_SET_SECCOMP)``): no process creation,
  no exec, no signals to other processes, no network sockets, no namespace or rlimit changes.

``apply(policy)`` returns what was applied; the worker reports it to the parent, which fails closed
for instructor grading when something is missing.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1 << 20


@dataclass
class Policy:
    """What to confine the worker to (sent by the parent on stdin; nothing secret in it)."""

    tmp: str  # the only writable folder, and the worker's cwd
    read: list[str] = field(default_factory=list)  # extra read-only paths (the learner's folder, build/)
    cpu_seconds: int = 60
    memory_bytes: int = 1024 * MiB
    file_bytes: int = 16 * MiB
    open_files: int = 64
    kernel: bool = True  # try Landlock and seccomp (Linux)
    simulate_missing: list[str] = field(default_factory=list)  # tests: pretend these are unavailable


# ---- rlimits --------------------------------------------------------------------------------------


def apply_rlimits(policy: Policy) -> list[str]:
    """Lower the worker's limits (soft = hard, so the learner's code cannot raise them back)."""
    try:
        import resource
    except ImportError:  # Windows
        return []
    done = []
    wanted = [
        ("RLIMIT_AS", policy.memory_bytes),
        ("RLIMIT_CPU", policy.cpu_seconds),
        ("RLIMIT_FSIZE", policy.file_bytes),
        ("RLIMIT_NOFILE", policy.open_files),
        ("RLIMIT_CORE", 0),
    ]
    for name, value in wanted:
        which = getattr(resource, name, None)
        if which is None:
            continue
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
            done.append(name)
        except (ValueError, OSError):
            pass
    return done


# ---- Landlock (include/uapi/linux/landlock.h) -----------------------------------------------------

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # all arches
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_PR_SET_PDEATHSIG = 1

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
FS_MAKE_SYM, FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}  # ABI 5+: (1 << 16) - 1
_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 when there is none)."""
    if sys.platform != "linux":
        return 0
    libc = _libc()
    abi = libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(abi))


def apply_landlock(read: list[str], write: list[str]) -> int:
    """Restrict this thread (and everything it starts) to ``read`` and ``write``; returns the ABI used."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    libc = _libc()
    handled_fs = _FS_BY_ABI.get(abi, (1 << 16) - 1)
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled_fs, handled_net)
    else:
        attr = struct.pack("=Q", handled_fs)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(
        ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path, access in [*((p, _READ) for p in read), *((p, handled_fs) for p in write)]:
            _add_path_rule(libc, int(ruleset), path, access & handled_fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(int(ruleset))
    return abi


def _add_path_rule(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist needs no rule
    try:
        if not os.path.isdir(path):
            access &= _FILE_ONLY
        rule = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)
        if libc.syscall(
            ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0)
        ):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    finally:
        os.close(fd)


# ---- seccomp (a classic BPF program over struct seccomp_data) ---------------------------------------

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# syscalls refused with EPERM (x86_64 numbers, aarch64 numbers); clone and socket are filtered on arguments
DENIED: dict[str, tuple[int | None, int | None]] = {
    "fork": (57, None),
    "vfork": (58, None),
    "execve": (59, 221),
    "execveat": (322, 281),
    "ptrace": (101, 117),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "setsid": (112, 157),
    "setpgid": (109, 154),
    "connect": (42, 203),
    "bind": (49, 200),
    "listen": (50, 201),
    "unshare": (272, 97),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "setrlimit": (160, 164),
    "prlimit64": (302, 261),
    "prctl": (157, 167),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "bpf": (321, 280),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "perf_event_open": (298, 241),
    "kexec_load": (246, 104),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "personality": (135, 92),
    "seccomp": (317, 277),
}
CLONE = {"x86_64": 56, "aarch64": 220}
CLONE3 = 435
SOCKET = {"x86_64": 41, "aarch64": 198}
CLONE_THREAD = 0x00010000
AF_UNIX = 1
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for one architecture."""
    prog: list[tuple[int, int, int, int]] = []

    def emit(code: int, jt: int, jf: int, k: int) -> None:
        prog.append((code, jt, jf, k))

    emit(_LD_W_ABS, 0, 0, 4)  # seccomp_data.arch
    emit(_JEQ_K, 1, 0, AUDIT_ARCH[machine])
    emit(_RET_K, 0, 0, _RET_KILL_PROCESS)  # another ABI (i386, x32 via arch): never allowed
    emit(_LD_W_ABS, 0, 0, 0)  # seccomp_data.nr
    if machine == "x86_64":
        emit(_JGE_K, 0, 1, 0x40000000)  # the x32 syscall range
        emit(_RET_K, 0, 0, _RET_KILL_PROCESS)
    column = 0 if machine == "x86_64" else 1
    numbers = sorted({n[column] for n in DENIED.values() if n[column] is not None})
    for number in numbers:
        emit(_JEQ_K, 0, 1, number)
        emit(_RET_K, 0, 0, _RET_ERRNO | _EPERM)
    emit(_JEQ_K, 0, 1, CLONE3)  # glibc falls back to clone() for threads on ENOSYS
    emit(_RET_K, 0, 0, _RET_ERRNO | _ENOSYS)
    emit(_JEQ_K, 0, 4, CLONE[machine])
    emit(_LD_W_ABS, 0, 0, 16)  # args[0] (flags), low 32 bits (little-endian)
    emit(_JSET_K, 0, 1, CLONE_THREAD)
    emit(_RET_K, 0, 0, _RET_ALLOW)  # a thread
    emit(_RET_K, 0, 0, _RET_ERRNO | _EPERM)  # a process
    emit(_JEQ_K, 0, 3, SOCKET[machine])
    emit(_LD_W_ABS, 0, 0, 16)  # args[0] (domain)
    emit(_JEQ_K, 1, 0, AF_UNIX)
    emit(_RET_K, 0, 0, _RET_ERRNO | _EPERM)
    emit(_RET_K, 0, 0, _RET_ALLOW)
    return prog


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def apply_seccomp() -> None:
    """Install the filter on this thread (threads started later inherit it)."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if sys.platform != "linux" or machine not in AUDIT_ARCH:
        raise OSError(f"seccomp filter not written for {sys.platform}/{machine}")
    prog = seccomp_program(machine)
    filters = (_SockFilter * len(prog))(*(_SockFilter(*ins) for ins in prog))
    fprog = _SockFprog(len(prog), filters)
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, 2, ctypes.byref(fprog), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def set_parent_death_signal() -> None:
    """SIGKILL this worker if the grader dies (Linux)."""
    if sys.platform == "linux":
        try:
            _libc().prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def status(fd: int | None = None) -> dict[str, str]:
    """``/proc/self/status`` fields (Linux), to verify what the kernel really applied. ``fd``: the file
    opened before Landlock closed ``/proc`` (it is read again from the start)."""
    try:
        if fd is None:
            text = Path("/proc/self/status").read_text()
        else:
            text = os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


# ---- everything, in order ---------------------------------------------------------------------------


def read_allow_list(extra: list[str]) -> list[str]:
    """System and Python folders, the lab's package (without its grader) and ``extra``."""
    lab = Path(__file__).resolve().parents[1]  # labsupport/
    paths = [
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/bin",
        "/sbin",
        "/etc",
        "/dev/null",
        "/dev/urandom",
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        str(Path(sys.executable).resolve().parent.parent),
    ]
    paths += [p for p in sys.path if p and os.path.isdir(p) and not _inside(Path(p).resolve(), lab.parent)]
    paths += [str(child) for child in lab.iterdir() if child.name != "grade"]  # never the checks
    paths += extra
    return sorted({os.path.abspath(p) for p in paths})


def _inside(path: Path, root: Path) -> bool:
    """True for ``root`` itself and paths below it (the repository root must not become readable)."""
    return path == root or root in path.parents


def apply(policy: Policy) -> dict[str, object]:
    """Apply every available confinement; returns what was applied (``ok`` when the kernel part held)."""
    report: dict[str, object] = {"platform": sys.platform, "landlock": 0, "seccomp": False, "missing": []}
    missing: list[str] = report["missing"]  # type: ignore[assignment]
    os.chdir(policy.tmp)
    report["rlimits"] = apply_rlimits(policy)
    set_parent_death_signal()
    try:
        status_fd: int | None = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, AttributeError):
        status_fd = None
    if not policy.kernel:
        missing.extend(["landlock", "seccomp"])
    else:
        if int(status().get("Threads", "1").strip() or 1) != 1:
            missing.append("single thread (the filters would miss other threads)")
        if "landlock" in policy.simulate_missing:
            missing.append("landlock")
        else:
            try:
                report["landlock"] = apply_landlock(read_allow_list(policy.read), [policy.tmp, "/dev/null"])
            except (OSError, AttributeError) as error:
                missing.append(f"landlock ({error})")
        if "seccomp" in policy.simulate_missing:
            missing.append("seccomp")
        else:
            try:
                apply_seccomp()
                fields = status(status_fd)
                report["seccomp"] = (
                    fields.get("Seccomp", "").strip() == "2" and fields.get("NoNewPrivs", "").strip() == "1"
                )
                if not report["seccomp"]:
                    missing.append("seccomp (not in force after prctl)")
            except (OSError, AttributeError) as error:
                missing.append(f"seccomp ({error})")
    if status_fd is not None:
        os.close(status_fd)
    report["ok"] = not missing
    return report
