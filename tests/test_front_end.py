"""The generated front end (``labsupport.torch``) against PyTorch 2.13: values, dtypes, shapes and
refusals of add/sub/mul (alpha, broadcasting, promotion, out=, in-place, methods), and gradients."""

from __future__ import annotations

import itertools
import operator
import random

import numpy as np
import pytest

import labsupport.torch as lt

DTYPES = ["bool", "int64", "float16", "float32", "float64"]
SHAPES = [((2,), (2,)), ((3, 1), (1, 4)), ((), (3,)), ((2, 3), (3,)), ((4,), ()), ((2,), (3,))]


def _data(rng: random.Random, shape, dtype: str) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        values = [rng.random() < 0.5 for _ in range(n)]
    elif dtype == "int64":
        values = [rng.randint(-5, 5) for _ in range(n)]
    else:
        values = [round(rng.uniform(-3, 3), 3) for _ in range(n)]
    return np.array(values, dtype=dtype).reshape(shape)


def _pair(torch, array: np.ndarray, dtype: str):
    return lt.tensor(array.tolist(), dtype=getattr(lt, dtype)), torch.tensor(array.tolist(), dtype=getattr(torch, dtype))


def _run(fn):
    try:
        return fn(), None
    except Exception as error:
        return None, error


def _same(lab_result, torch_result, what):
    lab_value, lab_error = lab_result
    ref_value, ref_error = torch_result
    if ref_error is not None:
        assert lab_error is not None, f"{what}: PyTorch raised {ref_error!r}, the lab returned {lab_value!r}"
        assert type(lab_error) is type(ref_error), (what, lab_error, ref_error)
        assert str(lab_error).split("\n")[0] == str(ref_error).split("\n")[0], what
        return
    assert lab_error is None, f"{what}: the lab raised {lab_error!r}, PyTorch returned {ref_value!r}"
    assert str(lab_value.dtype) == str(ref_value.dtype), what
    assert tuple(lab_value.shape) == tuple(ref_value.shape), what
    expected = ref_value.detach().numpy()
    actual = lab_value.detach().numpy() if lab_value.requires_grad else lab_value.numpy()
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=1e-3 if expected.dtype == np.float16 else 1e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


@pytest.mark.torch
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_binary_ops_agree_with_pytorch(torch_ref, op):
    torch = torch_ref
    rng = random.Random(hash(op) % 1000)
    for (sa, sb), da, db in itertools.product(SHAPES, DTYPES, DTYPES):
        a_np, b_np = _data(rng, sa, da), _data(rng, sb, db)
        la, ta = _pair(torch, a_np, da)
        lb, tb = _pair(torch, b_np, db)
        what = f"{op}({da}{list(sa)}, {db}{list(sb)})"
        _same(_run(lambda: getattr(lt, op)(la, lb)), _run(lambda: getattr(torch, op)(ta, tb)), what)
        if op != "mul":
            for alpha in (2, 0.5, True):
                _same(
                    _run(lambda: getattr(lt, op)(la, lb, alpha=alpha)),
                    _run(lambda: getattr(torch, op)(ta, tb, alpha=alpha)),
                    f"{what} alpha={alpha}",
                )


@pytest.mark.torch
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_python_scalars_methods_and_operators(torch_ref, op):
    torch = torch_ref
    rng = random.Random(7)
    symbol = {"add": "+", "sub": "-", "mul": "*"}[op]
    py_op = getattr(operator, op)
    for dtype in DTYPES:
        la, ta = _pair(torch, _data(rng, (3,), dtype), dtype)
        for scalar in (2, -1.5, True):
            _same(_run(lambda: getattr(lt, op)(la, scalar)), _run(lambda: getattr(torch, op)(ta, scalar)),
                  f"torch.{op}({dtype}, {scalar!r})")  # fmt: skip
            _same(_run(lambda: getattr(la, op)(scalar)), _run(lambda: getattr(ta, op)(scalar)),
                  f"Tensor.{op}({dtype}, {scalar!r})")  # fmt: skip
            _same(_run(lambda: py_op(la, scalar)), _run(lambda: py_op(ta, scalar)), f"{dtype} {symbol} {scalar!r}")
            _same(_run(lambda: py_op(scalar, la)), _run(lambda: py_op(scalar, ta)), f"{scalar!r} {symbol} {dtype}")


