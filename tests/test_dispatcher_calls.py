"""Calling through the dispatcher: key-set computation, redispatch, boxing, fallbacks, errors,
and the lifetime of registrations (the seed 003 ``myadd`` story in test form)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import labsupport as lab
from labsupport import DispatchKey as K
from labsupport import DispatchKeySet
from labsupport.aten import dtype as dt
from labsupport.aten.tensor import TensorBase, tensor_device


def T(values, device="cpu", requires_grad=False):
    data = np.asarray(values, dtype=np.float32)
    t = TensorBase._make(None if device == "meta" else data, data.shape, dt.float32, tensor_device(device))
    t.requires_grad = requires_grad
    return t


@pytest.fixture
def d():
    return lab.Dispatcher("test")


def _myops(d, *schemas):
    lib = lab.Library("myops", "DEF", dispatcher=d)
    for s in schemas:
        lib.define(s)
    return lib


def test_cpu_kernel_runs_and_sees_the_computed_key_set(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    seen = []

    def myadd_cpu(ks, a, b):
        seen.append(repr(ks))
        return T(a._data + b._data)

    lib.impl("myadd", myadd_cpu, "CPU", with_keyset=True)
    op = d.find_schema_or_throw("myops::myadd")
    out = op(T([1, 2]), T([3, 4]))
    assert out._data.tolist() == [4, 6]
    # AutogradCPU ran the autograd fallback (warn mode), which redispatched below autograd and
    # ADInplaceOrView; BackendSelect/ADInplaceOrView/AutocastCPU were masked or excluded up front.
    assert seen == ["DispatchKeySet(CPU)"]


def test_autograd_kernel_redispatches_with_masked_key_set(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    calls = []

    def myadd_autograd(ks, a, b):
        calls.append(("autograd", repr(ks)))
        return d.find_op("myops::myadd").redispatch(ks & lab.after_autograd_keyset, a, b)

    def myadd_cpu(ks, a, b):
        calls.append(("cpu", repr(ks)))
        return T(a._data + b._data)

    lib.impl("myadd", myadd_autograd, "Autograd", with_keyset=True)
    lib.impl("myadd", myadd_cpu, "CPU", with_keyset=True)
    d.find_op("myops::myadd").call(T([1]), T([2]))
    assert calls == [("autograd", "DispatchKeySet(CPU, AutogradCPU)"), ("cpu", "DispatchKeySet(CPU)")]


def test_autograd_kernel_with_guard_uses_tls_exclude(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    op = d.find_op("myops::myadd")
    order = []

    def myadd_autograd(a, b):
        order.append("autograd")
        with lab.AutoNonVariableTypeMode():
            return op.call(a, b)

    lib.impl("myadd", myadd_autograd, "Autograd")
    lib.impl("myadd", lambda a, b: order.append("cpu") or a, "CPU")
    op.call(T([1]), T([1]))
    assert order == ["autograd", "cpu"]


def test_forgetting_to_exclude_autograd_is_explained(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    op = d.find_op("myops::myadd")

    def myadd_autograd(a, b):
        return op.call(a, b)  # no guard: the dispatcher picks this kernel again and again

    lib.impl("myadd", myadd_autograd, "Autograd")
    lib.impl("myadd", lambda a, b: a, "CPU")
    with pytest.raises(lab.DispatchRecursionError) as info:
        op.call(T([1]), T([1]))
    message = str(info.value)
    assert "myops::myadd re-entered its AutogradCPU kernel" in message
    assert "myadd_autograd" in message and "notebook 04, section 6" in message
    # it explains the mistake without writing the fix for the learner (that is exercise ex04)
    assert "AutoDispatchBelowADInplaceOrView" not in message and "after_autograd_keyset" not in message


def test_missing_kernel_error_names_op_key_and_available_keys(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: a, "CPU")
    op = d.find_op("myops::myadd")
    with pytest.raises(NotImplementedError) as info:
        op.call(T([1], device="cuda"), T([1], device="cuda"))
    message = str(info.value)
    assert message.startswith("Could not run 'myops::myadd' with arguments from the 'CUDA' backend.")
    assert "only available for these backends: [CPU, Meta, BackendSelect" in message
    assert "CPU: <lambda> [kernel]" in message


def test_meta_fallback_and_no_tensor_arguments(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor", "make(int n) -> Tensor")
    lib.impl("myadd", lambda a, b: a, "CPU")
    lib.impl("make", lambda n: T([0.0] * n), "CPU")
    with pytest.raises(NotImplementedError, match="myops::myadd: attempted to run this operator with Meta"):
        d.find_op("myops::myadd").call(T([1], device="meta"), T([1], device="meta"))
    with pytest.raises(NotImplementedError, match="There were no tensor arguments"):
        d.find_op("myops::make").call(3)
    lib.impl("make", lambda n: T([1.0] * n), "CompositeExplicitAutograd")
    assert d.find_op("myops::make").call(2)._data.tolist() == [1, 1]


def test_boxed_fallback_serves_every_operator(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor", "myneg(Tensor self) -> Tensor")
    lib.impl("myadd", lambda a, b: T(a._data + b._data), "CPU")
    lib.impl("myneg", lambda a: T(-a._data), "CPU")
    log = []

    def logging_fallback(op, ks, stack):
        log.append((op.full_name, len(stack)))
        with lab.ExcludeDispatchKeyGuard(DispatchKeySet(K.TESTING_ONLY_GenericMode)):
            op.call_boxed(stack)

    fallbacks = lab.Library("_", "IMPL", dispatcher=d)
    fallbacks.fallback(logging_fallback, "TESTING_ONLY_GenericMode", with_keyset=True)
    with lab.IncludeDispatchKeyGuard(K.TESTING_ONLY_GenericMode):
        assert d.find_op("myops::myadd").call(T([1]), T([2]))._data.tolist() == [3]
        assert d.find_op("myops::myneg").call(T([5]))._data.tolist() == [-5]
    assert log == [("myops::myadd", 2), ("myops::myneg", 1)]
    fallbacks.close()
    with lab.IncludeDispatchKeyGuard(K.TESTING_ONLY_GenericMode):
        with pytest.raises(NotImplementedError, match="TESTING_ONLY_GenericMode"):
            d.find_op("myops::myneg").call(T([5]))


def test_unboxed_kernel_called_boxed(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    lib.impl("myadd", lambda a, b, alpha: T(a._data + alpha * b._data), "CPU")
    stack = [T([1]), T([2]), 10]
    d.find_op("myops::myadd").call_boxed(stack)
    assert len(stack) == 1 and stack[0]._data.tolist() == [21]
    assert d.find_op("myops::myadd")(T([1]), T([2]), alpha=3)._data.tolist() == [7]


def test_per_op_fallthrough_skips_the_key(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    order = []
    lib.impl("myadd", lambda a, b: order.append("cpu") or a, "CPU")
    lib.impl("myadd", lambda a, b: order.append("autograd") or a, "Autograd")
    op = d.find_op("myops::myadd")
    op.call(T([1]), T([1]))
    assert order == ["autograd"]
    with lab.Library("myops", "IMPL", "AutogradCPU", dispatcher=d) as ft:
        ft.impl("myadd", lab.fallthrough_kernel)
        op.call(T([1]), T([1]))
        assert order == ["autograd", "cpu"]
        assert "AutogradCPU: fallthrough registered at" in d.dump_table("myops::myadd")
    op.call(T([1]), T([1]))
    assert order == ["autograd", "cpu", "autograd"]


def test_closing_a_library_undoes_its_registrations(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    impl = lab.Library("myops", "IMPL", dispatcher=d)
    impl.impl("myadd", lambda a, b: a, "CPU")
    assert "CPU: <lambda> [kernel]" in d.dump_table("myops::myadd")
    del impl
    assert not any(line.startswith("CPU:") for line in d.dump_table("myops::myadd").splitlines())
    lib.close()
    assert d.find_op("myops::myadd") is None
    # the notebook pattern: re-running a cell rebinds the variable, dropping the old library first
    for _ in range(2):
        lib = lab.Library("myops", "DEF", dispatcher=d)
        lib.define("myadd(Tensor self, Tensor other) -> Tensor")
    assert d.find_op("myops::myadd").schema is not None


def test_duplicate_define_names_both_places(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    frag = lab.Library("myops", "FRAGMENT", dispatcher=d)
    with pytest.raises(RuntimeError, match=r"same name and overload name multiple times.*Duplicate registration: "
                                           r"registered at tests/test_dispatcher_calls.py:\d+\. Original "
                                           r"registration: registered at tests/test_dispatcher_calls.py:\d+"):
        frag.define("myadd(Tensor self, Tensor other) -> Tensor")
    with pytest.raises(RuntimeError, match="Only a single TORCH_LIBRARY can be used to register the namespace myops"):
        lab.Library("myops", "DEF", dispatcher=d).define("other(Tensor x) -> Tensor")
    assert lib.ns == "myops"


def test_bad_registrations_name_what_and_where(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    with pytest.raises(RuntimeError, match=r"^could not parse dispatch key: CPUU\. \(lab\) Did you mean CPU"):
        lib.impl("myadd", lambda a, b: a, "CPUU")
    # a typo in the name is not an error (its def may come later), but it leaves a dangling impl
    lib.impl("myad", lambda a, b: a, "CPU")
    assert [text.splitlines()[:2] for text in d.find_dangling_impls()] == [["name: myops::myad", "schema: (none)"]]
    with pytest.raises(RuntimeError, match=r"^Could not find schema for myops::myad\. but we found an implementation"):
        d.find_schema_or_throw("myops::myad")
    with pytest.raises(lab.SchemaParseError, match="column"):
        lib.define("broken(Tensor x -> Tensor")
    with pytest.raises(ValueError, match="AutogradFunctionality"):
        lib.impl("myadd", lambda a, b: a, "AutogradFunctionality")


def test_overriding_a_kernel_warns_and_newest_wins(d):
    from labsupport.c10.dispatcher import reset_override_warning

    reset_override_warning()  # PyTorch warns once per process; another test may have used it up
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: "first", "CPU")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib.impl("myadd", lambda a, b: "second", "CPU")
    assert any("Overriding a previously registered kernel" in str(w.message) for w in caught)
    with lab.AutoDispatchBelowAutograd():
        assert d.find_op("myops::myadd").call(T([1]), T([1])) == "second"
    assert "CPU (inactive): <lambda>" in d.dump("myops::myadd")


def test_dump_shapes():
    d = lab.Dispatcher("test")
    lib = lab.Library("myops", "DEF", dispatcher=d)
    lib.define("myadd(Tensor self, Tensor other) -> Tensor")

    def myadd_cpu(a, b):
        return a

    lib.impl("myadd", myadd_cpu, "CPU")
    lib.impl("myadd", lab.autograd_not_implemented_fallback(), "Autograd")
    text = d.dump("myops::myadd")
    lines = text.splitlines()
    assert lines[0] == "name: myops::myadd"
    assert lines[1] == "schema: myops::myadd(Tensor self, Tensor other) -> Tensor"
    assert lines[2].startswith("debug: registered at tests/test_dispatcher_calls.py:")
    assert lines[3] == "alias analysis kind: FROM_SCHEMA"
    assert "CPU: myadd_cpu :: (Tensor _0, Tensor _1) -> Tensor _0 [ boxed unboxed ]" in lines
    assert "Autograd[alias]: autogradNotImplementedFallback :: (none) [ boxed ]" in lines


def test_autograd_fallbacks_attach_nodes():
    d = lab.Dispatcher("test")
    lib = lab.Library("myops", "DEF", dispatcher=d)
    lib.define("myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: T(a._data + b._data), "CPU")
    x = T([1.0], requires_grad=True)
    out = d.find_op("myops::myadd").call(x, T([2.0]))
    assert out.grad_fn.name() == "WarnNotImplemented" and out.requires_grad
    lib.impl("myadd", lab.autograd_not_implemented_fallback(), "Autograd")
    out = d.find_op("myops::myadd").call(x, T([2.0]))
    assert out.grad_fn.name() == "NotImplemented"


def test_inplace_or_view_fallback_bumps_versions_of_written_arguments():
    d = lab.Dispatcher("test")
    lib = lab.Library("myops", "DEF", dispatcher=d)
    lib.define("myadd_(Tensor(a!) self, Tensor other) -> Tensor(a!)")

    def myadd_cpu(self, other):
        self._data += other._data
        return self

    lib.impl("myadd_", myadd_cpu, "CPU")
    lib.impl("myadd_", lab.autograd_not_implemented_fallback(), "Autograd")
    lib.impl("myadd_", lab.autograd_not_implemented_inplace_or_view_fallback(), "ADInplaceOrView")
    x, y = T([1.0]), T([2.0])
    before = x._version
    d.find_op("myops::myadd_").call(x, y)
    assert x._data.tolist() == [3.0] and x._version == before + 1 and y._version == 0


# ------------------------------------------------------------------ registration order and debugging tools


def test_impl_before_define_then_close_in_any_order(d):
    """PyTorch's static initialisers run in any order: an impl may precede its def (issue 10)."""
    orders = list(__import__("itertools").permutations(range(3)))
    for close_order in orders:
        impl = lab.Library("myops", "IMPL", "CPU", dispatcher=d)
        impl.impl("myadd", lambda a, b: a)
        assert d.dump("myops::myadd") == "name: myops::myadd\nschema: (none)\nCPU: <lambda> :: (none) [ boxed unboxed ]\n"
        assert d.dump_table("myops::myadd").splitlines()[0] == "CPU: <lambda> [kernel]"
        fallthrough = lab.Library("myops", "IMPL", "AutogradCPU", dispatcher=d)
        fallthrough.impl("myadd", lab.fallthrough_kernel)
        defs = lab.Library("myops", "DEF", dispatcher=d)
        defs.define("myadd(Tensor self, Tensor other) -> Tensor")
        assert d.dump("myops::myadd").splitlines()[1] == "schema: myops::myadd(Tensor self, Tensor other) -> Tensor"
        assert d.find_schema_or_throw("myops::myadd").call(T([1]), T([2]))._data.tolist() == [1]
        libraries = [impl, fallthrough, defs]
        for i in close_order:
            libraries[i].close()
            d.check_invariants()
        assert d.dump("myops::myadd") == "" and d.find_op("myops::myadd") is None


