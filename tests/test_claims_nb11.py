"""Claims of notebook 11 (the Python key: __torch_function__ and __torch_dispatch__) about PyTorch 2.13,
checked against an installed PyTorch; where the notebook shows the lab doing the same, the lab too."""

from __future__ import annotations

import importlib

import pytest
from claims import claim

import labsupport as lab
import labsupport.torch as lab_torch
from labsupport.overrides import TorchFunctionMode as LabTorchFunctionMode
from labsupport.utils._python_dispatch import TorchDispatchMode as LabTorchDispatchMode


def dispatch_module(torch_ref):
    return importlib.import_module("torch.utils._python_dispatch")


def aten_log(base):
    class AtenLog(base):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls.append(str(func))
            return func(*args, **(kwargs or {}))

    return AtenLog()


def function_log(base):
    class FunctionLog(base):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls.append(func.__name__)
            return func(*args, **(kwargs or {}))

    return FunctionLog()


@claim("nb11.flop_counter_mode")
def test_flop_counter_mode(torch_ref):
    fc = importlib.import_module("torch.utils.flop_counter")
    assert issubclass(fc._FlopCounterMode, dispatch_module(torch_ref).TorchDispatchMode)
    x, w = torch_ref.randn(4, 3, requires_grad=True), torch_ref.randn(3, 2)
    with fc.FlopCounterMode(display=False) as counter:
        loss = torch_ref.matmul(x, w).sum()
        assert counter.get_total_flops() == 48
        loss.backward()
    assert counter.get_total_flops() == 96
    assert {str(k): v for k, v in counter.get_flop_counts()["Global"].items()} == {"aten.mm": 96}
    with fc.FlopCounterMode(display=False) as counter:
        torch_ref.add(x, x).sum()
    assert counter.get_total_flops() == 0


@claim("nb11.mode_sees_mm_and_backward")
def test_mode_sees_mm_and_backward(torch_ref):
    x, w = torch_ref.randn(4, 3, requires_grad=True), torch_ref.randn(3, 2)
    with aten_log(dispatch_module(torch_ref).TorchDispatchMode) as mode:
        torch_ref.matmul(x, w).sum().backward()
    assert "aten.matmul.default" not in mode.calls
    assert mode.calls.count("aten.mm.default") == 2
    # the lab: the same two mm calls
    lx, lw = lab_torch.randn(4, 3, requires_grad=True), lab_torch.randn(3, 2)
    with aten_log(LabTorchDispatchMode) as lab_mode:
        lab_torch.matmul(lx, lw).sum().backward()
    assert lab_mode.calls.count("aten.mm.default") == 2 and "aten.matmul.default" not in lab_mode.calls


@claim("nb11.masked_tensor_hooks")
def test_masked_tensor_defines_both_hooks(torch_ref):
    from torch.masked import MaskedTensor

    assert issubclass(MaskedTensor, torch_ref.Tensor)
    assert "__torch_function__" in vars(MaskedTensor) and "__torch_dispatch__" in vars(MaskedTensor)


@claim("nb11.make_fx_traces_aten")
def test_make_fx_traces_aten_calls(torch_ref):
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(lambda a, b: torch_ref.matmul(a, b).sum())(torch_ref.randn(2, 2), torch_ref.randn(2, 2))
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert targets == ["aten.mm.default", "aten.sum.default"]
    assert "ProxyTorchDispatchMode" in [c.__name__ for c in dispatch_module(torch_ref).TorchDispatchMode.__subclasses__()]


def both_class(torch, disable):
    log = []

    class Both(torch.Tensor):
        @staticmethod
        def __new__(cls, elem):
            return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

        def __init__(self, elem):
            self.elem = elem

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(("TF", func.__name__, [t.__name__ for t in types]))
            with disable():
                return func(*args, **(kwargs or {}))

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            log.append(("TD", str(func), [t.__name__ for t in types]))
            return Both(func(*[x.elem if isinstance(x, Both) else x for x in args], **(kwargs or {})))

    return Both, log


