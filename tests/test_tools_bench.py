"""lab.count_instructions, lab.bench: exact counts, timings, callgrind, before/after views."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import labsupport as lab
import labsupport.torch as torch
from labsupport.tools import bench

ROOT = Path(__file__).resolve().parents[1]
SETUP = "import labsupport.torch as torch\na = torch.tensor([1.0, 2.0])"
# A dispatched call that needs neither numpy nor the generated build (fast to start under valgrind).
SMALL_SETUP = """
import labsupport as lab
d = lab.Dispatcher("callgrind")
lib = lab.Library("cg", "DEF", dispatcher=d)
lib.define("ident(Tensor self) -> Tensor")
lib.impl("ident", lambda x: x, "CPU")
op = d.find_schema_or_throw("cg::ident")
class FakeTensor:
    _ks = int(lab.DispatchKeySet(lab.DispatchKey.CPU))
x = FakeTensor()
"""


def test_instruction_counts_are_exact_in_process():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    counts = {lab.count_instructions(lambda: torch.add(a, b)) for _ in range(3)}
    assert len(counts) == 1
    (n,) = counts
    assert 100 < n < 5000
    # the dispatcher costs instructions: the direct CPU kernel needs fewer
    assert lab.count_instructions(lambda: torch._build.cpu_functions.add(a, b)) < n
    assert lab.count_instructions(lambda: None) <= 3
    assert lab.count_instructions(lambda: torch.add(a, b), number=4) == n
    assert sys.gettrace() is None


def test_instruction_counts_are_the_same_in_fresh_processes():
    script = textwrap.dedent(
        """
        import labsupport as lab
        import labsupport.torch as torch
        a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
        print(lab.count_instructions(lambda: torch.add(a, b)), lab.count_instructions(lambda: torch.randn(3)))
        """
    )
    outputs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True).stdout
        for _ in range(3)
    ]
    assert outputs[0].strip() and len(set(outputs)) == 1, outputs


def test_timeit_reports_medians():
    stats = lab.bench.timeit(lambda: None, repeat=5, number=100)
    assert len(stats.times) == 5 and stats.number == 100
    assert stats.min <= stats.median <= stats.max
    assert "per call (median of 5 repeats of 100" in repr(stats)
    auto = lab.bench.timeit(lambda: None, repeat=3, target=0.001)
    assert auto.number >= 1
    assert bench.format_time(3.41e-6) == "3.41 us" and bench.format_time(0.012) == "12 ms"
    assert bench.format_time(2.5e-9) == "2.5 ns" and bench.format_time(1.5) == "1.5 s"


def test_compare_prints_a_table_and_draws_a_deterministic_chart(capsys):
    before = {"bytecode instructions": 420, "callgrind instructions": 30000}
    after = {"bytecode instructions": 240, "callgrind instructions": 12000}
    view = lab.bench.compare(before, after)
    printed = capsys.readouterr().out
    assert printed == repr(view) + "\n"
    assert repr(view).splitlines() == [
        "                        before   after  after/before",
        "bytecode instructions      420     240         0.57x",
        "callgrind instructions  30,000  12,000         0.40x",
    ]
    svg = view._repr_svg_()
    assert svg.startswith("<svg") and svg == lab.bench.compare(before, after, print_table=False).svg()
    assert 'width="300"' in svg and 'width="120"' in svg  # 30,000 -> full bar, 12,000 -> 40 %
    assert view.ratio("bytecode instructions") == pytest.approx(240 / 420)
    assert not hasattr(view, "_repr_html_")  # timings vary: keep them out of what nbval compares
    bundle = view._repr_mimebundle_()
    assert bundle == {"image/svg+xml": svg, "text/plain": "<before vs after: bytecode instructions, callgrind instructions>"}


def test_measure_gives_counts_and_timings():
    figures = lab.bench.measure(lambda: None)
    assert set(figures) == {"bytecode instructions", "time per call"}
    assert isinstance(figures["time per call"], bench.TimeStats)
    view = lab.bench.compare(figures, figures, labels=("a", "b"), print_table=False)
    assert "time per call" in repr(view) and "1.00x" in repr(view)


def test_callgrind_without_valgrind_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(bench.ToolMissing, match=r"^valgrind is not installed: .*apt-get install valgrind"):
        lab.bench.callgrind("pass")
    assert lab.bench.callgrind("pass", missing_ok=True) is None


@pytest.mark.slow
def test_callgrind_counts_machine_instructions():
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    counts = lab.bench.callgrind_counts("op.call(x)", SMALL_SETUP, number=100, repeat=3, timeout=300)
    assert all(isinstance(c, int) and c > 500 for c in counts)
    assert max(counts) - min(counts) <= 0.01 * min(counts), counts


def test_callgrind_returns_the_median_of_its_repeats(monkeypatch):
    monkeypatch.setattr(bench, "callgrind_counts", lambda *args, **kwargs: [30010, 30000, 30020])
    assert lab.bench.callgrind("torch.add(a, a)", SETUP, repeat=3) == 30010


def test_interleaved_medians_times_every_case_inside_its_context():
    import contextlib

    from labsupport.tools.bench import interleaved_medians

    entered = []

    @contextlib.contextmanager
    def context():
        entered.append(1)
        yield

    calls = {"plain": 0, "in context": 0}

    def plain():
        calls["plain"] += 1

    def in_context():
        assert entered, "ran outside its context"
        calls["in context"] += 1

    medians = interleaved_medians({"plain": plain, "in context": (in_context, context)}, number=3, repeat=4)
    assert list(medians) == ["plain", "in context"] and all(v >= 0 for v in medians.values())
    assert calls == {"plain": 1 + 3 * 4, "in context": 1 + 3 * 4}  # one warm-up call, then repeat batches
    assert len(entered) == 1 + 4