def test_check_invariants_catches_a_stale_table(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: a, "CPU")
    d.check_invariants("myops::myadd")
    op = d.find_op("myops::myadd")
    cpu = [e.key.name for e in op.table].index("CPU")
    op.table[cpu] = op.table[0]  # corrupt one slot by hand
    with pytest.raises(RuntimeError, match=r"myops::myadd: the dispatch table entry for CPU \(slot 1\) is stale"):
        d.check_invariants()
    op.update_table()
    d.check_invariants("myops::myadd")
    d.check_invariants("nothing::here")  # unknown names pass, as in PyTorch


def test_dispatch_trace_prints_pytorchs_format(d):
    import io

    from labsupport.c10.dispatch_trace import show_dispatch_trace

    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: a, "CPU")

    def autograd(ks, a, b):
        with lab.AutoDispatchBelowADInplaceOrView():
            return op.redispatch(ks & lab.after_autograd_keyset, a, b)

    lib.impl("myadd", autograd, "AutogradCPU", with_keyset=True)
    op = d.find_op("myops::myadd")
    out = io.StringIO()
    with show_dispatch_trace(out):
        op.call(T([1]), T([2]))
        op.call_boxed([T([1]), T([2])])
    op.call(T([1]), T([2]))  # after the block: nothing more is printed
    assert out.getvalue() == (
        " [call] op=[myops::myadd], key=[AutogradCPU]\n"
        "  [redispatch] op=[myops::myadd], key=[CPU]\n"
        " [callBoxed] op=[myops::myadd], key=[AutogradCPU]\n"
        "  [redispatch] op=[myops::myadd], key=[CPU]\n"
    )
    from labsupport.c10.dispatcher import observers

    assert not observers.active  # off again: the call path is back to its one flag check


