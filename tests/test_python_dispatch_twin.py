"""The Python key, the lab next to PyTorch 2.13: the same logging mode, the same key sets, the same errors.

Each test runs the same program on both and compares what can be printed. Skipped without PyTorch.

The aten calls a mode sees agree call for call in the forward pass. In the backward pass PyTorch also
logs calls that the lab's autograd engine and formulas make with numpy instead of operators
(``BACKWARD_ONLY_IN_PYTORCH``); those are dropped from PyTorch's log before comparing, each for a
named reason, and everything else must agree.
"""

from __future__ import annotations

import random

import pytest
from subclasses import wrapper_subclass

import labsupport as lab
import labsupport.torch as labtorch
from labsupport.utils._python_dispatch import TorchDispatchMode as LabMode
from labsupport.utils._pytree import tree_map

pytestmark = pytest.mark.torch

# What PyTorch's backward pass dispatches and the lab's does not, for the programs below: nothing. The
# lab's engine dispatches ones_like, add, detach, new_empty_strided + copy_, add_, sum.dim_IntList + view
# and the formulas call t, unsqueeze, expand, zeros_like through the C++ API (tests/test_autograd_dispatch.py).
# What still differs elsewhere: add/sub's backward multiplies by alpha with aten::mul.Scalar, which the
# lab lacks (it dispatches mul.Tensor), and AsStridedBackward0 (a view read after an in-place op on its
# base) computes with numpy.
BACKWARD_ONLY_IN_PYTORCH: dict[str, str] = {}


def pytorch_backward_as_the_lab_dispatches(log: list[str]) -> list[str]:
    """PyTorch's backward log without the calls of BACKWARD_ONLY_IN_PYTORCH (none: the log itself)."""
    return [name for name in log if name not in BACKWARD_ONLY_IN_PYTORCH]


def logging_mode(base):
    class Logging(base):
        def __init__(self):
            super().__init__()
            self.log = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.log.append(str(func))
            return func(*args, **(kwargs or {}))

    return Logging()


def _mode_base(torch_ref):
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


UNARY = ("neg", "sin", "cos")
BINARY = ("add", "mul", "sub", "mm", "matmul")
INPLACE = ("add_", "mul_")
LAST = ("sum_dim", "expand", "to", None)


def run_program(torch, mode, steps, last, data_a, data_b):
    """Run one program under ``mode``: a chain of ``steps`` from ``a`` (requires grad), then ``last``,
    then ``.sum().backward()``. Returns (forward log, backward log, grad of a)."""
    a = torch.tensor(data_a, requires_grad=True)
    b = torch.tensor(data_b)
    with mode:
        x = a
        for step in steps:
            if step in UNARY:
                x = getattr(torch, step)(x)
            elif step in BINARY:
                x = getattr(torch, step)(x, b)
            else:
                x = getattr(x, step)(b)
        if last == "sum_dim":
            x = x.sum(0)
        elif last == "expand":
            x = x.expand(2, 3, 3)
        elif last == "to":
            x = x.to(torch.float64)
        forward = list(mode.log)
        x.sum().backward()
    return forward, mode.log[len(forward):], a.grad.tolist()


