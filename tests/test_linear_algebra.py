"""mm (structured, with MmBackward0) and matmul (CompositeImplicitAutograd -> mm) in the lab, and
``to``/``_to_copy``; randomized agreement with PyTorch 2.13 where it is installed."""

from __future__ import annotations

import random

import numpy as np
import pytest

import labsupport as lab
import labsupport.torch as lt

DTYPES = ("float16", "bfloat16", "float32", "float64", "int64", "bool")


def _f64(module, t) -> np.ndarray:
    return t.detach().to(module.float64).numpy()


def _run(fn):
    try:
        return fn(), None
    except Exception as e:  # the error itself is compared
        return None, e


# ------------------------------------------------------------------ lab only


def test_mm_values_shapes_and_method():
    a = lt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = lt.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    expected = [[4.0, 5.0], [10.0, 11.0]]
    assert lt.mm(a, b).tolist() == expected
    assert a.mm(b).tolist() == expected
    assert lt.matmul(a, b).tolist() == expected and a.matmul(b).tolist() == expected
    assert lt.mm(lt.tensor([[1, 2]]), lt.tensor([[3], [4]])).tolist() == [[11]]


def test_mm_errors():
    a = lt.randn(2, 3)
    with pytest.raises(RuntimeError, match=r"^self must be a matrix$"):
        lt.mm(lt.randn(3), a)
    with pytest.raises(RuntimeError, match=r"^mat2 must be a matrix$"):
        lt.mm(a, lt.randn(3))
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)$"):
        lt.mm(a, a)
    with pytest.raises(RuntimeError, match=r"^expected m1 and m2 to have the same dtype, but got: float != double$"):
        lt.mm(a, lt.randn(3, 2).to(lt.float64))
    with pytest.raises(NotImplementedError, match="\"addmm_impl_cpu_\" not implemented for 'Bool'"):
        lt.mm(lt.tensor([[True]]), lt.tensor([[False]]))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        lt.mm(a, lt.randn(3, 2), out=lt.empty(2, 2, dtype=lt.float64))


def test_mm_out_and_meta():
    a, b = lt.randn(2, 3), lt.randn(3, 4)
    out = lt.empty(0)
    assert lt.mm(a, b, out=out) is out and out.shape == (2, 4)
    m = lt.mm(lt.empty(2, 3, device="meta"), lt.empty(3, 5, device="meta"))
    assert m.device.type == "meta" and tuple(m.shape) == (2, 5)


def test_matmul_ranks():
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D, but they are 0D and 2D"):
        lt.matmul(lt.tensor(1.0), lt.randn(2, 2))
    with pytest.raises(NotImplementedError, match=r"aten::matmul: the lab implements .*unsqueeze\(0\) \+ at::mm"):
        lt.matmul(lt.randn(3), lt.randn(3, 2))
    assert lt.matmul(lt.randn(3), lt.randn(3)).shape == ()
    assert lt.matmul(lt.randn(2, 3), lt.randn(3)).shape == (2,)


def test_matmul_is_a_composite_that_calls_mm():
    table = lab.dispatcher.dump_table("aten::matmul")
    assert "CPU: wrapper_CompositeImplicitAutograd__matmul [math kernel]" in table
    assert "AutogradCPU: wrapper_CompositeImplicitAutograd__matmul [math kernel]" in table
    a, b = lt.randn(2, 3, requires_grad=True), lt.randn(3, 2)
    with lab.profiler.profile() as prof:
        out = lt.matmul(a, b)
    assert prof.counts() == {"aten::matmul": 1, "aten::mm": 1}
    assert out.grad_fn.name() == "MmBackward0"


def test_to_returns_self_when_nothing_changes():
    a = lt.randn(2)
    assert a.to(lt.float32) is a
    assert a.to(lt.float32, copy=True) is not a
    assert a.to(lt.float64).dtype is lt.float64
    c = lt.randn(2, device="cuda").to(lt.float16)
    assert c.device.type == "cuda" and c.dtype is lt.float16


# ------------------------------------------------------------------ agreement with PyTorch 2.13