@pytest.mark.parametrize("env", [{"LAB_SHOW_DISPATCH_TRACE": "1"}, {"TORCH_SHOW_DISPATCH_TRACE": "1"}])
def test_dispatch_trace_from_the_environment(env):
    import os
    import subprocess
    import sys

    code = "import labsupport.torch as torch\nx = torch.tensor([1.0, 2.0])\ntorch.add(x, x)\n"
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_SHOW_DISPATCH_TRACE")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**clean, **env})
    assert run.stderr.splitlines() == [
        " [call] op=[aten::add.Tensor], key=[AutogradCPU]",
        "  [redispatch] op=[aten::add.Tensor], key=[CPU]",
    ]


def test_dispatch_trace_environment_values():
    from labsupport.c10.dispatch_trace import _from_environment

    assert _from_environment({}) is False
    assert _from_environment({"TORCH_SHOW_DISPATCH_TRACE": "0"}) is False
    assert _from_environment({"LAB_SHOW_DISPATCH_TRACE": "1", "TORCH_SHOW_DISPATCH_TRACE": "0"}) is True
    with pytest.warns(UserWarning, match="ignoring invalid value for TORCH_SHOW_DISPATCH_TRACE: yes valid values are 0 or 1"):
        assert _from_environment({"TORCH_SHOW_DISPATCH_TRACE": "yes"}) is False


def test_registrations_for_dispatch_key_and_dangling_impls(d):
    lib = _myops(d, "myadd(Tensor self, Tensor other) -> Tensor")
    lib.impl("myadd", lambda a, b: a, "CPU")
    typo = lab.Library("myop", "IMPL", "CPU", dispatcher=d)  # the namespace is "myops"
    typo.impl("myadd", lambda a, b: a)
    assert d.registrations_for_dispatch_key("CPU") == ["myop::myadd", "myops::myadd"]
    assert d.registrations_for_dispatch_key("Autograd") == []
    assert [t.splitlines()[0] for t in d.find_dangling_impls()] == ["name: myop::myadd"]
    with pytest.raises(RuntimeError, match="could not parse dispatch key: CPUU"):
        d.registrations_for_dispatch_key("CPUU")
