"""torch.autocast in the lab (labsupport/amp.py, labsupport/aten/autocast_mode.py).

Two kinds of tests:
* lab-only ones (no PyTorch needed): TLS, nesting, the weight cache, policies, traces, dumps;
* agreement with PyTorch 2.13 (the ``torch_ref`` fixture skips them without PyTorch): randomized
  dtypes/shapes of mm and matmul under CPU autocast (result dtypes, values, errors), the ops that
  fall through, TLS sets, which operators run (profiler counts), grad_fn chains.
PyTorch's CUDA autocast is only checked through its policy lists (the wheel here has no CUDA).
"""

from __future__ import annotations

import random
import sys
import warnings

import numpy as np
import pytest

import labsupport as lab
import labsupport.torch as lt
from labsupport.aten import autocast_mode

DTYPES = ("float16", "bfloat16", "float32", "float64", "int64")


def _lab_counts(fn) -> dict[str, int]:
    with lab.profiler.profile() as prof:
        fn()
    return prof.counts()


def _grad_fn_tree(t) -> tuple:
    """(node name, children...) of a grad_fn graph, for comparing chains."""

    def name(node) -> str:
        n = node.name() if callable(getattr(node, "name", None)) else type(node).__name__
        return n.rsplit("::", 1)[-1]

    def walk(node) -> tuple:
        if node is None:
            return ("None",)
        return (name(node), *(walk(child) for child, _ in node.next_functions))

    return walk(t.grad_fn)


# ------------------------------------------------------------------ lab only: state and TLS


def test_default_state():
    assert lt.get_autocast_dtype("cpu") is lt.bfloat16
    assert lt.get_autocast_dtype("cuda") is lt.float16
    assert not lt.is_autocast_enabled("cpu")
    assert not lt.is_autocast_enabled()  # no argument means CUDA
    assert lt.is_autocast_cache_enabled()
    assert lab.DispatchKey.AutocastCPU in lab.tls_exclude_set()


def test_enabling_removes_only_the_devices_key_from_the_exclude_set():
    before_include, before_exclude = lab.tls_include_set(), lab.tls_exclude_set()
    with lt.autocast("cpu"):
        exc = lab.tls_exclude_set()
        assert lab.DispatchKey.AutocastCPU not in exc
        assert lab.DispatchKey.AutocastCUDA in exc
        assert lab.tls_include_set() == before_include  # the include set is never touched
        assert lt.is_autocast_enabled("cpu") and not lt.is_autocast_enabled("cuda")
        with lt.autocast("cuda"):
            assert lab.DispatchKey.AutocastCUDA not in lab.tls_exclude_set()
        assert lab.DispatchKey.AutocastCUDA in lab.tls_exclude_set()
    assert lab.tls_exclude_set() == before_exclude


def test_nested_contexts_restore_dtype_enabled_and_cache_flag():
    with lt.autocast("cpu"):
        with lt.autocast("cpu", dtype=lt.float16, cache_enabled=False):
            assert lt.get_autocast_dtype("cpu") is lt.float16
            assert not lt.is_autocast_cache_enabled()
            with lt.autocast("cpu", enabled=False):
                assert not lt.is_autocast_enabled("cpu")
                assert lab.DispatchKey.AutocastCPU in lab.tls_exclude_set()
            assert lt.is_autocast_enabled("cpu")
        assert lt.get_autocast_dtype("cpu") is lt.bfloat16
        assert lt.is_autocast_cache_enabled()
    assert not lt.is_autocast_enabled("cpu")


def test_state_is_restored_when_the_body_raises():
    with pytest.raises(ZeroDivisionError):
        with lt.autocast("cpu", dtype=lt.float16):
            raise ZeroDivisionError
    assert not lt.is_autocast_enabled("cpu")
    assert lt.get_autocast_dtype("cpu") is lt.bfloat16
    assert autocast_mode._state.nesting == 0


