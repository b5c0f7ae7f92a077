"""The exercises the grader knows, and how names given on the command line map to them."""

from __future__ import annotations

import importlib
from pathlib import Path

from labsupport.grade.checking import Exercise

REPO_ROOT = Path(__file__).resolve().parents[2]

# exercise id -> module holding its checks (named like the learner's file)
MODULES: dict[str, str] = {
    "ex02": "labsupport.grade.ex02_keyset",
    "ex04": "labsupport.grade.ex04_register",
    "ex06": "labsupport.grade.ex06_structured",
    "ex07": "labsupport.grade.ex07_boxed_fallback",
    "ex08": "labsupport.grade.ex08_bypass",
    # two-part exercises (issue 12): a package with decide.py (parent) and observe.py (worker)
    "ex04b": "labsupport.grade.ex04b_fill_table.decide",
    "ex04c": "labsupport.grade.ex04c_autocast.decide",
    "ex04d": "labsupport.grade.ex04d_predict_path.decide",
    "ex07b": "labsupport.grade.ex07b_backend_select.decide",
}


def exercise_ids() -> list[str]:
    return list(MODULES)


def load_exercise(exercise_id: str) -> Exercise:
    """The ``Exercise`` (file, notebook, checks) of one exercise id."""
    return importlib.import_module(MODULES[exercise_id]).EXERCISE


def resolve(name: str) -> str:
    """``"ex04"``, ``"4"``, ``"04"``, ``"ex04_register"`` or ``"ex04_register.py"`` -> ``"ex04"``."""
    text = Path(str(name)).name.lower().removesuffix(".py")
    if text.isdigit():
        text = f"ex{int(text):02d}"
    candidate = text.split("_", 1)[0]
    if candidate in MODULES:
        return candidate
    raise ValueError(f"unknown exercise {name!r}; the exercises are {', '.join(MODULES)}")
