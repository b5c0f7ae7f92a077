"""lab.trace(): the frames of torch.add, their PyTorch names, key sets, and clean hooks."""

from __future__ import annotations

import itertools
import sys

import pytest

import labsupport as lab
import labsupport.torch as torch
from labsupport.c10.dispatcher import observers
from labsupport.tools.frame_names import classify

ADD_PATH = [
    "torch::autograd::THPVariable_add",
    "at::_ops::add_Tensor::call",
    "torch::autograd::VariableType::(anonymous namespace)::add_Tensor",
    "at::_ops::add_Tensor::redispatch",
    "at::(anonymous namespace)::wrapper_CPU_add_Tensor",
    "at::native::structured_ufunc_add_CPU::impl",
]


def _add_trace(requires_grad: bool = False) -> lab.tools.trace.Trace:
    a = torch.tensor([1.0, 2.0], requires_grad=requires_grad)
    b = torch.tensor([3.0, 4.0])
    with lab.trace() as rec:
        torch.add(a, b)
    return rec


def _assert_nested(rec, names):
    """Each name is found, and each frame is called (directly or not) by the one before it."""
    frames = [rec.find(n) for n in names]
    assert all(frames), [n for n, f in zip(names, frames) if f is None]
    for outer, inner in itertools.pairwise(frames):
        assert outer in inner.ancestors(), (outer, inner)
    return frames


def test_add_walks_the_layers_of_exercise_0_in_order():
    rec = _add_trace()
    _assert_nested(rec, ADD_PATH)
    names = rec.torch_names()
    assert [n for n in names if n in ADD_PATH] == ADD_PATH
    layers = {f.torch_name: f.layer for f in rec.frames}
    assert layers["torch::autograd::THPVariable_add"] == "binding"
    assert layers["at::_ops::add_Tensor::call"] == "op_handle"
    assert layers["torch::autograd::VariableType::(anonymous namespace)::add_Tensor"] == "autograd"
    assert layers["at::(anonymous namespace)::wrapper_CPU_add_Tensor"] == "kernel"
    assert layers["at::meta::structured_add_Tensor::meta"] == "meta"
    assert layers["at::native::structured_ufunc_add_CPU::impl"] == "native"
    impl = rec.find("at::native::structured_ufunc_add_CPU::impl")
    assert impl.file == "labsupport/aten/native/binary_ops.py"
    assert impl.name == "structured_ufunc_add_CPU.impl"
    assert rec.find("at::(anonymous namespace)::wrapper_CPU_add_Tensor").file == "build/torch/register_cpu.py"


def test_dispatcher_frames_carry_the_key_sets():
    rec = _add_trace()
    call = rec.find("c10::Dispatcher::call")
    assert call.layer == "dispatcher" and call.redispatch is False
    assert call.key_set == lab.DispatchKeySet([lab.DispatchKey.CPU, lab.DispatchKey.AutogradCPU])
    assert repr(call.key_set) == "DispatchKeySet(CPU, AutogradCPU)"
    assert call.key is lab.DispatchKey.AutogradCPU
    assert call.label == "autograd kernel" and call.op == "aten::add.Tensor"
    assert set(call.parts) == {"tensor_keys", "tls_include", "tls_exclude", "fallthrough_mask"}
    assert repr(call.parts["tensor_keys"]) == "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    assert call.parts["tls_include"] == lab.tls_include_set()
    redispatch = rec.find("c10::Dispatcher::redispatch")
    assert redispatch.redispatch is True
    assert repr(redispatch.key_set) == "DispatchKeySet(CPU)"
    assert redispatch.key is lab.DispatchKey.CPU
    assert redispatch.kernel == "wrapper_CPU_add_Tensor" and redispatch.label == "kernel"
    assert set(redispatch.parts) == {"from_caller"}
    # the handle calls the dispatcher, which calls the kernel it chose
    assert rec.find("torch::autograd::VariableType::(anonymous namespace)::add_Tensor").parent is call
    assert rec.find("at::(anonymous namespace)::wrapper_CPU_add_Tensor").parent is redispatch


def test_grad_fn_is_recorded_on_the_autograd_frame():
    assert _add_trace(requires_grad=False).find("torch::autograd::VariableType::(anonymous namespace)::add_Tensor").grad_fn is None
    rec = _add_trace(requires_grad=True)
    assert rec.find("torch::autograd::VariableType::(anonymous namespace)::add_Tensor").grad_fn == "AddBackward0"


