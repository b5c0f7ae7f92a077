"""``lab.profiler.profile()``: the operators that went through the dispatcher, like ``torch.profiler``.

::

    with lab.profiler.profile() as prof:
        torch.add(a, b)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    print(prof.key_averages().table(times=False))     # counts only: the same text every run

PyTorch's profiler hears about operators through ``RecordFunction``, which ``Dispatcher::call``
runs before the kernel; ``Dispatcher::redispatch`` does not. The lab's profiler is an observer of
the same two places and keeps only the ``call`` events, so one ``torch.add`` is one ``aten::add``
however many kernels it passes through, and a call that never enters the dispatcher (``at::cpu::add``,
or the bypass of seed 000) is invisible by construction.

The Python key adds rows of its own, as in PyTorch 2.13: ``pythonFallback``
(aten/src/ATen/core/PythonFallbackKernel.cpp) opens a ``RECORD_FUNCTION`` scope named
``PythonDispatchMode`` around a mode's ``__torch_dispatch__`` and ``PythonSubclass`` around a
subclass's. The handler's own ``func(*args)`` enters ``Dispatcher::call`` again, so a pass-through
mode shows ``aten::add`` twice, nested ``aten::add > PythonDispatchMode > aten::add``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labsupport.c10.dispatcher import DispatchEvent

__all__ = ["FunctionEvent", "KeyAverage", "KeyAverages", "profile"]


class _Scope:
    """The start and end of one ``RECORD_FUNCTION`` scope that is not an operator call."""

    __slots__ = ("end", "start")

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.end = self.start


class FunctionEvent:
    """One operator call seen by ``Dispatcher::call``, or one other ``RECORD_FUNCTION`` scope such as
    ``PythonDispatchMode`` (``torch.autograd.profiler_util.FunctionEvent``)."""

    __slots__ = ("_event", "children", "depth", "name", "overload_name", "parent")

    def __init__(self, event: DispatchEvent | _Scope, parent: FunctionEvent | None, name: str | None = None) -> None:
        self._event = event  # whatever holds .start and .end
        if name is None:
            self.name = event.op.name  # "aten::add", as PyTorch names profiler events
            self.overload_name = event.op.overload_name
        else:
            self.name = name  # "PythonDispatchMode": not an operator, no overload
            self.overload_name = ""
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.children: list[FunctionEvent] = []

    @property
    def cpu_time_total(self) -> float:
        """Microseconds from entering the kernel to leaving it."""
        return (self._event.end - self._event.start) * 1e6

    @property
    def self_cpu_time_total(self) -> float:
        """``cpu_time_total`` minus the time of the operators it called."""
        return self.cpu_time_total - sum(child.cpu_time_total for child in self.children)

    def __repr__(self) -> str:
        return f"<FunctionEvent {self.name} depth={self.depth} children={len(self.children)}>"


class KeyAverage:
    """All events of one name added up (``FunctionEventAvg``)."""

    __slots__ = ("count", "cpu_time_total", "key", "self_cpu_time_total")

    def __init__(self, key: str) -> None:
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    @property
    def cpu_time(self) -> float:
        """The average time per call, in microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return f"<KeyAverage key={self.key} count={self.count}>"


_SORT_KEYS = {
    "cpu_time_total": lambda a: a.cpu_time_total,
    "self_cpu_time_total": lambda a: a.self_cpu_time_total,
    "cpu_time": lambda a: a.cpu_time,
    "count": lambda a: a.count,
}


def _format_us(us: float) -> str:
    """Like torch.profiler: microseconds as ``12.345us``, ``1.234ms`` or ``1.234s``."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _share(part: float, whole: float) -> str:
    return f"{part * 100.0 / whole:.2f}%" if whole else "NaN"


class KeyAverages(list):
    """A list of :class:`KeyAverage` in order of first appearance, with torch's ``table()``."""

    def table(
        self, sort_by: str | None = None, row_limit: int = 100, *, times: bool = True, max_name_column_width: int = 55
    ) -> str:
        """The table ``prof.key_averages().table()`` prints, in the same shape.

        ``times=False`` leaves out every time column (and the footer): rows stay in order of first
        appearance unless ``sort_by="count"``, so the text is the same on every run.
        """
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"sort_by must be one of {sorted(_SORT_KEYS)}, got {sort_by!r}")
            if times or sort_by == "count":
                rows.sort(key=_SORT_KEYS[sort_by], reverse=True)  # stable: ties keep first-seen order
        if row_limit > 0:
            rows = rows[:row_limit]
        if not self:
            return ""
        width = min(max(len(a.key) for a in self) + 4, max_name_column_width)
        if times:
            headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        else:
            headers = ["Name", "# of Calls"]
        widths = [width] + [12] * (len(headers) - 1)
        rule = "".join("-" * w + "  " for w in widths)

        def line(cells: list[str]) -> str:
            return "".join(cell.rjust(w) + "  " for cell, w in zip(cells, widths))

        self_total = sum(a.self_cpu_time_total for a in self)
        out = [rule, line(headers), rule]
        for a in rows:
            name = a.key if len(a.key) <= width - 4 else a.key[: width - 7] + "..."
            if times:
                cells = [
                    name, _share(a.self_cpu_time_total, self_total), _format_us(a.self_cpu_time_total),
                    _share(a.cpu_time_total, self_total), _format_us(a.cpu_time_total), _format_us(a.cpu_time),
                    str(a.count),
                ]  # fmt: skip
            else:
                cells = [name, str(a.count)]
            out.append(line(cells))
        out.append(rule)
        if times:
            out.append(f"Self CPU time total: {_format_us(self_total)}")
        return "\n".join(out) + "\n"


