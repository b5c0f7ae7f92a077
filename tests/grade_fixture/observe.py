"""Worker side of the test exercise ex90: call the learner's functions, return plain data."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def doubles(learner: ModuleType, inputs: list[int]) -> list[Any]:
    return [learner.double(x) for x in inputs]


def shouts(learner: ModuleType, inputs: list[str]) -> list[Any]:
    return [learner.shout(w) for w in inputs]
