"""Views on the autograd side: the ADInplaceOrView kernels (as_view, version bumps), check_inplace's
errors, CopySlices and the rebuilt AsStridedBackward0, the "modified by an inplace operation" error.

Twin tests run the same code on the lab and on PyTorch 2.13 (``torch_ref``, skipped without it) and
compare what a learner can observe: ``_is_view()``, ``_base``, ``_version``, grad_fn names, gradients,
and errors (type and message).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import labsupport as lab
import labsupport.aten.tensor
import labsupport.torch as lab_torch
from labsupport.autograd.variable import CreationMeta, get_view_meta
from labsupport.autograd.variable import grad_fn as view_grad_fn
from labsupport.c10.tls import AutoDispatchBelowADInplaceOrView, AutoDispatchBelowAutograd

OPS_YAML = Path(__file__).resolve().parents[1] / "ops.yaml"
VIEW_OPS_IN_YAML = ("view", "as_strided", "expand", "transpose.int", "t", "select.int", "slice.Tensor", "unsqueeze", "alias")


def grad_fn_name(t) -> str | None:
    """``type(t.grad_fn).__name__``. On the lab, ``grad_fn`` is read the way PyTorch's property reads it
    (refresh a stale view, raise for a forbidden one): the lab's plain attribute does not raise."""
    fn = view_grad_fn(t) if isinstance(t, labsupport.aten.tensor.TensorBase) else t.grad_fn
    return None if fn is None else type(fn).__name__


def next_names(node) -> list[str | None]:
    return [None if n is None else type(n).__name__ for n, _ in node.next_functions]


def message(exc: BaseException) -> str:
    """PyTorch's words: the lab appends its own hint after PyTorch's " Hint:" (which it cannot give)."""
    return str(exc).split(" Hint:")[0]


def rounded(t) -> list:
    return np.round(np.asarray(t.tolist(), dtype=np.float64), 3).tolist()


def data_3x4() -> np.ndarray:
    return np.arange(12, dtype=np.float32).reshape(3, 4) / 4 - 1


# ---------------------------------------------------------------- which ops get an ADInplaceOrView kernel


def test_view_ops_are_found_from_alias_annotations():
    from labsupport.codegen.gen_autograd import is_view_op, view_base_argument
    from labsupport.codegen.model import load_ops_yaml

    reg = load_ops_yaml(OPS_YAML)
    views = {f.name for f in reg.functions if is_view_op(f)}
    assert set(VIEW_OPS_IN_YAML) <= views
    # Tensor(a) returns that are not views of their own: to.dtype and reshape are CompositeImplicitAutograd.
    assert "to.dtype" not in views and "add_.Tensor" not in views and "add.Tensor" not in views
    assert all(view_base_argument(reg.by_name(name)) == "self" for name in views)


def test_view_ops_agree_with_torchgen_view_functions(torch_ref):
    pytest.importorskip("torchgen")
    from torchgen.packaged.autograd.gen_inplace_or_view_type import VIEW_FUNCTIONS

    from labsupport.codegen.gen_autograd import is_view_op
    from labsupport.codegen.model import load_ops_yaml

    reg = load_ops_yaml(OPS_YAML)
    for f in reg.functions:
        base = f.func.name.rstrip("_")
        assert is_view_op(f) == (base in VIEW_FUNCTIONS and not f.func.is_inplace), f.name


def _yaml_op_names() -> list[str]:
    from labsupport.codegen.model import load_ops_yaml

    return [f.name for f in load_ops_yaml(OPS_YAML).functions]