def test_decorator_and_no_grad():
    @lt.autocast("cpu")
    def f(a, b):
        return lt.mm(a, b), lt.is_autocast_enabled("cpu")

    a = lt.randn(2, 3, requires_grad=True)
    b = lt.randn(3, 2)
    out, enabled = f(a, b)
    assert enabled and out.dtype is lt.bfloat16 and out.grad_fn is not None
    assert f.__name__ == "f"
    with lt.no_grad():
        out, _ = f(a, b)
    assert out.dtype is lt.bfloat16 and out.grad_fn is None and not out.requires_grad
    with lt.autocast("cpu"), lt.no_grad():
        assert lt.matmul(a, b).dtype is lt.bfloat16
    assert not lt.is_autocast_enabled("cpu")


def test_decorator_rejects_non_callables():
    with pytest.raises(TypeError, match=r"autocast\(\)\(func\) requires a callable, but got int"):
        lt.autocast("cpu")(3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`, got: `<class 'int'>`"):
        lt.autocast(3)
    with pytest.raises(RuntimeError, match="User specified an unsupported autocast device_type 'meta'"):
        lt.autocast("meta")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        lt.autocast("tpu")


def test_cpu_autocast_with_float32_warns_and_disables_itself():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lt.autocast("cpu", dtype=lt.float32) as ctx:
            assert not lt.is_autocast_enabled("cpu") and not ctx._enabled
            assert lt.mm(lt.randn(2, 2), lt.randn(2, 2)).dtype is lt.float32
    assert [str(w.message) for w in caught] == [
        "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
        "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently."
    ]


# ------------------------------------------------------------------ lab only: policies and kernels


def test_dump_table_rows():
    table = lab.dispatcher.dump_table("aten::mm")
    assert "AutocastCPU: registered at aten/src/ATen/autocast_mode.cpp:335 [kernel]" in table
    assert "AutocastCUDA: registered at aten/src/ATen/autocast_mode.cpp:181 [kernel]" in table
    add = lab.dispatcher.dump_table("aten::add.Tensor")
    assert "AutocastCPU: fallthrough registered at aten/src/ATen/autocast_mode.cpp:330 [backend fallback]" in add
    sum_rows = lab.dispatcher.dump_table("aten::sum.dim_IntList")
    assert "AutocastCUDA: registered at aten/src/ATen/autocast_mode.cpp:181 [kernel]" in sum_rows
    assert "AutocastCPU: fallthrough registered" in sum_rows


def test_cpu_policies():
    a, b = lt.randn(2, 3), lt.randn(3, 4)
    with lt.autocast("cpu"):
        assert lt.mm(a, b).dtype is lt.bfloat16
        assert lt.matmul(a, b).dtype is lt.bfloat16
        assert a.mm(b).dtype is lt.bfloat16
        assert lt.add(a, a).dtype is lt.float32  # add is on no list
        assert a.sum().dtype is lt.float32  # sum has no CPU policy
        assert lt.mm(a.to(lt.float64), b.to(lt.float64)).dtype is lt.float64  # double is not eligible
        c = lt.randn(2, 3, device="cuda")
        assert lt.mm(c, lt.randn(3, 4, device="cuda")).dtype is lt.float32  # CUDA autocast is off


def test_cuda_policies_on_the_simulated_device():
    c, d = lt.randn(2, 3, device="cuda"), lt.randn(3, 4, device="cuda")
    v = lt.randn(3, device="cuda")
    with lt.autocast("cuda"):
        assert lt.mv(c, v).dtype is lt.float16  # lower_precision_fp
        assert lt.dot(v, v).dtype is lt.float32  # promote: float32 is the widest input
        assert lt.dot(v.to(lt.float16), v.to(lt.float16)).dtype is lt.float16
        assert lt.dot(v.to(lt.float16), v).dtype is lt.float32  # promote casts the float16 one up
        assert lt.matmul(v, v).dtype is lt.float16  # matmul casts first, then calls dot
        assert lt.mm(c, d).dtype is lt.float16
        assert lt.matmul(c, d).device.type == "cuda"
        assert c.to(lt.float16).sum().dtype is lt.float32  # fp32_set_opt_dtype
        assert c.to(lt.float16).sum(0).dtype is lt.float32
        assert c.to(lt.float16).sum(dtype=lt.float64).dtype is lt.float64  # the caller's dtype wins
        assert lt.tensor([1, 2], device="cuda").sum().dtype is lt.int64  # not eligible: unchanged
        assert lt.mm(lt.randn(2, 3), lt.randn(3, 4)).dtype is lt.float32  # CPU tensors untouched
        with lt.autocast("cuda", dtype=lt.bfloat16):
            assert lt.mm(c, d).dtype is lt.bfloat16


def test_the_kernel_excludes_only_its_own_key_then_dispatches_from_the_top():
    a, b = lt.randn(2, 3, requires_grad=True), lt.randn(3, 4)
    with lab.trace() as rec:
        with lt.autocast("cpu"):
            lt.mm(a, b)
    wrap = rec.find("at::autocast::WrapFunction_<(at::autocast::CastPolicy)0, ...>::call")
    assert wrap is not None and wrap.layer == "kernel"
    outer = wrap.parent
    assert outer.key is lab.DispatchKey.AutocastCPU
    # at::_ops::mm::call again, from the top: Autograd now, with AutocastCPU excluded
    inner = [f for f in wrap.children if f.torch_name == "at::_ops::mm::call"]
    assert len(inner) == 1
    inner_dispatch = inner[0].children[0]
    assert inner_dispatch.key is lab.DispatchKey.AutogradCPU
    assert lab.DispatchKey.AutocastCPU not in inner_dispatch.key_set
    assert [f.torch_name for f in wrap.children].count("at::autocast::cached_cast") == 2


def _copies(fn) -> int:
    return _lab_counts(fn).get("aten::_to_copy", 0)


def test_weight_cache():
    w = lt.randn(3, 3, requires_grad=True)
    x = lt.randn(3, 3)

    def twice():
        lt.mm(w, x)
        lt.mm(w, x)

    with lt.autocast("cpu"):
        assert _copies(twice) == 3  # w cast once, x twice
    with lt.autocast("cpu", cache_enabled=False):
        assert _copies(twice) == 4
    with lt.autocast("cpu"):
        lt.mm(w, x)
        with lt.autocast("cpu"):
            pass
        with lt.autocast("cpu", enabled=False):
            pass
        assert _copies(lambda: lt.mm(w, x)) == 1  # still cached after nested exits
        lt.clear_autocast_cache()
        assert _copies(lambda: lt.mm(w, x)) == 2
    assert autocast_mode._cached_casts == {}  # the outermost exit cleared it
    nonleaf = w.mul(lt.tensor(1.0))
    no_grad_leaf = lt.randn(3, 3)
    with lt.autocast("cpu"):
        assert _copies(lambda: (lt.mm(nonleaf, x), lt.mm(nonleaf, x))) == 4
        assert _copies(lambda: (lt.mm(no_grad_leaf, x), lt.mm(no_grad_leaf, x))) == 4
    with lt.autocast("cpu"), lt.inference_mode():
        assert _copies(twice) == 4  # no caching under inference mode (PyTorch 2.13)


def test_cached_cast_returns_the_argument_when_not_eligible():
    to = lt.Tensor.to
    for t in (lt.tensor([1, 2]), lt.randn(2).to(lt.float64), lt.randn(2).to(lt.bfloat16)):
        assert autocast_mode.cached_cast(lt.bfloat16, t, "cpu", to) is t
    assert autocast_mode.cached_cast(lt.bfloat16, 3.0, "cpu", to) == 3.0
    c = lt.randn(2, device="cuda")
    assert autocast_mode.cached_cast(lt.bfloat16, c, "cpu", to) is c


def test_promote_type():
    """at::autocast::prioritize: float32 wins, float64 is ignored, two lower-precision stay."""
    bf16, f32, f64 = lt.randn(1).to(lt.bfloat16), lt.randn(1), lt.randn(1).to(lt.float64)
    f16 = lt.randn(1).to(lt.float16)
    assert autocast_mode.promote_type(lt.bfloat16, "cpu", bf16, bf16) is lt.bfloat16
    assert autocast_mode.promote_type(lt.bfloat16, "cpu", bf16, f32) is lt.float32
    assert autocast_mode.promote_type(lt.bfloat16, "cpu", bf16, f64) is lt.bfloat16
    assert autocast_mode.promote_type(lt.bfloat16, "cpu", lt.tensor([1]), 2.0) is lt.bfloat16
    with pytest.raises(RuntimeError, match="Unexpected floating ScalarType in at::autocast::prioritize"):
        autocast_mode.promote_type(lt.bfloat16, "cpu", f16)


def test_backward_through_the_casts():
    w = lt.randn(3, 3, requires_grad=True)
    x = lt.randn(3, 2)
    with lt.autocast("cpu"):
        out = lt.mm(w, x)
    # x needs no gradient, so its cast records nothing: the edge is empty (None), as in PyTorch
    assert _grad_fn_tree(out) == ("MmBackward0", ("ToCopyBackward0", ("AccumulateGrad",)), ("None",))
    out.sum().backward()
    assert w.grad.dtype is lt.float32
    expected = np.ones((3, 2)) @ x.to(lt.bfloat16).to(lt.float64).numpy().T
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=2e-2, atol=2e-2)


# ------------------------------------------------------------------ agreement with PyTorch 2.13


def _pair(torch, rng, shape, dtype_name):
    """The same values as a lab tensor and a PyTorch tensor of ``dtype_name``."""
    if dtype_name == "int64":
        data = rng.integers(-5, 6, size=shape)
    else:
        data = rng.standard_normal(shape)
    return lt.tensor(data).to(getattr(lt, dtype_name)), torch.tensor(data).to(getattr(torch, dtype_name))


def _run(fn):
    try:
        return fn(), None
    except Exception as e:  # the error itself is compared
        return None, e


def _f64(t) -> np.ndarray:
    """A lab or PyTorch tensor's values as float64 numpy (bfloat16 has no numpy type in either)."""
    module = sys.modules["torch"] if type(t).__module__.startswith("torch") else lt
    return t.detach().to(module.float64).numpy()


@pytest.mark.parametrize("seed", range(6))
def test_mm_and_matmul_under_cpu_autocast_agree(torch_ref, seed):
    torch = torch_ref
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    for _ in range(12):
        n, k, m = (int(v) for v in rng.integers(1, 5, size=3))
        if pyrng.random() < 0.15:
            k2 = k + 1  # a shape error
        else:
            k2 = k
        d1, d2 = pyrng.choice(DTYPES), pyrng.choice(DTYPES)
        fast = pyrng.choice([None, "bfloat16", "float16"])
        op = pyrng.choice(["mm", "matmul", "matmul 1-D", "dot", "mv"])
        shape1 = (k,) if op in ("dot",) or (op == "matmul 1-D" and pyrng.random() < 0.5) else (n, k)
        shape2 = (k2,) if op in ("dot", "mv", "matmul 1-D") else (k2, m)
        op = op.split()[0]
        la, ta = _pair(torch, rng, shape1, d1)
        lb, tb = _pair(torch, rng, shape2, d2)
        ldt = None if fast is None else getattr(lt, fast)
        tdt = None if fast is None else getattr(torch, fast)
        with lt.autocast("cpu", dtype=ldt):
            mine, my_err = _run(lambda: getattr(lt, op)(la, lb))
        with torch.autocast("cpu", dtype=tdt):
            real, real_err = _run(lambda: getattr(torch, op)(ta, tb))
        case = f"{op} {d1}{shape1} x {d2}{shape2} autocast dtype={fast}"
        if real_err is not None:
            assert my_err is not None, case
            assert type(my_err) is type(real_err), case
            assert str(my_err) == str(real_err), case
            continue
        assert my_err is None, f"{case}: {my_err}"
        assert str(mine.dtype) == str(real.dtype), case
        assert tuple(mine.shape) == tuple(real.shape), case
        np.testing.assert_allclose(_f64(mine), _f64(real), rtol=2e-2, atol=2e-2, err_msg=case)


@pytest.mark.parametrize("seed", range(4))
def test_bmm_and_batched_matmul_under_cpu_autocast_agree(torch_ref, seed):
    """bmm is on the CPU lower-precision list; a batched matmul casts once, then reaches bmm or mm."""
    torch = torch_ref
    rng = np.random.default_rng(200 + seed)
    pyrng = random.Random(seed)
    for _ in range(10):
        b, n, k, m = (int(v) for v in rng.integers(1, 4, size=4))
        k2 = k + 1 if pyrng.random() < 0.15 else k
        op = pyrng.choice(["bmm", "matmul"])
        shape1 = (b, n, k) if op == "bmm" else pyrng.choice([(k,), (n, k), (b, n, k), (2, b, n, k)])
        shape2 = (b, k2, m) if op == "bmm" else pyrng.choice([(k2,), (k2, m), (b, k2, m), (1, b, k2, m)])
        d1, d2 = pyrng.choice(DTYPES), pyrng.choice(DTYPES)
        fast = pyrng.choice([None, "bfloat16", "float16"])
        la, ta = _pair(torch, rng, shape1, d1)
        lb, tb = _pair(torch, rng, shape2, d2)
        with lt.autocast("cpu", dtype=None if fast is None else getattr(lt, fast)):
            mine, my_err = _run(lambda: getattr(lt, op)(la, lb))
        with torch.autocast("cpu", dtype=None if fast is None else getattr(torch, fast)):
            real, real_err = _run(lambda: getattr(torch, op)(ta, tb))
        case = f"{op} {d1}{shape1} x {d2}{shape2} autocast dtype={fast}"
        if real_err is not None:
            assert type(my_err) is type(real_err) and str(my_err) == str(real_err), (case, my_err, real_err)
            continue
        assert my_err is None, f"{case}: {my_err}"
        assert str(mine.dtype) == str(real.dtype), case
        assert tuple(mine.shape) == tuple(real.shape), case
        np.testing.assert_allclose(_f64(mine), _f64(real), rtol=2e-2, atol=2e-2, err_msg=case)


@pytest.mark.parametrize("seed", range(3))
def test_ops_without_a_cpu_policy_fall_through_like_pytorch(torch_ref, seed):
    torch = torch_ref
    rng = np.random.default_rng(100 + seed)
    pyrng = random.Random(seed)
    for _ in range(10):
        d1, d2 = pyrng.choice(DTYPES), pyrng.choice(DTYPES)
        la, ta = _pair(torch, rng, (2, 3), d1)
        lb, tb = _pair(torch, rng, (2, 3), d2)
        calls = {
            "add": (lambda m, a, b: m.add(a, b)),
            "sub": (lambda m, a, b: m.sub(a, b)),
            "mul": (lambda m, a, b: m.mul(a, b)),
            "sin": (lambda m, a, b: m.sin(a)),
            "neg": (lambda m, a, b: m.neg(a)),
            "sum": (lambda m, a, b: a.sum()),
            "sum(dim=0)": (lambda m, a, b: a.sum(0)),
        }
        for name, call in calls.items():
            with lt.autocast("cpu"):
                mine, my_err = _run(lambda: call(lt, la, lb))
            with torch.autocast("cpu"):
                real, real_err = _run(lambda: call(torch, ta, tb))
            case = f"{name} {d1} {d2}"
            assert (my_err is None) == (real_err is None), f"{case}: {my_err!r} / {real_err!r}"
            if real_err is None:
                assert str(mine.dtype) == str(real.dtype), case
                np.testing.assert_allclose(_f64(mine), _f64(real), rtol=2e-2, atol=2e-2, err_msg=case)


def test_tls_sets_agree(torch_ref):
    torch = torch_ref
    C = torch._C

    def states(m, ctx_factory):
        got = []

        def cpu_probe() -> bool:
            return m.is_autocast_enabled("cpu")

        with ctx_factory(m, "outer"):
            got.append(("outer", cpu_probe(), str(m.get_autocast_dtype("cpu")), m.is_autocast_cache_enabled()))
            with ctx_factory(m, "nested16"):
                got.append(("nested16", cpu_probe(), str(m.get_autocast_dtype("cpu")), m.is_autocast_cache_enabled()))
            with ctx_factory(m, "off"):
                got.append(("off", cpu_probe(), str(m.get_autocast_dtype("cpu")), m.is_autocast_cache_enabled()))
            got.append(("back", cpu_probe(), str(m.get_autocast_dtype("cpu")), m.is_autocast_cache_enabled()))
        got.append(("after", cpu_probe(), str(m.get_autocast_dtype("cpu")), m.is_autocast_cache_enabled()))
        return got

    def factory(m, which):
        if which == "outer":
            return m.autocast("cpu")
        if which == "nested16":
            return m.autocast("cpu", dtype=m.float16, cache_enabled=False)
        return m.autocast("cpu", enabled=False)

    assert states(lt, factory) == states(torch, factory)
    with lt.autocast("cpu"):
        mine = (str(lab.tls_include_set()), str(lab.tls_exclude_set()))
    with torch.autocast("cpu"):
        real = (str(C._dispatch_tls_local_include_set()), str(C._dispatch_tls_local_exclude_set()))
    assert mine == real
    assert str(lab.tls_exclude_set()) == str(C._dispatch_tls_local_exclude_set())


def test_key_sets_of_cast_results_agree(torch_ref):
    torch = torch_ref
    with lt.autocast("cpu"):
        mine = lt.mm(lt.randn(2, 2, requires_grad=True), lt.randn(2, 2))
    with torch.autocast("cpu"):
        real = torch.mm(torch.randn(2, 2, requires_grad=True), torch.randn(2, 2))
    assert repr(lab.dispatch_keys(mine)) == str(torch._C._dispatch_keys(real))


def test_operators_that_run_agree(torch_ref):
    """Profiler counts: the casts (aten::to -> aten::_to_copy), the weight cache, matmul -> mm."""
    torch = torch_ref

    def program(m, cache):
        w = m.randn(3, 3, requires_grad=True)
        x = m.randn(3, 3)
        nonleaf = w.mul(m.tensor(2.0))

        def run():
            with m.autocast("cpu", cache_enabled=cache):
                m.mm(w, x)
                m.matmul(w, x)
                m.mm(nonleaf, x)
                m.add(w, x)
        return run

    for cache in (True, False):
        run = program(torch, cache)
        with torch.profiler.profile() as prof:
            run()
        real = {row.key: row.count for row in prof.key_averages()}
        mine = _lab_counts(program(lt, cache))
        keys = ("aten::mm", "aten::matmul", "aten::to", "aten::_to_copy", "aten::copy_", "aten::add")
        assert {k: mine.get(k, 0) for k in keys} == {k: real.get(k, 0) for k in keys}, cache


def test_grad_fn_chains_agree(torch_ref):
    torch = torch_ref

    def chains(m):
        a = m.randn(2, 2, requires_grad=True)
        b = m.randn(2, 2, requires_grad=True)
        half = m.randn(2, 2).to(m.bfloat16).requires_grad_()
        with m.autocast("cpu"):
            return {
                "mm": _grad_fn_tree(m.mm(a, b)),
                "matmul": _grad_fn_tree(m.matmul(a, b)),
                "add": _grad_fn_tree(m.add(a, b)),
                "mm(bf16 leaf, f32 leaf)": _grad_fn_tree(m.mm(half, b)),
            }

    assert chains(lt) == chains(torch)


def test_weight_gradients_agree(torch_ref):
    torch = torch_ref
    rng = np.random.default_rng(7)
    wd, xd = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    grads = []
    for m in (lt, torch):
        w = m.tensor(wd, dtype=m.float32, requires_grad=True)
        x = m.tensor(xd, dtype=m.float32)
        with m.autocast("cpu"):
            out = m.mm(w, x)
        out.sum().backward()
        grads.append((str(w.grad.dtype), _f64(w.grad)))
    assert grads[0][0] == grads[1][0]
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-2, atol=1e-2)


def test_policy_lists_match_pytorchs_dispatch_tables(torch_ref):
    """Which lab ops have an Autocast kernel, per device, is what 2.13's tables say."""
    torch = torch_ref
    ops = ["mm", "bmm", "matmul", "dot", "mv", "sum", "sum.dim_IntList", "add.Tensor", "sub.Tensor", "mul.Tensor", "neg", "sin",
           "cos", "_to_copy", "to.dtype", "copy_", "fill_.Scalar", "expand"]
    for op in ops:
        real = torch._C._dispatch_dump_table(f"aten::{op}")
        mine = lab.dispatcher.dump_table(f"aten::{op}")
        for key in ("AutocastCPU", "AutocastCUDA"):
            real_row = next((r for r in real.splitlines() if r.startswith(key + ":")), "")
            mine_row = next((r for r in mine.splitlines() if r.startswith(key + ":")), "")
            real_kernel = "[kernel]" in real_row
            assert ("[kernel]" in mine_row) == real_kernel, (op, key, real_row, mine_row)
            if real_kernel:
                assert mine_row.split("autocast_mode.cpp:")[1] == real_row.split("autocast_mode.cpp:")[1]


def _stale_cache_program(m):
    """A nested autocast with another dtype fills the weight cache; the cache outlives the nested exit
    and is keyed by the tensor only, so the outer (bfloat16) mm gets the float16 weight back."""
    w = m.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    x = m.tensor([[1.0, 2.0], [3.0, 4.0]])
    with m.autocast("cpu"):
        with m.autocast("cpu", dtype=m.float16):
            inner = str(m.mm(x, w).dtype)
        try:
            m.mm(x, w)
            outer = "no error"
        except RuntimeError as e:
            outer = str(e)
    return inner, outer


def test_the_weight_cache_ignores_the_dtype_it_was_cast_to():
    assert _stale_cache_program(lt) == (
        "torch.float16", "expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != c10::Half"
    )


def test_the_stale_cache_surprise_agrees(torch_ref):
    assert _stale_cache_program(lt) == _stale_cache_program(torch_ref)


def test_key_set_views_show_autocast_switched_on():
    """The key-set view of the first dispatch: AutocastCPU comes from the tensor, nothing removes it."""
    from labsupport.tools.keyset_view import keyset_text

    a = lt.randn(2, 2)
    for enabled in (False, True):
        with lab.trace() as rec:
            with lt.autocast("cpu", enabled=enabled):
                lt.mm(a, a)
        first = next(f for f in rec.frames if f.layer == "dispatcher")
        assert (lab.DispatchKey.AutocastCPU in first.parts["tls_exclude"]) is not enabled
        assert (lab.DispatchKey.AutocastCPU in first.key_set) is enabled
        text = keyset_text(int(first.key_set), parts=first.parts)
        assert text.startswith("DispatchKeySet(CPU, AutogradCPU, AutocastCPU)" if enabled else "DispatchKeySet(CPU, AutogradCPU)")
