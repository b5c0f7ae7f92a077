"""Checks of exercise 07: the boxed for-loop fallback for the Batched key.

The learner's fallback is registered with ``Library("_", "IMPL").fallback(fn, "Batched",
with_keyset=True)`` on a fresh dispatcher that gets its own copy of the generated front end. (A
fresh dispatcher starts with PyTorch's start-up fallbacks, one of which sits on Batched; the grader
clears that slot first, as a backend would that takes the key over.) Operators are called through
the at:: functions API, so the dispatcher sees the BatchedTensor's key set.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from labsupport.grade.checking import CheckFailed, Context, Exercise
from labsupport.grade.instruments import observing
from labsupport.grade.tensors import FLOAT_DTYPES, make, random_array, random_shape, same_values, short

EXERCISE = Exercise(
    id="ex07",
    number=7,
    title="A boxed fallback: batching every operator with a for loop",
    filename="ex07_boxed_fallback.py",
    notebook="07 (boxing, fallbacks, BackendSelect)",
)


def fresh_build_with_fallback(fallback: Any, name: str = "grade-ex07") -> tuple[ModuleType, Any]:
    """The default front end on a new dispatcher, with ``fallback`` as the Batched backend fallback."""
    import labsupport as lab
    from labsupport.c10.dispatch_key_set import SLOT_OF_KEY
    from labsupport.codegen import load_build

    dispatcher = lab.Dispatcher(name)
    dispatcher.fallbacks[SLOT_OF_KEY[lab.DispatchKey.Batched]] = None  # drop the start-up passthrough
    dispatcher._refresh_all()
    build = load_build(name="torch", dispatcher=dispatcher)
    library = lab.Library("_", "IMPL", dispatcher=dispatcher)
    library.fallback(fallback, "Batched", with_keyset=True)
    return build, library


def state(ctx: Context) -> tuple[ModuleType, Any]:
    if "build" not in ctx.cache:
        try:
            ctx.cache["build"] = fresh_build_with_fallback(ctx.function("batched_for_loop_fallback"))
        except CheckFailed:
            raise
        except Exception as error:
            ctx.cache["build"] = error
    value = ctx.cache["build"]
    if isinstance(value, Exception):
        raise CheckFailed(
            f"registering batched_for_loop_fallback for Batched failed: {type(value).__name__}: {value}",
            "keep the signature batched_for_loop_fallback(op, ks, stack)",
        )
    return value


def batched(ctx: Context, build: ModuleType, array: np.ndarray) -> Any:
    return ctx.function("make_batched")(make(build.python_variable_methods.Tensor, array))


def unbatched(ctx: Context, build: ModuleType, array: np.ndarray) -> Any:
    return make(build.python_variable_methods.Tensor, array)


def read_batched(ctx: Context, what: str, result: Any) -> np.ndarray:
    """The full (batch-first) data of a result that must be a batched tensor."""
    import labsupport as lab

    if not hasattr(result, "_ks"):
        raise CheckFailed(
            f"{what} returned {type(result).__name__}, not a tensor",
            "push the stacked results onto the stack (stack.append(...))",
        )
    if not lab.DispatchKeySet.from_raw(result._ks).has(lab.DispatchKey.Batched):
        raise CheckFailed(
            f"{what} returned a tensor without the Batched key",
            f"wrap the stacked result with make_batched ({ctx.where('stack_results')})",
        )
    full = ctx.function("unwrap_batched")(result)
    if getattr(full, "_data", None) is None:
        raise CheckFailed(f"{what}: the batched result wraps no data", "")
    return full._data


def compare(ctx: Context, what: str, result: Any, expected: np.ndarray, inputs: str) -> None:
    got = read_batched(ctx, what, result)
    if got.shape != expected.shape:
        raise CheckFailed(
            f"{what}: the batched result has shape {list(got.shape)} (batch first), expected "
            f"{list(expected.shape)}\n{inputs}",
            "stack the per-element results along a new first dimension",
        )
    if not same_values(got, expected):
        raise CheckFailed(
            f"{what}:\n{inputs}\n  expected {short(expected)}\n  got      {short(got)}",
            f"call the operator once per batch element on that element ({ctx.where('batched_for_loop_fallback')})",
        )


def random_batch(rng: Any, *, min_dims: int = 0) -> tuple[int, tuple[int, ...], str]:
    size = int(rng.integers(2, 6))
    return size, random_shape(rng, min_dims=min_dims, max_dims=2), FLOAT_DTYPES[int(rng.integers(2))]




# ---- the checks -----------------------------------------------------------------------------------


@EXERCISE.check("7.1", "add of two batched tensors (with and without alpha)", 2)
def add_batched(ctx: Context) -> str:
    build, _ = state(ctx)
    rng = ctx.rng()
    for n in range(1, 5):
        size, shape, dtype = random_batch(rng)
        a, b = random_array(rng, (size, *shape), dtype), random_array(rng, (size, *shape), dtype)
        alpha = 1 if n % 2 else int(rng.integers(2, 5))
        result = build.functions.add(batched(ctx, build, a), batched(ctx, build, b), alpha)
        compare(
            ctx,
            f"case {n}: add(batched, batched, alpha={alpha})",
            result,
            a + alpha * b,
            f"  batch of {size} x {list(shape)} {dtype}",
        )
    return "4 random batches: add(x, y, alpha) per element"


@EXERCISE.check("7.2", "a batched and an unbatched argument", 2)
def mixed(ctx: Context) -> str:
    build, _ = state(ctx)
    rng = ctx.rng()
    for n in range(1, 5):
        size, shape, dtype = random_batch(rng, min_dims=1)
        a, w = random_array(rng, (size, *shape), dtype), random_array(rng, shape, dtype)
        if n % 2:
            result, expected, name = build.functions.mul(batched(ctx, build, a), unbatched(ctx, build, w)), a * w, "mul"
        else:
            result, expected, name = build.functions.add(unbatched(ctx, build, w), batched(ctx, build, a)), w + a, "add"
        compare(
            ctx,
            f"case {n}: {name} of a batched and an unbatched tensor",
            result,
            expected,
            f"  batch of {size} x {list(shape)}, unbatched {list(shape)}",
        )
    return "mul(batched, plain) and add(plain, batched): the plain tensor is used for every element"


@EXERCISE.check("7.3", "unary operators: sin and neg", 2)
def unary(ctx: Context) -> str:
    build, _ = state(ctx)
    rng = ctx.rng()
    for n in range(1, 5):
        size, shape, dtype = random_batch(rng)
        a = random_array(rng, (size, *shape), dtype)
        compare(
            ctx,
            f"case {n}: sin(batched)",
            build.functions.sin(batched(ctx, build, a)),
            np.sin(a),
            f"  batch of {size} x {list(shape)} {dtype}",
        )
        compare(
            ctx,
            f"case {n}: neg(batched)",
            build.functions.neg(batched(ctx, build, a)),
            -a,
            f"  batch of {size} x {list(shape)} {dtype}",
        )
    return "sin and neg per element"


@EXERCISE.check("7.4", "reductions: sum and sum over a dim", 2)
def reductions(ctx: Context) -> str:
    build, _ = state(ctx)
    rng = ctx.rng()
    for n in range(1, 4):
        size, shape, dtype = random_batch(rng, min_dims=1)
        a = random_array(rng, (size, *shape), dtype)
        x = batched(ctx, build, a)
        compare(
            ctx,
            f"case {n}: sum(batched)",
            build.functions.sum(x),
            a.reshape(size, -1).sum(axis=1),
            f"  batch of {size} x {list(shape)} {dtype}",
        )
        dim = int(rng.integers(len(shape)))
        keepdim = bool(n % 2)
        compare(
            ctx,
            f"case {n}: sum(batched, dim=[{dim}], keepdim={keepdim})",
            build.functions.sum_dim_IntList(x, [dim], keepdim),
            a.sum(axis=dim + 1, keepdims=keepdim),
            f"  batch of {size} x {list(shape)} {dtype}; dim and keepdim are not tensors: pass them on as they are",
        )
    return "sum and sum(dim, keepdim) per element (non-tensor arguments passed through)"


@EXERCISE.check("7.5", "one call per batch element, below Batched; the boxed stack", 2)
def per_element(ctx: Context) -> str:
    import labsupport as lab

    build, _ = state(ctx)
    rng = ctx.rng()
    size, shape, dtype = random_batch(rng)
    a = random_array(rng, (size, *shape), dtype)
    x = batched(ctx, build, a)
    batched_bit = int(lab.DispatchKeySet(lab.DispatchKey.Batched))
    before = int(lab.tls_exclude_set())
    with observing() as log:
        build.functions.neg(x)
    if int(lab.tls_exclude_set()) != before:
        ctx.fail(
            "after the call, the thread-local exclude set was not restored",
            "use `with lab.ExcludeDispatchKeyGuard(...)` as a context manager",
        )
    neg = [(key, ks) for name, key, ks, _ in log.events if name == "aten::neg"]
    if not neg or neg[0][0].name != "Batched":
        ctx.fail(f"the first neg kernel was {neg[0][0].name if neg else 'none'}, expected the Batched fallback", "")
    inner = neg[1:]
    cpu = [ks for key, ks in inner if key.name == "CPU"]
    if len(cpu) != size:
        ctx.fail(
            f"neg on a batch of {size} reached the CPU kernel {len(cpu)} times, expected {size}",
            "call op.call_boxed once per batch element",
        )
    leaked = [key.name for key, ks in inner if ks & batched_bit]
    if leaked:
        ctx.fail(
            f"inner calls still had the Batched key in their key set (kernels: {leaked})",
            "pass the elements (plain tensors), and run the loop under lab.ExcludeDispatchKeyGuard(Batched)",
        )
    stack = [x]  # a boxed call: the stack must end up holding exactly the results
    build.dispatcher.find_schema_or_throw("aten::neg").call_boxed(stack)
    if len(stack) != 1 or stack[0] is x:
        ctx.fail(
            f"after a boxed call of neg on a batched tensor the stack holds {len(stack)} value(s): "
            f"{[type(v).__name__ for v in stack]}; expected just the result",
            "a boxed kernel pops its arguments from the stack (del stack[-n:]) and pushes its results",
        )
    compare(ctx, "neg through call_boxed", stack[0], -a, f"  batch of {size} x {list(shape)} {dtype}")
    return (
        "one Batched fallback call, then one CPU call per batch element without the Batched key; "
        "arguments popped, results pushed"
    )