@pytest.mark.parametrize("op", _yaml_op_names())
def test_ad_inplace_or_view_row_matches_pytorch(torch_ref, op):
    """Every op of ops.yaml: a view op, an in-place op and an out= op have an ADInplaceOrView kernel;
    the others fall through (CompositeImplicitAutograd ones show their math kernel)."""
    theirs = next(r for r in torch_ref._C._dispatch_dump_table(f"aten::{op}").splitlines() if r.startswith("ADInplaceOrView:"))
    ours = next(r for r in lab.dispatcher.dump_table(f"aten::{op}").splitlines() if r.startswith("ADInplaceOrView:"))
    for kind in ("[kernel]", "fallthrough", "[math kernel]"):
        assert (kind in ours) == (kind in theirs), (ours, theirs)


def test_trace_shows_the_ad_inplace_or_view_kernel_of_a_view_op():
    h = lab_torch.randn(3, 4, requires_grad=True).mul(1)
    with lab.trace() as tr:
        h.t()
    text = str(tr)
    assert "torch::ADInplaceOrView::(anonymous namespace)::t" in text
    assert "-> ADInplaceOrView [kernel]" in text
    # VariableType redispatched under AutoDispatchBelowAutograd: the autograd frame comes first.
    assert text.index("VariableType::(anonymous namespace)::t") < text.index("ADInplaceOrView::(anonymous namespace)::t")


def test_profiler_lists_the_same_view_ops_as_pytorch(torch_ref):
    """One entry per operator *call* (a redispatch to ADInplaceOrView is not a new call), as in PyTorch."""
    h = lab_torch.randn(3, 4, requires_grad=True).mul(1)
    with lab.profiler.profile() as prof:
        h.t()
        h.select(0, 1)
    ref = torch_ref.randn(3, 4, requires_grad=True).mul(1)
    with torch_ref.profiler.profile() as ref_prof:
        ref.t()
        ref.select(0, 1)
    assert sorted(e.key for e in prof.key_averages()) == sorted(e.key for e in ref_prof.key_averages())


# ---------------------------------------------------------------- as_view: marking views


def test_view_shares_version_counter_and_points_at_the_root():
    x = lab_torch.zeros(3, 4)
    v = x.select(0, 1)
    w = v.slice(0, 1, 3)
    assert v._is_view() and w._is_view() and not x._is_view()
    assert v._base is x and w._base is x and x._base is None
    assert v._version_counter is x._version_counter is w._version_counter
    w.add_(1)
    assert (x._version, v._version, w._version) == (1, 1, 1)
    assert x.tolist()[1] == [0.0, 1.0, 1.0, 0.0]


def test_creation_meta_follows_grad_mode_and_inference_mode():
    x = lab_torch.zeros(3, 4)
    assert get_view_meta(x.t()).creation_meta is CreationMeta.DEFAULT
    with lab_torch.no_grad():
        nv = x.t()
    assert get_view_meta(nv).creation_meta is CreationMeta.NO_GRAD_MODE
    assert get_view_meta(nv.select(0, 0)).creation_meta is CreationMeta.NO_GRAD_MODE  # propagated
    with lab_torch.inference_mode():
        iv = x.t()
        inf = lab_torch.zeros(2)
        assert not inf.select(0, 0)._is_view()  # a view of an inference tensor is not tracked
    assert get_view_meta(iv).creation_meta is CreationMeta.INFERENCE_MODE


def test_below_ad_inplace_or_view_nothing_is_marked_or_bumped():
    """The version bump and the view marking are ADInplaceOrView's job (notes §2.6)."""
    x = lab_torch.zeros(3, 4)
    with AutoDispatchBelowADInplaceOrView():
        x.add_(1)
        v = x.view(12)
    assert x._version == 0 and not v._is_view()
    with AutoDispatchBelowAutograd():
        v = x.view(12)
        x.add_(1)
    assert v._is_view() and x._version == 1 and v.grad_fn is None


def test_dead_views_leave_the_table():
    from labsupport.autograd import variable

    x = lab_torch.zeros(3, 4)
    before = len(variable._VIEW_META)
    views = [x.select(0, i) for i in range(3)]
    assert len(variable._VIEW_META) == before + 3
    del views
    assert len(variable._VIEW_META) == before
    assert id(x._version_counter) not in variable._LIVE_VIEWS


