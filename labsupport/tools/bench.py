"""Measuring a call: bytecode instruction counts, timings, callgrind, before/after comparisons.

Stands for the tools of seed 000's Test B (``torch.utils.benchmark``):

* ``count_instructions(fn)`` -- the Python bytecode instructions one call of ``fn`` executes. Like
  callgrind's instruction counts it is the same number on every run and in every process, so a
  change of a few instructions shows up where timings would drown it in noise.
* ``timeit(fn)`` -- wall-clock timings, median and minimum of repeats (``Timer.blocked_autorange``).
* ``callgrind(stmt, setup)`` -- machine instructions per run measured by valgrind's callgrind in a
  fresh interpreter, net of an empty statement (``Timer.collect_callgrind``).
* ``compare(before, after)`` -- the two sets of figures side by side, with a bar chart.
"""

from __future__ import annotations

import gc
import html
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = [
    "Comparison", "TimeStats", "ToolMissing", "callgrind", "callgrind_counts", "compare", "count_instructions",
    "format_time", "interleaved_medians", "measure", "timeit",
]  # fmt: skip

REPO_ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- bytecode counts


def count_instructions(fn: Callable[[], Any], *, warmup: int = 3, number: int = 1) -> int:
    """The Python bytecode instructions one call of ``fn`` executes, in every frame it runs.

    ``fn`` is called ``warmup`` times first, so that caches (the dispatcher's slot cache, lazy
    imports, ...) are filled, then ``number`` times under ``sys.settrace`` with per-opcode events
    on; the result is the count divided by ``number``. Garbage collection is paused while counting,
    so finalizers cannot run at random points. The count includes the few instructions of ``fn``
    itself (a handful for ``lambda: torch.add(a, b)``).
    """
    if number < 1:
        raise ValueError("number must be at least 1")
    for _ in range(warmup):
        fn()
    counter = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            counter[0] += 1
        return local

    def start(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return local

    previous = sys.gettrace()
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        # Python 3.12.1 reports no opcode events in the first tracing session of a process: open and
        # close a throwaway session first (harmless elsewhere).
        sys.settrace(start)
        format_time(1.0)
        sys.settrace(previous)
        counter[0] = 0
        sys.settrace(start)
        for _ in range(number):
            fn()
    finally:
        sys.settrace(previous)
        if gc_was_enabled:
            gc.enable()
    return round(counter[0] / number)


# ---------------------------------------------------------------------------- timings


def format_time(seconds: float) -> str:
    """``3.41 us``, ``12.0 ms``: three significant digits and a unit."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


class TimeStats:
    """Timings of one callable: seconds per call for each repeat, with median / min / max."""

    __slots__ = ("number", "times")

    def __init__(self, times: list[float], number: int) -> None:
        self.times = times  # seconds per call, one entry per repeat
        self.number = number

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    def __repr__(self) -> str:
        return (
            f"{format_time(self.median)} per call (median of {len(self.times)} repeats of {self.number}; "
            f"min {format_time(self.min)})"
        )


def timeit(
    fn: Callable[[], Any], *, repeat: int = 7, number: int | None = None, target: float = 0.02
) -> TimeStats:
    """Time ``fn``: ``repeat`` batches of ``number`` calls (chosen so a batch takes about ``target``
    seconds when not given); the result holds the time per call of each batch."""
    fn()  # warm up
    if number is None:
        number = 1
        while True:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            if time.perf_counter() - start >= target or number >= 1 << 24:
                break
            number *= 2
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return TimeStats(times, number)


def interleaved_medians(
    cases: Mapping[str, Callable[[], Any] | tuple[Callable[[], Any], Callable[[], Any]]], *, number: int, repeat: int
) -> dict[str, float]:
    """Microseconds per call of each case, timed one batch of ``number`` calls per case per round for
    ``repeat`` rounds; each case's median over the rounds. Load that comes and goes during the run then
    hits all cases alike, so the ratios between them stay honest. A case is a function, or a pair
    (function, context manager factory) for a case that must run inside a context (a mode, autocast)."""
    import contextlib
    import timeit as _timeit

    runs = {name: case if isinstance(case, tuple) else (case, contextlib.nullcontext) for name, case in cases.items()}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for fn, context in runs.values():  # warm up every case first
        with context():
            fn()
    for _ in range(repeat):
        for name, (fn, context) in runs.items():
            with context():
                samples[name].append(_timeit.timeit(fn, number=number) / number * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


# ---------------------------------------------------------------------------- callgrind


class ToolMissing(RuntimeError):
    """A measuring program the lab calls (valgrind, graphviz's dot) is not installed."""


VALGRIND_MISSING = (
    "valgrind is not installed: callgrind instruction counts need it. Install it with "
    "`apt-get install valgrind` (Debian/Ubuntu) or `conda install -c conda-forge valgrind` (Linux). "
    "Valgrind does not run on macOS or Windows; use lab.count_instructions(fn) there, which counts "
    "Python bytecode instructions instead."
)

# The measured loop runs inside functools.reduce; callgrind counts only while that C function is
# on the stack (--toggle-collect) and writes one dump each time it returns (--dump-after).
_MARKER = "functools_reduce"
_SCRIPT = """\
import functools, sys
sys.path.insert(0, {root!r})
{setup}
def _lab_empty(acc, _):
    return acc
def _lab_stmt(acc, _):
{stmt}
    return acc
for _ in range(3):
    _lab_stmt(None, None)
functools.reduce(_lab_stmt, range({number}), None)  # dump 1: warm-up, discarded
functools.reduce(_lab_empty, range({number}), None)  # dump 2: the empty statement
for _ in range({repeat}):
    functools.reduce(_lab_stmt, range({number}), None)  # dumps 3...: the statement
"""


def _valgrind() -> str:
    found = shutil.which("valgrind")
    if found is None:
        raise ToolMissing(VALGRIND_MISSING)
    return found


def callgrind_counts(
    stmt: str, setup: str = "", *, number: int = 100, repeat: int = 1, timeout: float = 120
) -> list[int]:
    """Machine instructions per run of ``stmt``, once per repeat, from one callgrind process."""
    valgrind = _valgrind()
    script = _SCRIPT.format(
        root=str(REPO_ROOT),
        setup=textwrap.dedent(setup),
        stmt=textwrap.indent(textwrap.dedent(stmt).strip() or "pass", "    "),
        number=number,
        repeat=repeat,
    )
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory(prefix="lab-callgrind-") as folder:
        out = Path(folder) / "callgrind.out"
        command = [
            valgrind, "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={_MARKER}",
            f"--dump-after={_MARKER}", f"--callgrind-out-file={out}", sys.executable, "-c", script,
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env)
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"callgrind did not finish within {timeout} s (valgrind runs Python about 50 times slower); "
                "pass a larger timeout= or a smaller number="
            ) from None
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise RuntimeError(f"the statement failed under callgrind (exit code {done.returncode}):\n{tail}")
        # One dump per return from the marker; if setup used functools.reduce too, ours are the last ones.
        dumps = sorted((p for p in Path(folder).glob("callgrind.out.*") if p.suffix[1:].isdigit()),
                       key=lambda p: int(p.suffix[1:]))  # fmt: skip
        totals = [_total(p) for p in dumps[-(repeat + 2) :]]
    if len(totals) < repeat + 2 or not any(totals):
        raise RuntimeError(
            f"callgrind counted no instructions inside {_MARKER}: this Python interpreter has no symbol table "
            "(it was stripped), so callgrind cannot find the function that marks the measured loop. "
            "Use a Python with symbols (pyenv, python.org builds, conda's python usually work)."
        )
    empty = totals[1]
    return [round((t - empty) / number) for t in totals[2:]]


def _total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    return 0


def callgrind(
    stmt: str, setup: str = "", *, number: int = 100, repeat: int = 1, timeout: float = 120, missing_ok: bool = False
) -> int | None:
    """Machine instructions per run of ``stmt`` (``Timer(stmt, setup).collect_callgrind()``).

    Runs ``valgrind --tool=callgrind`` on a fresh ``python -c`` (repo root on ``sys.path``, hash seed
    fixed): ``setup`` once, then ``number`` runs of ``stmt`` and ``number`` runs of an empty
    statement; the difference divided by ``number`` is the answer (the median when ``repeat > 1``).
    The statement must not call ``functools.reduce`` itself: that C function marks the measured loop.
    Without valgrind it raises :class:`ToolMissing`, or returns None when ``missing_ok``.
    """
    try:
        counts = callgrind_counts(stmt, setup, number=number, repeat=repeat, timeout=timeout)
    except ToolMissing:
        if missing_ok:
            return None
        raise
    return round(statistics.median(counts))


# ---------------------------------------------------------------------------- before / after


def measure(fn: Callable[[], Any], *, times: bool = True) -> dict[str, Any]:
    """``{"bytecode instructions": ..., "time per call": TimeStats}`` for ``compare``."""
    figures: dict[str, Any] = {"bytecode instructions": count_instructions(fn)}
    if times:
        figures["time per call"] = timeit(fn)
    return figures


def _number(value: Any) -> float | None:
    if isinstance(value, TimeStats):
        return value.median
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, TimeStats):
        return format_time(value.median)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class Comparison:
    """Before/after figures: ``repr`` is a text table; in a notebook, an SVG bar chart (with a one-line
    ``text/plain``, since ``compare`` prints the table already)."""

    def __init__(self, before: Mapping[str, Any], after: Mapping[str, Any], labels: tuple[str, str]) -> None:
        self.labels = labels
        names = list(before) + [k for k in after if k not in before]
        self.rows = [(name, before.get(name), after.get(name)) for name in names]

    def ratio(self, name: str) -> float | None:
        for row_name, b, a in self.rows:
            if row_name == name:
                nb, na = _number(b), _number(a)
                return na / nb if nb and na is not None else None
        raise KeyError(name)

    def table(self) -> str:
        header = ("", self.labels[0], self.labels[1], f"{self.labels[1]}/{self.labels[0]}")
        rows = [header]
        for name, b, a in self.rows:
            ratio = self.ratio(name)
            rows.append((name, _show(b), _show(a), "-" if ratio is None else f"{ratio:.2f}x"))
        widths = [max(len(r[c]) for r in rows) for c in range(4)]
        lines = []
        for r in rows:
            lines.append("  ".join([r[0].ljust(widths[0])] + [r[c].rjust(widths[c]) for c in range(1, 4)]))
        return "\n".join(lines)

    __repr__ = table

    def svg(self) -> str:
        """A bar chart, one pair of bars per figure (each pair scaled to its larger value)."""
        bar_area, label_w, row_h = 300, 170, 46
        height = 28 + row_h * len(self.rows)
        colors = ("#8c8c8c", "#4c72b0")
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_area + 110}" height="{height}" '
            'font-family="sans-serif" font-size="12">'
        ]
        for i, label in enumerate(self.labels):
            x = label_w + 120 * i
            out.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{colors[i]}"/>')
            out.append(f'<text x="{x + 14}" y="15">{html.escape(label)}</text>')
        for r, (name, b, a) in enumerate(self.rows):
            y = 28 + r * row_h
            out.append(f'<text x="0" y="{y + 20}">{html.escape(name)}</text>')
            values = (_number(b), _number(a))
            top = max((v for v in values if v is not None), default=0.0) or 1.0
            for i, (raw, value) in enumerate(zip((b, a), values)):
                width = 0 if value is None else round(bar_area * value / top)
                by = y + 4 + 18 * i
                out.append(f'<rect x="{label_w}" y="{by}" width="{width}" height="14" fill="{colors[i]}"/>')
                out.append(f'<text x="{label_w + width + 4}" y="{by + 11}">{html.escape(_show(raw))}</text>')
        out.append("</svg>")
        return "".join(out)

    def _repr_svg_(self) -> str:
        return self.svg()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """The chart, and a one-line text form: ``compare`` has already printed the table."""
        names = ", ".join(name for name, _, _ in self.rows)
        return {"image/svg+xml": self.svg(), "text/plain": f"<{self.labels[0]} vs {self.labels[1]}: {names}>"}


def compare(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    labels: tuple[str, str] = ("before", "after"),
    print_table: bool = True,
) -> Comparison:
    """Print ``before`` and ``after`` side by side and return a :class:`Comparison` (a bar chart in
    notebooks). Values may be numbers or :class:`TimeStats`; ``measure(fn)`` makes such a dict."""
    result = Comparison(before, after, labels)
    if print_table:
        print(result.table())
    return result