@claim("nb11.both_hooks_order")
def test_both_hooks_order(torch_ref):
    from labsupport.overrides import DisableTorchFunctionSubclass

    expected = [("TF", "add", ["Both"]), ("TD", "aten.add.Tensor", ["Both"])]
    for torch, disable in ((torch_ref, torch_ref._C.DisableTorchFunctionSubclass),
                           (lab_torch, DisableTorchFunctionSubclass)):
        both, log = both_class(torch, disable)
        result = torch.add(both(torch.tensor([1.0, 2.0])), torch.tensor([10.0, 20.0]))
        assert log == expected and type(result) is both
        assert result.elem.tolist() == [11.0, 22.0]


@claim("nb11.modes_order_fixed")
def test_function_mode_first_whatever_the_order(torch_ref):
    td = dispatch_module(torch_ref).TorchDispatchMode
    a = torch_ref.ones(2, requires_grad=True)
    for function_outside in (True, False):
        tf_mode, td_mode = function_log(torch_ref.overrides.TorchFunctionMode), aten_log(td)
        log = []
        tf_mode.calls = td_mode.calls = log
        outer, inner = (tf_mode, td_mode) if function_outside else (td_mode, tf_mode)
        with outer, inner:
            torch_ref.add(a, a)
        assert log == ["add", "aten.add.Tensor"]


@claim("nb11.default_torch_function_rewraps")
def test_default_torch_function_rewraps(torch_ref):
    class Plain(torch_ref.Tensor):
        pass

    t = torch_ref.tensor([1.0, 2.0])
    s = t.as_subclass(Plain)
    assert "__torch_function__" not in vars(Plain)
    assert Plain.__torch_function__.__func__ is torch_ref.Tensor.__torch_function__.__func__
    assert [type(r).__name__ for r in (torch_ref.add(s, t), t + s, s.sum(), torch_ref.add(t, t))] == [
        "Plain", "Plain", "Plain", "Tensor"]
    import torch._tensor as tensor_module

    assert callable(tensor_module._convert)


@claim("nb11.exact_type_check")
def test_exact_type_check(torch_ref):
    class Sub(torch_ref.Tensor):
        pass

    plain, sub = torch_ref.ones(1), torch_ref.ones(1).as_subclass(Sub)
    has = torch_ref.overrides.has_torch_function
    assert not has((plain,)) and has((sub,))
    with function_log(torch_ref.overrides.TorchFunctionMode):
        assert has((plain,))


@claim("nb11.tf_not_backward_ops")
def test_function_mode_does_not_see_backward_ops(torch_ref):
    a, b = torch_ref.tensor([1.0, 2.0], requires_grad=True), torch_ref.tensor([3.0, 4.0])
    with function_log(torch_ref.overrides.TorchFunctionMode) as mode:
        torch_ref.mul(a, b).sin().sum().backward()
    assert mode.calls == ["mul", "sin", "sum", "backward"]
    la, lb = lab_torch.tensor([1.0, 2.0], requires_grad=True), lab_torch.tensor([3.0, 4.0])
    with function_log(LabTorchFunctionMode) as lab_mode:
        lab_torch.mul(la, lb).sin().sum().backward()
    assert lab_mode.calls == mode.calls


FUNCTIONALITY_ORDER = ["PythonDispatcher", "PreDispatch", "PythonTLSSnapshot", "AutocastCPU", "Tracer",
                       "AutogradFunctionality", "ADInplaceOrView", "Python", "Fake", "BackendSelect"]


@claim("nb11.python_key_priority")
def test_python_key_priority(torch_ref):
    K = torch_ref._C.DispatchKey
    keys = [k for k in FUNCTIONALITY_ORDER if hasattr(K, k)]
    assert "Tracer" not in keys  # the Python enum has no Tracer member (notes §0.2)
    values = [int(getattr(K, k)) for k in keys]
    assert values == sorted(values, reverse=True)
    lab_order = [k.name for k in lab.DispatchKey]
    assert sorted(FUNCTIONALITY_ORDER, key=lab_order.index, reverse=True) == FUNCTIONALITY_ORDER
    import torch.utils._python_dispatch  # noqa: F401 -- the fallbacks live in C++; this checks the Python side loads