# ---------------------------------------------------------------- twins: scripted scenarios


def run_both(torch_ref, script):
    """Run ``script(tm, slice_fn)`` with the lab and with PyTorch; return both results (or errors)."""
    results = []
    for tm, slice_fn in ((lab_torch, lambda t, *a: t.slice(*a)), (torch_ref, lambda t, *a: torch_ref.ops.aten.slice.Tensor(t, *a))):
        try:
            results.append(("ok", script(tm, slice_fn)))
        except Exception as exc:
            results.append((type(exc).__name__, message(exc)))
    return results


def leaf(tm, requires_grad=True):
    return tm.tensor(data_3x4().tolist(), requires_grad=requires_grad)


SCENARIOS = {
    "leaf_inplace": lambda tm, s: leaf(tm).add_(1),
    "view_of_leaf_select": lambda tm, s: leaf(tm).select(0, 0).add_(1),
    "view_of_leaf_t": lambda tm, s: leaf(tm).t().mul_(2),
    "view_of_leaf_view": lambda tm, s: leaf(tm).view(12).sub_(1),
    "nograd_view_then_inplace": lambda tm, s: _nograd_view(tm, lambda h: h.select(0, 1)).mul_(2),
    "nograd_view_of_plain_tensor": lambda tm, s: _nograd_view(tm, lambda h: h.t(), rg=False).add_(leaf(tm).t()),
    "view_of_nograd_view": lambda tm, s: s(_nograd_view(tm, lambda h: h.select(0, 1)), 0, 1, 3).add_(1),
    "inference_view": lambda tm, s: _inference_view(tm).mul_(2),
    "view_of_inference_view": lambda tm, s: _inference_view(tm).select(0, 0).mul_(2),
    "nograd_leaf_view_inplace_ok": lambda tm, s: _under(tm.no_grad(), lambda: leaf(tm).select(0, 0).add_(1))._version,
    "out_requires_grad": lambda tm, s: tm.add(leaf(tm), 1, out=tm.zeros(3, 4)),
    "out_bumps_a_saved_tensor": lambda tm, s: _out_into_saved(tm),
}


def _nograd_view(tm, make, rg=True):
    h = leaf(tm).mul(1) if rg else leaf(tm, requires_grad=False)
    with tm.no_grad():
        return make(h)


def _out_into_saved(tm):
    w, x = leaf(tm), leaf(tm, requires_grad=False)
    y = w.mul(x)  # saves x
    tm.add(x.select(0, 0), 1, out=x.select(0, 0))  # an out= op through a view bumps x's counter too
    y.sum().backward()


def _inference_view(tm):
    h = leaf(tm).mul(1)
    with tm.inference_mode():
        return h.t()


def _under(ctx, fn):
    with ctx:
        return fn()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_inplace_errors_match_pytorch(torch_ref, name):
    ours, theirs = run_both(torch_ref, SCENARIOS[name])
    if theirs[0] == "ok":
        assert ours[0] == "ok", ours
    else:
        assert ours == theirs


@pytest.mark.parametrize(
    "make_view",
    [
        lambda h, s: h.select(0, 0),
        lambda h, s: h.t(),
        lambda h, s: h.transpose(0, 1),
        lambda h, s: s(h, 1, 1, 3),
        lambda h, s: s(h, 0, 0, 3, 2),
        lambda h, s: h.as_strided((2, 2), (1, 4), 1),
        lambda h, s: h.view(12),
        lambda h, s: h.unsqueeze(0),
        lambda h, s: h.select(1, 2).unsqueeze(1),
    ],
)
def test_inplace_on_a_view_gives_copyslices_and_right_gradients(torch_ref, make_view):
    def script(tm, s):
        b = leaf(tm)
        w = tm.tensor([2.0], requires_grad=True)
        h = b.mul(1)
        v = make_view(h, s)
        before = grad_fn_name(v)
        v.mul_(w)
        out = {
            "before": before, "view": grad_fn_name(v), "base": grad_fn_name(h),
            "copyslices_next": next_names(h.grad_fn), "view_next": next_names(v.grad_fn),
            "versions": (h._version, v._version), "base_is": v._base is h,
        }
        h.mul(h).sum().backward()
        out["grad_b"], out["grad_w"] = rounded(b.grad), rounded(w.grad)
        return out

    ours, theirs = run_both(torch_ref, script)
    assert ours == theirs


