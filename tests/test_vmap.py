"""vmap on the FuncTorchBatched key (labsupport/functorch): the lab against PyTorch 2.13, and the
lab on its own.

Tests that compare with PyTorch take the ``torch_ref`` fixture (skipped without PyTorch); the rest
run on the lab alone. Random cases use fixed seeds, so a failure names a reproducible case.
"""

from __future__ import annotations

import random
import re
import warnings

import numpy as np
import pytest

import labsupport as lab
import labsupport.torch as lt
from labsupport.functorch import (
    get_dynamic_layer_stack,
    get_unwrapped,
    is_batchedtensor,
    maybe_current_level,
    maybe_get_bdim,
    maybe_get_level,
    set_vmap_fallback_enabled,
    set_vmap_fallback_warning_enabled,
)

K = lab.DispatchKey
DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64}
FALLBACK_WORDS = "There is a performance drop because we have not yet implemented the batching rule for"


def lab_tensor(array: np.ndarray):
    dtype = getattr(lt, str(array.dtype))
    array = np.array(array)  # np.take of a 1-d array gives a numpy scalar
    return lt.Tensor._make(array, tuple(array.shape), dtype, lt.device("cpu"))


def names(ks) -> set[str]:
    return {k.name for k in ks} if not isinstance(ks, str) else set(re.findall(r"\w+", ks[len("DispatchKeySet") :]))


@pytest.fixture
def custom_op():
    """A lab operator with only a CPU kernel (no batching rule), like a torch.library op."""
    lib = lab.Library("vmaptest", "DEF")
    lib.define("mysub(Tensor self, Tensor other) -> Tensor")
    lib.impl("mysub", lambda a, b: lt.sub(a, b), "CPU")
    yield lab.ops.vmaptest.mysub.default
    lib.close()


# ------------------------------------------------------------------ lab only: keys, TLS, levels


def test_batched_tensor_keeps_backend_keys_and_adds_functorch_batched():
    seen = {}

    def f(a):
        seen["keys"] = lab.dispatch_keys(a)
        seen["include"] = lab.tls_include_set()
        seen["exclude"] = lab.tls_exclude_set()
        return a.sin()

    lt.vmap(f)(lt.randn(5, 3))
    assert names(seen["keys"]) == {"CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU", "FuncTorchBatched"}
    assert not seen["keys"].has(K.Batched)  # not the legacy key of exercise ex07
    inc = names(seen["include"])
    assert inc == {
        "BackendSelect",
        "ADInplaceOrView",
        "FuncTorchDynamicLayerFrontMode",
        "FuncTorchDynamicLayerBackMode",
    }
    assert seen["exclude"] == lab.autocast_dispatch_keyset
    assert names(lab.tls_include_set()) == {"BackendSelect", "ADInplaceOrView"}


def test_levels_start_at_one_nest_and_are_reused():
    seen = []

    def inner(b, a):
        seen.append((maybe_get_level(b), maybe_get_level(a), maybe_current_level(), len(get_dynamic_layer_stack())))
        return b * a

    def outer(a):
        seen.append((maybe_get_level(a), maybe_get_bdim(a), maybe_current_level()))
        return lt.vmap(lambda b: inner(b, a))(a)

    x = lt.randn(2, 3, 4)
    out = lt.vmap(outer)(x)
    assert tuple(out.shape) == (2, 3, 3, 4)
    assert seen == [(1, 0, 1), (2, 1, 2, 2)]
    lt.vmap(outer)(x)
    assert seen[2:] == seen[:2]  # a second vmap gets level 1 again
    assert maybe_current_level() is None and maybe_get_level(out) == -1 and not is_batchedtensor(out)


def test_get_unwrapped_peels_one_level():
    seen = {}

    def inner(b):
        one = get_unwrapped(b)
        seen["l2"] = (tuple(b.shape), maybe_get_level(b))
        seen["l1"] = (tuple(one.shape), maybe_get_level(one))
        seen["plain"] = (tuple(get_unwrapped(one).shape), maybe_get_level(get_unwrapped(one)))
        return b

    lt.vmap(lambda a: lt.vmap(inner)(a))(lt.randn(2, 3, 4))
    assert seen == {"l2": ((4,), 2), "l1": ((3, 4), 1), "plain": ((2, 3, 4), -1)}


def test_in_dims_keeps_the_batch_dim_where_it_is():
    seen = {}
    lt.vmap(lambda a: seen.setdefault("bdim", maybe_get_bdim(a)) and a, in_dims=1)(lt.randn(4, 3))
    assert seen["bdim"] == 1


def test_repr_is_pytorchs():
    seen = {}
    x = lab_tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    lt.vmap(lambda a: seen.setdefault("r", repr(a)) and a)(x)
    assert seen["r"] == (
        "BatchedTensor(lvl=1, bdim=0, value=\n    tensor([[0., 1.],\n            [2., 3.],\n            [4., 5.]])\n)"
    )


# ------------------------------------------------------------------ lab only: values against a loop

LAB_UNARY = {
    "neg": lambda a: lt.neg(a),
    "sin": lambda a: a.sin(),
    "cos": lambda a: lt.cos(a),
    "sum": lambda a: a.sum(),
    "sum0": lambda a: lt.sum(a, 0),
    "sum_keep": lambda a: lt.sum(a, [-1], keepdim=True),
}
LAB_BINARY = {
    "add": lambda a, b: lt.add(a, b),
    "add_alpha": lambda a, b: lt.add(a, b, alpha=2),
    "sub": lambda a, b: lt.sub(a, b),
    "mul": lambda a, b: a * b,
    "chain": lambda a, b: lt.mul(lt.add(a, b).sin(), b),
}


def _loop(fn, arrays, in_dims, batch):
    outs = []
    for i in range(batch):
        args = [lab_tensor(np.take(a, i, axis=d)) if d is not None else lab_tensor(a) for a, d in zip(arrays, in_dims)]
        outs.append(fn(*args).numpy())
    return np.stack(outs)


