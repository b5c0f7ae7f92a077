"""What the parent-side ``decide`` modules (``labsupport/grade/<exercise>/decide.py``) share.

``decide(inputs, observed)`` gets what the worker observed as plain JSON, from code it does not
trust: every reader here checks the shape of the data and answers None (or a failed Verdict) on
garbage instead of raising.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from labsupport.grade.checking import Verdict


def passed(message: str) -> Verdict:
    return Verdict(True, message)


def failed(message: str, *hints: str) -> Verdict:
    """A failed check; ``hints`` go from a pointer to the notebook to the most specific one."""
    return Verdict(False, message, tuple(h for h in hints if h))


def most_common(wrong: list[Any]) -> Any:
    """The first of the wrong answers ``(reason, ...)`` whose reason most of them share: the hint names the
    misunderstanding the answers show most, not whatever the first random case happened to hit."""
    top = Counter(w[0] for w in wrong).most_common(1)[0][0]
    return next(w for w in wrong if w[0] == top)


def compare_records(
    observed: Any, expected_all: list[Any], valid: Callable[[Any], bool], format_hints: tuple[str, ...]
) -> list[tuple[int, Any, Any]] | Verdict:
    """``(index, given, expected)`` of every call whose observation differs from the reference's, or a
    failed Verdict when the observations are missing or malformed (untrusted data)."""
    if not isinstance(observed, list) or len(observed) != len(expected_all):
        return Verdict(False, "some calls gave no observation", format_hints)
    wrong = []
    for number, (given, expected) in enumerate(zip(observed, expected_all)):
        if given == expected:
            continue
        if not valid(given):
            return Verdict(False, f"the observation of call {number + 1} is malformed: {str(given)[:80]}", format_hints)
        wrong.append((number, given, expected))
    return wrong


def garbled(what: str) -> Verdict:
    """The observation is not what the observer writes: the worker's output was tampered with."""
    return failed(
        f"the grader could not read the observations of {what} (they are not what the grader's worker writes)",
        "grade your own code only: the grader's worker reports what your functions return",
    )


def raised(record: Any) -> str | None:
    """``TypeError: ... \\nraised at ex06_structured.py:31 in impl: ...`` of an observed exception, else None."""
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    message = str(record.get("message", ""))
    text = f"{record['type']}: {message}" if message else record["type"]
    where = record.get("where")
    if isinstance(where, str) and where:
        text += f"\nraised at {where}"
    return text


def error_type(record: Any) -> str:
    return record.get("type", "") if isinstance(record, dict) and isinstance(record.get("type"), str) else ""


def error_message(record: Any) -> str:
    return str(record.get("message", "")) if isinstance(record, dict) else ""


def array(value: Any) -> Any:
    """The numpy array of an observed ``values`` field (see ``jsonable.values``), else None."""
    import numpy as np

    try:
        if isinstance(value, dict):
            shape = [int(s) for s in value["shape"]]
            flat = [float(v) for v in value["flat"]]  # "nan", "inf" and "-inf" too
            return np.array(flat, dtype=np.float64).reshape(shape)
        if isinstance(value, (list, bool, int, float)):
            result = np.array(value)
            if result.dtype.kind not in "biuf":
                return None
            return result
    except (KeyError, TypeError, ValueError):
        return None
    return None


def is_tensor(record: Any) -> bool:
    """An observed tensor record (``jsonable.tensor``) with readable sizes, dtype and device."""
    return (
        isinstance(record, dict)
        and record.get("tensor") is True
        and isinstance(record.get("sizes"), list)
        and all(isinstance(s, int) for s in record["sizes"])
        and isinstance(record.get("dtype"), str)
        and isinstance(record.get("device"), str)
    )


def describe(record: Any) -> str:
    """``float32[2, 3] on cpu`` of an observed tensor, or what it was instead."""
    if is_tensor(record):
        return f"{record['dtype']}{record['sizes']} on {record['device']}"
    if isinstance(record, dict) and "class" in record:
        return f"a {record['class']} (not a tensor)"
    return "something that is not a tensor"


def close(got: Any, expected: Any, dtype: str) -> bool:
    """Same shape and values (floats within a few ulps of the dtype, NaNs equal)."""
    import numpy as np

    if got is None or expected is None:
        return False
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        return False
    if dtype.startswith(("int", "uint", "bool")):
        return bool(np.array_equal(got, expected))
    tol = 1e-5 if dtype in ("float32", "float16", "bfloat16") else 1e-12
    return bool(np.allclose(got, expected, rtol=tol, atol=tol, equal_nan=True))


def short(value: Any, limit: int = 80) -> str:
    """A numpy array (or anything) as one short line."""
    import numpy as np

    try:
        text = np.array2string(np.asarray(value), precision=4, separator=", ", threshold=8).replace("\n", "")
    except Exception:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
