"""The Python key: TorchDispatchMode, tensor subclasses with __torch_dispatch__, and their fallbacks.

The lab-only tests check the behaviour a learner relies on (where the Python key sits, what a mode
sees, what a wrapper subclass does); the twin tests at the end compare with PyTorch 2.13 and skip
without it.
"""

from __future__ import annotations

import random

import pytest
from subclasses import wrapper_subclass

import labsupport as lab
import labsupport.torch as torch
from labsupport._ops import OpOverload, OpOverloadPacket, ops
from labsupport.aten.python_fallback_kernel import after_Python_keyset
from labsupport.c10.dispatch_key import DispatchKey
from labsupport.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode,
    _get_current_dispatch_mode_stack,
    _pop_mode,
    _push_mode,
    is_traceable_wrapper_subclass,
)
from labsupport.utils._pytree import tree_flatten, tree_map, tree_map_only, tree_unflatten

DEFAULT_INCLUDE = "DispatchKeySet(BackendSelect, ADInplaceOrView)"
MODE_INCLUDE = "DispatchKeySet(BackendSelect, Python, ADInplaceOrView, PythonTLSSnapshot)"
# Printed by PyTorch 2.13 inside __torch_dispatch__ (torch._C._dispatch_tls_local_exclude_set()).
HANDLER_EXCLUDE = (
    "DispatchKeySet(FuncTorchDynamicLayerBackMode, Functionalize, Conjugate, Negative, ZeroTensor, ADInplaceOrView, "
    "AutogradOther, AutogradNestedTensor, Tracer, AutocastCPU, AutocastMTIA, AutocastMAIA, AutocastXPU, AutocastIPU, "
    "AutocastHPU, AutocastXLA, AutocastMPS, AutocastCUDA, AutocastPrivateUse1, FuncTorchBatched, BatchedNestedTensor, "
    "FuncTorchVmapMode, Batched, VmapMode, FuncTorchGradWrapper, DeferredInit, PythonTLSSnapshot, "
    "FuncTorchDynamicLayerFrontMode, TESTING_ONLY_GenericWrapper, TESTING_ONLY_GenericMode, PreDispatch)"
)
SUBCLASS_KEYS = "DispatchKeySet(CPU, Python, ADInplaceOrView, AutogradCPU, AutocastCPU, PythonTLSSnapshot)"


