"""A tiny two-part exercise used only by the grader's own tests (tests/test_grade_hostile.py).

The learner's file ``ex90_double.py`` defines ``double(x)`` and ``shout(text)``. The checks are written
the way every exercise's are (GRADER_PROTOCOL.md): ``plan`` and ``decide`` here, in the parent,
``observe.py`` in the worker.
"""

from __future__ import annotations

from typing import Any

from labsupport.grade.checking import Exercise, Verdict

EXERCISE = Exercise(
    id="ex90",
    number=90,
    title="Test exercise: double and shout",
    filename="ex90_double.py",
    notebook="none (a test fixture)",
    observer="tests.grade_fixture.observe",
)


def plan_numbers(rng: Any) -> list[int]:
    return [int(v) for v in rng.integers(-1000, 1000, size=8)]


def decide_numbers(inputs: list[int], observed: Any) -> Verdict:
    if not isinstance(observed, list) or len(observed) != len(inputs):
        return Verdict(False, "double() did not give one result per input", ("see the docstring",))
    wrong = [(x, got) for x, got in zip(inputs, observed) if not (type(got) is int and got == 2 * x)]
    if wrong:
        x, got = wrong[0]
        return Verdict(False, f"double({x}) gave {got!r}",
                       ("hint level 1: read the exercise's docstring again",
                        "hint level 2: doubling is not squaring",
                        "hint level 3: compare double(3) with double(-3)"))  # fmt: skip
    return Verdict(True, f"{len(inputs)} random numbers doubled")


def plan_words(rng: Any) -> list[str]:
    letters = "abcdefghij"
    return ["".join(letters[int(i)] for i in rng.integers(0, 10, size=5)) for _ in range(4)]


def decide_words(inputs: list[str], observed: Any) -> Verdict:
    expected = [w.upper() + "!" for w in inputs]
    if observed != expected:
        return Verdict(False, f"shout() gave {str(observed)[:80]}", ("upper case, then one '!'",))
    return Verdict(True, "4 random words shouted")


EXERCISE.add_check("90.1", "double random numbers", 2, plan=plan_numbers, observe="doubles", decide=decide_numbers)
EXERCISE.add_check("90.2", "shout random words", 1, plan=plan_words, observe="shouts", decide=decide_words)
