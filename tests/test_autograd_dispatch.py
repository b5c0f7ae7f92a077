"""The lab's autograd dispatches what PyTorch 2.13's does: the engine's seed (``ones_like``), input
buffers (``add``), ``validate_outputs`` (``at::sum_to``: ``sum.dim_IntList`` + ``view``; ``_to_copy``),
AccumulateGrad (``detach`` / ``new_empty_strided`` + ``copy_`` / ``add_``) and the formulas' calls
(``t``, ``unsqueeze``, ``expand``, ``zeros_like``) all go through the build's C++ API, so a logging mode,
a wrapper subclass and the profiler see the same aten calls on both. Twins skip without PyTorch.
"""

from __future__ import annotations

import pathlib
import random

import pytest
from subclasses import wrapper_subclass

import labsupport as lab
import labsupport.torch as labtorch
from labsupport.utils._pytree import tree_map as lab_tree_map


def _mode_base(torch):
    return torch.utils._python_dispatch.TorchDispatchMode


def _logging(torch):
    class Logging(_mode_base(torch)):
        def __init__(self):
            super().__init__()
            self.log = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.log.append(str(func))
            return func(*args, **(kwargs or {}))

    return Logging()


UNARY = ("neg", "sin", "cos")
BINARY = ("add", "mul", "sub", "mm", "matmul", "add_alpha", "mul_row")
INPLACE = ("add_", "mul_", "fill_", "zero_", "normal_", "copy_into")
LAST = ("sum", "sum_dim", "sum_dim_keep", "expand", "to", "t", "view", "backward_grad")


def run(torch, program, data_a, data_b, data_c):
    """One program on ``torch``: leaves a (and sometimes c) require grad; returns the full log, the
    gradients and the name of the output's grad_fn."""
    steps, last, two_leaves, twice = program
    a = torch.tensor(data_a, requires_grad=True)
    b = torch.tensor(data_b)
    c = torch.tensor(data_c, requires_grad=two_leaves)
    seed = torch.tensor(data_b)  # made outside the mode: PyTorch's torch.tensor logs lift_fresh, the lab's does not
    mode = _logging(torch)
    with mode:
        for _ in range(2 if twice else 1):
            x = a
            for step in steps:
                if step in UNARY:
                    x = getattr(torch, step)(x)
                elif step == "add_alpha":
                    x = torch.add(x, c, alpha=2)
                elif step == "mul_row":
                    x = torch.mul(x, c[0])  # broadcast: the engine sums the gradient back to (3,)
                elif step in BINARY:
                    x = getattr(torch, step)(x, c if step in ("add", "mul") else b)
                elif step == "fill_":
                    x.fill_(0.5)
                elif step == "zero_":
                    x.zero_()
                elif step == "normal_":
                    x.normal_()
                elif step == "copy_into":
                    x = torch.mul(b, 1.0).copy_(x)
                else:
                    getattr(x, step)(b)
            if last == "sum_dim":
                x.sum(0).sum().backward()
            elif last == "sum_dim_keep":
                x.sum(1, keepdim=True).sum().backward()
            elif last == "expand":
                x.expand(2, 3, 3).sum().backward()
            elif last == "to":
                x.to(torch.float64).sum().backward()
            elif last == "t":
                x.t().sum().backward()
            elif last == "view":
                x.view(9).sum().backward()
            elif last == "backward_grad":
                x.backward(seed)
            else:
                x.sum().backward()
    grads = [None if t.grad is None else t.grad.tolist() for t in (a, c)]
    return mode.log, grads


