"""Worker side of ex04b: call the learner's ``fill_table`` on each scenario and report the answers as
plain JSON. No expected values and no verdicts live here.

While the learner's function runs, the lab's table builder is switched off (``engine_off``): the
exercise asks for the table to be worked out from the precedence rules, not read back from a
``lab.Dispatcher`` or ``lab.PythonDispatcher``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


class _NoRealTorch:
    """A meta-path finder that refuses ``import torch`` (PyTorch itself, not ``labsupport.torch``)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise ImportError(self.message)
        return None


@contextmanager
def engine_off(exercise: str, what: str) -> Iterator[None]:
    """Make every dispatch-table computation raise while the block runs (restored afterwards): the lab's
    ``OperatorEntry`` table builder and, when PyTorch is importable, its dispatcher dumps and libraries."""
    import sys

    from labsupport.c10.operator_entry import OperatorEntry

    message = (
        f"{exercise}: the grader switches the dispatch-table builders (the lab's and PyTorch's) off while "
        f"{what} runs; work the answer out from the rules instead of building a dispatcher"
    )

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(message)

    patched: list[tuple[Any, str, Any]] = [
        (OperatorEntry, "_compute", OperatorEntry._compute),
        (OperatorEntry, "update_table", OperatorEntry.update_table),
    ]
    real_torch = sys.modules.get("torch")
    if real_torch is not None and hasattr(real_torch, "_C"):
        for name in ("_dispatch_dump_table", "_dispatch_dump", "_dispatch_library", "_dispatch_find_dangling_impls"):
            if hasattr(real_torch._C, name):
                patched.append((real_torch._C, name, getattr(real_torch._C, name)))
    finder = _NoRealTorch(message)
    for owner, name, _ in patched:
        setattr(owner, name, refuse)
    if real_torch is None:
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for owner, name, original in patched:
            setattr(owner, name, original)


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON data: tuples become lists, unknown objects their ``repr`` (shortened)."""
    if depth > 6:
        return "<too deep>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in list(value)[:200]]
    if isinstance(value, dict):
        return {_key(k): plain(v, depth + 1) for k, v in list(value.items())[:200]}
    from labsupport.c10.dispatch_key_set import DispatchKeySet

    if isinstance(value, DispatchKeySet):  # a key set stands for the names of its keys
        return [k.name for k in value]
    name = getattr(value, "name", None)
    if isinstance(name, str):  # a DispatchKey
        return name
    return f"<{type(value).__name__}: {repr(value)[:80]}>"


def _key(key: Any) -> str:
    name = getattr(key, "name", None)
    return (name if isinstance(name, str) else str(key))[:80]


def fill_tables(learner: ModuleType, inputs: Any) -> Any:
    """The learner's table for every scenario: ``[{key: [kernel, label]}, ...]``."""
    answers = []
    for scenario in inputs["scenarios"]:
        with engine_off("ex04b", "fill_table"):
            answer = learner.fill_table(
                list(scenario["registrations"]), dict(scenario["fallbacks"]), list(scenario["keys"])
            )
        answers.append(plain(answer))
    return answers