@claim("nb11.python_keys_on_tensor_and_tls")
def test_python_keys_on_tensor_and_tls(torch_ref):
    both, _ = both_class(torch_ref, torch_ref._C.DisableTorchFunctionSubclass)
    keys = str(torch_ref._C._dispatch_keys(both(torch_ref.ones(2))))
    assert keys == "DispatchKeySet(CPU, Python, ADInplaceOrView, AutogradCPU, AutocastCPU, PythonTLSSnapshot)"
    with aten_log(dispatch_module(torch_ref).TorchDispatchMode):
        include = str(torch_ref._C._dispatch_tls_local_include_set())
    assert include == "DispatchKeySet(BackendSelect, Python, ADInplaceOrView, PythonTLSSnapshot)"
    lab_both, _ = both_class(lab_torch, lambda: __import__("contextlib").nullcontext())
    assert str(lab.dispatch_keys(lab_both(lab_torch.ones(2)))) == keys
    with aten_log(LabTorchDispatchMode):
        assert str(lab.tls_include_set()) == include


@claim("nb11.python_fallback_order")
def test_python_fallback_tries_subclasses_in_order(torch_ref):
    import labsupport._ops as lab_ops

    for torch, add in ((torch_ref, lambda: torch_ref.ops.aten.add.Tensor), (lab_torch, lambda: lab_ops.ops.aten.add.Tensor)):
        order = []

        def refuse(tag):
            def handler(cls, func, types, args=(), kwargs=None):
                order.append((tag, [t.__name__ for t in types]))
                return NotImplemented
            return classmethod(handler)

        base = type("Base", (torch.Tensor,), {"__torch_dispatch__": refuse("Base")})
        child = type("Child", (base,), {"__torch_dispatch__": refuse("Child")})
        x = torch.Tensor._make_subclass(base, torch.ones(2))
        y = torch.Tensor._make_subclass(child, torch.ones(2))
        with pytest.raises(TypeError, match="all __torch_dispatch__ handlers returned NotImplemented"):
            add()(x, y)
        assert order == [("Child", ["Child", "Base"]), ("Base", ["Child", "Base"])]


@claim("nb11.reentrant_dispatch_snapshot")
def test_reentrant_dispatch_restores_the_snapshot(torch_ref):
    pd = dispatch_module(torch_ref)
    C = torch_ref._C
    seen = {}

    class Peek(pd.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen["handler"] = C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.AutogradFunctionality)
            with torch_ref.overrides.enable_reentrant_dispatch():
                seen["include"] = str(C._dispatch_tls_local_include_set())
                seen["reentrant"] = C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.AutogradFunctionality)
            return func(*args, **(kwargs or {}))

    a = torch_ref.ones(2, requires_grad=True)
    with Peek():
        include_on_entry = str(C._dispatch_tls_local_include_set())
        torch_ref.add(a, a)
    assert seen == {"handler": True, "include": include_on_entry, "reentrant": False}
    import inspect

    import torch.overrides

    assert "_RestorePythonTLSSnapshot" in inspect.getsource(torch.overrides.enable_reentrant_dispatch)


