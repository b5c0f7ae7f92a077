"""Hostile submissions against the grader (issue 12 item 2; notes/grading-sandbox.md).

A class is graded the way an instructor grades it (strict: the kernel sandbox is required), with the
test exercise ``tests/grade_fixture`` (``double``/``shout``). Every student but one is hostile; each
attack is written so that it would score if it worked (forged lines, leaked answers, a file read that
would give the solution...). Each must get 0 for the checks it tried to fake, and the honest student
in the same run must still get full marks.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from labsupport.grade import registry
from labsupport.grade.__main__ import main
from labsupport.grade.runner import Settings, run_folders
from labsupport.grade.sandbox import landlock_abi

FIXTURE = Path(__file__).parent / "grade_fixture"
REPO = Path(__file__).resolve().parents[1]
HONEST = (FIXTURE / "ex90_double.py").read_text()
CORRECT = "def double(x):\n    return 2 * x\n\ndef shout(text):\n    return text.upper() + '!'\n"
WRONG = "def double(x):\n    return 0\n\ndef shout(text):\n    return ''\n"

linux_sandbox = pytest.mark.skipif(
    sys.platform != "linux" or landlock_abi() < 4, reason="needs Linux with Landlock ABI >= 4 and seccomp"
)


@pytest.fixture(autouse=True)
def fixture_exercise(monkeypatch):
    """Register the test exercise ex90 (importable as tests.grade_fixture in parent and worker)."""
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.setitem(registry.MODULES, "ex90", "tests.grade_fixture.decide")


def hostile(body: str, *, correct_after: bool = False) -> str:
    """A learner file: ``body`` runs at import; then wrong answers (or correct ones when the attack
    itself is what is under test); functions the body defines replace them."""
    return (CORRECT if correct_after else WRONG) + "\n" + textwrap.dedent(body)


SUBMISSIONS: dict[str, str] = {
    "honest": HONEST,
    # forge the grader's files, then leave before any check runs
    "forge_progress": hostile(
        """
        import json, os, sys
        fake = {"done": True, "checks": [{"number": "90.1", "passed": True, "score": 2, "points": 2},
                                         {"number": "90.2", "passed": True, "score": 1, "points": 1}]}
        for target in [os.path.join(os.path.dirname(__file__), "results.json"),
                       os.path.join(os.path.dirname(__file__), ".lab-grade-history.json"),
                       os.path.join(os.path.dirname(os.getcwd()), "progress.json"), "/tmp/lab-forged-progress.json"]:
            try:
                with open(target, "w") as f:
                    json.dump(fake, f)
            except OSError:
                pass
        os._exit(0)
        """
    ),
    "exit_at_import": hostile("import os\nos._exit(0)\n"),
    "sys_exit": hostile("import sys\nsys.exit(0)\n"),
    # monkeypatch the grader's code that lives in the worker: the observer, checking, Verdict
    "monkeypatch": hostile(
        """
        import sys
        checking = sys.modules["labsupport.grade.checking"]
        checking.Verdict = lambda *a, **k: None
        observe = sys.modules["tests.grade_fixture.observe"]
        observe.doubles = lambda learner, inputs: {"passed": True, "score": 2}
        observe.shouts = lambda learner, inputs: "PASS"
        """
    ),
    # print fake results on stdout, and forge lines on every fd that might be the result channel
    "fake_json": hostile(
        """
        import json, os
        print(json.dumps({"check": "90.1", "observed": [0] * 8, "passed": True, "score": 2}))
        print(json.dumps({"score": 3, "tests": [{"name": "90.1", "score": 2, "status": "passed"}]}))
        for fd in range(3, 64):
            for line in ({"check": "90.1", "observed": "PASS", "passed": True},
                         {"check": "90.2", "legacy": {"passed": True}}, {"check": "99.9", "observed": 1},
                         {"sandbox": {"ok": True}}, {"done": True}):
                try:
                    os.write(fd, (json.dumps(line) + "\\n").encode())
                except OSError:
                    pass
        """
    ),
    "garbage_on_fd": hostile(
        """
        import os
        for fd in range(3, 64):
            try:
                os.write(fd, b"\\x00\\xff not json {{{\\n[1, 2]\\n")
            except OSError:
                pass
        """,
        correct_after=True,
    ),
    # read what the worker must not see; each would give full marks if the read worked
    "read_solutions": hostile(
        f"""
        source = open({str(REPO / "solutions" / "ex02_keyset.py")!r}).read()
        exec(compile({CORRECT!r}, "leak", "exec"))
        """
    ),
    "read_other_student": hostile(
        """
        import os
        here = os.path.dirname(os.path.abspath(__file__))
        source = open(os.path.join(here, "..", "honest", "ex90_double.py")).read()
        exec(compile(source, "alice", "exec"))
        """
    ),
    "read_grader_proc": hostile(
        f"""
        import os
        secret = open(f"/proc/{{os.getppid()}}/cmdline").read() + open(f"/proc/{{os.getppid()}}/environ").read()
        exec(compile({CORRECT!r}, "leak", "exec"))
        """
    ),
    "read_grader_checks": hostile(
        f"""
        source = open({str(FIXTURE / "decide.py")!r}).read()
        exec(compile({CORRECT!r}, "leak", "exec"))
        """
    ),
    # processes: each returns the right answers only if the process could be started
    "fork_bomb": hostile(
        """
        import os
        def double(x):
            while True:
                os.fork()
        """
    ),
    "fork_ctypes": hostile(
        f"""
        import ctypes, os
        libc = ctypes.CDLL(None)
        pid = libc.fork()
        if pid == 0:
            os._exit(0)
        if pid > 0:
            exec(compile({CORRECT!r}, "forked", "exec"))
        """
    ),
    "escape_setsid": hostile(
        f"""
        import ctypes
        libc = ctypes.CDLL(None)
        if libc.setsid() >= 0 or libc.kill(libc.getppid(), 0) == 0:
            exec(compile({CORRECT!r}, "escaped", "exec"))
        """
    ),
    "subprocess": hostile(
        f"""
        import subprocess
        subprocess.run(["touch", "/tmp/lab-grade-pwned-subprocess"])
        exec(compile({CORRECT!r}, "ran", "exec"))
        """
    ),
    "os_system": hostile(
        f"""
        import os
        if os.system("touch /tmp/lab-grade-pwned-system") == 0:
            exec(compile({CORRECT!r}, "ran", "exec"))
        """
    ),
    "socket": hostile(
        f"""
        import os, socket
        s = socket.create_connection(("127.0.0.1", int(open(os.path.join(os.path.dirname(__file__), "port")).read())))
        exec(compile({CORRECT!r}, "net", "exec"))
        """
    ),
    # resource bombs
    "sleep_bomb": hostile("import time\ntime.sleep(1000)\n"),
    "cpu_spin": hostile("while True:\n    pass\n"),
    "memory_hog": hostile(
        """
        def double(x):
            hog = []
            while True:
                hog.append(bytearray(50 * 2**20))
        def shout(text):
            return bytearray(2**34)
        """
    ),
    "stdout_flood": hostile("while True:\n    print('x' * 65536)\n"),
    "file_flood": hostile(
        """
        import os
        for i in range(10**6):
            with open(f"flood{i}.bin", "wb") as f:
                f.write(b"x" * (1 << 20))
        """
    ),
    "big_file": hostile(
        """
        with open("big.bin", "wb") as f:
            while True:
                f.write(b"x" * (1 << 20))
        """
    ),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The whole hostile class, graded once (strict, --jobs 2, 4 s per worker)."""
    root = tmp_path_factory.mktemp("class")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    for name, source in SUBMISSIONS.items():
        (root / name).mkdir()
        (root / name / "ex90_double.py").write_text(source)
    (root / "socket" / "port").write_text(str(listener.getsockname()[1]))
    for leftover in Path("/tmp").glob("lab-grade-pwned-*"):
        leftover.unlink()
    folders = {name: root / name for name in SUBMISSIONS}
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(REPO))
    mp.setitem(registry.MODULES, "ex90", "tests.grade_fixture.decide")
    try:
        results = run_folders(
            folders, ["ex90"], seed=7, jobs=2, settings=Settings(timeout=4, strict=True, history=False)
        )
    finally:
        mp.undo()
    try:
        connection, _ = listener.accept()
        accepted = True
        connection.close()
    except BlockingIOError:
        accepted = False
    listener.close()
    return root, results, accepted