def random_program(rng):
    steps = [rng.choice(UNARY + BINARY) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.6:  # an in-place op on a non-leaf, after the first step
        steps.insert(rng.randint(1, len(steps)), rng.choice(INPLACE))
    return steps, rng.choice(LAST), rng.random() < 0.5, rng.random() < 0.3


def _data(rng):
    return [[round(rng.uniform(-1, 1), 3) for _ in range(3)] for _ in range(3)]


# The one call that differs: add/sub's backward multiplies by alpha with ``grad * alpha``, which is
# aten::mul.Scalar in PyTorch; the lab has no mul.Scalar operator, so its maybe_multiply dispatches
# mul.Tensor with the scalar wrapped in a 0-dim tensor (what mul.Scalar's kernel does inside PyTorch).
RENAMED_IN_THE_LAB = {"aten.mul.Scalar": "aten.mul.Tensor"}


def _close(x, y):
    if x is None or y is None:
        return x is y
    return [v for row in x for v in row] == pytest.approx([v for row in y for v in row], rel=1e-4, abs=1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(60))
def test_random_programs_log_pytorchs_aten_calls_forward_and_backward(torch_ref, seed):
    rng = random.Random(7000 + seed)
    program = random_program(rng)
    data = (_data(rng), _data(rng), _data(rng))
    lab_log, lab_grads = run(labtorch, program, *data)
    ref_log, ref_grads = run(torch_ref, program, *data)
    assert lab_log == [RENAMED_IN_THE_LAB.get(name, name) for name in ref_log], program
    if "normal_" not in program[0] or any(s in ("fill_", "zero_") for s in program[0]):
        assert all(_close(x, y) for x, y in zip(lab_grads, ref_grads)), program


def _wrapper(torch, tree_map):
    return wrapper_subclass(torch, tree_map)


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(20))
def test_backward_through_a_wrapper_subclass_matches_pytorch(torch_ref, seed):
    from torch.utils._pytree import tree_map as ref_tree_map

    rng = random.Random(9000 + seed)
    steps = [rng.choice(("neg", "sin", "add", "mul", "mm", "sub")) for _ in range(rng.randint(1, 4))]
    last = rng.choice(("sum", "sum_dim", "expand"))
    data_a, data_b = _data(rng), _data(rng)
    results = []
    for torch, tree_map in ((labtorch, lab_tree_map), (torch_ref, ref_tree_map)):
        Wrapper = _wrapper(torch, tree_map)
        w = Wrapper(torch.tensor(data_a, requires_grad=True))
        b = Wrapper(torch.tensor(data_b))
        x = w
        for step in steps:
            x = getattr(torch, step)(x) if step in ("neg", "sin") else getattr(torch, step)(x, b)
        out = x.sum(0).sum() if last == "sum_dim" else x.expand(2, 3, 3).sum() if last == "expand" else x.sum()
        out.backward()
        results.append((Wrapper.log, type(w.grad).__name__, [round(v, 4) for row in w.grad.elem.tolist() for v in row]))
    assert results[0] == results[1], steps


@pytest.mark.torch
@pytest.mark.parametrize("op", ["fill_", "zero_", "normal_", "copy_"])
def test_in_place_nodes_have_pytorchs_names(torch_ref, op):
    names = []
    for torch in (labtorch, torch_ref):
        a = torch.ones(2, requires_grad=True)
        h = torch.mul(a, 2.0)
        if op == "copy_":
            h.copy_(torch.mul(a, 3.0))
        elif op == "fill_":
            h.fill_(1.0)
        else:
            getattr(h, op)()
        names.append(h.grad_fn.name())
    assert names[0] == names[1]


@pytest.mark.torch
def test_fill_backward_is_numbered_as_derivatives_yaml_numbers_it(torch_ref):
    import torchgen

    text = (pathlib.Path(torchgen.__file__).parent / "packaged" / "autograd" / "derivatives.yaml").read_text()
    fills = [line.split("(")[0].split()[-1] for line in text.splitlines() if line.startswith("- name: fill")]
    assert fills.index("fill_.Scalar") == 2
    h = labtorch.mul(labtorch.ones(2, requires_grad=True), 2.0)
    assert type(h.fill_(1.0).grad_fn).__name__ == "FillBackward2"


@pytest.mark.torch
def test_setitem_on_a_tensor_that_requires_grad_then_backward_matches_pytorch(torch_ref):
    grads = []
    for torch in (labtorch, torch_ref):
        a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        x = torch.mul(a, a)
        x[0] = 5
        x.sum().backward()
        grads.append(a.grad.tolist())
    assert grads[0] == grads[1] == [[0.0, 0.0], [6.0, 8.0]]


@pytest.mark.torch
def test_the_new_operators_have_pytorchs_schemas_and_kernels(torch_ref):
    import torchgen
    import yaml

    path = pathlib.Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    theirs = {e["func"]: e for e in yaml.safe_load(path.read_text())}
    ours = {e["func"]: e for e in yaml.safe_load((pathlib.Path(__file__).parents[1] / "ops.yaml").read_text())["native_functions"]}
    def per_key(dispatch):
        return {key.strip(): kernel for keys, kernel in dispatch.items() for key in keys.split(",")}

    for name in ("empty_strided", "empty_like", "ones_like", "zeros_like", "new_empty_strided", "detach",
                 "select_backward", "slice_backward"):  # fmt: skip
        (schema,) = [s for s in ours if s.split("(")[0] == name]
        assert schema in theirs, schema
        mine, ref = per_key(ours[schema]["dispatch"]), per_key(theirs[schema]["dispatch"])
        assert {key: ref.get(key) for key in mine} == mine, name


