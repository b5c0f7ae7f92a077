"""Verdicts, decided in the trusted parent from what a worker sent back.

The first line on the result fd is the worker's sandbox report (written before any learner byte ran);
every other line is untrusted. A line for a check that was not asked for is ignored, a duplicated
line fails its check, garbage is dropped; an error becomes a failed check with the learner's line and
one hint; a refused action (a process, a socket, a write outside the temporary folder) fails its check
with a clear message; an observation goes to the check's ``decide(inputs, observed)``.
"""

from __future__ import annotations

import signal
from typing import Any

from labsupport.grade.checking import Check, Exercise, Verdict
from labsupport.grade.processes import DISK_CAP, OUTPUT_CAP, Outcome
from labsupport.grade.results import CheckResult, ExerciseResult
from labsupport.grade.sandbox import MiB

NOT_DONE = "not done yet"

REFUSALS = {
    "process": "your code tried to start a process ({what}); the grader does not allow that",
    "network": "your code tried to use the network ({what}); the grader does not allow that",
    "signal": "your code tried to send a signal to another process ({what}); the grader does not allow that",
    "write": "your code tried to write {what}, outside its temporary folder; the grader does not allow that",
}
RECURSION_POINTER = (
    "notebook 04, section 6 (an autograd kernel that redispatches): what an Autograd kernel must do before it "
    "calls the operator again"
)
STOPPED = {
    "timeout": "timed out after {timeout:g} s",
    "output": f"stopped: your code printed more than {OUTPUT_CAP // MiB} MiB",
    "result-flood": "stopped: more than 32 MiB were written on the grader's result channel",
    "disk": f"stopped: your code wrote more than {DISK_CAP // MiB} MiB of files",
}


def judge(
    exercise: Exercise,
    inputs: dict[str, Any],
    outcome: Outcome,
    result: ExerciseResult,
    *,
    strict: bool,
    timeout: float,
) -> None:
    """Turn the worker's messages into one CheckResult per check (verdicts are decided here)."""
    messages = outcome.messages
    sandbox = messages[0].get("sandbox") if messages else None  # written before any learner byte ran
    if strict and isinstance(sandbox, dict) and sandbox.get("ok") is not True:
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
            _fail_missing(cr, check, result, outcome, started, stopped_at, import_message, timeout)
            stopped_at = stopped_at or check.number
            continue
        line = lines[0]
        if line.get("attempts"):
            _fail_attempts(cr, line["attempts"], "")
            continue
        if "error" in line:
            _fail_error(cr, _as_dict(line["error"]), result.file)
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
    message, hint = describe_error(error, display, importing)
    if error.get("attempts"):
        _fail_attempts(cr, error["attempts"], "")
        cr.message = f"{cr.message}\n{message}"
        return
    cr.message, cr.hint = message, hint


def describe_error(error: dict[str, Any], display: str, importing: bool = False) -> tuple[str, str]:
    """(message, hint) for an exception the worker described (``worker.describe``): its type and words,
    the line of the learner's file, and one hint (the error's own explanation is not repeated)."""
    kind = str(error.get("kind", ""))
    if kind == "missing":
        return f"{display} is missing", "submit the file with the name of the stub"
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
    if kind == "recursion" and name == "DispatchRecursionError":  # its message already explains the mistake
        return message, RECURSION_POINTER
    hint = {
        "not-done": f"{NOT_DONE}: this is the stub's NotImplementedError; the message above says what to write",
        "recursion": (
            "a kernel kept calling itself: an Autograd kernel that calls the operator again lands on itself "
            "unless it first steps below autograd (notebook 04, section 6)"
        ),
        "memory": "your code used more memory than the grader allows (about 1 GiB)",
        "exit": "your code called sys.exit() or raised SystemExit; return a value instead",
        "refused": (
            "the grader does not allow that: exercise code may read only its own folder and the lab, "
            "and write only in its temporary folder (the current directory)"
        ),
    }.get(kind, "")
    if kind == "refused" and error.get("filename"):
        hint = f"your code tried to open {error['filename']}; " + hint
    return message, hint




def _fail_missing(
    cr: CheckResult,
    check: Check,
    result: ExerciseResult,
    outcome: Outcome,
    started: list[str],
    stopped_at: str | None,
    import_message: dict[str, Any] | None,
    timeout: float,
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
        cr.message = STOPPED[outcome.stopped].format(timeout=timeout)
        if outcome.stopped == "timeout":
            cr.hint = "an endless loop? (a while loop that never ends, or a kernel that keeps calling itself)"
            result.note = f"grading timed out after {timeout:g} s while running {where}"
        else:
            result.note = f"{cr.message} while running {where}"
        return
    code = outcome.returncode
    cpu_killed = hasattr(signal, "SIGXCPU") and code in (-signal.SIGXCPU, -signal.SIGKILL)
    why = "killed by the CPU-time limit" if cpu_killed else f"exit code {code}"
    result.note = f"the grading process stopped unexpectedly ({why}) while running {where}"
    tail = (outcome.stderr or outcome.stdout).strip()
    if tail:
        result.note += "\nlast output:\n" + tail[-1500:]
    cr.message = f"the grading process stopped unexpectedly ({why}) while running this check"
    cr.hint = "did your code call os._exit() or crash the interpreter?"