def check(results, student: str, number: str):
    return next(c for c in results[student]["ex90"].checks if c.number == number)


@linux_sandbox
def test_the_honest_student_gets_full_marks_beside_hostile_ones(graded):
    _, results, _ = graded
    assert results["honest"].score == results["honest"].max_score == 3, results["honest"].report()


@linux_sandbox
@pytest.mark.parametrize("student", [name for name in SUBMISSIONS if name not in ("honest", "garbage_on_fd")])
def test_every_hostile_submission_scores_zero(graded, student):
    _, results, _ = graded
    assert results[student].score == 0, results[student].report()


@linux_sandbox
def test_forged_files_are_never_written_and_never_read(graded):
    root, results, _ = graded
    assert not (root / "forge_progress" / "results.json").exists()
    assert not (root / "forge_progress" / ".lab-grade-history.json").exists()
    assert not Path("/tmp/lab-forged-progress.json").exists()
    assert "stopped unexpectedly (exit code 0)" in check(results, "forge_progress", "90.1").message
    assert "stopped unexpectedly (exit code 0)" in check(results, "exit_at_import", "90.1").message
    assert "SystemExit" in check(results, "sys_exit", "90.2").message
    assert "sys.exit()" in check(results, "sys_exit", "90.2").hint


@linux_sandbox
def test_forged_and_garbage_result_lines_are_ignored_or_failed(graded):
    _, results, _ = graded
    forged = results["fake_json"]["ex90"]
    assert "more than one result arrived" in check(results, "fake_json", "90.1").message
    assert "were not the grader's" in forged.note
    # garbage on the channel is dropped; the grader's own lines of the same worker are still judged
    garbage = results["garbage_on_fd"]["ex90"]
    assert "were not the grader's" in garbage.note
    assert garbage.score == 3


