"""``__torch_function__`` at the binding (labsupport/overrides.py), checked against PyTorch 2.13.

Each program runs twice, once with the lab (``labsupport.torch`` + ``labsupport.overrides``) and once
with PyTorch (``torch`` + ``torch.overrides``); what the hooks see and what comes back must agree.
The twins skip cleanly without PyTorch; the lab-only tests run everywhere.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

import labsupport.overrides as lab_overrides
import labsupport.torch as lab_torch


@pytest.fixture(params=["lab", "torch"])
def api(request):
    """``api.torch`` and ``api.overrides`` for the lab or for PyTorch 2.13 (skipped without it)."""
    if request.param == "lab":
        from labsupport.utils import _python_dispatch

        return SimpleNamespace(name="lab", torch=lab_torch, overrides=lab_overrides,
                               disable_subclass=lab_overrides.DisableTorchFunctionSubclass,
                               python_dispatch=_python_dispatch)
    import importlib

    from claims import torch_213

    torch = torch_213()
    return SimpleNamespace(name="torch", torch=torch, overrides=torch.overrides,
                           disable_subclass=torch._C.DisableTorchFunctionSubclass,
                           python_dispatch=importlib.import_module("torch.utils._python_dispatch"))


# --- programs: name -> fn(torch, a, b) -------------------------------------------------------------

PROGRAMS = {
    "torch.add(a, b)": lambda t, a, b: t.add(a, b),
    "torch.add(a, b, alpha=2)": lambda t, a, b: t.add(a, b, alpha=2),
    "torch.add(b, a)": lambda t, a, b: t.add(b, a),
    "a.add(b)": lambda t, a, b: a.add(b),
    "b.add(a)": lambda t, a, b: b.add(a),
    "a + b": lambda t, a, b: a + b,
    "b + a": lambda t, a, b: b + a,
    "a * b": lambda t, a, b: a * b,
    "torch.mul(b, a)": lambda t, a, b: t.mul(b, a),
    "a - 1": lambda t, a, b: a - 1,
    "1 - a": lambda t, a, b: 1 - a,
    "-a": lambda t, a, b: -a,
    "a.neg()": lambda t, a, b: a.neg(),
    "torch.sin(a)": lambda t, a, b: t.sin(a),
    "a.sum()": lambda t, a, b: a.sum(),
    "torch.sum(a, 0)": lambda t, a, b: t.sum(a, 0),
    "a.sum(dim=0, keepdim=True)": lambda t, a, b: a.sum(dim=0, keepdim=True),
    "a.add_(b)": lambda t, a, b: a.add_(b),
    "a.mul_(2)": lambda t, a, b: a.mul_(2),
}


def _logging_subclass(torch, log):
    class Logged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(_record(func, types, args, kwargs))
            return super().__torch_function__(func, types, args, kwargs)

    return Logged


def _record(func, types, args, kwargs):
    return (func.__name__, [t.__name__ for t in types], [type(x).__name__ for x in args], kwargs)


def _run_subclass_program(api, program):
    torch = api.torch
    log: list = []
    logged = _logging_subclass(torch, log)
    a = torch.ones(2, 3).as_subclass(logged)
    b = torch.ones(2, 3)
    result = PROGRAMS[program](torch, a, b)
    return log, type(result).__name__


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_subclass_sees_the_public_function(api, program):
    """What a subclass's ``__torch_function__`` receives: one call, named for the public function, the
    types, the arguments as given (``self`` first for methods), keywords only when given."""
    log, result_type = _run_subclass_program(api, program)
    expected = {
        "torch.add(a, b)": [("add", ["Logged"], ["Logged", "Tensor"], None)],
        "torch.add(a, b, alpha=2)": [("add", ["Logged"], ["Logged", "Tensor"], {"alpha": 2})],
        "torch.add(b, a)": [("add", ["Logged"], ["Tensor", "Logged"], None)],
        "a.add(b)": [("add", ["Logged"], ["Logged", "Tensor"], None)],
        "b.add(a)": [("add", ["Logged"], ["Tensor", "Logged"], None)],
        "a + b": [("add", ["Logged"], ["Logged", "Tensor"], None)],
        "b + a": [("add", ["Logged"], ["Tensor", "Logged"], None)],
        "a * b": [("mul", ["Logged"], ["Logged", "Tensor"], None)],
        "torch.mul(b, a)": [("mul", ["Logged"], ["Tensor", "Logged"], None)],
        "a - 1": [("sub", ["Logged"], ["Logged", "int"], None)],
        "1 - a": [("__rsub__", ["Logged"], ["Logged", "int"], {})],
        "-a": [("neg", ["Logged"], ["Logged"], None)],
        "a.neg()": [("neg", ["Logged"], ["Logged"], None)],
        "torch.sin(a)": [("sin", ["Logged"], ["Logged"], None)],
        "a.sum()": [("sum", ["Logged"], ["Logged"], None)],
        "torch.sum(a, 0)": [("sum", ["Logged"], ["Logged", "int"], None)],
        "a.sum(dim=0, keepdim=True)": [("sum", ["Logged"], ["Logged"], {"dim": 0, "keepdim": True})],
        "a.add_(b)": [("add_", ["Logged"], ["Logged", "Tensor"], None)],
        "a.mul_(2)": [("mul_", ["Logged"], ["Logged", "int"], None)],
    }[program]
    assert log == expected
    assert result_type == "Logged"  # the default __torch_function__ rewraps the result


def test_random_sequences_agree_with_pytorch(torch_ref):
    """Random sequences of programs: the lab's log equals PyTorch's, call for call."""
    lab = SimpleNamespace(torch=lab_torch, overrides=lab_overrides)
    ref = SimpleNamespace(torch=torch_ref, overrides=torch_ref.overrides)
    rng = random.Random(13)
    for _ in range(20):
        sequence = rng.sample(list(PROGRAMS), 4)
        logs = []
        for api in (lab, ref):
            log: list = []
            for program in sequence:
                entries, result_type = _run_subclass_program(api, program)
                log += [*entries, result_type]
            logs.append(log)
        assert logs[0] == logs[1], sequence


def test_func_is_the_public_function(api):
    """``func`` is ``torch.add`` for the function and ``Tensor.add`` for the method and for ``+``."""
    torch = api.torch
    seen = []

    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    a, b = torch.ones(2).as_subclass(Sub), torch.ones(2)
    torch.add(a, b)
    a.add(b)
    _ = a + b
    assert seen[0] is torch.add
    assert seen[1] is torch.Tensor.add
    assert seen[2] is torch.Tensor.add


# --- result types -------------------------------------------------------------------------------

@pytest.mark.parametrize("program", list(PROGRAMS))
def test_subclass_without_override_gets_its_type_back(api, program):
    """A subclass that overrides nothing inherits ``Tensor.__torch_function__``, which rewraps."""
    torch = api.torch

    class Plain(torch.Tensor):
        pass

    a, b = torch.ones(2, 3).as_subclass(Plain), torch.ones(2, 3)
    assert type(PROGRAMS[program](torch, a, b)) is Plain
    c = torch.ones(2, 3)
    assert type(PROGRAMS[program](torch, c, b)) is torch.Tensor


def test_subclass_of_subclass_wins(api):
    """Of two overloaded arguments, a subclass's handler runs before its parent's, whatever the
    argument order; unrelated classes go left to right."""
    torch = api.torch
    order = []

    def handler(tag):
        def refuse(cls, func, types, args=(), kwargs=None):
            order.append((tag, [t.__name__ for t in types]))
            return NotImplemented
        return classmethod(refuse)

    parent = type("Parent", (torch.Tensor,), {"__torch_function__": handler("Parent")})
    child = type("Child", (parent,), {"__torch_function__": handler("Child")})
    other = type("Other", (torch.Tensor,), {"__torch_function__": handler("Other")})
    x = torch.ones(1)
    for first, second in ((parent, child), (other, parent)):
        with pytest.raises(TypeError):
            torch.add(x.as_subclass(first), x.as_subclass(second))
    assert order == [
        ("Child", ["Child", "Parent"]), ("Parent", ["Child", "Parent"]),
        ("Other", ["Other", "Parent"]), ("Parent", ["Other", "Parent"]),
    ]


def test_as_subclass_keeps_data_and_history(api):
    torch = api.torch

    class Sub(torch.Tensor):
        pass

    a = torch.ones(2, requires_grad=True)
    c = a * 2
    s = c.as_subclass(Sub)
    assert type(s) is Sub and s.requires_grad and not s.is_leaf
    # PyTorch records an alias node; the lab's as_subclass shares the producer's node instead.
    assert type(s.grad_fn).__name__ == {"torch": "AliasBackward0", "lab": "MulBackward0"}[api.name]
    s.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]
    with pytest.raises(TypeError):
        c.as_subclass(int)


def test_disabled_impl_opts_out(api):
    torch = api.torch
    disabled = torch._C._disabled_torch_function_impl if api.name == "torch" else lab_overrides._disabled_torch_function_impl

    class Off(torch.Tensor):
        __torch_function__ = disabled

    o = torch.ones(2).as_subclass(Off)
    assert type(torch.add(o, o)) is torch.Tensor
    assert not api.overrides.has_torch_function((o,))


# --- modes --------------------------------------------------------------------------------------

def _named_mode(api, name, log):
    class Named(api.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append(f"{name} {func.__name__} {[t.__name__ for t in types]}")
            return func(*args, **(kwargs or {}))

    return Named()


def test_mode_sees_plain_tensors_and_not_the_backward_pass(api):
    """A TorchFunctionMode sees every binding call, plain tensors included, and ``Tensor.backward``;
    it does not see what autograd's backward pass runs (that happens below, in the engine)."""
    torch = api.torch
    log: list = []
    a, b = torch.ones(2, requires_grad=True), torch.ones(2)
    with _named_mode(api, "mode", log):
        c = torch.mul(a, b) * a
        c.sum().backward()
    assert log == ["mode mul []", "mode mul []", "mode sum []", "mode backward ['Tensor']"]
    assert a.grad.tolist() == [2.0, 2.0]