@pytest.mark.parametrize("seed", range(25))
def test_vmap_equals_a_python_loop_on_the_lab(seed):
    rng = np.random.default_rng(seed)
    r = random.Random(seed)
    batch = r.randint(1, 4)
    binary = r.random() < 0.6
    name, fn = r.choice(list((LAB_BINARY if binary else LAB_UNARY).items()))
    shape = tuple(r.randint(1, 3) for _ in range(r.randint(1 if name.startswith("sum") else 0, 2)))
    arrays, in_dims = [], []
    for i in range(2 if binary else 1):
        arg_shape = shape[r.randint(0, len(shape)) :] if i else shape
        d = None if (i and r.random() < 0.4) else r.randint(0, len(arg_shape))
        full = list(arg_shape)
        if d is not None:
            full.insert(d, batch)
        arrays.append(rng.standard_normal(full).astype(np.float32))
        in_dims.append(d)
    if all(d is None for d in in_dims):
        in_dims[0] = 0
        arrays[0] = rng.standard_normal((batch, *arrays[0].shape)).astype(np.float32)
    got = lt.vmap(fn, in_dims=tuple(in_dims))(*[lab_tensor(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), _loop(fn, arrays, in_dims, batch), rtol=1e-6, atol=1e-6)


def test_in_place_ops_write_into_the_batch():
    x = lab_tensor(np.zeros((3, 2), np.float32))
    y = lab_tensor(np.arange(6, dtype=np.float32).reshape(2, 3))

    def f(a, b):
        a.add_(b)
        a.mul_(b)
        return a

    out = lt.vmap(f, in_dims=(0, 1))(x, y)
    expected = (np.arange(6, dtype=np.float32).reshape(2, 3).T) ** 2
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(x.numpy(), expected)  # written through the batch dim
    z = lab_tensor(np.zeros((3, 2), np.float32))
    lt.vmap(lambda a: a.fill_(2.0))(z)
    assert (z.numpy() == 2).all()


def test_unbatched_output_is_expanded_and_out_dims_moves_the_batch_dim():
    x = lt.randn(3, 4)
    assert tuple(lt.vmap(lambda a: lt.zeros(2))(x).shape) == (3, 2)
    assert tuple(lt.vmap(lt.sin, out_dims=1)(x).shape) == (4, 3)
    assert tuple(lt.vmap(lambda a: lt.ones(2), out_dims=None)(x).shape) == (2,)
    a, b = lt.vmap(lambda a: (a, a.sum()), out_dims=(1, 0))(x)
    assert tuple(a.shape) == (4, 3) and tuple(b.shape) == (3,)


def test_expand_rule():
    x = lt.randn(3, 4)
    assert tuple(lt.vmap(lambda a: a.expand(2, 4))(x).shape) == (3, 2, 4)
    with pytest.raises(RuntimeError, match=re.escape("expand: the number of sizes provided (1) must be greater")):
        lt.vmap(lambda a: a.expand(3))(lt.randn(5, 2, 3))


# ------------------------------------------------------------------ lab only: fallback, errors, randomness


def test_for_loop_fallback_warns_and_loops(custom_op):
    x, y = lt.randn(3, 2), lt.randn(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = lt.vmap(custom_op, in_dims=(0, None))(x, y)
        lt.vmap(custom_op, in_dims=(0, None))(x, y)
    assert [str(w.message) for w in caught] == [
        f"{FALLBACK_WORDS} vmaptest::mysub. Please file us an issue on GitHub so that we can prioritize its implementation."
    ] * 2
    assert all(w.category is UserWarning for w in caught)
    np.testing.assert_allclose(out.numpy(), (lt.sub(x, y)).numpy())


def test_fallback_switches(custom_op):
    x = lt.randn(3, 2)
    set_vmap_fallback_warning_enabled(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lt.vmap(custom_op)(x, x)
    finally:
        set_vmap_fallback_warning_enabled(True)
    set_vmap_fallback_enabled(False)
    try:
        with pytest.raises(RuntimeError, match="vmaptest::mysub hit the vmap fallback which is currently disabled"):
            lt.vmap(custom_op)(x, x)
    finally:
        set_vmap_fallback_enabled(True)


def test_nested_vmap_through_the_fallback(custom_op):
    x = lt.randn(2, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = lt.vmap(lambda a: lt.vmap(lambda b: custom_op(b, a))(a))(x)
    expected = x.numpy()[:, :, None, :] - x.numpy()[:, None, :, :]
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_out_variants_are_refused_by_the_fallback():
    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "Batching rule not implemented for aten::add.out; the fallback path doesn't work on out= or view ops."
        ),
    ):
        lt.vmap(lambda a: lt.add(a, a, out=lt.empty(2)))(lt.randn(3, 2))


def test_randomness():
    with pytest.raises(RuntimeError, match="vmap: called random operation while in randomness error mode"):
        lt.vmap(lambda a: lt.randn(2))(lt.randn(3, 2))
    same = lt.vmap(lambda a: lt.randn(2) + a * 0, randomness="same")(lt.randn(3, 2)).numpy()
    assert (same == same[0]).all()
    diff = lt.vmap(lambda a: lt.randn(2) + a * 0, randomness="different")(lt.randn(3, 2)).numpy()
    assert not (diff == diff[0]).all()


def test_item_and_control_flow_errors():
    with pytest.raises(RuntimeError, match=re.escape("vmap: It looks like you're calling .item() on a Tensor.")):
        lt.vmap(lambda a: a.sum().item())(lt.randn(3, 2))
    with pytest.raises(
        RuntimeError, match="vmap: It looks like you're attempting to use a Tensor in some data-dependent"
    ):
        lt.vmap(lambda a: lt.neg(a) if a.sum() else a)(lt.randn(3, 2))


# ------------------------------------------------------------------ lab only: what the tools show


def test_trace_shows_the_functorch_frames():
    x, y = lt.randn(3, 2), lt.randn(3, 2)
    with lab.trace() as rec:
        lt.vmap(lt.add)(x, y)
    frames = [(f.torch_name, f.key.name if f.key is not None else None) for f in rec.frames]
    keys = [k for _, k in frames if k]
    assert keys == [
        "FuncTorchDynamicLayerFrontMode",
        "FuncTorchBatched",
        "FuncTorchDynamicLayerBackMode",
        "AutogradCPU",
        "CPU",
    ]
    names_ = [n for n, _ in frames]
    order = [
        "at::functorch::dynamicLayerFrontFallback",
        "at::functorch::VmapInterpreterPtr::processImpl",
        "at::functorch::add_Tensor_generated_plumbing",
        "at::functorch::binary_pointwise_batch_rule",
        "at::functorch::dynamicLayerBackFallback",
        "torch::autograd::VariableType::(anonymous namespace)::add_Tensor",
        "at::(anonymous namespace)::wrapper_CPU_add_Tensor",
    ]
    positions = [names_.index(n) for n in order]
    assert positions == sorted(positions)


def test_profiler_sees_the_aten_op():
    x = lt.randn(3, 2)
    with lab.profiler.profile() as prof:
        lt.vmap(lambda a: lt.add(a, a).sin())(x)
    table = prof.key_averages().table()
    assert "aten::add" in table and "aten::sin" in table


def test_dump_table_rows_name_the_batch_rule_files():
    def row(op, key):
        return next(line for line in lab.dispatcher.dump_table(op).splitlines() if line.startswith(key + ":"))

    assert row("aten::add.Tensor", "FuncTorchBatched") == (
        "FuncTorchBatched: registered at aten/src/ATen/functorch/BatchRulesBinaryOps.cpp:353 [kernel]"
    )
    assert "BatchRulesUnaryOps.cpp:63 [kernel]" in row("aten::sin", "FuncTorchBatched")
    assert "BatchRulesReduceOps.cpp:458 [kernel]" in row("aten::sum.dim_IntList", "FuncTorchBatched")
    assert "LegacyBatchingRegistrations.cpp:730 [backend fallback]" in row("aten::add.out", "FuncTorchBatched")
    assert "BatchRulesRandomness.cpp:375 [kernel]" in row("aten::randn", "FuncTorchVmapMode")


def test_vmap_is_exported():
    assert lab.vmap is lt.vmap


# ------------------------------------------------------------------ against PyTorch 2.13

TORCH_UNARY = ["neg", "sin", "cos", "sum", "sum0", "sum_keep", "expand"]
TORCH_BINARY = ["add", "add_alpha", "sub", "mul", "chain"]


def _fns(torch, name):
    return {
        "neg": lambda a: torch.neg(a),
        "sin": lambda a: a.sin(),
        "cos": lambda a: torch.cos(a),
        "sum": lambda a: a.sum(),
        "sum0": lambda a: torch.sum(a, 0),
        "sum_keep": lambda a: torch.sum(a, [-1], keepdim=True),
        "expand": lambda a: a.expand(2, *a.shape),
        "add": lambda a, b: torch.add(a, b),
        "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
        "sub": lambda a, b: torch.sub(a, b),
        "mul": lambda a, b: a * b,
        "chain": lambda a, b: torch.mul(torch.add(a, b).sin(), b),
    }[name]


def _case(seed):
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    binary = r.random() < 0.6
    name = r.choice(TORCH_BINARY if binary else TORCH_UNARY)
    batch = r.randint(1, 4)
    ndim = r.randint(1 if name.startswith("sum") else 0, 3)
    shape = tuple(r.randint(1, 3) for _ in range(ndim))
    arrays, in_dims = [], []
    for i in range(2 if binary else 1):
        arg_shape = shape[r.randint(0, len(shape)) :] if i else shape
        d = None if (i and r.random() < 0.3) else r.randint(-len(arg_shape) - 1, len(arg_shape))
        full = list(arg_shape)
        if d is not None:
            full.insert(d % (len(arg_shape) + 1), batch)
        dtype = r.choice(list(DTYPES.values()))
        a = rng.standard_normal(full) * 3
        arrays.append(np.array(a, dtype=dtype))
        in_dims.append(d)
    out_dims = r.randint(-1, 0 if name == "sum" else 1)
    return name, arrays, tuple(in_dims), out_dims


@pytest.mark.parametrize("seed", range(60))
def test_random_programs_agree_with_pytorch(torch_ref, seed):
    name, arrays, in_dims, out_dims = _case(seed)
    results = {}
    for side, mod, make in (("lab", lt, lab_tensor), ("torch", torch_ref, lambda a: torch_ref.from_numpy(a.copy()))):
        try:
            out = mod.vmap(_fns(mod, name), in_dims=in_dims, out_dims=out_dims)(*[make(a) for a in arrays])
            results[side] = (np.asarray(out.numpy()), str(out.dtype).replace("torch.", ""), tuple(out.shape))
        except Exception as error:
            results[side] = (type(error).__name__, str(error).split("\n")[0][:60])
    lab_r, torch_r = results["lab"], results["torch"]
    if isinstance(torch_r[0], str):
        assert lab_r == torch_r, (name, in_dims, out_dims)
        return
    assert not isinstance(lab_r[0], str), (lab_r, name, in_dims)
    assert lab_r[1:] == torch_r[1:], (name, in_dims, out_dims, [a.dtype for a in arrays])
    np.testing.assert_allclose(lab_r[0], torch_r[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(16))
def test_nested_vmap_agrees_with_pytorch(torch_ref, seed):
    """Two levels: the inner vmap maps over a tensor batched at level 1 and closes over it too.
    Shapes that do not broadcast must fail on both sides with the same words."""
    rng = np.random.default_rng(seed)
    r = random.Random(seed)
    a = rng.standard_normal((r.randint(1, 3), r.randint(1, 3), r.randint(1, 3))).astype(np.float32)
    inner_dim = r.choice([0, 1, -1])
    out_dim = r.choice([0, 1])

    def program(mod):
        def outer(x):
            inner = mod.vmap(lambda y: mod.add(mod.mul(y, x), y.sin()), in_dims=inner_dim, out_dims=out_dim)
            return inner(x)

        return outer

    def run(mod, make):
        try:
            return mod.vmap(program(mod))(make(a)).numpy()
        except Exception as error:
            return type(error).__name__, str(error).split("\n")[0]

    got = run(lt, lab_tensor)
    want = run(torch_ref, lambda x: torch_ref.from_numpy(x.copy()))
    if isinstance(want, tuple):
        assert got == want
        return
    assert not isinstance(got, tuple), got
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_tls_and_keys_agree_with_pytorch(torch_ref):
    seen = {}

    def lab_f(a):
        seen["lab"] = (names(lab.dispatch_keys(a)), names(lab.tls_include_set()))
        return a

    def torch_f(a):
        seen["torch"] = (
            names(str(torch_ref._C._dispatch_keys(a))),
            names(str(torch_ref._C._dispatch_tls_local_include_set())),
        )
        return a

    lt.vmap(lab_f)(lt.randn(3, 2))
    torch_ref.vmap(torch_f)(torch_ref.randn(3, 2))
    assert seen["lab"] == seen["torch"]


def test_tls_inside_a_batched_kernel_agrees_with_pytorch(torch_ref):
    """A kernel registered on FuncTorchBatched sees the TLS VmapInterpreter set up."""
    seen = {}
    tlib = torch_ref.library.Library("h12vmapchk", "DEF")
    tlib.define("peek(Tensor self) -> Tensor")

    def torch_kernel(x):
        seen["torch"] = (
            names(str(torch_ref._C._dispatch_tls_local_include_set())),
            names(str(torch_ref._C._dispatch_tls_local_exclude_set())),
        )
        return torch_ref._C._functorch.get_unwrapped(x).clone()

    tlib.impl("peek", torch_kernel, "FuncTorchBatched")
    llib = lab.Library("h12vmapchk", "DEF")
    llib.define("peek(Tensor self) -> Tensor")

    def lab_kernel(x):
        seen["lab"] = (names(lab.tls_include_set()), names(lab.tls_exclude_set()))
        return lt.neg(lt.neg(get_unwrapped(x)))

    llib.impl("peek", lab_kernel, "FuncTorchBatched")
    try:
        torch_ref.vmap(torch_ref.ops.h12vmapchk.peek)(torch_ref.randn(3, 2))
    except Exception:
        pass
    try:
        lt.vmap(lab.ops.h12vmapchk.peek.default)(lt.randn(3, 2))
    except Exception:
        pass
    lab_inc, lab_exc = seen["lab"]
    torch_inc, torch_exc = seen["torch"]
    assert lab_inc == torch_inc
    # the lab prints excluded autograd as AutogradOther/AutogradNestedTensor like PyTorch; compare the
    # functionality keys both have
    assert {k for k in torch_exc if not k.startswith("Autograd")} - {k for k in lab_exc} == set()
    assert "FuncTorchDynamicLayerBackMode" not in torch_exc and "FuncTorchDynamicLayerBackMode" not in lab_exc


def test_fallback_warning_words_agree_with_pytorch(torch_ref):
    x = torch_ref.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch_ref.vmap(torch_ref.special.chebyshev_polynomial_t, in_dims=(0, None))(x, torch_ref.tensor(2.0))
    words = [str(w.message) for w in caught if FALLBACK_WORDS in str(w.message)]
    assert words and words[0].startswith(FALLBACK_WORDS + " aten::special_chebyshev_polynomial_t. Please file us")
    # PyTorch's C++ warning adds "(Triggered internally at .../BatchedFallback.cpp:82.)"; the lab's does not
    assert "so that we can prioritize its implementation. (Triggered internally at" in words[0]
    assert words[0].rstrip(")").endswith("aten/src/ATen/functorch/BatchedFallback.cpp:82.")


def test_batching_rule_sites_agree_with_pytorch(torch_ref):
    for op in ["add.Tensor", "add_.Tensor", "sub.Tensor", "mul.Tensor", "mul_.Tensor", "neg", "sin", "cos",
               "sum", "sum.dim_IntList", "fill_.Scalar", "zero_", "copy_", "expand", "add.out", "sin.out",
               "empty.memory_format", "zeros", "ones", "randn", "normal_", "mm", "matmul", "mv", "dot",
               "mm.out", "_to_copy", "to.dtype"]:  # fmt: skip
        for key in ("FuncTorchBatched", "FuncTorchVmapMode"):
            real = next(
                line
                for line in torch_ref._C._dispatch_dump_table("aten::" + op).splitlines()
                if line.startswith(key + ":")
            )
            mine = next(
                line for line in lab.dispatcher.dump_table("aten::" + op).splitlines() if line.startswith(key + ":")
            )
            assert mine == real.replace("/__w/pytorch/pytorch/", ""), op


def _mm_case(rng: random.Random, op: str):
    """A random vmap over mm, mv, dot or matmul: which operand is batched, where its batch dim sits,
    sizes (sometimes 0), dtype."""
    batch, n, k, m = (rng.randint(0, 4) if rng.random() < 0.1 else rng.randint(1, 4) for _ in range(4))
    dtype = rng.choice(["float32", "float64", "int64"])
    kind = {"mm": "mm", "mv": "mv", "dot": "dot"}.get(op) or rng.choice(["mm", "mv", "dot"])
    logical = {"mm": ((n, k), (k, m)), "mv": ((n, k), (k,)), "dot": ((k,), (k,))}[kind]
    in_dims = rng.choice([(0, 0), (0, None), (None, 0), (0, 0), (1, 0), (0, 1), (2, None), (None, 2)])
    in_dims = tuple(None if d is None else min(d, len(shape)) for d, shape in zip(in_dims, logical))
    shapes = []
    for shape, bdim in zip(logical, in_dims):
        shape = list(shape)
        if bdim is not None:
            shape.insert(bdim, batch)
        shapes.append(tuple(shape))
    arrays = [np.asarray(np.random.default_rng(rng.randrange(2**32)).integers(-5, 5, size=s)).astype(dtype)
              for s in shapes]  # fmt: skip
    return arrays, in_dims


@pytest.mark.parametrize("op", ["mm", "mv", "dot", "matmul"])
def test_vmap_linear_algebra_agrees_with_pytorch(torch_ref, op):
    """Randomized: values, shapes, dtypes equal PyTorch's, and none warns (the rules of mm, mv, dot;
    matmul's decomposition, which reaches them through the per-example ranks)."""
    rng = random.Random(1713)
    for _ in range(40):
        arrays, in_dims = _mm_case(rng, op)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            real = torch_ref.vmap(getattr(torch_ref, op), in_dims=in_dims)(*map(torch_ref.from_numpy, arrays))
            mine = lt.vmap(getattr(lt, op), in_dims=in_dims)(*map(lab_tensor, arrays))
        assert tuple(mine.shape) == tuple(real.shape), (op, in_dims, [a.shape for a in arrays])
        assert str(mine.dtype) == str(real.dtype)
        np.testing.assert_allclose(mine.numpy(), real.numpy(), rtol=1e-6)


def test_vmap_dtype_conversion_agrees_with_pytorch(torch_ref):
    """``to(dtype)`` is decomposed (to.dtype's composite kernel on FuncTorchBatchedDecomposition) into
    ``_to_copy``, whose rule is the basic unary one: no warning, PyTorch's values and dtypes."""
    rng = np.random.default_rng(1719)
    for in_dim in (0, 1):
        array = rng.standard_normal((3, 4))
        for name in ("float32", "int64", "float64"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                real = torch_ref.vmap(lambda t, n=name: t.to(getattr(torch_ref, n)), in_dims=in_dim)(
                    torch_ref.from_numpy(array)
                )
                mine = lt.vmap(lambda t, n=name: t.to(getattr(lt, n)), in_dims=in_dim)(lab_tensor(array))
            assert str(mine.dtype) == str(real.dtype) and tuple(mine.shape) == tuple(real.shape)
            np.testing.assert_array_equal(mine.numpy(), real.numpy())


def test_nested_vmap_mm_agrees_with_pytorch(torch_ref):
    """Randomized nested vmap over mm: each operand batched at the inner level, the outer, both or
    neither (not both unbatched at one level), batch dims anywhere."""
    rng = random.Random(1717)
    choices = [(0, 0), (0, None), (None, 0), (1, 0), (0, 1)]
    for _ in range(30):
        inner, outer = rng.choice(choices), rng.choice(choices)
        n, k, m, b_in, b_out = (rng.randint(1, 4) for _ in range(5))
        arrays = []
        for logical, i_dim, o_dim in (((n, k), inner[0], outer[0]), ((k, m), inner[1], outer[1])):
            shape = list(logical)
            if i_dim is not None:
                shape.insert(min(i_dim, len(shape)), b_in)
            if o_dim is not None:
                shape.insert(min(o_dim, len(shape)), b_out)
            arrays.append(np.random.default_rng(rng.randrange(2**32)).standard_normal(shape))
        in_inner = tuple(None if d is None else min(d, 2) for d in inner)
        in_outer = tuple(None if d is None else min(d, 2 + (i is not None)) for d, i in zip(outer, inner))

        def run(mod, tensors, in_inner=in_inner, in_outer=in_outer):
            return mod.vmap(mod.vmap(mod.mm, in_dims=in_inner), in_dims=in_outer)(*tensors)

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            real = run(torch_ref, [torch_ref.from_numpy(a) for a in arrays])
            mine = run(lt, [lab_tensor(a) for a in arrays])
        assert tuple(mine.shape) == tuple(real.shape), (inner, outer, [a.shape for a in arrays])
        np.testing.assert_allclose(mine.numpy(), real.numpy(), rtol=1e-6, atol=1e-12)


def test_vmap_mm_runs_the_rule_and_folds_into_mm():
    """The trace: matmul's decomposition on FuncTorchBatched, then mm's plumbing and rule, which
    folds a batched self into one at::mm (no for-loop, so one mm call, not one per example)."""
    a, b = lt.randn(4, 2, 3), lt.randn(3, 5)
    table = lab.dispatcher.dump_table("aten::matmul")
    assert "FuncTorchBatched: registered at aten/src/ATen/functorch/BatchRulesDecompositions.cpp:35 " \
        "[batched kernel]" in table
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with lab.trace() as t:
            lt.vmap(lt.matmul, in_dims=(0, None))(a, b)
    text = str(t)
    assert "mm_generated_plumbing" in text and "mm_batch_rule" in text
    frames = [line.split()[2] for line in text.splitlines()[1:] if len(line.split()) > 2]
    assert frames.count("at::native::structured_mm_out_cpu::impl") == 1  # one mm for the batch, no per-example loop
    assert "at::functorch::batchedTensorForLoopFallback" not in frames
    assert frames.index("at::native::matmul") < frames.index("at::functorch::mm_batch_rule")


@pytest.mark.parametrize(
    "case",
    [
        "rank",        # a logical vector: mm's rule rejects it with PyTorch's words
        "bmm_dtype",   # both batched, dtypes differ: bmm's check
        "fold_dtype",  # self batched only: the folded mm's dtype check
        "bmm_size",    # both batched, inner sizes differ
        "fold_size",   # self batched only, inner sizes differ: the folded shapes in mm's words
        "bmm_bool",
        "matmul_0d",
        "mv_rank",
        "dot_rank",
    ],
)
def test_vmap_mm_errors_agree_with_pytorch(torch_ref, case):
    def run(m, arrays, in_dims=0, op="mm"):
        tensors = [m.from_numpy(a) if m is torch_ref else lab_tensor(a) for a in arrays]
        return m.vmap(getattr(m, op), in_dims=in_dims)(*tensors)

    f32, f64 = np.float32, np.float64
    cases = {
        "rank": ([np.ones((3, 4), f32), np.ones((3, 4, 5), f32)], 0, "mm"),
        "bmm_dtype": ([np.ones((3, 2, 4), f32), np.ones((3, 4, 5), f64)], 0, "mm"),
        "fold_dtype": ([np.ones((3, 2, 4), f32), np.ones((4, 5), f64)], (0, None), "mm"),
        "bmm_size": ([np.ones((3, 2, 4), f32), np.ones((3, 3, 5), f32)], 0, "mm"),
        "fold_size": ([np.ones((3, 2, 4), f32), np.ones((3, 5), f32)], (0, None), "mm"),
        "bmm_bool": ([np.ones((3, 2, 2), bool), np.ones((3, 2, 2), bool)], 0, "mm"),
        "matmul_0d": ([np.ones(3, f32), np.ones(3, f32)], 0, "matmul"),
        "mv_rank": ([np.ones((3, 4), f32), np.ones((3, 4), f32)], 0, "mv"),
        "dot_rank": ([np.ones((3, 2, 4), f32), np.ones((3, 4), f32)], 0, "dot"),
    }
    arrays, in_dims, op = cases[case]
    with pytest.raises(Exception) as real:
        run(torch_ref, arrays, in_dims, op)
    with pytest.raises(Exception) as mine:
        run(lt, arrays, in_dims, op)
    assert type(mine.value) is type(real.value)
    assert str(mine.value) == str(real.value)


def _matmul_case(rng, op="matmul"):
    """Per-example shapes of ranks 1..3 for matmul (bmm: both 3-D), each operand batched at a random
    dim or not (not both unbatched)."""
    k, n, m, b, batch = (rng.randint(1, 3) for _ in range(5))
    shapes = [rng.choice([(k,), (n, k), (b, n, k), (1, n, k)]), rng.choice([(k,), (k, m), (b, k, m), (1, k, m)])]
    if op == "bmm":
        shapes = [rng.choice([(b, n, k), (b, n, k), (n, k)]), rng.choice([(b, k, m), (b, k + 1, m)])]
    dims = rng.choice([(0, 0), (0, None), (None, 0), (1, 0), (0, 1), (-1, 0)])
    arrays, in_dims = [], []
    for shape, dim in zip(shapes, dims, strict=True):
        physical = list(shape)
        if dim is not None:
            dim = min(dim, len(shape)) if dim >= 0 else -1
            physical.insert(dim if dim >= 0 else len(physical), batch)
        arrays.append(np.random.default_rng(rng.randrange(2**32)).standard_normal(physical))
        in_dims.append(dim)
    return arrays, tuple(in_dims)


@pytest.mark.parametrize("op", ["matmul", "bmm"])
def test_vmap_matmul_every_rank_and_bmm_agree_with_pytorch(torch_ref, op):
    """Randomized: matmul's per-example ranks 1-D..3-D (so 2-D..4-D physical, through mm's, mv's,
    dot's, bmm's and the view ops' rules) and bmm under vmap: shapes, values and errors equal PyTorch's,
    and none warns (no for-loop fallback)."""
    rng = random.Random(1723 if op == "matmul" else 1729)
    for _ in range(40):
        arrays, in_dims = _matmul_case(rng, op)
        case = (op, in_dims, [a.shape for a in arrays])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                real = torch_ref.vmap(getattr(torch_ref, op), in_dims=in_dims)(*map(torch_ref.from_numpy, arrays))
            except RuntimeError as e:
                with pytest.raises(RuntimeError) as mine_err:
                    lt.vmap(getattr(lt, op), in_dims=in_dims)(*map(lab_tensor, arrays))
                assert str(mine_err.value) == str(e), case
                continue
            mine = lt.vmap(getattr(lt, op), in_dims=in_dims)(*map(lab_tensor, arrays))
        assert tuple(mine.shape) == tuple(real.shape), case
        np.testing.assert_allclose(mine.numpy(), real.numpy(), rtol=1e-9, atol=1e-12, err_msg=str(case))


def test_vmap_bmm_rank_error_and_rule_row(torch_ref):
    for m in (torch_ref, lt):
        a, b = m.ones(3, 2, 4), m.ones(3, 2, 4, 5)
        with pytest.raises(RuntimeError) as err:
            m.vmap(m.bmm)(a, b)
        assert str(err.value) == ("Shape mismatch: Got incorrect dims for bmm(a, b). a has dim 2and b has dim 3"
                                  "but expected them to have dim 3 and dim 3")
    real = torch_ref._C._dispatch_dump_table("aten::bmm")
    row = next(r for r in real.splitlines() if r.startswith("FuncTorchBatched:"))
    assert row.split("functorch/")[1] in lab.dispatcher.dump_table("aten::bmm")


ERROR_CASES = {
    "mismatch": lambda m: m.vmap(m.add)(m.randn(3, 4), m.randn(5, 4)),
    "in_dim_range": lambda m: m.vmap(m.sin, in_dims=2)(m.randn(3, 4)),
    "in_dims_none": lambda m: m.vmap(m.sin, in_dims=None)(m.randn(3, 4)),
    "all_none": lambda m: m.vmap(m.sin, in_dims=(None,))(m.randn(3, 4)),
    "structure": lambda m: m.vmap(m.add, in_dims=(0,))(m.randn(3, 4), m.randn(3, 4)),
    "float_arg": lambda m: m.vmap(lambda a, b: a, in_dims=(0, 0))(m.randn(3), 1.0),
    "returns_float": lambda m: m.vmap(lambda a: 1.0)(m.randn(3)),
    "out_dim_none_batched": lambda m: m.vmap(lambda a: a, out_dims=None)(m.randn(3)),
    "no_inputs": lambda m: m.vmap(m.sin)(),
    "out_dims_range": lambda m: m.vmap(m.sin, out_dims=3)(m.randn(3, 2)),
    "in_dims_str": lambda m: m.vmap(m.sin, in_dims="a")(m.randn(3, 2)),
    "out_structure": lambda m: m.vmap(m.sin, out_dims=(0, 0))(m.randn(3, 2)),
    "zero_dim": lambda m: m.vmap(m.sin)(m.ones([])),
    "sum_dim": lambda m: m.vmap(lambda a: a.sum(1))(m.randn(3, 4)),
    "expand": lambda m: m.vmap(lambda a: a.expand(3))(m.randn(5, 2, 3)),
    "add_out": lambda m: m.vmap(lambda a: m.add(a, a, out=a))(m.randn(3, 2)),
    "randn": lambda m: m.vmap(lambda a: m.randn(2))(m.randn(3, 2)),
    "randomness": lambda m: m.vmap(m.sin, randomness="x")(m.randn(3, 2)),
    "item": lambda m: m.vmap(lambda a: a.sum().item())(m.randn(3, 2)),
    "chunk_size": lambda m: m.vmap(m.sin, chunk_size=0)(m.ones(3)),
    "in_dim_float": lambda m: m.vmap(m.add, in_dims=(0, 0.5))(m.ones(3), m.ones(3)),
    "in_dims_list": lambda m: m.vmap(m.sin, in_dims=[0])(m.ones(3)),
    "nested_structure": lambda m: m.vmap(lambda p: p[0], in_dims=((0, 0, 0),))((m.ones(3), m.ones(3))),
    "inplace_unbatched_self": lambda m: m.vmap(lambda a, b: a.add_(b), in_dims=(None, 0))(m.zeros(2), m.ones(3, 2)),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_agree_with_pytorch(torch_ref, case):
    def run(mod):
        try:
            ERROR_CASES[case](mod)
        except Exception as error:
            return type(error).__name__, str(error).split("\n")[0]
        return None

    real, mine = run(torch_ref), run(lt)
    assert real is not None
    assert mine is not None, real
    assert mine[0] == real[0]
    assert mine[1][:80] == real[1][:80]


def test_profiler_events_agree_with_pytorch(torch_ref):
    """Pointwise rules call one aten op per op. (PyTorch's reduction rule for ``sum`` also records
    ``as_strided`` and ``fill_``, which the lab's numpy-level dim moves do not; not compared here.)"""
    from torch.profiler import profile

    data = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    real_x, lab_x = torch_ref.from_numpy(data.copy()), lab_tensor(data)
    with profile() as real:
        torch_ref.vmap(lambda t: torch_ref.mul(torch_ref.add(t, t).sin(), t))(real_x)
    with lab.profiler.profile() as mine:
        lt.vmap(lambda t: lt.mul(lt.add(t, t).sin(), t))(lab_x)
    real_names = [e.name for e in real.events() if e.name.startswith("aten::")]
    assert [e.name for e in mine.events()] == real_names


INPLACE = {
    "add_": lambda m: lambda a, b: a.add_(b, alpha=2),
    "mul_": lambda m: lambda a, b: a.mul_(b),
    "sub_": lambda m: lambda a, b: a.sub_(b),
    "copy_": lambda m: lambda a, b: a.copy_(b),
    "fill_": lambda m: lambda a, b: a.fill_(3.5),
    "neg_sin_": lambda m: lambda a, b: a.neg_().sin_(),
    "zero_": lambda m: lambda a, b: a.zero_(),
}


@pytest.mark.parametrize("seed", range(30))
def test_in_place_ops_agree_with_pytorch(torch_ref, seed):
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    name = r.choice(sorted(INPLACE))
    batch, shape = r.randint(1, 3), tuple(r.randint(1, 3) for _ in range(r.randint(0, 2)))
    self_dim = r.choice([None, *range(len(shape) + 1)])
    other_shape = shape[r.randint(0, len(shape)) :]
    other_dim = r.choice([None, *range(len(other_shape) + 1)])
    if self_dim is None and other_dim is None:
        self_dim = 0

    def make(s, d):
        full = list(s)
        if d is not None:
            full.insert(d, batch)
        return np.array(rng.standard_normal(full), dtype=np.float32)

    a, b = make(shape, self_dim), make(other_shape, other_dim)
    results = {}
    for side, mod, conv in (("lab", lt, lab_tensor), ("torch", torch_ref, lambda x: torch_ref.from_numpy(x.copy()))):
        ta, tb = conv(a), conv(b)
        try:
            out = mod.vmap(INPLACE[name](mod), in_dims=(self_dim, other_dim))(ta, tb)
            results[side] = (np.asarray(out.numpy()), np.asarray(ta.numpy()))
        except Exception as error:  # both sides must fail alike
            results[side] = (type(error).__name__, str(error).split("\n")[0][:50])
    lab_r, torch_r = results["lab"], results["torch"]
    if isinstance(torch_r[0], str):
        assert lab_r == torch_r, (name, self_dim, other_dim)
        return
    assert not isinstance(lab_r[0], str), (lab_r, name, self_dim, other_dim)
    for mine, real in zip(lab_r, torch_r):
        np.testing.assert_allclose(mine, real, rtol=1e-5, atol=1e-6)


def test_in_place_fallback_writes_each_slice(custom_op):
    lib = lab.Library("vmaptest2", "DEF")
    lib.define("bump_(Tensor(a!) self, Tensor other) -> Tensor(a!)")
    lib.impl("bump_", lambda s, o: s.add_(o), "CPU")
    try:
        x = lab_tensor(np.zeros((2, 3), np.float32))
        y = lab_tensor(np.arange(3, dtype=np.float32))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = lt.vmap(lab.ops.vmaptest2.bump_.default, in_dims=(1, 0))(x, y)
        assert FALLBACK_WORDS + " vmaptest2::bump_." in str(caught[0].message)
        np.testing.assert_array_equal(x.numpy(), np.tile(np.arange(3, dtype=np.float32), (2, 1)))
        assert tuple(out.shape) == (3, 2)
    finally:
        lib.close()


def test_kwargs_are_passed_unbatched():
    x = lab_tensor(np.ones((3, 2), np.float32))
    out = lt.vmap(lambda a, *, scale: lt.mul(a, scale))(x, scale=lab_tensor(np.array([2.0, 3.0], np.float32)))
    np.testing.assert_array_equal(out.numpy(), np.tile([2.0, 3.0], (3, 1)))


def test_plain_calls_outside_vmap_never_touch_functorch():
    """The common path: no FuncTorch key in a plain call's key set, and no functorch frame in its trace."""
    x = lt.randn(2)
    with lab.trace() as rec:
        lt.add(x, x)
    assert not any("functorch" in f.torch_name for f in rec.frames)
    assert [f.key.name for f in rec.frames if f.key is not None] == ["AutogradCPU", "CPU"]


def test_in_place_fallback_agrees_with_pytorch(torch_ref):
    tlib = torch_ref.library.Library("h12vmapinpl", "DEF")
    tlib.define("bump_(Tensor(a!) self, Tensor other) -> Tensor(a!)")
    tlib.impl("bump_", lambda s, o: s.add_(o), "CPU")
    llib = lab.Library("h12vmapinpl", "DEF")
    llib.define("bump_(Tensor(a!) self, Tensor other) -> Tensor(a!)")
    llib.impl("bump_", lambda s, o: s.add_(o), "CPU")
    try:
        outcomes = []
        for mod, op, conv in (
            (torch_ref, torch_ref.ops.h12vmapinpl.bump_, lambda a: torch_ref.from_numpy(a.copy())),
            (lt, lab.ops.h12vmapinpl.bump_.default, lab_tensor),
        ):
            x, y = conv(np.zeros((2, 3), np.float32)), conv(np.arange(3, dtype=np.float32))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = mod.vmap(op, in_dims=(1, 0))(x, y)
                try:
                    mod.vmap(op, in_dims=(None, 0))(conv(np.zeros(3, np.float32)), y)
                    error = None
                except RuntimeError as e:
                    error = str(e)
            outcomes.append((x.numpy().tolist(), tuple(out.shape), error))
        assert outcomes[0] == outcomes[1]
    finally:
        llib.close()


def test_nested_in_dims_and_dict_inputs_agree_with_pytorch(torch_ref):
    def run(mod, make):
        x, y = make(np.arange(6, dtype=np.float32).reshape(3, 2)), make(np.array([10.0, 20.0], np.float32))
        pair = mod.vmap(lambda p: mod.add(p[0], p[1]), in_dims=((0, None),))((x, y))
        named = mod.vmap(lambda d: mod.mul(d["a"], d["b"]), in_dims=({"a": 1, "b": None},))(
            {"a": x, "b": make(np.array([2.0, 3.0, 4.0], np.float32))}
        )
        return pair.numpy().tolist(), named.numpy().tolist()

    assert run(lt, lab_tensor) == run(torch_ref, lambda a: torch_ref.from_numpy(a.copy()))


def test_gradients_flow_through_vmap_when_no_batch_dim_moves(torch_ref):
    """Autograd runs below BackMode on the plain values, so vmap(f)(x).sum().backward() fills x.grad.
    (The lab moves batch dims with numpy, outside autograd: with in_dims/out_dims other than 0, or a
    padded operand, the lab's graph is cut where PyTorch's movedim/view would record a node.)"""
    data = np.array([[0.5, 1.0], [1.5, 2.0], [2.5, 3.0]], np.float32)
    grads = []
    for mod, make in ((lt, lab_tensor), (torch_ref, lambda a: torch_ref.from_numpy(a.copy()))):
        x = make(data)
        x.requires_grad_(True)
        mod.vmap(lambda a: mod.mul(mod.sin(a), a).sum())(x).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


@pytest.mark.parametrize("in_dim", [0, 1, 2])
def test_vmap_squeeze_in_place_agrees_with_pytorch(torch_ref, in_dim):
    """squeeze_ / squeeze_.dim / squeeze_.dims under vmap (LegacyBatchingRegistrations.cpp's rules):
    the BatchedTensor itself changes; logical dims only, wherever the batch dim sits."""
    programs = {
        "all": lambda t: t.mul(1).squeeze_(),
        "dim": lambda t: t.mul(1).squeeze_(0),
        "neg_dim": lambda t: t.mul(1).squeeze_(-1),
        "dims": lambda t: t.mul(1).squeeze_([0, 1]),
    }
    logical = [1, 3, 1]
    array = np.random.default_rng(in_dim).standard_normal([*logical[:in_dim], 2, *logical[in_dim:]])
    for name, fn in programs.items():
        real = torch_ref.vmap(fn, in_dims=in_dim)(torch_ref.from_numpy(array))
        mine = lt.vmap(fn, in_dims=in_dim)(lab_tensor(array))
        assert tuple(mine.shape) == tuple(real.shape), name
        np.testing.assert_allclose(mine.numpy(), real.numpy(), err_msg=name)
    for op in ("squeeze_", "squeeze_.dim", "squeeze_.dims"):
        real_row = next(r for r in torch_ref._C._dispatch_dump_table(f"aten::{op}").splitlines()
                        if r.startswith("FuncTorchBatched:"))
        assert real_row.split("functorch/")[1] in lab.dispatcher.dump_table(f"aten::{op}")