@linux_sandbox
def test_monkeypatched_observers_only_feed_the_parent_garbage(graded):
    _, results, _ = graded
    assert "did not give one result per input" in check(results, "monkeypatch", "90.1").message
    assert check(results, "monkeypatch", "90.2").message.startswith("shout() gave PASS")


@linux_sandbox
@pytest.mark.parametrize("student", ["read_solutions", "read_other_student", "read_grader_proc", "read_grader_checks"])
def test_reads_outside_the_allow_list_are_refused(graded, student):
    _, results, _ = graded
    message = check(results, student, "90.1").message
    assert "PermissionError" in message and "Permission denied" in message, message
    assert f"{student}/ex90_double.py:" in message  # the learner's line


@linux_sandbox
@pytest.mark.parametrize("student", ["fork_bomb", "subprocess", "os_system"])
def test_processes_are_refused_with_a_clear_message(graded, student):
    _, results, _ = graded
    cr = check(results, student, "90.1")
    assert "your code tried to start a process" in cr.message and "the grader does not allow that" in cr.message
    assert not list(Path("/tmp").glob("lab-grade-pwned-*"))


@linux_sandbox
def test_the_kernel_refuses_what_the_audit_hook_cannot_see(graded):
    _, results, _ = graded
    # ctypes fork/setsid/kill raise no audit event: seccomp refuses them, so the wrong answers stay
    assert check(results, "fork_ctypes", "90.1").message.startswith("double(")
    assert check(results, "escape_setsid", "90.1").message.startswith("double(")


@linux_sandbox
def test_network_is_refused(graded):
    _, results, accepted = graded
    assert "your code tried to use the network" in check(results, "socket", "90.1").message
    assert not accepted