def test_modes_nest_innermost_first(api):
    torch = api.torch
    log: list = []
    x = torch.ones(1)
    with _named_mode(api, "outer", log), _named_mode(api, "inner", log):
        torch.add(x, x)
    assert log == ["inner add []", "outer add []"]


def test_mode_runs_before_subclass(api):
    torch = api.torch
    log: list = []

    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(f"Sub {func.__name__}")
            return super().__torch_function__(func, types, args, kwargs)

    s, x = torch.ones(1).as_subclass(Sub), torch.ones(1)
    with _named_mode(api, "mode", log):
        result = torch.add(s, x)
    assert log == ["mode add ['Sub']", "Sub add"]
    assert type(result) is Sub


def test_disable_guards(api):
    """DisableTorchFunctionSubclass skips subclasses but not modes (which then see no types)."""
    torch = api.torch
    log: list = []

    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append("Sub")
            return super().__torch_function__(func, types, args, kwargs)

    s = torch.ones(1).as_subclass(Sub)
    with api.disable_subclass():
        assert type(torch.add(s, s)) is torch.Tensor
        with _named_mode(api, "mode", log):
            torch.add(s, s)
    assert log == ["mode add []"]  # the subclass is not even listed in types


def test_has_torch_function(api):
    torch = api.torch

    class Sub(torch.Tensor):
        pass

    plain, sub = torch.ones(1), torch.ones(1).as_subclass(Sub)
    has = api.overrides.has_torch_function
    assert (has((plain,)), has((sub,)), api.overrides.has_torch_function_unary(sub)) == (False, True, True)
    with _named_mode(api, "m", []):
        assert has((plain,))


