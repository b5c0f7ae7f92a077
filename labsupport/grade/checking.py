"""What an exercise's checks are made of: ``Exercise``, ``Check``, ``Context`` and ``CheckFailed``.

An exercise module (``labsupport/grade/ex04_register.py``, ...) creates one ``Exercise`` and adds its
checks with the ``@EXERCISE.check(number, name, points)`` decorator. A check is a function
``fn(ctx) -> str``: it returns a short success message, or raises ``CheckFailed(message, hint)``.
Any other exception raised while it runs (usually from the learner's code) is reported with the line
of the learner's file it came from.

This module is imported by the parent process too (to know the checks and their points), so it
stays light: no numpy, no builds.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn


class CheckFailed(Exception):
    """A check's verdict "failed", with a message for the learner and an optional hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Verdict:
    """What the parent decides for one check: passed or not, a message,
    and hints from gentle (a pointer to the notebook) to specific (never the answer's code)."""

    passed: bool
    message: str
    hints: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One graded check of an exercise.

    Old style: ``fn(ctx)`` runs in the worker. Two-part style: ``plan(rng)`` (parent) makes JSON inputs,
    the observer function named ``observe`` (worker) returns JSON observations, ``decide(inputs,
    observed)`` (parent) returns a ``Verdict``.
    """

    number: str  # "4.2"
    name: str
    points: int
    fn: Callable[[Context], str] | None = None
    plan: Callable[[Any], Any] | None = None
    observe: str = ""
    decide: Callable[[Any, Any], Verdict] | None = None


@dataclass
class Exercise:
    """An exercise: the learner's file, the notebook that teaches it, and its checks."""

    id: str  # "ex04"
    number: int | str  # 4, or "4b"
    title: str
    filename: str  # "ex04_register.py"
    notebook: str  # "04 (registering operators)"
    observer: str = ""  # two-part style: the worker-side module, "labsupport.grade.ex04b_fill_table.observe"
    checks: list[Check] = field(default_factory=list)

    @property
    def max_points(self) -> int:
        return sum(c.points for c in self.checks)

    def check(
        self, number: str, name: str, points: int
    ) -> Callable[[Callable[[Context], str]], Callable[[Context], str]]:
        """Decorator: register ``fn`` as check ``number``."""

        def register(fn: Callable[[Context], str]) -> Callable[[Context], str]:
            self.checks.append(Check(number, name, points, fn=fn))
            return fn

        return register

    def add_check(
        self,
        number: str,
        name: str,
        points: int,
        *,
        plan: Callable[[Any], Any],
        observe: str,
        decide: Callable[[Any, Any], Verdict],
    ) -> Check:
        """Two-part check: ``plan(rng)`` and ``decide(inputs, observed)`` run in the parent, the observer
        function ``observe`` in the sandboxed worker."""
        check = Check(number, name, points, plan=plan, observe=observe, decide=decide)
        self.checks.append(check)
        return check


def check_rng(seed: int, exercise: Exercise, index: int) -> Any:
    """The Generator a two-part check's ``plan`` gets: ``default_rng([seed, exercise number hash, index])``."""
    import zlib

    import numpy as np

    return np.random.default_rng([int(seed), zlib.crc32(str(exercise.number).encode()), int(index)])


class Context:
    """What a check gets: the learner's module, where it lives, the seed, and a per-exercise cache."""

    def __init__(self, exercise: Exercise, module: ModuleType, path: Path, display: str, seed: int) -> None:
        self.exercise = exercise
        self.module = module
        self.path = path
        self.display = display  # "exercises/ex04_register.py", for messages
        self.seed = seed
        self.cache: dict[str, Any] = {}
        self.check: Check | None = None

    def rng(self, salt: int = 0) -> Any:
        """A numpy Generator seeded from the run's seed, the exercise and the current check."""
        import numpy as np

        index = self.exercise.checks.index(self.check) if self.check in self.exercise.checks else 0
        return np.random.default_rng([self.seed, self.exercise.number, index, salt])

    def function(self, name: str) -> Callable[..., Any]:
        """A public function (or class) of the learner's module, or a failed check saying it is missing."""
        value = getattr(self.module, name, None)
        if value is None:
            raise CheckFailed(
                f"{self.display} has no `{name}`",
                f"keep the names of the stub: the grader calls {name}() (see the exercise's docstring)",
            )
        return value

    def where(self, name: str) -> str:
        """``exercises/ex02_keyset.py:31 (compute_dispatch_key_set)``: where a learner function is defined."""
        value = getattr(self.module, name, None)
        try:
            line = inspect.getsourcelines(value)[1]  # type: ignore[arg-type]
        except (OSError, TypeError):
            return f"{self.display} ({name})"
        return f"{self.display}:{line} ({name})"

    def fail(self, message: str, hint: str = "") -> NoReturn:
        raise CheckFailed(message, hint)


def learner_frame(error: BaseException, path: Path) -> traceback.FrameSummary | None:
    """The innermost traceback frame of ``error`` (or its causes) that lies in the learner's file."""
    wanted = str(path.resolve())
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = [f for f in traceback.extract_tb(error.__traceback__) if _same_file(f.filename, wanted)]
        if frames:
            return frames[-1]
        if isinstance(error, SyntaxError) and error.filename and _same_file(error.filename, wanted):
            return traceback.FrameSummary(
                error.filename, error.lineno or 0, "<module>", line=(error.text or "").strip()
            )
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return None


def _same_file(filename: str, wanted: str) -> bool:
    try:
        return str(Path(filename).resolve()) == wanted
    except (OSError, ValueError):
        return False


def freeze_message(error: BaseException) -> None:
    """Compute an exception's message now. Some messages are built lazily from live state (the
    DispatchRecursionError reads the dispatch table), which a check may undo before reporting."""
    try:
        error._lab_message = str(error)  # type: ignore[attr-defined]
    except Exception:
        pass


def describe_exception(error: BaseException, path: Path, display: str) -> tuple[str, str]:
    """(message, hint) for an exception raised while a check ran the learner's code."""
    kind = type(error).__name__
    text = str(getattr(error, "_lab_message", None) or error).strip()
    message = f"{kind}: {text}" if text else kind
    frame = learner_frame(error, path)
    location = ""
    if frame is not None:
        code = f": {frame.line.strip()}" if frame.line else ""
        location = f"raised at {display}:{frame.lineno} in {frame.name}{code}"
    elif not isinstance(error, SyntaxError):
        last = traceback.extract_tb(error.__traceback__)
        if last:
            location = f"raised in {_short(last[-1].filename)}:{last[-1].lineno} ({last[-1].name})"
    if location:
        message = f"{message}\n{location}"
    hint = ""
    if isinstance(error, NotImplementedError) and text.startswith("ex"):
        hint = "not done yet: this is the stub's NotImplementedError; the message above says what to write"
    elif kind == "DispatchRecursionError" or isinstance(error, RecursionError):
        hint = (
            "an Autograd kernel must step below autograd before calling the operator again: "
            "`with lab.AutoDispatchBelowADInplaceOrView(): op.call(...)`, or redispatch with "
            "`ks & lab.after_autograd_keyset` (notebook 04, seed 003)"
        )
    return message, hint


def _short(filename: str) -> str:
    """A file name without the user's directories: ``labsupport/c10/dispatcher.py``."""
    parts = Path(filename).parts
    for anchor in ("labsupport", "build"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) :])
    return Path(filename).name