@linux_sandbox
def test_bombs_and_floods_are_stopped(graded):
    _, results, _ = graded
    assert "timed out after 4 s" in check(results, "sleep_bomb", "90.1").message
    assert results["sleep_bomb"]["ex90"].status == "timeout"
    spin = check(results, "cpu_spin", "90.1").message
    assert "timed out" in spin or "CPU-time limit" in spin
    assert "MemoryError" in check(results, "memory_hog", "90.1").message
    assert "more memory than the grader allows" in check(results, "memory_hog", "90.2").hint
    assert "printed more than 1 MiB" in check(results, "stdout_flood", "90.1").message
    assert "wrote more than 64 MiB of files" in check(results, "file_flood", "90.1").message
    assert "File too large" in check(results, "big_file", "90.1").message


@pytest.mark.parametrize("fork_server", [False, True], ids=["fresh-interpreter", "fork-server"])
def test_strict_grading_fails_closed_without_the_kernel_sandbox(tmp_path, fork_server):
    """Instructor grading where Landlock (or seccomp) cannot be applied: nothing runs, every check says so."""
    folder = tmp_path / "student"
    folder.mkdir()
    marker = tmp_path / "ran.txt"
    (folder / "ex90_double.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + CORRECT)
    for missing in (("landlock",), ("seccomp",)):
        settings = Settings(timeout=10, strict=True, history=False, simulate_missing=missing, fork_server=fork_server)
        result = run_folders({"s": folder}, ["ex90"], seed=1, jobs=1, settings=settings)["s"]
        exercise = result["ex90"]
        assert result.score == 0 and exercise.status == "sandbox-unavailable"
        assert all(c.status == "sandbox-unavailable" and "sandbox-unavailable" in c.message for c in exercise.checks)
        assert missing[0] in exercise.note and "ran none of this code" in exercise.note
        assert not marker.exists()


@pytest.mark.skipif(sys.platform != "linux", reason="the subreaper sweep is Linux's")
@pytest.mark.parametrize("fork_server", [False, True], ids=["fresh-interpreter", "fork-server"])
def test_nothing_outlives_a_worker_even_without_seccomp(tmp_path, fork_server):
    """The escape of notes/grading-sandbox.md §3: fork through ctypes (no audit event), setsid, write a
    forged file later. Without seccomp (a learner's machine) the grader's subreaper sweep kills it."""
    import time

    folder = tmp_path / "escaper"
    folder.mkdir()
    marker = tmp_path / "forged-later.json"
    (folder / "ex90_double.py").write_text(
        CORRECT
        + textwrap.dedent(f"""
        import ctypes, os, time
        libc = ctypes.CDLL(None)
        if libc.fork() == 0:
            libc.setsid()
            time.sleep(2)
            open({str(marker)!r}, "w").write('{{"score": 100}}')
            os._exit(0)
        """)
    )
    settings = Settings(timeout=10, history=False, simulate_missing=("landlock", "seccomp"), fork_server=fork_server)
    result = run_folders({"s": folder}, ["ex90"], seed=1, jobs=1, settings=settings)["s"]
    assert result.score == 3  # the learner's answers are right; only the escape is under test
    time.sleep(3)
    assert not marker.exists()


def test_a_learner_grading_their_own_work_runs_with_what_is_available(tmp_path):
    """Not strict (a notebook cell, make grade): a missing sandbox is not an error and is not mentioned."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "ex90_double.py").write_text(CORRECT)
    settings = Settings(timeout=10, strict=False, history=False, simulate_missing=("landlock", "seccomp"))
    result = run_folders({"": folder}, ["ex90"], seed=1, jobs=1, settings=settings)[""]
    assert result.score == 3
    assert "sandbox" not in result.report()


def test_submissions_mode_is_strict_and_writes_only_parent_results(tmp_path):
    """``--submissions`` grades strictly; results.json files are written by the parent only."""
    root = tmp_path / "subs"
    for name, source in (("ann", CORRECT), ("bo", SUBMISSIONS["forge_progress"])):
        (root / name).mkdir(parents=True)
        (root / name / "ex90_double.py").write_text(source)
    code = main(["ex90", "--submissions", str(root), "--jobs", "2", "--timeout", "10"])
    assert code == 1
    ann = json.loads((root / "ann" / "results.json").read_text())
    bo = json.loads((root / "bo" / "results.json").read_text())
    if sys.platform == "linux" and landlock_abi() >= 4:
        assert ann["score"] == 3 and bo["score"] == 0
    else:
        assert ann["score"] == bo["score"] == 0 and "sandbox-unavailable" in ann["output"]
    assert not os.path.exists(root / "bo" / ".lab-grade-history.json")


def test_decide_runs_in_the_parent_and_survives_garbage():
    """decide() gets whatever the worker sent: wrong shapes fail, they never crash the grader."""
    from tests.grade_fixture import decide

    for observed in (None, "PASS", {"passed": True}, [True] * 8, [2.0] * 8, [[1]] * 8, list(range(9))):
        assert decide.decide_numbers(list(range(8)), observed).passed is False
    assert decide.decide_numbers([1, 2], [2, 4]).passed


def test_hints_get_more_specific_with_each_failed_attempt(tmp_path):
    """Progressive hints: the parent counts failed gradings per check in the folder's history file."""
    folder = tmp_path / "learner"
    folder.mkdir()
    (folder / "ex90_double.py").write_text(
        "def double(x):\n    return x * x\n\ndef shout(text):\n    return text.upper() + '!'\n"
    )
    shown = []
    for _ in range(4):
        result = run_folders({"": folder}, ["ex90"], seed=3, jobs=1, settings=Settings(timeout=10))[""]
        shown.append(check({"": result}, "", "90.1").hint)
    assert shown == ["hint level 1: read the exercise's docstring again", "hint level 2: doubling is not squaring",
                     "hint level 3: compare double(3) with double(-3)", "hint level 3: compare double(3) with double(-3)"]  # fmt: skip
    history = json.loads((folder / ".lab-grade-history.json").read_text())
    assert history == {"ex90": {"90.1": 4}}
    shutil.rmtree(folder)


@pytest.mark.parametrize("fork_server", [False, True], ids=["fresh-interpreter", "fork-server"])
def test_the_worker_gets_inputs_only_and_the_parent_decides(tmp_path, monkeypatch, fork_server):
    """What crosses to the worker is the plan's inputs; decide() runs here; no decide module is loaded in
    the worker (fresh interpreter or fork-server child), so a learner cannot reach expected values."""
    from labsupport.grade import runner
    from tests.grade_fixture import decide

    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "ex90_double.py").write_text(
        "import sys\n"
        "LEAKED = sorted(m for m in sys.modules if m.endswith('.decide'))\n"
        "try:\n"
        "    import importlib\n"
        "    importlib.import_module('tests.grade_fixture.decide')\n"
        "    LEAKED.append('imported decide')\n"
        "except Exception:\n"
        "    pass\n"
        "def double(x):\n    return 2 * x\n"
        "def shout(text):\n    return text.upper() + '!' if not LEAKED else repr(LEAKED)\n"
    )
    jobs, calls = [], []
    spawn = runner.spawn

    def spy(job, *args):
        jobs.append(json.loads(json.dumps(job)))
        return spawn(job, *args)

    def counting(inputs, observed):
        calls.append(os.getpid())
        return decide.decide_words(inputs, observed)

    monkeypatch.setattr(runner, "spawn", spy)
    check_90_2 = decide.EXERCISE.checks[1]
    monkeypatch.setattr(decide.EXERCISE, "checks", [decide.EXERCISE.checks[0], type(check_90_2)(
        check_90_2.number, check_90_2.name, check_90_2.points, plan=check_90_2.plan, observe=check_90_2.observe,
        decide=counting)])  # fmt: skip
    settings = Settings(timeout=20, history=False, fork_server=fork_server)
    folders = {f"s{i}": folder for i in range(4 if fork_server else 1)}
    results = run_folders(folders, ["ex90"], seed=11, jobs=2, settings=settings)
    assert all(r.score == 3 for r in results.values()), results["s0"].report()
    assert calls and set(calls) == {os.getpid()}  # decided in this process
    job = jobs[0]
    words = job["checks"][1]["inputs"]
    text = json.dumps(job)
    assert all(w.upper() + "!" not in text for w in words)  # no expected value in the job
    assert set(job["checks"][0]) == {"check", "observe", "inputs"}
    assert "decide" not in text.replace("tests.grade_fixture.observe", "")