def random_program(rng):
    steps = [rng.choice(UNARY + BINARY) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.5:  # an in-place op on a non-leaf, after the first step
        steps.insert(rng.randint(1, len(steps)), rng.choice(INPLACE))
    return steps, rng.choice(LAST)


@pytest.mark.parametrize("seed", range(30))
def test_random_programs_log_the_same_aten_calls_as_pytorch_forward_and_backward(torch_ref, seed):
    rng = random.Random(seed)
    steps, last = random_program(rng)
    data_a = [[rng.uniform(-1, 1) for _ in range(3)] for _ in range(3)]
    data_b = [[rng.uniform(-1, 1) for _ in range(3)] for _ in range(3)]
    lab_fwd, lab_bwd, lab_grad = run_program(labtorch, logging_mode(LabMode), steps, last, data_a, data_b)
    ref_fwd, ref_bwd, ref_grad = run_program(torch_ref, logging_mode(_mode_base(torch_ref)), steps, last, data_a, data_b)
    assert lab_fwd == ref_fwd, (steps, last)
    assert lab_bwd == pytorch_backward_as_the_lab_dispatches(ref_bwd), (steps, last, ref_bwd)
    flat = [v for row in lab_grad for v in row]
    assert flat == pytest.approx([v for row in ref_grad for v in row], rel=1e-4, abs=1e-5)


def test_the_backward_log_is_pytorchs_call_for_call(torch_ref):
    """torch.add(a, b).sum().backward(): the seed (ones_like), SumBackward0's expand and AccumulateGrad's
    clone of the expanded gradient (new_empty_strided + copy_), on both."""
    data = [[1.0, 2.0], [3.0, 4.0]]
    _, ref_bwd, _ = run_program(torch_ref, logging_mode(_mode_base(torch_ref)), ["add"], None, data, data)
    _, lab_bwd, _ = run_program(labtorch, logging_mode(LabMode), ["add"], None, data, data)
    assert ref_bwd == ["aten.sum.default", "aten.ones_like.default", "aten.expand.default",
                       "aten.new_empty_strided.default", "aten.copy_.default"]  # fmt: skip
    assert lab_bwd == ref_bwd


@pytest.mark.parametrize("op", ["copy_", "fill_", "zero_", "normal_", "setitem"])
def test_in_place_ops_log_the_same_calls_and_gradients_as_pytorch(torch_ref, op):
    data = [[1.0, 2.0], [3.0, 4.0]]
    results = []
    for torch, base in ((labtorch, LabMode), (torch_ref, _mode_base(torch_ref))):
        a = torch.tensor(data, requires_grad=True)
        mode = logging_mode(base)
        with mode:
            if op == "copy_":
                out = torch.zeros(2, 2).copy_(a)
            elif op == "fill_":
                out = torch.mul(a, a).fill_(2.0)
            elif op == "normal_":
                out = torch.mul(a, a).normal_()
            elif op == "zero_":
                out = torch.mul(a, a).zero_()
            else:
                out = torch.mul(a, a)
                out[0] = torch.mul(a[1], 3.0)
            name = out.grad_fn.name()
            forward = list(mode.log)
            out.sum().backward()
        results.append((name, forward, mode.log[len(forward):], a.grad.tolist()))
    lab, ref = results
    assert lab[0] == ref[0]
    assert lab[2:] == ref[2:]  # backward, CopySlices' steps included, and the gradient
    assert lab[1] == ref[1]


def _tls_inside(torch, base, make_args):
    seen = {}

    class Probe(base):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.setdefault("include", str(_include(torch)))
            seen.setdefault("exclude", str(_exclude(torch)))
            seen.setdefault("types", types)
            return func(*args, **(kwargs or {}))

    with Probe():
        seen["in_block"] = str(_include(torch))
        torch.add(*make_args(torch))
    seen["after"] = str(_include(torch))
    return seen


def _include(torch):
    return lab.tls_include_set() if torch is labtorch else torch._C._dispatch_tls_local_include_set()


def _exclude(torch):
    return lab.tls_exclude_set() if torch is labtorch else torch._C._dispatch_tls_local_exclude_set()


def test_tls_in_a_mode_block_and_inside_its_handler_match_pytorch(torch_ref):
    def make(torch):
        return torch.ones(2, requires_grad=True), torch.ones(2)

    lab_seen = _tls_inside(labtorch, LabMode, make)
    ref_seen = _tls_inside(torch_ref, _mode_base(torch_ref), make)
    assert lab_seen == ref_seen
    assert ref_seen["in_block"] == "DispatchKeySet(BackendSelect, Python, ADInplaceOrView, PythonTLSSnapshot)"


def _subclasses(torch, pytree_map):
    class Plain(torch.Tensor):
        pass

    Wrap = wrapper_subclass(torch, pytree_map, name="Wrap")

    class Declines(torch.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    return Plain, Wrap, Declines


def _keys(torch, t):
    return str(lab.dispatch_keys(t)) if torch is labtorch else str(torch._C._dispatch_keys(t))


def test_subclass_key_sets_match_pytorch(torch_ref):
    from torch.utils._pytree import tree_map as ref_tree_map

    found = []
    for torch, pytree_map in ((labtorch, tree_map), (torch_ref, ref_tree_map)):
        Plain, Wrap, Declines = _subclasses(torch, pytree_map)
        data = torch.ones(2, 3)
        rows = [
            _keys(torch, torch.Tensor._make_subclass(Plain, data)),
            _keys(torch, torch.Tensor._make_subclass(Declines, data)),
            _keys(torch, torch.Tensor._make_subclass(Declines, data, True)),
            _keys(torch, Wrap(data)),
            _keys(torch, Wrap(torch.ones(2, requires_grad=True))),
            _keys(torch, torch.Tensor._make_wrapper_subclass(Wrap, (2, 3), device="meta")),
            _keys(torch, torch.Tensor._make_wrapper_subclass(Wrap, (2, 3), device="cpu")),
            _keys(torch, data),
        ]
        w = Wrap(torch.ones(2, 3))
        rows.append((type(w + w).__name__, str(torch.Tensor._make_wrapper_subclass(Wrap, (2, 3)).dtype)))
        found.append(rows)
        with pytest.raises(TypeError) as info:
            torch.Tensor._make_wrapper_subclass(Plain, (2,))
        rows.append(str(info.value))
    assert found[0] == found[1]


def test_not_implemented_errors_match_pytorch(torch_ref):
    from torch.utils._pytree import tree_map as ref_tree_map

    messages = []
    for torch, pytree_map, base in ((labtorch, tree_map, LabMode), (torch_ref, ref_tree_map, _mode_base(torch_ref))):
        _, _, Declines = _subclasses(torch, pytree_map)

        class Declines2(Declines):
            pass

        class NoMode(base):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return NotImplemented

            def __repr__(self):
                return "<NoMode>"

        t = torch.Tensor._make_subclass(Declines, torch.ones(2))
        t2 = torch.Tensor._make_subclass(Declines2, torch.ones(2))
        x = torch.ones(2)
        got = []
        with pytest.raises(TypeError) as info:
            torch.add(t, t)
        got.append(str(info.value))
        with pytest.raises(TypeError) as info:
            torch.mul(t, t2)
        got.append(str(info.value))
        with pytest.raises(TypeError) as info, NoMode():
            torch.sub(x, t2)
        got.append(str(info.value))
        messages.append([m.replace(f"{__name__}.", "") for m in got])
    assert messages[0] == messages[1]
    assert "  - mode object <NoMode>\n  - tensor subclass" in messages[1][2]


def test_func_attributes_match_pytorch(torch_ref):
    from labsupport._ops import ops

    for name, overload in (("add", "Tensor"), ("sum", "default"), ("sum", "dim_IntList"), ("mm", "default"),
                           ("copy_", "default"), ("_to_copy", "default"), ("expand", "default")):  # fmt: skip
        mine = getattr(getattr(ops.aten, name), overload)
        ref = getattr(getattr(torch_ref.ops.aten, name), overload)
        assert (str(mine), repr(mine), mine.name(), mine.__name__, mine._overloadname, mine.namespace) == (
            str(ref), repr(ref), ref.name(), ref.__name__, ref._overloadname, ref.namespace
        )
        assert (str(mine.overloadpacket), repr(mine.overloadpacket), mine.overloadpacket.__name__) == (
            str(ref.overloadpacket), repr(ref.overloadpacket), ref.overloadpacket.__name__
        )
        assert str(mine._schema) == str(ref._schema)


def test_args_and_kwargs_seen_by_a_mode_match_pytorch(torch_ref):
    def program(torch, a):
        torch.add(a, a, alpha=2)
        torch.add(a, a)
        a.add_(1, alpha=3)
        a.sum(dim=[0])
        a.sum(dim=[0], keepdim=True)
        a.to(torch.float64)

    shapes = []
    for torch, base in ((labtorch, LabMode), (torch_ref, _mode_base(torch_ref))):
        seen = []

        class Probe(base):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                def describe(x):
                    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type):
                        return f"Tensor{list(x.shape)}"
                    return repr(x) if not isinstance(x, (list, tuple)) else list(x)

                seen.append((str(func), [describe(x) for x in args], {k: describe(v) for k, v in (kwargs or {}).items()}))
                return func(*args, **(kwargs or {}))

        a = torch.ones(2, 2)
        with Probe():
            program(torch, a)
            torch.zeros(2, dtype=torch.float64)
        shapes.append(seen)
    assert shapes[0][:-1] == shapes[1][:-1]
    # Factories: PyTorch's binding fills in device=cpu (the default device) before dispatching; the lab's
    # binding leaves it None, so the mode sees no 'device' in kwargs.
    assert shapes[1][-1] == ("aten.zeros.default", [[2]],
                             {"dtype": "torch.float64", "device": "device(type='cpu')", "pin_memory": "False"})
    assert shapes[0][-1] == ("aten.zeros.default", [[2]], {"dtype": "torch.float64", "pin_memory": "False"})


def _carrier(torch, pytree_map):
    return wrapper_subclass(torch, pytree_map, carries_data=True, name="Carrier")


@pytest.mark.parametrize("seed", range(8))
def test_a_data_carrying_subclass_under_autograd_matches_pytorch(torch_ref, seed):
    from torch.utils._pytree import tree_map as ref_tree_map

    rng = random.Random(100 + seed)
    steps = [rng.choice((*UNARY, "add", "mul", "sub")) for _ in range(rng.randint(1, 4))]
    data_a = [rng.uniform(-1, 1) for _ in range(3)]
    data_b = [rng.uniform(-1, 1) for _ in range(3)]
    results = []
    for torch, pytree_map in ((labtorch, tree_map), (torch_ref, ref_tree_map)):
        Carrier = _carrier(torch, pytree_map)
        x = Carrier(torch.tensor(data_a, requires_grad=True))
        b = torch.tensor(data_b)
        y = x
        for step in steps:
            y = getattr(torch, step)(y) if step in UNARY else getattr(torch, step)(y, b)
        out = y.sum()
        forward = list(Carrier.log)
        out.backward()
        grad = x.grad.elem if type(x.grad) is Carrier else x.grad  # PyTorch: a Carrier (via detach); lab: a Tensor
        results.append((type(out).__name__, type(out.grad_fn).__name__, forward, Carrier.log[len(forward):],
                        [round(v, 5) for v in grad.tolist()], _keys(torch, x)))  # fmt: skip
    lab_r, ref_r = results
    assert lab_r[:3] == ref_r[:3]
    assert lab_r[4:] == ref_r[4:]
    # Backward: PyTorch's seed is ones_like(out), which the handler rewraps, so every backward call
    # involves a Carrier and reaches the handler. The lab's seed is a plain tensor, so only the calls
    # on saved Carrier tensors do: the lab's log is PyTorch's with some calls left out, in order.
    ref_bwd = iter(pytorch_backward_as_the_lab_dispatches(ref_r[3]))
    assert all(name in ref_bwd for name in lab_r[3]), (lab_r[3], ref_r[3])


def test_a_mode_under_autocast_and_vmap_sees_what_pytorchs_sees(torch_ref):
    """Autocast and vmap's keys sit above Python: the mode sees autocast's casts and vmap's batched call."""
    logs = []
    for torch, base in ((labtorch, LabMode), (torch_ref, _mode_base(torch_ref))):
        a, b = torch.ones(2, 2, requires_grad=True), torch.ones(2, 2)
        with torch.autocast("cpu"), logging_mode(base) as mode:
            out = torch.mm(a, b)
        with logging_mode(base) as vmode:
            torch.vmap(lambda x: torch.add(x, 1.0))(b)
        logs.append((mode.log, str(out.dtype), vmode.log))
    assert logs[0] == logs[1]
    assert logs[1] == (["aten._to_copy.default", "aten._to_copy.default", "aten.mm.default"], "torch.bfloat16",
                       ["aten.add.Tensor"])  # fmt: skip