def test_mode_fast_path_is_restored(api):
    """After a mode exits, plain calls are plain again (the lab reopens its fast path)."""
    torch = api.torch
    log: list = []
    x = torch.ones(1)
    with _named_mode(api, "m", log):
        torch.add(x, x)
        if api.name == "lab":
            assert lab_torch._functions._FastTensor is None
    torch.add(x, x)
    assert log == ["m add []"]
    if api.name == "lab":
        assert lab_torch._functions._FastTensor is lab_torch.Tensor


# --- duck types and errors -----------------------------------------------------------------------

def test_non_tensor_with_torch_function(api):
    """Any object whose type has ``__torch_function__`` is accepted where a Tensor is expected."""
    torch = api.torch

    class Duck:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return ("duck", func.__name__, [t.__name__ for t in types])

    b = torch.ones(2)
    assert torch.add(Duck(), b) == ("duck", "add", ["Duck"])
    assert torch.add(b, Duck()) == ("duck", "add", ["Duck"])
    assert torch.sum(Duck()) == ("duck", "sum", ["Duck"])
    assert b.add(Duck()) == ("duck", "add", ["Duck"])


NOT_IMPLEMENTED = (
    "Multiple dispatch failed for '{name}'; all __torch_function__ handlers returned NotImplemented:\n\n"
    "{lines}\n\nFor more information, try re-running with TORCH_LOGS=not_implemented"
)