def _run_bpf(program, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """A classic-BPF interpreter for the few instructions the filter uses, over a struct seccomp_data."""
    import struct

    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:  # ret k
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_seccomp_filter_refuses_processes_and_network_on_both_architectures(machine):
    from labsupport.grade import sandbox

    program = sandbox.seccomp_program(machine)
    arch = sandbox.AUDIT_ARCH[machine]
    column = 0 if machine == "x86_64" else 1
    allow, eperm, enosys, kill = 0x7FFF0000, 0x00050001, 0x00050026, 0x80000000

    def nr(name: str) -> int:
        return sandbox.DENIED[name][column]

    read_nr, clone_nr, socket_nr = (0, 56, 41) if machine == "x86_64" else (63, 220, 198)
    assert _run_bpf(program, arch, read_nr) == allow
    for name in ("execve", "kill", "tgkill", "setsid", "connect", "bind", "ptrace", "unshare", "prlimit64", "prctl"):
        assert _run_bpf(program, arch, nr(name)) == eperm, name
    if machine == "x86_64":
        assert _run_bpf(program, arch, nr("fork")) == _run_bpf(program, arch, nr("vfork")) == eperm
        assert _run_bpf(program, arch, 0x40000000 + 57) == kill  # the x32 ABI
    assert _run_bpf(program, arch, clone_nr, (0x11,)) == eperm  # fork() is clone(SIGCHLD)
    assert _run_bpf(program, arch, clone_nr, (0x3D0F00,)) == allow  # pthread_create: CLONE_THREAD set
    assert _run_bpf(program, arch, 435) == enosys  # clone3: glibc falls back to clone
    assert _run_bpf(program, arch, socket_nr, (1,)) == allow  # AF_UNIX
    assert _run_bpf(program, arch, socket_nr, (2,)) == _run_bpf(program, arch, socket_nr, (10,)) == eperm
    assert _run_bpf(program, 0x40000003, read_nr) == kill  # another architecture (i386)
    assert len(program) < 4096  # BPF_MAXINSNS


@pytest.mark.parametrize(
    ("column", "header", "pattern"),
    [
        (0, "/usr/include/x86_64-linux-gnu/asm/unistd_64.h", r"#define __NR_(\w+) (\d+)"),
        (1, "/usr/include/asm-generic/unistd.h", r"#define __NR(?:3264)?_(\w+) (\d+)"),
    ],
    ids=["x86_64", "aarch64"],
)
def test_the_syscall_numbers_match_the_kernel_headers(column, header, pattern):
    import re

    from labsupport.grade import sandbox

    if not Path(header).exists():
        pytest.skip(f"{header} is not installed")
    numbers = {m.group(1): int(m.group(2)) for m in re.finditer(pattern, Path(header).read_text())}
    for name, pair in sandbox.DENIED.items():
        if pair[column] is not None:
            assert numbers[name] == pair[column], name
    machine = "x86_64" if column == 0 else "aarch64"
    assert numbers["clone"] == sandbox.CLONE[machine] and numbers["socket"] == sandbox.SOCKET[machine]
    assert numbers["clone3"] == sandbox.CLONE3


def test_an_untouched_two_part_stub_is_not_done_yet(tmp_path):
    """The stub's NotImplementedError("ex90: ...") is reported as "not done yet", with the stub's line,
    and it does not count as a failed attempt for the progressive hints."""
    folder = tmp_path / "stub"
    folder.mkdir()
    shutil.copy(FIXTURE / "ex90_stub.py", folder / "ex90_double.py")
    result = run_folders({"": folder}, ["ex90"], seed=1, jobs=1, settings=Settings(timeout=20))[""]
    for cr in result["ex90"].checks:
        assert cr.score == 0 and cr.hint.startswith("not done yet"), cr
        assert "NotImplementedError: ex90:" in cr.message and "stub/ex90_double.py:" in cr.message
    assert not (folder / ".lab-grade-history.json").exists()