def test_backtrace_reads_like_gdb():
    rec = _add_trace()
    bt = rec.backtrace().splitlines()
    assert bt[0].startswith("#0  at::native::structured_ufunc_add_CPU::impl  (labsupport/aten/native/binary_ops.py:")
    assert bt[1].startswith("#1  at::(anonymous namespace)::wrapper_CPU_add_Tensor  (build/torch/register_cpu.py:")
    assert any("c10::Dispatcher::call" in line and "ks=DispatchKeySet(CPU, AutogradCPU) -> AutogradCPU" in line
               for line in bt)  # fmt: skip
    assert bt[-1].split("  ")[1] == "torch::autograd::THPVariable_add"
    assert rec.backtrace(at="at::(anonymous namespace)::wrapper_CPU_add_Tensor").startswith("#0  at::(anonymous namespace)::wrapper_CPU_add_Tensor")
    with pytest.raises(KeyError):
        rec.backtrace(at="no::such::frame")


def test_output_is_deterministic():
    first, second = _add_trace(), _add_trace()
    assert first.backtrace() == second.backtrace()
    assert first.table() == second.table()
    assert "0x" not in first.table()
    assert first.call_graph().source == second.call_graph().source


def test_factory_functions_show_backend_select_and_nested_operators():
    with lab.trace() as rec:
        torch.randn(2)
    first = rec.find("c10::Dispatcher::call")
    assert first.key is lab.DispatchKey.BackendSelect
    _assert_nested(rec, ["at::_ops::randn::call", "at::(anonymous namespace)::randn", "at::native::randn",
                         "at::_ops::empty_memory_format::call", "at::native::empty_cpu"])  # fmt: skip
    assert rec.find("at::_ops::normal_::call") is not None


def test_bypassing_the_dispatcher_leaves_no_dispatcher_frame():
    a = torch.tensor([1.0, 2.0])
    with lab.trace() as rec:
        torch._build.cpu_functions.add(a, a)
    assert rec.torch_names()[:2] == ["at::cpu::add", "at::(anonymous namespace)::wrapper_CPU_add_Tensor"]
    assert not [f for f in rec.frames if f.layer == "dispatcher"]


def test_user_kernels_and_fallbacks_are_named_from_the_dispatch_table():
    d = lab.Dispatcher("trace_test")
    lib = lab.Library("tracetest", "DEF", dispatcher=d)
    lib.define("twice(Tensor self) -> Tensor")

    def twice_cpu(x):
        return x

    lib.impl("twice", twice_cpu, "CPU")
    op = d.find_schema_or_throw("tracetest::twice")
    a = torch.tensor([1.0])
    with lab.trace() as rec:
        op(a)
    kernel = rec.find("twice_cpu")
    assert kernel is not None and kernel.layer == "kernel"
    fallback = rec.find("torch::autograd::basicAutogradNotImplementedFallbackImpl")
    assert fallback is not None and fallback.layer == "fallback"
    call = rec.find("c10::Dispatcher::call")
    assert call.key is lab.DispatchKey.AutogradCPU and call.label == "backend fallback"
    assert fallback in kernel.ancestors()
    lib.close()


def test_any_build_is_recognised():
    from labsupport.codegen import load_build

    second = load_build(name="torch", dispatcher=lab.Dispatcher("second_build"))
    assert second.__name__ != torch._build.__name__
    assert classify(f"{second.__name__}.register_cpu", "wrapper_CPU_add_Tensor") == ("kernel", "at::(anonymous namespace)::wrapper_CPU_add_Tensor")
    assert classify("some_module.register_cpu", "wrapper_CPU_add_Tensor") is None  # not a build
    a = torch.tensor([1.0, 2.0])
    with lab.trace() as rec:
        second.functions.add(a, a)
    _assert_nested(rec, ADD_PATH[1:])
    assert rec.find("c10::Dispatcher::call").key is lab.DispatchKey.AutogradCPU


def test_hooks_are_off_and_restored_after_the_block():
    before = sys.getprofile()
    with lab.trace():
        assert observers.active and sys.getprofile() is not before
    assert not observers.active and sys.getprofile() is before
    a = torch.tensor([1.0])
    with pytest.raises(ZeroDivisionError), lab.trace():
        torch.add(a, a)
        1 / 0  # noqa: B018
    assert not observers.active and sys.getprofile() is before


