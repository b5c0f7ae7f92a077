"""The exercises the grader knows, and how names given on the command line map to them.

An exercise is a package ``labsupport/grade/<exNN[x]_name>/`` with ``decide.py`` (parent side) and
``observe.py`` (worker side). Packages are found by looking at the folder, so adding an exercise needs
no edit here; ``MODULES`` maps each id ("ex04", "ex04b") to its decide module, which holds ``EXERCISE``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from labsupport.grade.checking import Exercise

REPO_ROOT = Path(__file__).resolve().parents[2]
GRADE_DIR = Path(__file__).resolve().parent
_ID = re.compile(r"^(ex\d\d[a-z]?)_\w+$")


def _discover(folder: Path = GRADE_DIR) -> dict[str, str]:
    """exercise id -> the decide module holding its EXERCISE."""
    found: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        match = _ID.match(entry.name)
        if match is not None and entry.is_dir() and (entry / "decide.py").is_file():
            found[match.group(1)] = f"labsupport.grade.{entry.name}.decide"
    return dict(sorted(found.items(), key=lambda item: _order(item[0])))


def _order(exercise_id: str) -> tuple[int, str]:
    return int(exercise_id[2:4]), exercise_id[4:]


MODULES: dict[str, str] = _discover()


def exercise_ids() -> list[str]:
    return list(MODULES)


def load_exercise(exercise_id: str) -> Exercise:
    """The ``Exercise`` (file, notebook, checks) of one exercise id."""
    return importlib.import_module(MODULES[exercise_id]).EXERCISE


def resolve(name: str) -> str:
    """``"ex04"``, ``"4"``, ``"04"``, ``"4b"``, ``"ex04_register"`` or ``"ex04_register.py"`` -> an id."""
    text = Path(str(name)).name.lower().removesuffix(".py")
    match = re.fullmatch(r"(?:ex)?(\d+)([a-z]?)", text)
    if match:
        text = f"ex{int(match.group(1)):02d}{match.group(2)}"
    candidate = text.split("_", 1)[0]
    if candidate in MODULES:
        return candidate
    raise ValueError(f"unknown exercise {name!r}; the exercises are {', '.join(MODULES)}")