def test_copyslices_when_only_the_other_operand_requires_grad(torch_ref):
    def script(tm, s):
        c = tm.zeros(3, 4)
        sibling = c.select(0, 1)
        v = c.select(0, 0)
        w = tm.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        v.add_(w, alpha=3)
        out = [grad_fn_name(c), grad_fn_name(v), grad_fn_name(sibling), sibling.requires_grad, next_names(c.grad_fn)]
        c.sum().backward()
        return out, rounded(w.grad)

    ours, theirs = run_both(torch_ref, script)
    assert ours == theirs
    assert ours[1][0][:3] == ["CopySlices", "AsStridedBackward0", "AsStridedBackward0"]


def test_base_modified_rebuilds_its_views(torch_ref):
    def script(tm, s):
        b = leaf(tm)
        h = b.mul(1)
        v = h.view(12)
        u = s(h, 1, 0, 2)
        names = [grad_fn_name(v), grad_fn_name(u)]
        h.add_(1)
        names += [grad_fn_name(v), grad_fn_name(u), next_names(v.grad_fn)]
        with tm.no_grad():
            h.add_(1)
        names.append(grad_fn_name(v))
        u.sin().sum().backward()
        return names, rounded(b.grad)

    ours, theirs = run_both(torch_ref, script)
    assert ours == theirs


def test_grad_fn_of_a_base_modified_in_place_is_the_op(torch_ref):
    def script(tm, s):
        b = leaf(tm)
        h = b.mul(1)
        h.add_(1)
        return grad_fn_name(h), next_names(h.grad_fn)

    assert run_both(torch_ref, script)[0] == run_both(torch_ref, script)[1]


@pytest.mark.parametrize(
    "modify",
    [
        lambda h, y, s: y.mul_(3),              # y is saved by y.mul(y)
        lambda h, y, s: h.select(0, 0).add_(1),  # the saved input of sin, through a view
        lambda h, y, s: h.t().add_(1),
        lambda h, y, s: (h.add_(1), h.add_(1)),  # version counts every bump
    ],
)
def test_modified_by_an_inplace_operation_matches_pytorch(torch_ref, modify):
    def script(tm, s):
        b = leaf(tm)
        h = b.mul(1)
        y = h.sin()
        z = y.mul(y)
        modify(h, y, s)
        z.sum().backward()

    ours, theirs = run_both(torch_ref, script)
    assert theirs[0] == "RuntimeError"
    assert ours == theirs


def test_saved_view_modified_through_its_base(torch_ref):
    def script(tm, s):
        b = leaf(tm)
        h = b.mul(1)
        v = h.select(0, 1)
        y = v.sin()
        h.add_(1)
        y.sum().backward()

    ours, theirs = run_both(torch_ref, script)
    assert "which is output 0 of AsStrided, is at version 1; expected version 0 instead." in theirs[1]
    assert ours == theirs


def test_leaf_modified_under_no_grad_has_no_output_clause(torch_ref):
    def script(tm, s):
        b = tm.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = b.sin()
        with tm.no_grad():
            b.add_(1)
        y.sum().backward()

    ours, theirs = run_both(torch_ref, script)
    assert ours == theirs == ("RuntimeError", theirs[1])
    assert "[torch.FloatTensor [3]] is at version 1; expected version 0 instead." in ours[1]