def test_nested_traces_both_record_and_restore_in_order():
    a = torch.tensor([1.0])

    def outer_profile(frame, event, arg):
        return None

    sys.setprofile(outer_profile)
    try:
        with lab.trace() as outer:
            with lab.trace() as inner:
                torch.add(a, a)
            assert sys.getprofile() == outer._profile
        assert sys.getprofile() is outer_profile
    finally:
        sys.setprofile(None)
    assert inner.torch_names() == outer.torch_names()
    assert "at::native::structured_ufunc_add_CPU::impl" in inner.torch_names()
    with pytest.raises(RuntimeError):
        with inner:
            pass


def test_pass_through_fallbacks_are_named_per_key():
    d = lab.Dispatcher("trace_fallbacks")
    lib = lab.Library("tracefb", "DEF", dispatcher=d)
    lib.define("ident(Tensor self) -> Tensor")

    def ident_cpu(x):
        return x

    lib.impl("ident", ident_cpu, "CPU")
    op = d.find_schema_or_throw("tracefb::ident")
    a = torch.tensor([1.0])
    keys = lab.DispatchKeySet([lab.DispatchKey.Conjugate, lab.DispatchKey.Negative])
    with lab.IncludeDispatchKeyGuard(keys), lab.trace() as rec:
        op(a)
    fallbacks = [f.torch_name for f in rec.frames if f.layer == "fallback"]
    assert fallbacks == [
        "torch::autograd::basicAutogradNotImplementedFallbackImpl",
        "negative_passthrough_fallback",  # the two share one code object, yet each is named after its key
        "conjugate_passthrough_fallback",
    ]
    assert [f.key.name for f in rec.frames if f.layer == "dispatcher"] == ["AutogradCPU", "Negative", "Conjugate", "CPU"]
    assert rec.find("ident_cpu").layer == "kernel"
    assert rec.find("c10::impl::BoxedKernelWrapper::call").layer == "boxing"
    lib.close()


def test_generated_kernels_keep_pytorchs_anonymous_namespaces():
    """PyTorch 2.13's wheel (symbol table, gdb) names the generated kernels inside anonymous namespaces:
    one around a structured kernel's wrapper and its classes, two around any other wrapper."""
    build = torch._build.__name__
    assert classify(f"{build}.register_cpu", "wrapper_CPU_add_Tensor").torch_name == (
        "at::(anonymous namespace)::wrapper_CPU_add_Tensor"
    )
    assert classify(f"{build}.register_cpu", "structured_ufunc_add_CPU_functional.set_output_raw_strided").torch_name == (
        "at::(anonymous namespace)::structured_ufunc_add_CPU_functional::set_output_raw_strided"
    )
    for module, wrapper in (("register_cpu", "wrapper_CPU__zero_"), ("register_meta", "wrapper_Meta_memory_format_empty"),
                            ("register_composite_explicit_autograd", "wrapper_CompositeExplicitAutograd__zeros")):  # fmt: skip
        assert classify(f"{build}.{module}", wrapper).torch_name == (
            f"at::(anonymous namespace)::(anonymous namespace)::{wrapper}"
        )
    assert classify(f"{build}.variable_type", "mul_Tensor").torch_name == (
        "torch::autograd::VariableType::(anonymous namespace)::mul_Tensor"
    )
    assert classify(f"{build}.ad_inplace_or_view_type", "add__Tensor").torch_name == (
        "torch::ADInplaceOrView::(anonymous namespace)::add__Tensor"
    )
    assert classify(f"{build}.ad_inplace_or_view_type", "copy_").torch_name == "torch::ADInplaceOrView::copy_"


def test_out_variant_frames_carry_pytorchs_kernel_names():
    """torch.add(..., out=) runs the kernels PyTorch 2.13 calls ``add_out_out`` (C++ name + overload),
    reached through the ``at::_ops::add_out`` handle."""
    a, b, out = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]), torch.empty(2)
    with lab.trace() as rec:
        torch.add(a, b, out=out)
    _assert_nested(rec, [
        "at::_ops::add_out::call",
        "torch::autograd::VariableType::(anonymous namespace)::add_out_out",
        "torch::ADInplaceOrView::(anonymous namespace)::add_out_out",
        "at::(anonymous namespace)::wrapper_CPU_add_out_out",
    ])  # fmt: skip
    assert rec.find("torch::autograd::VariableType::(anonymous namespace)::add_out") is None
