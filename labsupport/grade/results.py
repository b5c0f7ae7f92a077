"""Grading results, the printed report and Gradescope's ``results.json``.

``GradeResult`` (one folder of work) holds one ``ExerciseResult`` per exercise, which holds one
``CheckResult`` per check. ``report()`` gives the text a learner reads; it contains no times or
seeds unless asked, so a notebook cell that grades prints the same text every run.
"""

from __future__ import annotations

import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class CheckResult:
    """The outcome of one check."""

    number: str
    name: str
    points: int
    score: int = 0
    passed: bool = False
    message: str = ""
    hint: str = ""  # the hint shown (one of ``hints``, chosen by the attempt history)
    status: str = ""  # "" or "sandbox-unavailable"
    hints: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class ExerciseResult:
    """The outcome of one exercise: its checks, and how grading it went."""

    id: str
    number: int
    title: str
    file: str  # as shown to the learner, e.g. "exercises/ex04_register.py"
    notebook: str
    checks: list[CheckResult] = field(default_factory=list)
    status: str = "done"  # done | timeout | crashed | missing
    note: str = ""  # what went wrong with the grading process itself, if anything
    seconds: float = 0.0

    @property
    def score(self) -> int:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> int:
        return sum(c.points for c in self.checks)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


@dataclass
class GradeResult:
    """Everything graded in one run over one folder of work."""

    folder: str
    seed: int
    exercises: list[ExerciseResult] = field(default_factory=list)
    seconds: float = 0.0
    student: str = ""

    @property
    def score(self) -> int:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> int:
        return sum(e.max_score for e in self.exercises)

    @property
    def passed(self) -> bool:
        return all(e.passed for e in self.exercises)

    def __getitem__(self, exercise_id: str) -> ExerciseResult:
        for e in self.exercises:
            if e.id == exercise_id:
                return e
        raise KeyError(exercise_id)

    def __repr__(self) -> str:
        names = ", ".join(e.id for e in self.exercises)
        return f"<GradeResult {names}: {self.score}/{self.max_score} points>"

    def report(self, *, show_times: bool = False, show_seed: bool = False, only_failures: bool = False) -> str:
        """The readable report (deterministic unless times or the seed are asked for)."""
        lines: list[str] = []
        header = f"Dispatcher Lab grader: {self.folder}"
        if self.student:
            header = f"Dispatcher Lab grader: student {self.student} ({self.folder})"
        lines.append(header)
        if show_seed:
            again = f"make grade SEED={self.seed}, or LAB_GRADE_SEED={self.seed}"
            lines.append(f"seed {self.seed} (the same inputs again: {again})")
        for e in self.exercises:
            lines.append("")
            timing = f"  [{e.seconds:.1f} s]" if show_times else ""
            lines.append(f"{e.id}  {e.score}/{e.max_score}  {e.title}{timing}")
            lines.append(f"      {e.file}, notebook {e.notebook}")
            if e.note:
                lines.extend(_indent(e.note, "      "))
            explained: dict[str, str] = {}  # an error's first line -> the check that shows it in full
            hinted: dict[str, str] = {}
            previous: tuple[str, str, str] | None = None
            for c in e.checks:
                if only_failures and c.passed:
                    continue
                mark = "PASS" if c.passed else "FAIL"
                lines.append(f"  {mark} {c.number:<4} {c.name}  {c.score}/{c.points}")
                if c.passed:
                    if c.message:
                        lines.extend(_indent(c.message, "         "))
                    continue
                if previous is not None and (c.message, c.hint) == previous[1:]:
                    lines.append(f"         (same as {previous[0]})")
                    continue
                previous = (c.number, c.message, c.hint)
                lines.extend(_indent(_once(c.message, c.number, explained), "         "))
                if c.hint:
                    if c.hint in hinted:
                        lines.append(f"         hint: as for {hinted[c.hint]}")
                    else:
                        hinted[c.hint] = c.number
                        lines.extend(_indent("hint: " + c.hint, "         "))
        lines.append("")
        total = f"Total: {self.score}/{self.max_score}"
        if show_times:
            total += f"  [{self.seconds:.1f} s]"
        lines.append(total + ("  -- all checks passed" if self.passed and self.exercises else ""))
        return "\n".join(lines)

    # ---- Gradescope ----
    def to_gradescope(self) -> dict[str, Any]:
        """Gradescope's ``results.json`` shape (one entry in ``tests`` per check)."""
        tests = []
        for e in self.exercises:
            for c in e.checks:
                output = c.message
                if c.hint and not c.passed:
                    output += ("\n" if output else "") + "hint: " + c.hint
                if e.note and not c.passed:
                    output += ("\n" if output else "") + e.note
                tests.append(
                    {
                        "name": f"{e.id} {c.number} {c.name}",
                        "number": c.number,
                        "score": c.score,
                        "max_score": c.points,
                        "status": "passed" if c.passed else "failed",
                        "output": output,
                        "output_format": "text",
                        "tags": [e.id],
                        "visibility": "visible",
                    }
                )
        return {  # only the fields Gradescope's autograder specification defines
            "score": self.score,
            "execution_time": round(self.seconds, 3),
            "output": self.report(show_seed=True),
            "output_format": "text",
            "visibility": "visible",
            "stdout_visibility": "visible",
            "extra_data": {
                "max_score": self.max_score,
                "seed": self.seed,
                "folder": self.folder,
                "student": self.student,
                "exercises": {
                    e.id: {"score": e.score, "max_score": e.max_score, "status": e.status} for e in self.exercises
                },
            },
            "tests": tests,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, as plain data."""
        return asdict(self)


def crash_results(message: str, *, seed: int = 0, seconds: float = 0.0) -> dict[str, Any]:
    """A results.json for a grading run that could not finish (written instead of nothing)."""
    return {
        "score": 0,
        "execution_time": round(seconds, 3),
        "output": "The grader itself failed, so nothing could be graded:\n" + message,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "visible",
        "extra_data": {"max_score": 0, "seed": seed, "crashed": True},
        "tests": [],
    }


def _once(message: str, number: str, explained: dict[str, str]) -> str:
    """An error explained by an earlier check of the same exercise is not printed again in full:
    its first line, where it was raised, and a pointer to the full text."""
    lines = message.splitlines()
    if not lines:
        return ""
    first = lines[0]
    key = first[:60]  # the same error, even when a count inside its message differs
    if key in explained and len(message) > 200:
        kept = [first[:160] + ("..." if len(first) > 160 else "")]
        kept += [line for line in lines[1:] if line.startswith(("raised at", "raised in"))]
        kept.append(f"(the full message is shown under {explained[key]})")
        return "\n".join(kept)
    explained.setdefault(key, number)
    return message


def _indent(text: str, prefix: str) -> list[str]:
    """Lines of ``text`` behind ``prefix``, long ones wrapped under their own indentation."""
    out: list[str] = []
    for raw in text.splitlines() or [""]:
        lead = " " * (len(raw) - len(raw.lstrip(" ")))
        wrapped = textwrap.wrap(
            raw, width=110, subsequent_indent=lead + "  ", break_long_words=False, break_on_hyphens=False
        )
        out.extend(prefix + w for w in wrapped or [""])
    return out