def test_nograd_view_error_is_raised_when_autograd_next_uses_the_view(torch_ref):
    """PyTorch raises on the next ``grad_fn`` read; the lab on the next use by autograd (see variable.py)."""

    def script(tm, s):
        h = leaf(tm).mul(1)
        with tm.no_grad():
            v = h.select(0, 0)
        h.mul_(2)
        return v.mul(2)

    ours, theirs = run_both(torch_ref, script)
    assert theirs[0] == "RuntimeError" and "its base or another view of its base has been modified" in theirs[1]
    assert ours == theirs


# ---------------------------------------------------------------- twins: random chains


class Chain:
    """One library's side of a random chain: a pool of tensors, ops applied by index."""

    def __init__(self, tm, slice_fn, requires_grad: bool, leaf_base: bool):
        self.tm, self.slice = tm, slice_fn
        self.b = tm.tensor(data_3x4().tolist(), requires_grad=requires_grad)
        self.w = tm.tensor([1.5], requires_grad=True)
        self.pool = [self.b if leaf_base else self.b.mul(1)]
        self.saved: list = []

    def observe(self):
        pool = self.pool
        rows = []
        for t in pool:
            base = t._base
            base_at = None if base is None else next((i for i, p in enumerate(pool) if p is base), "outside")
            lab_side = isinstance(t, labsupport.aten.tensor.TensorBase)
            plain = t.grad_fn if lab_side else None  # the lab's attribute, before any lazy refresh
            try:
                name = grad_fn_name(t)
            except RuntimeError as exc:  # a view that may not be rebuilt: record it and look at the others
                name = message(exc)
            else:
                # the lab refreshes views eagerly: its plain attribute must already be what PyTorch reads
                assert not lab_side or t.grad_fn is plain, f"stale grad_fn attribute on pool[{len(rows)}]"
            rows.append((t._is_view(), base_at, t._version, t.requires_grad, name, tuple(t.shape)))
        return rows


def chain_step(chain: Chain, step: tuple):
    kind, index, arg = step
    t = chain.pool[index % len(chain.pool)]
    tm = chain.tm
    if kind == "view":
        dims = t.dim()
        if dims == 0:
            out = t.view(1)
        elif arg == 0:
            out = t.select(0, 0)
        elif arg == 1 and dims >= 2:
            out = t.t()
        elif arg == 2:
            out = chain.slice(t, 0, 0, max(1, t.shape[0] - 1))
        elif arg == 3:
            out = t.unsqueeze(0)
        elif arg == 4 and dims >= 2:
            out = t.transpose(0, 1)
        elif arg == 5 and t.shape[-1] >= 2:
            out = t.as_strided((2,), (t.stride(-1),), t.storage_offset())
        elif arg == 6:
            out = t[..., 1:] if t.shape[-1] >= 2 else t[0]  # basic indexing: slice / select underneath
        else:
            out = t.view(-1) if t.is_contiguous() else t.select(0, 0)
        chain.pool.append(out)
    elif kind == "inplace":
        if arg == 0:
            t.add_(1)
        elif arg == 1:
            t.mul_(chain.w)
        elif arg == 2:
            t.sub_(chain.w, alpha=2)
        else:
            t.sin_()  # (not neg_: see test_unary_inplace_writes_through_a_strided_view)
    elif kind == "nograd_inplace":
        with tm.no_grad():
            t.mul_(2)
    elif kind == "inference_inplace":
        with tm.inference_mode():
            t.add_(1)
    elif kind == "nograd_view":
        with tm.no_grad():
            chain.pool.append(t.select(0, 0) if t.dim() else t.view(1))
    elif kind == "save":
        chain.saved.append(t.sin())
    elif kind == "detach":
        chain.pool.append(t.detach())  # shares the version counter, is not a view


