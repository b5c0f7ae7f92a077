"""Worker side of ex04d: call the learner's ``predict_path`` on each scenario and report the
predicted paths as plain JSON (the lab's table builder is off while it runs)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from labsupport.grade.ex04b_fill_table.observe import engine_off, plain


def predict_paths(learner: ModuleType, inputs: Any) -> Any:
    """``[[[key, kernel, [keys of the key set]], ...], ...]``: one predicted path per scenario."""
    answers = []
    for scenario in inputs["scenarios"]:
        with engine_off("ex04d", "predict_path"):
            answers.append(plain(learner.predict_path(scenario)))
    return answers