@pytest.mark.parametrize("seed", range(4))
def test_mm_and_matmul_agree(torch_ref, seed):
    torch = torch_ref
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    for _ in range(15):
        n, k, m = (int(v) for v in rng.integers(0, 5, size=3))
        k2 = k + 1 if pyrng.random() < 0.1 else k
        d1 = pyrng.choice(DTYPES)
        d2 = d1 if pyrng.random() < 0.7 else pyrng.choice(DTYPES)
        op = pyrng.choice(["mm", "matmul", "dot", "mv"])
        shape1 = pyrng.choice([(n, k), (k,)]) if op in ("matmul", "dot", "mv") else (n, k)
        if op == "matmul" and len(shape1) == 1:
            shape2 = (k2,)  # the lab has no 1-D x 2-D yet (a view op); see test_matmul_ranks
        else:
            shape2 = pyrng.choice([(k2, m), (k2,)]) if op in ("matmul", "dot", "mv") else (k2, m)
        x = rng.integers(-4, 5, size=shape1) if d1 in ("int64", "bool") else rng.standard_normal(shape1)
        y = rng.integers(-4, 5, size=shape2) if d2 in ("int64", "bool") else rng.standard_normal(shape2)
        la, ta = lt.tensor(x).to(getattr(lt, d1)), torch.tensor(x).to(getattr(torch, d1))
        lb, tb = lt.tensor(y).to(getattr(lt, d2)), torch.tensor(y).to(getattr(torch, d2))
        mine, my_err = _run(lambda: getattr(lt, op)(la, lb))
        real, real_err = _run(lambda: getattr(torch, op)(ta, tb))
        case = f"{op} {d1}{shape1} x {d2}{shape2}"
        if real_err is not None:
            assert type(my_err) is type(real_err) and str(my_err) == str(real_err), case
            continue
        assert my_err is None, f"{case}: {my_err}"
        assert str(mine.dtype) == str(real.dtype) and tuple(mine.shape) == tuple(real.shape), case
        np.testing.assert_allclose(_f64(lt, mine), _f64(torch, real), rtol=1e-2, atol=1e-2, err_msg=case)


@pytest.mark.parametrize(("shape1", "shape2", "node"), [
    ((3, 4), (4, 2), "MmBackward0"), ((3, 4), (4,), "MvBackward0"), ((4,), (4,), "DotBackward0"),
])
def test_matmul_gradients_agree(torch_ref, shape1, shape2, node):
    torch = torch_ref
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(shape1), rng.standard_normal(shape2)
    got = []
    for module in (lt, torch):
        a = module.tensor(x, requires_grad=True)
        b = module.tensor(y, requires_grad=True)
        out = module.matmul(a, b)
        out.mul(out).sum().backward()
        got.append((type(out.grad_fn).__name__ if module is torch else out.grad_fn.name(),
                    _f64(module, a.grad), _f64(module, b.grad)))
    assert got[0][0] == got[1][0] == node
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-10)
    np.testing.assert_allclose(got[0][2], got[1][2], rtol=1e-10)


def test_to_copy_grad_fn_agrees(torch_ref):
    torch = torch_ref
    names = []
    for module in (lt, torch):
        a = module.randn(2, 2, requires_grad=True)
        b = a.to(module.bfloat16)
        b.to(module.float32).sum().backward()
        names.append((str(b.dtype), type(b.grad_fn).__name__ if module is torch else b.grad_fn.name(),
                      str(a.grad.dtype), a.to(module.float32) is a))
    assert names[0] == names[1]


def test_profiler_names_agree(torch_ref):
    torch = torch_ref
    a, b = lt.randn(2, 3), lt.randn(3, 2)
    with lab.profiler.profile() as prof:
        lt.matmul(a, b)
        lt.mm(a, b)
        a.to(lt.float64)
    ta, tb = torch.randn(2, 3), torch.randn(3, 2)
    with torch.profiler.profile() as real:
        torch.matmul(ta, tb)
        torch.mm(ta, tb)
        ta.to(torch.float64)
    real_counts = {row.key: row.count for row in real.key_averages()}
    keys = ("aten::matmul", "aten::mm", "aten::to", "aten::_to_copy", "aten::copy_")
    assert {k: prof.counts().get(k, 0) for k in keys} == {k: real_counts.get(k, 0) for k in keys}
