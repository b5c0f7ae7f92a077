"""What the worker-side observers (``labsupport/grade/<exercise>/observe.py``) share: turning whatever
the learner's code returned or raised into plain JSON.

Nothing here compares or judges: an observation says what happened ("the result has sizes [2, 3],
dtype float32, these values"; "it raised TypeError at line 31"), and the parent's ``decide`` says
whether that is right. Every conversion is defensive: a learner may return anything at all.

The untouched stub raises ``NotImplementedError("exNN: ...")``; ``attempt`` lets that one through so
the framework can report "not done yet".
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

MAX_TEXT = 1500
MAX_VALUES = 4096


def is_stub(error: BaseException) -> bool:
    """The stub's own ``NotImplementedError("exNN: ...")``."""
    return isinstance(error, NotImplementedError) and str(error).startswith("ex")


def text(value: Any, limit: int = MAX_TEXT) -> str:
    """``str(value)``, short, and never raising."""
    try:
        result = str(value)
    except Exception as error:  # a learner's __str__ may raise
        result = f"<unprintable {type(value).__name__}: {type(error).__name__}>"
    return result if len(result) <= limit else result[: limit - 3] + "..."


def learner_frame(error: BaseException, path: str | Path) -> traceback.FrameSummary | None:
    """The innermost traceback frame of ``error`` (or of its causes) that lies in the learner's file."""
    wanted = _resolved(str(path))
    seen: set[int] = set()
    current: BaseException | None = error
    while wanted and current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = [f for f in traceback.extract_tb(current.__traceback__) if _resolved(f.filename) == wanted]
        if frames:
            return frames[-1]
        if isinstance(current, SyntaxError) and current.filename and _resolved(current.filename) == wanted:
            line = (current.text or "").strip()
            return traceback.FrameSummary(current.filename, current.lineno or 0, "<module>", line=line)
        current = current.__cause__ or current.__context__
    return None


def where(error: BaseException, learner: ModuleType | None) -> str:
    """``ex04_register.py:31 in myadd_cpu: return ...``: the innermost line of the learner's file."""
    frame = learner_frame(error, getattr(learner, "__file__", None) or "")
    if frame is not None:
        code = f": {frame.line.strip()}" if frame.line else ""
        return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}{code}"
    last = traceback.extract_tb(error.__traceback__)
    if last:
        return f"{short_path(last[-1].filename)}:{last[-1].lineno} in {last[-1].name}"
    return ""


def error_record(error: BaseException, learner: ModuleType | None) -> dict[str, Any]:
    """``{"type", "message", "where"}`` of an exception raised by (or through) the learner's code."""
    return {"type": type(error).__name__, "message": text(error), "where": where(error, learner)}


_BUILDS: dict[tuple[str, int], tuple[ModuleType, Any]] = {}


def build_once(kind: str, learner: ModuleType, make: Callable[[str], Any]) -> tuple[Any, dict[str, Any] | None]:
    """``(build, None)`` or ``(None, error_record)``: what ``make(name)`` built from this learner module,
    made once per worker (every check of an exercise observes the same build); the stub's
    NotImplementedError propagates."""
    key = (kind, id(learner))
    if key not in _BUILDS:
        try:
            _BUILDS[key] = (learner, ("built", make(f"grade_{kind}_{len(_BUILDS)}")))
        except Exception as error:
            if is_stub(error):
                raise
            _BUILDS[key] = (learner, ("failed", error_record(error, learner)))
    state, value = _BUILDS[key][1]
    return (value, None) if state == "built" else (None, value)


def attempt(learner: ModuleType | None, fn: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, value)`` or ``(False, error_record)``; the stub's NotImplementedError propagates."""
    try:
        return True, fn()
    except Exception as error:
        if is_stub(error):
            raise
        return False, error_record(error, learner)


def number(value: Any) -> Any:
    """A JSON number (NaN and infinities as strings, which json cannot hold)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    try:
        value = float(value)
    except (TypeError, ValueError):
        return text(value, 80)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def values(array: Any) -> Any:
    """A numpy array as nested lists of JSON numbers (None when it is not an array)."""
    import numpy as np

    if not isinstance(array, np.ndarray) or array.size > MAX_VALUES:
        return None
    if array.dtype.kind == "b":
        return array.tolist()
    if array.dtype.kind in "iu":
        return array.astype(np.int64).tolist()
    if array.dtype.kind == "f":
        flat = [number(v) for v in array.astype(np.float64).ravel().tolist()]
        return {"shape": list(array.shape), "flat": flat}
    return None


def tensor(value: Any) -> dict[str, Any]:
    """What a tensor looks like from outside: class, sizes, dtype, device, its data's dtype and values.

    ``data_dtype`` is the numpy dtype of the storage, which can disagree with ``dtype`` when a kernel
    rebinds ``_data`` instead of writing into it.
    """
    import numpy as np

    record: dict[str, Any] = {"class": type(value).__name__}
    try:
        sizes = getattr(value, "_sizes", None)
        dtype = getattr(value, "_dtype", None)
        device = getattr(value, "_device", None)
        data = getattr(value, "_data", None)
    except Exception as error:
        return {"class": type(value).__name__, "unreadable": text(error, 200)}
    if sizes is None or dtype is None or device is None:
        record["tensor"] = False
        record["repr"] = text(value, 200)
        return record
    record["tensor"] = True
    try:
        record["sizes"] = [int(s) for s in sizes]
    except Exception:
        record["sizes"] = text(sizes, 100)
    record["dtype"] = text(getattr(dtype, "name", dtype), 40)
    record["device"] = text(device, 40)
    record["has_data"] = data is not None
    if isinstance(data, np.ndarray):
        record["data_dtype"] = str(data.dtype)
        record["data_shape"] = list(data.shape)
        record["values"] = values(data)
    elif data is not None:
        record["data_dtype"] = f"{type(data).__name__} (not a numpy array)"
    return record


def _resolved(filename: str) -> str:
    try:
        return str(Path(filename).resolve()) if filename else ""
    except (OSError, ValueError):
        return filename


def short_path(filename: str) -> str:
    """A file name without the user's directories: ``labsupport/c10/dispatcher.py``."""
    parts = Path(filename).parts
    for anchor in ("labsupport", "build"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) :])
    return Path(filename).name


def encode_array(array: Any) -> dict[str, Any]:
    """A numpy array as plan inputs: ``{"dtype", "shape", "flat"}`` (floats exactly, as float64)."""
    import numpy as np

    array = np.asarray(array)
    flat = array.ravel().tolist() if array.dtype.kind in "biu" else array.astype(np.float64).ravel().tolist()
    return {"dtype": str(array.dtype), "shape": list(array.shape), "flat": flat}


def decode_array(data: dict[str, Any]) -> Any:
    """The numpy array of ``encode_array``."""
    import numpy as np

    return np.array(data["flat"], dtype=np.float64 if data["dtype"].startswith("float") else None).astype(
        data["dtype"]
    ).reshape(data["shape"])
