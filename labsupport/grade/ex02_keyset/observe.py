"""Exercise 02, worker side: call the learner's two functions on the planned calls and report the answers.

Inputs (from the parent's plan): ``{"cases": [{"tensors": [[label, raw], ...], "include": raw,
"exclude": raw, "mask": raw, ...}]}``, key sets as raw 64-bit integers. Observations: one entry per
case, ``{"raw": int, "type": str}`` (a key set), ``{"key": name, "type": str}`` (a key),
``{"type": str, "repr": str}`` (anything else) or ``{"error": {...}}``; the first error ends the list.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from labsupport.grade.jsonable import attempt, text

FULL = (1 << 64) - 1


def _arguments(case: dict[str, Any]) -> tuple[Any, ...]:
    from labsupport import DispatchKeySet

    def ks(raw: Any) -> DispatchKeySet:
        return DispatchKeySet.from_raw(int(raw) & FULL)

    return (
        [ks(raw) for _, raw in case["tensors"]],
        ks(case["include"]),
        ks(case["exclude"]),
        ks(case["mask"]),
    )


def _run(learner: ModuleType, name: str, inputs: Any, convert: Any) -> dict[str, Any]:
    fn = getattr(learner, name, None)
    if not callable(fn):
        return {"missing": name}
    results: list[dict[str, Any]] = []
    for case in inputs["cases"]:
        args = _arguments(case)
        ok, value = attempt(learner, lambda args=args: fn(*args))
        if not ok:
            results.append({"error": value})
            break
        results.append(convert(value))
    return {"results": results}


def _key_set(value: Any) -> dict[str, Any]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"raw": int.__int__(value) & FULL, "type": type(value).__name__}
    return {"type": type(value).__name__, "repr": text(value, 200)}


def _key(value: Any) -> dict[str, Any]:
    from labsupport import DispatchKey

    if isinstance(value, DispatchKey):
        return {"key": value.name, "type": "DispatchKey"}
    return {"type": type(value).__name__, "repr": text(value, 200)}


def key_sets(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """``compute_dispatch_key_set`` on every planned call."""
    return _run(learner, "compute_dispatch_key_set", inputs, _key_set)


def chosen_keys(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """``dispatch_key_for`` on every planned call."""
    return _run(learner, "dispatch_key_for", inputs, _key)