def test_all_not_implemented_error(api):
    torch = api.torch

    class NI(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    a, b = torch.ones(2).as_subclass(NI), torch.ones(2)
    lines = f"  - tensor subclass {NI}"
    with pytest.raises(TypeError) as e:
        torch.add(a, b)
    assert str(e.value) == NOT_IMPLEMENTED.format(name="torch.add", lines=lines)
    with pytest.raises(TypeError) as e:
        a.sum()
    assert str(e.value) == NOT_IMPLEMENTED.format(name="torch.Tensor.sum", lines=lines)
    # the operators turn the TypeError into NotImplemented (TypeError_to_NotImplemented_), so Python
    # tries the other operand and then gives its own message
    with pytest.raises(TypeError, match=r"^unsupported operand type\(s\) for \+: 'NI' and 'Tensor'$"):
        a + b
    with pytest.raises(TypeError, match=r"^unsupported operand type\(s\) for \*: 'Tensor' and 'NI'$"):
        b * a
    with pytest.raises(TypeError) as e:
        api.overrides.handle_torch_function(torch.add, (a,), a, b)
    assert str(e.value) == f"no implementation found for 'torch.add' on types that implement __torch_function__: [{NI}]"


def test_mode_not_implemented_error(api):
    torch = api.torch

    class NIM(api.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return NotImplemented

        def __repr__(self):
            return "NIM()"

    x = torch.ones(1)
    with pytest.raises(TypeError) as e, NIM():
        torch.add(x, x)
    assert str(e.value) == NOT_IMPLEMENTED.format(name="torch.add", lines="  - mode object NIM()")


def test_bad_argument_still_a_type_error(api):
    with pytest.raises(TypeError, match=r"add\(\): argument 'input' \(position 1\) must be Tensor, not str"):
        api.torch.add("x", api.torch.ones(1))


# --- both hooks: __torch_function__ first, at the binding; __torch_dispatch__ later, below autograd --

def _dispatch_mode(api, log):
    class TD(api.python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            log.append(f"TD {func}")
            return func(*args, **(kwargs or {}))

    return TD()


@pytest.mark.parametrize("function_mode_outside", [True, False])
def test_function_hook_runs_before_dispatch_hook_whatever_the_order(api, function_mode_outside):
    torch = api.torch
    log: list = []
    a, b = torch.ones(2, requires_grad=True), torch.ones(2)
    tf, td = _named_mode(api, "TF", log), _dispatch_mode(api, log)
    outer, inner = (tf, td) if function_mode_outside else (td, tf)
    with outer, inner:
        torch.add(a, b)
    assert log == ["TF add []", "TD aten.add.Tensor"]


def test_subclass_with_both_hooks(api):
    """A wrapper subclass with both hooks: its __torch_function__ sees ``add``, its
    __torch_dispatch__ then sees ``aten.add.Tensor``; the result stays the subclass."""
    torch = api.torch
    log: list = []
    disable = api.disable_subclass

    class Both(torch.Tensor):
        @staticmethod
        def __new__(cls, elem):
            return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

        def __init__(self, elem):
            self.elem = elem

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(f"TF {func.__name__}")
            with disable():
                return func(*args, **(kwargs or {}))

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            log.append(f"TD {func}")
            out = func(*[x.elem if isinstance(x, Both) else x for x in args], **(kwargs or {}))
            return Both(out)

    x, b = Both(torch.ones(2)), torch.ones(2)
    r = torch.add(x, b)
    assert log == ["TF add", "TD aten.add.Tensor"] and type(r) is Both
    log.clear()
    r = x * 2
    assert log == ["TF mul", "TD aten.mul.Tensor"] and type(r) is Both


def test_subclass_function_hook_then_dispatch_mode(api):
    torch = api.torch
    log: list = []

    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(f"Sub {func.__name__}")
            return super().__torch_function__(func, types, args, kwargs)

    s, b = torch.ones(2).as_subclass(Sub), torch.ones(2)
    with _dispatch_mode(api, log):
        r = torch.add(s, b)
    assert log == ["Sub add", "TD aten.add.Tensor"] and type(r) is Sub


def test_as_subclass_to_a_dispatch_class_adds_the_python_keys(api):
    torch = api.torch

    class W(torch.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    keys = torch._C._dispatch_keys(torch.ones(1).as_subclass(W)) if api.name == "torch" else None
    if api.name == "lab":
        import labsupport as lab

        keys = lab.dispatch_keys(torch.ones(1).as_subclass(W))
    assert "Python" in str(keys) and "PythonTLSSnapshot" in str(keys)


def test_plain_method_warning(api, monkeypatch):
    """``def __torch_function__(self, ...)`` still works, with PyTorch's deprecation warning: a
    UserWarning once per process from a binding, a DeprecationWarning from handle_torch_function."""
    import warnings

    torch = api.torch

    class Duck:
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return "duck"

    message = "as a plain method is deprecated and will be an error in future, please define it as a classmethod."
    if api.name == "lab":
        monkeypatch.setattr(lab_overrides, "_plain_method_warned", False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert torch.add(Duck(), torch.ones(1)) == "duck"
            assert torch.add(Duck(), torch.ones(1)) == "duck"
        assert [(w.category, message in str(w.message)) for w in caught] == [(UserWarning, True)]
        assert str(caught[0].message).startswith("Defining your `__torch_function__` as a plain")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert api.overrides.handle_torch_function(torch.add, (Duck(),), Duck()) == "duck"
    assert [w.category for w in caught] == [DeprecationWarning]
    assert str(caught[0].message) == "Defining your `__torch_function__ " + message


@pytest.mark.parametrize("expr", ['t + "x"', '"x" + t', 't - "x"', '"x" - t', 't += "x"', "t + None", "t - [1.0, 2.0]"])
def test_operators_turn_type_errors_into_not_implemented(api, expr):
    """``t + "x"`` is Python's "unsupported operand" error, not the binding's argument error."""
    t = api.torch.ones(2)
    with pytest.raises(TypeError) as e:
        exec(expr, {"t": t})
    assert str(e.value).startswith(("unsupported operand type(s)", "can only concatenate str"))
    assert "Tensor" in str(e.value) and "argument" not in str(e.value)