def chain_end(chain: Chain):
    total = None
    for y in chain.saved + [p for p in chain.pool if p.requires_grad]:
        part = y.sum()
        total = part if total is None else total.add(part)
    if total is None or not total.requires_grad:
        return None
    total.backward()
    grads = []
    for leaf_t in (chain.b, chain.w):
        grad = leaf_t.grad if leaf_t.is_leaf else None  # (PyTorch warns when .grad of a non-leaf is read)
        grads.append(None if grad is None else np.asarray(grad.tolist(), dtype=np.float64))
    return grads


def random_steps(rng: np.random.Generator, n: int) -> list[tuple]:
    kinds = ["view", "view", "view", "inplace", "inplace", "save", "nograd_inplace", "nograd_view", "detach", "inference_inplace"]
    return [(kinds[rng.integers(len(kinds))], int(rng.integers(100)), int(rng.integers(8))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(300))
def test_random_chains_of_views_and_inplace_ops_match_pytorch(torch_ref, seed):
    rng = np.random.default_rng(seed)
    requires_grad = bool(rng.integers(4))  # mostly with grad
    leaf_base = rng.integers(5) == 0  # sometimes work on the leaf itself (leaf errors)
    steps = random_steps(rng, 12)
    chains = [
        Chain(lab_torch, lambda t, *a: t.slice(*a), requires_grad, leaf_base),
        Chain(torch_ref, lambda t, *a: torch_ref.ops.aten.slice.Tensor(t, *a), requires_grad, leaf_base),
    ]
    logs: list[list] = [[], []]
    for side, chain in enumerate(chains):
        for step in steps:
            try:
                chain_step(chain, step)
                logs[side].append(("ok", chain.observe()))
            except Exception as exc:
                logs[side].append((type(exc).__name__, message(exc)))
                chain.pool.append(chain.pool[0])  # keep indices aligned
        try:
            logs[side].append(("end", chain_end(chain)))
        except Exception as exc:
            logs[side].append((type(exc).__name__, message(exc)))
    for i, (ours, theirs) in enumerate(zip(*logs)):
        where = f"seed {seed}, step {i} {steps[i] if i < len(steps) else 'backward'}"
        if ours[0] == theirs[0] == "end" and ours[1] is not None and theirs[1] is not None:
            for mine, ref in zip(ours[1], theirs[1]):  # gradients: float32 sums in a different order
                assert (mine is None) == (ref is None), where
                assert mine is None or np.allclose(mine, ref, rtol=1e-4, atol=1e-4), where
        else:
            assert ours == theirs, where


@pytest.mark.parametrize(
    "op",
    [
        "add_",
        "sin_",
        "neg_",  # numpy 2.4's in-place np.negative on a strided float32 view is wrong; the kernel avoids it
    ],
)
def test_unary_inplace_writes_through_a_strided_view(torch_ref, op):
    def script(tm, s):
        x = tm.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]])
        v = x.select(1, 0)
        getattr(v, op)(*((1,) if op == "add_" else ()))
        return rounded(x), x._version

    ours, theirs = run_both(torch_ref, script)
    assert ours == theirs


def test_inplace_view_ops_set_history_instead_of_rebasing(torch_ref):
    """squeeze_ changes a view's geometry, not its data: the view gets SqueezeBackward4 (set_history),
    not CopySlices on its base and AsStridedBackward0 (rebase_history), as gen_variable_type.py's
    emit_history decides from view_info. Same nodes and gradients on both."""
    seen = []
    for T in (lab_torch, torch_ref):
        x = T.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
        y = x.mul(1)
        v = y[0:1]
        v.squeeze_(0)
        (v * T.tensor([1.0, 2.0, 3.0])).sum().backward()
        seen.append((type(v.grad_fn).__name__, type(y.grad_fn).__name__, tuple(v.shape), v._version,
                     x.grad.numpy().tolist()))  # fmt: skip
    assert seen[0] == seen[1]
    assert seen[0][:2] == ("SqueezeBackward4", "MulBackward0")