def test_backward_calls_the_cpp_api_never_the_python_bindings():
    a = labtorch.ones(2, 2, requires_grad=True)
    out = labtorch.mm(a, a).sum(0).sum()
    with lab.trace() as t:
        out.backward()
    names = t.torch_names()
    assert not [n for n in names if "THPVariable_" in n and n != "torch::autograd::THPVariable_backward"]
    for frame in ("at::Tensor::t", "at::Tensor::unsqueeze", "at::Tensor::expand", "at::_ops::ones_like::call"):
        assert frame in names


def test_detach_and_the_like_factories_record_no_graph():
    a = labtorch.ones(2, 3, requires_grad=True)
    for out in (a.detach(), labtorch.ones_like(a), labtorch.zeros_like(a), labtorch.empty_like(a),
                a.new_empty_strided((3, 2), (1, 3))):  # fmt: skip
        assert not out.requires_grad and out.grad_fn is None
    d = a.detach()
    assert d._version_counter is a._version_counter and not d._is_view()
    assert a.new_empty_strided((3, 2), (1, 3)).stride() == (1, 3)


def test_accumulate_grad_clones_a_gradient_the_caller_holds_and_adds_in_place_on_the_second_backward():
    a = labtorch.ones(2, requires_grad=True)
    g = labtorch.tensor([1.0, 2.0])
    a.backward(g)
    assert a.grad is not g and a.grad.tolist() == [1.0, 2.0]
    first = a.grad
    labtorch.mul(a, 3.0).sum().backward()
    assert a.grad is first and a.grad.tolist() == [4.0, 5.0]  # variable_grad += new_grad


def _view_program(torch, view, op, data_a, data_b):
    a = torch.tensor(data_a, requires_grad=True)
    b = torch.tensor(data_b)
    mode = _logging(torch)
    with mode:
        h = torch.mul(a, 2.0) if view != "leafless" else torch.mul(a, b)
        v = {"select": lambda: h.select(0, 1), "select1": lambda: h.select(1, 2), "t": lambda: h.t(),
             "view": lambda: h.view(9), "leafless": lambda: h.select(0, 0)}[view]()  # fmt: skip
        other = b.select(0, 0) if v.dim() == 1 and v.shape[0] == 3 else b.t() if view == "t" else b.view(9)
        if op == "mul_":
            v.mul_(other)
        elif op == "add_":
            v.add_(other)
        elif op == "zero_":
            v.zero_()
        else:
            v.copy_(torch.mul(other, 3.0))
        torch.sin(h).sum().backward()
    return mode.log, a.grad.tolist()


@pytest.mark.torch
@pytest.mark.parametrize("view", ["select", "select1", "t", "view", "leafless"])
@pytest.mark.parametrize("op", ["mul_", "add_", "zero_", "copy_"])
def test_in_place_on_a_view_then_backward_logs_pytorchs_calls(torch_ref, view, op):
    """CopySlices' steps (new_empty_strided + copy_, as_strided, clone, the op's own backward, copy_)
    are operator calls on both sides."""
    rng = random.Random(f"{view}-{op}")
    data_a, data_b = _data(rng), _data(rng)
    lab_log, lab_grad = _view_program(labtorch, view, op, data_a, data_b)
    ref_log, ref_grad = _view_program(torch_ref, view, op, data_a, data_b)
    assert lab_log == ref_log
    assert _close(lab_grad, ref_grad)


@pytest.mark.torch
def test_like_factories_keep_strides_as_pytorch_does(torch_ref):
    """empty_like's preserve_format: a dense input's strides are kept (empty_strided), an overlapping
    one (expanded) gets contiguous strides (empty)."""
    found = []
    for torch in (labtorch, torch_ref):
        a = torch.ones(2, 3)
        found.append((torch.empty_like(a.t()).stride(), torch.ones_like(a.expand(2, 2, 3)).stride(),
                       torch.zeros_like(a, dtype=torch.float64).dtype == torch.float64,
                       torch.empty_strided((2, 3), (1, 2)).stride(), a.new_empty_strided((3, 2), (1, 3)).stride(),
                       torch.ones_like(a, requires_grad=True).requires_grad))  # fmt: skip
    assert found[0] == found[1]
