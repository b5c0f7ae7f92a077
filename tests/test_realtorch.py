"""The real-PyTorch helpers: parsing gdb's backtrace, and (when PyTorch, gdb and valgrind are here)
the real torch.add frames and instruction counts next to the lab's."""

from __future__ import annotations

import shutil

import pytest

from labsupport.tools import realtorch
from labsupport.tools.bench import ToolMissing

GDB_OUTPUT = """\
Thread 1 "python" hit Breakpoint 1.1, 0x00007fffe17cc090 in at::native::structured_ufunc_add_CPU::impl(at::Tensor const&, at::Tensor const&, c10::Scalar const&, at::Tensor const&)@plt () from /x/libtorch_cpu.so
#0  0x00007fffe17cc090 in at::native::structured_ufunc_add_CPU::impl(at::Tensor const&, at::Tensor const&, c10::Scalar const&, at::Tensor const&)@plt () from /x/libtorch_cpu.so
#1  0x00007fffe35f2230 in at::(anonymous namespace)::wrapper_CPU_add_Tensor(at::Tensor const&, at::Tensor const&, c10::Scalar const&) () from /x/libtorch_cpu.so
#2  0x00007fffe35f2282 in c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&), &at::(anonymous namespace)::wrapper_CPU_add_Tensor>, at::Tensor, c10::guts::typelist::typelist<at::Tensor const&> >, at::Tensor (at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&) () from /x/libtorch_cpu.so
#3  0x00007fffe318e644 in at::_ops::add_Tensor::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, c10::Scalar const&) () from /x/libtorch_cpu.so
#4  0x00007fffe59b3ed6 in torch::autograd::VariableType::(anonymous namespace)::add_Tensor(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, c10::Scalar const&) () from /x/libtorch_cpu.so
#6  0x00007fffe322914b in at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&) () from /x/libtorch_cpu.so
#7  0x00007ffff5999b0a in torch::autograd::THPVariable_add(_object*, _object*, _object*) () from /x/libtorch_python.so
#8  0x00007ffff7ba6ce3 in cfunction_call (func=0x7ffff6de0810, args=<optimized out>) at Objects/methodobject.c:542
#13 _PyEval_Vector (args=0x0, argcount=0) at Python/ceval.c:6434
"""

EXPECTED = [
    "at::native::structured_ufunc_add_CPU::impl",
    "at::(anonymous namespace)::wrapper_CPU_add_Tensor",
    "at::_ops::add_Tensor::redispatch",
    "torch::autograd::VariableType::(anonymous namespace)::add_Tensor",
    "at::_ops::add_Tensor::call",
    "torch::autograd::THPVariable_add",
]


def test_parse_gdb_backtrace():
    frames = realtorch.parse_gdb_backtrace(GDB_OUTPUT)
    assert [f.index for f in frames] == [0, 1, 2, 3, 4, 6, 7, 8, 13]
    assert frames[1].function == "at::(anonymous namespace)::wrapper_CPU_add_Tensor"
    assert frames[1].library == "/x/libtorch_cpu.so"
    assert frames[7].name == "cfunction_call" and not frames[7].is_pytorch
    assert [f.name for f in realtorch.pytorch_frames(frames)] == EXPECTED


def test_missing_tools_are_reported_plainly(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ToolMissing, match=r"gdb is not installed, so this comparison is skipped. Install it with: apt-get"):
        realtorch.require("gdb")


def _needs(*tools):
    missing = [t for t in tools if not realtorch.status()[t]]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")


@pytest.mark.torch
def test_real_torch_add_backtrace_matches_the_lab_trace():
    _needs("torch", "gdb")
    import labsupport as lab
    import labsupport.torch as torch

    frames = realtorch.pytorch_frames(realtorch.gdb_backtrace())
    assert [f.name for f in frames][: len(EXPECTED)] == EXPECTED
    a, b = torch.tensor([1.0, 1.0]), torch.tensor([1.0, 1.0])
    with lab.trace() as rec:
        torch.add(a, b)
    skipped = ("c10::Dispatcher", "at::meta", "at::TensorIterator", "at::(anonymous namespace)::structured")
    lab_names = [n for n in rec.torch_names() if not n.startswith(skipped)]
    assert lab_names == list(reversed(EXPECTED))
    assert all(index is not None for _, index in realtorch.align_frames(lab_names, frames))


@pytest.mark.torch
@pytest.mark.slow
def test_real_torch_add_instruction_count():
    _needs("torch", "valgrind")
    count = realtorch.callgrind_instructions(number=20)
    assert 1_000 < count < 100_000