@claim("nb11.inside_handler_tls")
def test_inside_handler_tls(torch_ref):
    pd = dispatch_module(torch_ref)
    seen = {}

    class Peek(pd.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen["include"] = str(torch_ref._C._dispatch_tls_local_include_set())
            seen["mode"] = pd._get_current_dispatch_mode()
            seen["autograd_excluded"] = torch_ref._C._dispatch_tls_is_dispatch_key_excluded(
                torch_ref._C.DispatchKey.AutogradFunctionality)
            out = func(*args, **(kwargs or {}))
            seen["grad_fn"] = out.grad_fn
            return out

    a = torch_ref.ones(2, requires_grad=True)
    with Peek():
        torch_ref.add(a, a)
    assert seen == {"include": "DispatchKeySet(BackendSelect, ADInplaceOrView)", "mode": None,
                    "autograd_excluded": True, "grad_fn": None}


@claim("nb11.predispatch_tracing_only")
def test_predispatch_only_for_pre_dispatch_tracing(torch_ref):
    from torch.fx.experimental.proxy_tensor import make_fx

    K = torch_ref._C.DispatchKey
    seen = []

    def f(x):
        seen.append(torch_ref._C._dispatch_tls_is_dispatch_key_included(K.PreDispatch))
        return x + 1

    make_fx(f, pre_dispatch=True)(torch_ref.ones(2))
    make_fx(f)(torch_ref.ones(2))
    with aten_log(dispatch_module(torch_ref).TorchDispatchMode):
        f(torch_ref.ones(2))
    assert seen == [True, False, False]
    assert int(K.PreDispatch) > int(K.PythonTLSSnapshot)


@claim("nb11.logging_mode_add_backward")
def test_logging_mode_add_backward(torch_ref):
    a, b = torch_ref.randn(2, 2, requires_grad=True), torch_ref.randn(2, 2)
    with aten_log(dispatch_module(torch_ref).TorchDispatchMode) as mode:
        torch_ref.add(a, b).sum().backward()
    assert mode.calls == ["aten.add.Tensor", "aten.sum.default", "aten.ones_like.default", "aten.expand.default",
                          "aten.new_empty_strided.default", "aten.copy_.default"]
    a = torch_ref.randn(2, 2, requires_grad=True)  # a fresh leaf: no .grad to accumulate into
    with aten_log(dispatch_module(torch_ref).TorchDispatchMode) as mode:
        torch_ref.matmul(a, b).sum().backward()
    assert mode.calls == ["aten.mm.default", "aten.sum.default", "aten.ones_like.default", "aten.expand.default",
                          "aten.t.default", "aten.mm.default", "aten.detach.default"]


def counted_class(torch):
    from labsupport.utils._pytree import tree_map_only as lab_tree_map_only

    if torch is lab_torch:
        tree_map_only = lab_tree_map_only
    else:
        tree_map_only = importlib.import_module("torch.utils._pytree").tree_map_only

    class Counted(torch.Tensor):
        @staticmethod
        def __new__(cls, elem, ops=0, requires_grad=False):
            return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device,
                                                       requires_grad=requires_grad)

        def __init__(self, elem, ops=0, requires_grad=False):
            self.elem, self.ops = elem, ops

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            ops = 1 + max(x.ops for x in args if isinstance(x, Counted))
            out = func(*tree_map_only(Counted, lambda x: x.elem, args), **(kwargs or {}))
            return tree_map_only(type(out), lambda o: Counted(o, ops), out)

    return Counted


@claim("nb11.mode_before_subclass")
def test_mode_before_subclass(torch_ref):
    for torch, base in ((torch_ref, dispatch_module(torch_ref).TorchDispatchMode), (lab_torch, LabTorchDispatchMode)):
        counted = counted_class(torch)
        w = counted(torch.tensor([1.0, 2.0, 3.0]), requires_grad=True)
        with aten_log(base) as mode:
            y = (w * w + w).sum()
        assert mode.calls == ["aten.mul.Tensor", "aten.add.Tensor", "aten.sum.default"]
        assert type(y) is counted and y.ops == 3 and y.requires_grad
        assert type(y.grad_fn).__name__ == "SumBackward0" and not y.elem.requires_grad


@claim("nb11.wrapper_backward")
def test_wrapper_backward_in_pytorch(torch_ref):
    counted = counted_class(torch_ref)
    w = counted(torch_ref.tensor([1.0, 2.0, 3.0]), requires_grad=True)
    (w * w + w).sum().backward()
    assert type(w.grad) is counted and w.grad.elem.tolist() == [3.0, 5.0, 7.0]


@claim("nb11.wrapper_backward_in_the_lab")
def test_wrapper_backward_in_the_lab_matches_pytorch(torch_ref):
    """The lab's engine dispatches every backward step, so a wrapper subclass's handler sees them and
    the gradient (a Counted, like PyTorch's) is PyTorch's."""
    found = []
    for torch in (lab_torch, torch_ref):
        counted = counted_class(torch)
        w = counted(torch.tensor([1.0, 2.0, 3.0]), requires_grad=True)
        (w * w + w).sum().backward()
        found.append((type(w.grad) is counted, w.grad.elem.tolist(), w.grad.ops))
    assert found[0] == found[1]
    assert found[0][:2] == (True, [3.0, 5.0, 7.0])


@claim("nb11.accessors_and_alias")
def test_accessors_check_torch_function_and_as_subclass_aliases(torch_ref):
    seen = []

    class Sub(torch_ref.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    s = torch_ref.ones(2, requires_grad=True).as_subclass(Sub)
    s.dim()
    _ = s.shape
    s.detach()
    assert seen == ["dim", "__get__", "detach"]
    c = (torch_ref.ones(2, requires_grad=True) * 2).as_subclass(Sub)
    assert type(c.grad_fn).__name__ == "AliasBackward0"
