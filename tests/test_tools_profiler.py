"""lab.profiler.profile(): operators seen by Dispatcher::call, in torch.profiler's table shape."""

from __future__ import annotations

import re

import labsupport as lab
import labsupport.torch as torch
from labsupport.c10.dispatcher import observers


def test_one_event_per_call_never_per_redispatch():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    with lab.profiler.profile() as prof:
        for _ in range(3):
            torch.add(a, b)
    assert prof.counts() == {"aten::add": 3}
    (row,) = prof.key_averages()
    assert row.key == "aten::add" and row.count == 3
    assert row.cpu_time_total >= row.self_cpu_time_total > 0
    assert not observers.active


def test_nested_operators_become_children():
    with lab.profiler.profile() as prof:
        torch.randn(2)
    assert prof.counts() == {"aten::randn": 1, "aten::empty": 1, "aten::normal_": 1}
    (root,) = [e for e in prof.events() if e.parent is None]
    assert root.name == "aten::randn"
    assert [c.name for c in root.children] == ["aten::empty", "aten::normal_"]
    assert prof.tree() == "aten::randn\n  aten::empty\n  aten::normal_"
    randn = {a.key: a for a in prof.key_averages()}["aten::randn"]
    assert randn.cpu_time_total > randn.self_cpu_time_total


def test_a_call_that_bypasses_the_dispatcher_is_invisible():
    a = torch.tensor([1.0, 2.0])
    with lab.profiler.profile() as prof:
        torch._build.cpu_functions.add(a, a)  # at::cpu::add: straight to the CPU kernel
    assert prof.counts() == {}
    assert prof.events() == []
    assert prof.key_averages().table() == ""


def test_table_has_torch_profilers_shape():
    a = torch.tensor([1.0, 2.0])
    with lab.profiler.profile() as prof:
        torch.add(a, a)
        torch.randn(2)
    text = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    lines = text.splitlines()
    assert re.fullmatch(r"-{17}  (-{12}  ){6}", lines[0])
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU", "total",
                                "CPU", "time", "avg", "#", "of", "Calls"]  # fmt: skip
    assert lines[2] == lines[0] and lines[-2] == lines[0]
    assert lines[1].startswith("             Name    Self CPU %")
    assert re.fullmatch(r"Self CPU time total: \d+\.\d{3}(us|ms|s)", lines[-1])
    assert lines[3].split()[0] == "aten::randn"  # the largest total time comes first
    (add_row,) = [line for line in lines if "aten::add" in line]
    assert re.fullmatch(r" {8}aten::add +\d+\.\d\d% +\d+\.\d{3}(us|ms) +\d+\.\d\d% .* 1  ", add_row)
    assert len(lines) == 3 + 4 + 2


def test_counts_only_table_is_the_same_every_run():
    def run() -> str:
        a = torch.tensor([1.0, 2.0])
        with lab.profiler.profile() as prof:
            torch.add(a, a)
            torch.randn(2)
            torch.add(a, a)
        return prof.key_averages().table(sort_by="cpu_time_total", times=False)

    text = run()
    assert text == run()
    assert text == (
        "-----------------  ------------  \n"
        "             Name    # of Calls  \n"
        "-----------------  ------------  \n"
        "        aten::add             2  \n"
        "      aten::randn             1  \n"
        "      aten::empty             1  \n"
        "    aten::normal_             1  \n"
        "-----------------  ------------  \n"
    )


def test_python_key_scopes_nest_and_close_when_the_handler_raises():
    from labsupport.utils._python_dispatch import TorchDispatchMode

    class Refuses(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            raise ValueError(f"no {func}")

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    a = torch.tensor([1.0, 2.0])
    with lab.profiler.profile() as prof:
        try:
            with Refuses():
                torch.add(a, a)
        except ValueError:
            pass
        with PassThrough():
            torch.neg(a)
        torch.add(a, a)
    # RECORD_FUNCTION is a scope guard: the raising handler's row ends with it (PyTorch 2.13 prints this tree)
    assert prof.tree() == (
        "aten::add\n  PythonDispatchMode\naten::neg\n  PythonDispatchMode\n    aten::neg\naten::add"
    )
    assert prof.counts() == {"aten::add": 2, "PythonDispatchMode": 2, "aten::neg": 2}
    assert [e.name for e in prof.events() if e.cpu_time_total < 0] == []
    assert not observers.active