class LoggingMode(TorchDispatchMode):
    """Records ``str(func)`` of every call, and what the TLS looked like inside the handler."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        self.seen: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.log.append(str(func))
        self.seen.append((func, types, args, dict(kwargs or {}), str(lab.tls_include_set()),
                          str(lab.tls_exclude_set()), _get_current_dispatch_mode()))  # fmt: skip
        return func(*args, **(kwargs or {}))


class Wrapper(torch.Tensor):
    """A tensor that holds another one (the usual wrapper-subclass pattern)."""

    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(
            cls, elem.shape, dtype=elem.dtype, device=elem.device, requires_grad=elem.requires_grad
        )

    def __init__(self, elem):
        self.elem = elem

    calls: list[str] = []

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(str(func))

        def unwrap(x):
            return x.elem if isinstance(x, Wrapper) else x

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        return tree_map_only(torch.Tensor, Wrapper, out)


def _ab(requires_grad: bool = True):
    torch.manual_seed(0)
    return torch.randn(2, 2, requires_grad=requires_grad), torch.randn(2, 2)


# ---------------------------------------------------------------- the mode stack and the TLS


def test_a_mode_adds_python_and_python_tls_snapshot_to_the_include_set_and_exit_removes_them():
    assert str(lab.tls_include_set()) == DEFAULT_INCLUDE
    with LoggingMode() as outer:
        assert str(lab.tls_include_set()) == MODE_INCLUDE
        assert _get_current_dispatch_mode() is outer
        with LoggingMode() as inner:
            assert _get_current_dispatch_mode_stack() == [outer, inner]
            assert str(lab.tls_include_set()) == MODE_INCLUDE
        assert str(lab.tls_include_set()) == MODE_INCLUDE  # the outer mode still needs them
    assert str(lab.tls_include_set()) == DEFAULT_INCLUDE
    assert _get_current_dispatch_mode() is None and _get_current_dispatch_mode_stack() == []


def test_a_mode_is_popped_also_when_the_block_raises():
    with pytest.raises(ZeroDivisionError), LoggingMode():
        raise ZeroDivisionError
    assert _get_current_dispatch_mode_stack() == []
    assert str(lab.tls_include_set()) == DEFAULT_INCLUDE


def test_pop_mode_on_an_empty_stack_raises_pytorchs_error():
    with pytest.raises(RuntimeError, match=r"^trying to pop from empty mode stack$"):
        _pop_mode()
    mode = LoggingMode()
    _push_mode(mode)
    assert _pop_mode() is mode


def test_inside_the_handler_the_mode_is_popped_and_every_key_above_python_is_excluded():
    a, b = _ab()
    with LoggingMode() as mode:
        torch.add(a, b)
    (_, types, _, _, include, exclude, current) = mode.seen[0]
    assert types == ()
    assert include == DEFAULT_INCLUDE  # no Python keys: the mode was popped
    assert current is None
    assert exclude == HANDLER_EXCLUDE
    assert str(after_Python_keyset) == HANDLER_EXCLUDE  # the guard pythonFallback puts up
    assert str(lab.tls_exclude_set()) == str(lab.autocast_dispatch_keyset)  # and takes down


def test_nested_modes_the_inner_one_sees_the_call_first_and_its_func_call_reaches_the_outer_one():
    order: list[str] = []

    class Named(TorchDispatchMode):
        def __init__(self, name):
            super().__init__()
            self.name = name

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            order.append(f"{self.name}: {func}")
            return func(*args, **(kwargs or {}))

    a, b = _ab(requires_grad=False)
    with Named("outer"), Named("inner"):
        out = torch.mul(a, b)
    assert order == ["inner: aten.mul.Tensor", "outer: aten.mul.Tensor"]
    assert out.tolist() == (a * b).tolist()


# ---------------------------------------------------------------- where the Python key sits


def test_the_python_key_sits_below_autograd_so_the_mode_sees_mm_for_matmul_and_no_grad_fn():
    a, b = _ab()
    results = []

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            results.append((out.grad_fn, out.requires_grad))
            return out

    with Mode():
        out = torch.matmul(a, b)
    assert results == [(None, False)]  # below autograd: the kernel's own output, not yet recorded
    assert type(out.grad_fn).__name__ == "MmBackward0"  # recorded by autograd above the mode
    with LoggingMode() as mode:
        torch.matmul(a, b)
    assert mode.log == ["aten.mm.default"]


def test_the_first_kernel_reached_under_a_mode_is_python_tls_snapshots_then_autograd_then_python():
    a, b = _ab()
    with LoggingMode(), lab.trace() as rec:
        torch.add(a, b)
    hops = [(f.torch_name, f.key.name) for f in rec.frames if f.layer == "dispatcher" and f.key is not None]
    assert hops[:3] == [
        ("c10::Dispatcher::call", "PythonTLSSnapshot"),
        ("c10::Dispatcher::redispatchBoxed", "AutogradCPU"),
        ("c10::Dispatcher::redispatch", "Python"),
    ]
    assert hops[3] == ("c10::Dispatcher::call", "CPU")  # func(*args) inside the handler
    first = next(f for f in rec.frames if f.layer == "dispatcher")
    assert str(first.key_set) == "DispatchKeySet(CPU, Python, AutogradCPU, PythonTLSSnapshot)"
    names = rec.torch_names()
    for frame in ("(anonymous namespace)::pythonTLSSnapshotFallback", "(anonymous namespace)::pythonFallback",
                  "torch::handle_torch_function_no_python_arg_parser"):  # fmt: skip
        assert frame in names
    assert names.index("(anonymous namespace)::pythonTLSSnapshotFallback") < names.index(
        "torch::autograd::VariableType::(anonymous namespace)::add_Tensor"
    ) < names.index("(anonymous namespace)::pythonFallback")


def test_plain_tensors_without_a_mode_never_reach_the_python_keys():
    a, b = _ab()
    assert not lab.dispatch_keys(a).has(DispatchKey.Python)
    with lab.trace() as rec:
        torch.add(a, b)
    assert all(f.key not in (DispatchKey.Python, DispatchKey.PythonTLSSnapshot) for f in rec.frames)
    assert "(anonymous namespace)::pythonFallback" not in rec.torch_names()


# ---------------------------------------------------------------- what a logging mode sees


def test_a_logging_mode_sees_the_forward_and_the_backward_aten_calls():
    a, b = _ab()
    with LoggingMode() as mode:
        torch.add(a, b).sum().backward()
    # as on PyTorch 2.13: the implicit grad_output (ones_like), SumBackward0's expand, and AccumulateGrad
    # cloning the expanded gradient into the leaf's layout (new_empty_strided + copy_)
    assert mode.log == ["aten.add.Tensor", "aten.sum.default", "aten.ones_like.default", "aten.expand.default",
                        "aten.new_empty_strided.default", "aten.copy_.default"]  # fmt: skip
    assert a.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_args_and_kwargs_are_packed_as_pytorch_packs_them():
    a, _ = _ab(requires_grad=False)
    with LoggingMode() as mode:
        torch.add(a, a, alpha=2)
        torch.add(a, a)
        a.sum(dim=[0])
    (add2, add1, sum_dim) = mode.seen
    assert len(add2[2]) == 2 and add2[3] == {"alpha": 2}
    assert add1[3] == {}
    assert str(sum_dim[0]) == "aten.sum.dim_IntList"
    assert len(sum_dim[2]) == 2 and list(sum_dim[2][1]) == [0] and sum_dim[3] == {}  # keepdim left out


def test_func_is_an_op_overload_named_as_in_pytorch_and_calling_it_dispatches():
    a, b = _ab(requires_grad=False)
    with LoggingMode() as mode:
        torch.add(a, b)
    func = mode.seen[0][0]
    assert isinstance(func, OpOverload)
    assert func is ops.aten.add.Tensor
    assert str(func) == "aten.add.Tensor"
    assert repr(func) == "<OpOverload(op='aten.add', overload='Tensor')>"
    assert func.name() == "aten::add.Tensor"
    assert func.__name__ == "add.Tensor"
    assert func._overloadname == "Tensor" and func.namespace == "aten"
    assert isinstance(func.overloadpacket, OpOverloadPacket)
    assert str(func.overloadpacket) == "aten.add" and func.overloadpacket.__name__ == "add"
    assert repr(func.overloadpacket) == "<OpOverloadPacket(op='aten.add')>"
    assert str(func._schema) == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    default = ops.aten.sum.default
    assert (str(default), default.name(), default.__name__) == ("aten.sum.default", "aten::sum", "sum.default")
    assert func(a, b, alpha=3).tolist() == torch.add(a, b, alpha=3).tolist()


# ---------------------------------------------------------------- tensor subclasses


def test_subclass_key_sets_python_keys_only_with_torch_dispatch():
    class Plain(torch.Tensor):
        pass

    class Declines(torch.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    data = torch.randn(2)
    assert str(lab.dispatch_keys(torch.Tensor._make_subclass(Plain, data))) == str(lab.dispatch_keys(data))
    sub = torch.Tensor._make_subclass(Declines, data)
    assert str(lab.dispatch_keys(sub)) == SUBCLASS_KEYS
    assert type(sub) is Declines and sub._version_counter is data._version_counter
    assert str(lab.dispatch_keys(Wrapper(data))) == SUBCLASS_KEYS
    meta = torch.Tensor._make_wrapper_subclass(Wrapper, (2, 3), dtype=torch.float32, device="meta")
    assert str(lab.dispatch_keys(meta)) == "DispatchKeySet(Meta, Python, ADInplaceOrView, AutogradMeta, PythonTLSSnapshot)"
    assert meta.shape == (2, 3)
    with pytest.raises(TypeError, match=r"^Plain must define __torch_dispatch__$"):
        torch.Tensor._make_wrapper_subclass(Plain, (2,))


def test_a_subclass_without_torch_dispatch_behaves_like_a_tensor():
    class Plain(torch.Tensor):
        pass

    x = torch.Tensor._make_subclass(Plain, torch.tensor([1.0, 2.0]), True)
    assert x.requires_grad and x.is_leaf
    y = (x * x).sum()
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0]
    assert y.item() == 5.0


def test_a_wrapper_subclass_unwraps_calls_func_and_rewraps():
    Wrapper.calls = []
    a, b = _ab(requires_grad=False)
    wa, wb = Wrapper(a), Wrapper(b)
    out = torch.mm(wa, wb).neg()
    assert type(out) is Wrapper
    assert out.elem.tolist() == torch.mm(a, b).neg().tolist()
    assert Wrapper.calls == ["aten.mm.default", "aten.neg.default"]
    s = wa.sum()
    assert type(s) is Wrapper and s.elem.item() == pytest.approx(a.sum().item())


def test_under_a_mode_a_wrapper_call_reaches_the_mode_first_then_the_subclass():
    Wrapper.calls = []
    a, b = _ab(requires_grad=False)
    with LoggingMode() as mode:
        out = Wrapper(a) + Wrapper(b)
    assert mode.log == ["aten.add.Tensor"] and mode.seen[0][1] == (Wrapper,)
    assert Wrapper.calls == ["aten.add.Tensor"]
    assert type(out) is Wrapper


def test_all_handlers_returning_not_implemented_raise_pytorchs_type_error():
    class Declines(torch.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    class Declines2(Declines):
        pass

    class NoMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return NotImplemented

    t = torch.Tensor._make_subclass(Declines, torch.randn(2))
    t2 = torch.Tensor._make_subclass(Declines2, torch.randn(2))
    with pytest.raises(TypeError) as info:
        torch.add(t, t)
    assert str(info.value) == (
        "Multiple dispatch failed for 'torch._ops.aten.add.Tensor'; all __torch_dispatch__ handlers returned "
        f"NotImplemented:\n\n  - tensor subclass {Declines!r}\n\nFor more information, try re-running with "
        "TORCH_LOGS=not_implemented"
    )
    mode = NoMode()
    with pytest.raises(TypeError) as info, mode:
        torch.add(t, t2)
    assert f"  - mode object {mode!r}\n  - tensor subclass {Declines2!r}\n  - tensor subclass {Declines!r}\n" in str(
        info.value
    )


def test_is_traceable_wrapper_subclass_needs_tensor_flatten():
    class Flat(Wrapper):
        def __tensor_flatten__(self):
            return ["elem"], None

        @staticmethod
        def __tensor_unflatten__(inner, meta, size, stride):
            return Flat(inner["elem"])

    assert not is_traceable_wrapper_subclass(Wrapper(torch.randn(2)))
    assert is_traceable_wrapper_subclass(Flat(torch.randn(2)))
    assert not is_traceable_wrapper_subclass(torch.randn(2))


def test_pytree_round_trips_nested_lists_tuples_and_dicts():
    tree = (1, [2, {"a": 3, "b": (4,)}], {"c": [5]})
    leaves, spec = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5]
    assert tree_unflatten(leaves, spec) == tree
    assert tree_map(lambda x: x * 10, tree) == (10, [20, {"a": 30, "b": (40,)}], {"c": [50]})
    assert tree_map_only(int, str, [1, 2.5, (3,)]) == ["1", 2.5, ("3",)]
    with pytest.raises(ValueError):
        tree_unflatten([1, 2, 3], tree_flatten((1, 2))[1])


def test_random_programs_under_a_pass_through_mode_give_the_same_values_and_grads():
    rng = random.Random(13)
    for _ in range(20):
        steps = [rng.choice(["add", "mul", "sub", "neg", "sin", "cos", "mm"]) for _ in range(rng.randint(1, 4))]

        def run(steps=steps):
            torch.manual_seed(1)
            a = torch.randn(3, 3, requires_grad=True)
            b = torch.randn(3, 3)
            x = a
            for step in steps:
                x = getattr(torch, step)(x, b) if step in ("add", "mul", "sub", "mm") else getattr(torch, step)(x)
            x.sum().backward()
            return x.tolist(), a.grad.tolist()

        plain = run()
        with LoggingMode():
            moded = run()
        assert moded == plain, steps


# A subclass that carries data (``_make_subclass``) and keeps the plain tensor in ``elem``.
Carrier = wrapper_subclass(torch, tree_map, carries_data=True, name="Carrier")


def test_a_data_carrying_subclass_works_with_autograd_above_its_handler():
    Carrier.log = []
    x = Carrier(torch.tensor([1.0, 2.0, 3.0], requires_grad=True))
    b = torch.tensor([0.5, 0.25, 2.0])
    assert x.requires_grad and x.is_leaf
    out = (x * b).sin().sum()
    assert type(out) is Carrier and type(out.grad_fn).__name__ == "SumBackward0"
    out.backward()
    expected = [round(__import__("math").cos(v * w) * w, 5) for v, w in zip([1.0, 2.0, 3.0], [0.5, 0.25, 2.0])]
    assert [round(v, 5) for v in x.grad.tolist()] == expected
    # forward, the seed ones_like(out) (a Carrier, so every backward call reaches the handler), the
    # formulas' calls, and AccumulateGrad keeping the fresh gradient with detach: PyTorch 2.13's log
    assert Carrier.log == ["aten.mul.Tensor", "aten.sin.default", "aten.sum.default", "aten.ones_like.default",
                           "aten.expand.default", "aten.cos.default", "aten.mul.Tensor", "aten.mul.Tensor",
                           "aten.detach.default"]  # fmt: skip
    assert type(x.grad) is Carrier


def test_a_wrapper_subclass_runs_backward_through_its_handler():
    Wrapper.calls = []
    w = Wrapper(torch.tensor([1.0, 2.0], requires_grad=True))
    assert w.requires_grad and w.is_leaf
    out = (w * w).sum()
    assert type(out) is Wrapper and out.requires_grad and type(out.grad_fn).__name__ == "SumBackward0"
    out.backward()  # every backward step is an operator call the handler unwraps and rewraps
    assert type(w.grad) is Wrapper and w.grad.elem.tolist() == [2.0, 4.0]
    assert Wrapper.calls == ["aten.mul.Tensor", "aten.sum.default", "aten.ones_like.default", "aten.expand.default",
                             "aten.mul.Tensor", "aten.mul.Tensor", "aten.add.Tensor", "aten.detach.default"]  # fmt: skip


def test_observers_that_ask_for_record_function_scopes_see_python_dispatch_mode_and_python_subclass():
    from labsupport.c10.dispatcher import observers

    class Scopes:
        def __init__(self):
            self.events: list[tuple[str, bool]] = []

        def on_enter(self, event):
            self.events.append((event.op.full_name, event.redispatch))

        def on_exit(self, event):
            pass

        def on_record_function(self, name, entering):
            self.events.append((name, entering))

    a, b = _ab(requires_grad=False)
    scopes = Scopes()
    observers.add(scopes)
    try:
        with LoggingMode():
            torch.add(Wrapper(a), b)
    finally:
        observers.remove(scopes)
    records = [e for e in scopes.events if e[0].startswith("Python")]
    assert records == [("PythonDispatchMode", True), ("PythonSubclass", True), ("PythonSubclass", False),
                       ("PythonDispatchMode", False)]  # fmt: skip
    assert [e for e in scopes.events if e[0] == "aten::add.Tensor" and not e[1]] == [("aten::add.Tensor", False)] * 3