@pytest.mark.torch
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_inplace_and_out_variants(torch_ref, op):
    torch = torch_ref
    rng = random.Random(11)
    for (sa, sb), da, db in itertools.product(SHAPES[:5], DTYPES, DTYPES):
        a_np, b_np = _data(rng, sa, da), _data(rng, sb, db)
        la, ta = _pair(torch, a_np, da)
        lb, tb = _pair(torch, b_np, db)
        what = f"{op}_({da}{list(sa)}, {db}{list(sb)})"
        _same(_run(lambda: getattr(la, op + "_")(lb)), _run(lambda: getattr(ta, op + "_")(tb)), what)
        _same((la, None), (ta, None), what + " self after")
        for out_dtype in ("int64", "float32"):
            lo, to = _pair(torch, np.zeros((0,), dtype=out_dtype), out_dtype)
            _same(_run(lambda: getattr(lt, op)(la, lb, out=lo)), _run(lambda: getattr(torch, op)(ta, tb, out=to)),
                  f"{op}(..., out={out_dtype}) {da} {db}")  # fmt: skip


@pytest.mark.torch
def test_unary_reductions_and_factories(torch_ref):
    torch = torch_ref
    rng = random.Random(3)
    for dtype in DTYPES:
        la, ta = _pair(torch, _data(rng, (2, 3), dtype), dtype)
        for name in ("neg", "sin", "cos", "sum"):
            _same(_run(lambda: getattr(lt, name)(la)), _run(lambda: getattr(torch, name)(ta)), f"{name}({dtype})")
        for dim, keepdim in ((0, False), (1, True), ((0, 1), False), (-1, False), (2, False)):
            _same(_run(lambda: lt.sum(la, dim, keepdim=keepdim)), _run(lambda: torch.sum(ta, dim, keepdim=keepdim)),
                  f"sum({dtype}, {dim}, keepdim={keepdim})")  # fmt: skip
        _same(_run(lambda: la.sum(dtype=lt.float64)), _run(lambda: ta.sum(dtype=torch.float64)), f"sum dtype {dtype}")
    for name in ("zeros", "ones"):
        for dtype in (None, "int64", "float64", "bool"):
            kw_l = {} if dtype is None else {"dtype": getattr(lt, dtype)}
            kw_t = {} if dtype is None else {"dtype": getattr(torch, dtype)}
            _same(_run(lambda: getattr(lt, name)(2, 3, **kw_l)), _run(lambda: getattr(torch, name)(2, 3, **kw_t)), name)
    assert tuple(lt.randn(4, 2).shape) == (4, 2) and lt.randn(3).dtype is lt.float32
    assert lt.randn(2, device="meta").device.type == "meta"


@pytest.mark.torch
def test_gradients_agree_with_pytorch(torch_ref):
    torch = torch_ref
    rng = random.Random(5)
    programs = [
        lambda m, x, y: (m.add(x, y, alpha=2) * x).sum(),
        lambda m, x, y: m.sub(x, y).sin().sum(),
        lambda m, x, y: (x * y).neg().sum(dim=0).sum(),
        lambda m, x, y: (x.cos() + y * 3).sum(),
        lambda m, x, y: (x + 1.5).mul(y).sum(dim=1, keepdim=True).sum(),
    ]
    for program, (sx, sy) in itertools.product(programs, [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3))]):
        x_np, y_np = _data(rng, sx, "float32"), _data(rng, sy, "float32")
        lx = lt.tensor(x_np.tolist(), requires_grad=True)
        ly = lt.tensor(y_np.tolist(), requires_grad=True)
        tx = torch.tensor(x_np.tolist(), requires_grad=True)
        ty = torch.tensor(y_np.tolist(), requires_grad=True)
        program(lt, lx, ly).backward()
        program(torch, tx, ty).backward()
        np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ly.grad.numpy(), ty.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_autograd_records_and_refuses_like_pytorch():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert y.grad_fn.name() == "MulBackward0" and y.requires_grad and not y.is_leaf
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.add_(1)
    with pytest.raises(RuntimeError, match=r"add\(\): functions with out=\.\.\. arguments don't support automatic"):
        lt.add(x, x, out=lt.zeros(2))
    with lt.no_grad():
        assert (x * x).grad_fn is None
    z = lt.tensor([1.0, 2.0])
    v = z._version
    z.add_(1)
    assert z._version == v + 1  # ADInplaceOrView bumped the version counter


def test_backward_refuses_a_saved_tensor_modified_in_place():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    y = lt.tensor([3.0, 4.0])
    z = x * y  # MulBackward0 saves y (at version 0)
    y.add_(1)  # ADInplaceOrView bumps y to version 1
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[torch.FloatTensor \[2\]\] is at version 1; expected version 0"):
        z.sum().backward()
