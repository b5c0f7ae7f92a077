"""lab.stop_at(): the real Python stack holds exactly the frames lab.trace() reports."""

from __future__ import annotations

import sys

import labsupport as lab
import labsupport.torch as torch

IMPL = "at::native::structured_ufunc_add_CPU::impl"


def test_traced_frames_are_the_real_stack_in_the_same_order():
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    before = sys.getprofile()
    with lab.stop_at(IMPL) as bp:
        torch.add(a, b)
    assert sys.getprofile() is before
    assert bp.hit and bp.hits == 1
    with lab.trace() as rec:
        torch.add(a, b)
    impl = rec.find(IMPL)
    traced = [f.torch_name for f in reversed([impl, *impl.ancestors()])]
    real = [entry.function for entry in bp.stack]
    # every traced frame is a real frame, in the same order (innermost last)
    assert bp.torch_names() == traced
    assert [e.torch_name for e in bp.stack if e.torch_name] == traced
    assert real[-1] == "structured_ufunc_add_CPU.impl" and bp.stack[-1].file == "labsupport/aten/native/binary_ops.py"
    assert [s.name for s in bp.summaries][-1] == "impl"
    assert len(bp.summaries) == len(bp.stack)


def test_format_is_shaped_like_pdbs_where():
    a = torch.tensor([1.0, 2.0])
    with lab.stop_at(IMPL) as bp:
        torch.add(a, a)
    text = bp.format()
    lines = text.splitlines()
    assert lines[-2].startswith("> labsupport/aten/native/binary_ops.py(")
    assert lines[-2].endswith(f")impl()    # {IMPL}")
    assert lines[-1].startswith("-> def impl(")
    assert any(line.startswith("  build/torch/register_cpu.py(") and "wrapper_CPU_add_Tensor()" in line for line in lines)
    assert "site-packages" not in text and "/usr/lib" not in text
    assert text == repr(bp)
    assert len(bp.format(lab_only=False).splitlines()) > len(lines)


def test_a_missed_breakpoint_says_so():
    with lab.stop_at("at::native::no_such_kernel") as bp:
        torch.add(torch.tensor([1.0]), torch.tensor([1.0]))
    assert not bp.hit
    assert bp.format() == "(the breakpoint on at::native::no_such_kernel was not reached)"