class profile:
    """Record every operator that enters ``Dispatcher::call`` inside the ``with`` block.

    Stands for ``torch.profiler.profile`` (CPU activity only). Nested calls become children:
    ``torch.randn(2)`` gives ``aten::randn`` with ``aten::empty`` and ``aten::normal_`` under it.
    """

    def __init__(self) -> None:
        self._roots: list[FunctionEvent] = []
        self._all: list[FunctionEvent] = []
        self._open: list[FunctionEvent] = []
        self._thread = 0
        self._state = "new"

    def __enter__(self) -> profile:
        from labsupport.c10.dispatcher import observers

        if self._state != "new":
            raise RuntimeError("a profile can be used once; start a new one with lab.profiler.profile()")
        self._state = "recording"
        self._thread = threading.get_ident()
        observers.add(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        from labsupport.c10.dispatcher import observers

        observers.remove(self)
        self._open.clear()
        self._state = "done"
        self._remove_dup_nodes()

    def _remove_dup_nodes(self) -> None:
        """Fold an event into its parent when the parent has the same name and no other child, as
        ``torch.profiler``'s post-processing does (``EventList._remove_dup_nodes``): ``x.sum()``
        runs ``aten::sum`` -> ``aten::sum`` (the dim overload) and is shown as one ``aten::sum``."""
        while True:
            folded = [
                record
                for record in self._all
                if record.parent is not None
                and record.parent.name == record.name
                and len(record.parent.children) == 1
            ]
            if not folded:
                break
            gone = {id(record) for record in folded}
            for record in folded:
                parent = record.parent
                parent.children = record.children
                for child in record.children:
                    child.parent = parent
            self._all = [record for record in self._all if id(record) not in gone]
        for record in self._all:  # depths after folding
            record.depth = 0 if record.parent is None else record.parent.depth + 1

    # dispatcher observer: RecordFunction's place in Dispatcher::call (never in redispatch)
    def on_enter(self, event: DispatchEvent) -> None:
        if event.redispatch or threading.get_ident() != self._thread:
            return
        self._open_record(event, None)

    def on_exit(self, event: DispatchEvent) -> None:
        if event.redispatch or threading.get_ident() != self._thread:
            return
        if self._open and self._open[-1]._event is event:
            self._open.pop()

    def on_record_function(self, name: str, entering: bool) -> None:
        """A ``RECORD_FUNCTION`` scope that is not an operator call (``PythonDispatchMode``,
        ``PythonSubclass``): a row of its own, parent of the calls made inside it."""
        if threading.get_ident() != self._thread:
            return
        if entering:
            self._open_record(_Scope(), name)
            return
        if self._open and self._open[-1].name == name and isinstance(self._open[-1]._event, _Scope):
            self._open.pop()._event.end = time.perf_counter()

    def _open_record(self, event: DispatchEvent | _Scope, name: str | None) -> None:
        parent = self._open[-1] if self._open else None
        record = FunctionEvent(event, parent, name)
        (self._roots if parent is None else parent.children).append(record)
        self._all.append(record)
        self._open.append(record)

    # ---- results
    def events(self) -> list[FunctionEvent]:
        """Every recorded operator call, in the order they started."""
        return list(self._all)

    def __iter__(self) -> Iterator[FunctionEvent]:
        return iter(self._all)

    def key_averages(self) -> KeyAverages:
        """The events grouped by name (``prof.key_averages()``)."""
        groups: dict[str, KeyAverage] = {}
        for record in self._all:
            avg = groups.get(record.name)
            if avg is None:
                avg = groups[record.name] = KeyAverage(record.name)
            avg.count += 1
            avg.cpu_time_total += record.cpu_time_total
            avg.self_cpu_time_total += record.self_cpu_time_total
        return KeyAverages(groups.values())

    def counts(self) -> dict[str, int]:
        """``{"aten::add": 3, ...}`` in order of first appearance."""
        return {a.key: a.count for a in self.key_averages()}

    def tree(self) -> str:
        """The calls as an indented tree of names (no times, so the same text every run)."""
        lines: list[str] = []

        def walk(record: FunctionEvent) -> None:
            lines.append("  " * record.depth + record.name)
            for child in record.children:
                walk(child)

        for root in self._roots:
            walk(root)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<lab.profiler.profile: {len(self._all)} operator calls>"

