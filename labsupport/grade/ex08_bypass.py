"""Checks of exercise 08: torch.add bypassing the dispatcher, "before" and "after" side by side.

* before: the lab's default ops.yaml, loaded on its own dispatcher;
* after:  ``patch_ops_yaml(<default ops.yaml>)`` written to a temporary file and built with
  ``manual=<learner module>`` (the hand-written ``add`` replaces at::add and Tensor.add) and
  ``kernels=[<learner module>]`` (where the yaml's ``dispatch:`` names are found); then
  ``<learner module>.bind(after)`` so that ``add`` can reach ``functions.__dispatch_add``.

Test A and Test B of seed 000 use ``labsupport.grade.instruments`` (the lab's profiler and
instruction counter, with small fallbacks of the grader's own).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from labsupport.grade.checking import CheckFailed, Context, Exercise
from labsupport.grade.tensors import broadcast_partner, describe, make, random_array, random_shape, same_values, short

EXERCISE = Exercise(
    id="ex08",
    number=8,
    title="Bypass the dispatcher for torch.add",
    filename="ex08_bypass.py",
    notebook="08 (bypass the dispatcher)",
)

ADD_TENSOR = "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
DTYPES = ("float32", "float64", "int64", "int32")


def default_yaml() -> str:
    from labsupport.codegen.build import DEFAULT_OPS_YAML

    return DEFAULT_OPS_YAML.read_text()


def after_yaml(ctx: Context) -> str:
    if "yaml" not in ctx.cache:
        text = ctx.function("patch_ops_yaml")(default_yaml())
        if not isinstance(text, str):
            ctx.fail(f"patch_ops_yaml returned {type(text).__name__}, not the yaml text", "")
        ctx.cache["yaml"] = text
    return ctx.cache["yaml"]


def before_and_after(module: ModuleType, out_dir: str | Path | None = None) -> tuple[ModuleType, ModuleType]:
    """The "before" build (default ops.yaml) and the "after" build of ``module`` (usable from notebook 08).

    ``module`` provides ``patch_ops_yaml``, the hand-written ``add`` and the kernels its yaml names;
    ``bind(after)`` is called so that ``add`` can reach the dispatcher path.
    """
    import labsupport as lab
    from labsupport.codegen import load_build
    from labsupport.grade.tensors import scratch_dir

    folder = Path(out_dir) if out_dir is not None else scratch_dir("bypass")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ops_after.yaml"
    path.write_text(module.patch_ops_yaml(default_yaml()))
    before = load_build(name="torch", dispatcher=lab.Dispatcher("before"))
    after = load_build(
        path, "after", manual=module, kernels=[module], out_dir=folder / "after", dispatcher=lab.Dispatcher("after")
    )
    bind = getattr(module, "bind", None)
    if callable(bind):
        bind(after)
    return before, after


def builds(ctx: Context) -> tuple[ModuleType, ModuleType]:
    """(before, after), made once per grading run; a failure is reported by every check."""
    if "builds" not in ctx.cache:
        after_yaml(ctx)  # patch_ops_yaml's own errors are reported as they are
        try:
            ctx.cache["builds"] = before_and_after(ctx.module)
        except Exception as error:
            ctx.cache["builds"] = error
    value = ctx.cache["builds"]
    if isinstance(value, Exception):
        raise CheckFailed(
            f"building the after ops.yaml failed:\n{type(value).__name__}: {value}",
            "the yaml's dispatch: names must be kernels defined in your file (add_functional, "
            "add_functional_meta), and `add` must exist for manual_cpp_binding",
        )
    return value


def tensor(
    b: ModuleType,
    array: np.ndarray | None,
    *,
    shape: tuple[int, ...] | None = None,
    dtype: str | None = None,
    device: str = "cpu",
) -> Any:
    return make(b.python_variable_methods.Tensor, array, shape=shape, dtype=dtype, device=device)


def call_both(before: ModuleType, after: ModuleType, fn: Any) -> tuple[Any, Any]:
    """``fn(build)`` on both builds; an exception is returned instead of raised."""
    results = []
    for b in (before, after):
        try:
            results.append(fn(b))
        except Exception as error:
            results.append(error)
    return results[0], results[1]


def same_result(ctx: Context, what: str, before: Any, after: Any) -> None:
    if isinstance(before, Exception) or isinstance(after, Exception):
        if isinstance(before, Exception) and isinstance(after, Exception) and type(before) is type(after):
            return  # both refuse the call the same way (e.g. a float alpha with int tensors)
        if isinstance(after, Exception):
            after_text = f"raised {type(after).__name__}: {after}"
            if type(after).__name__ == "NotImplementedError" and str(after).startswith("ex08"):
                raise after
        else:
            after_text = f"returned {describe(after)}"
        before_text = (
            f"raised {type(before).__name__}: {before}"
            if isinstance(before, Exception)
            else f"returned {describe(before)}"
        )
        ctx.fail(
            f"{what}: before the change it {before_text}; after it {after_text}",
            f"add() must behave exactly like the generated at::add ({ctx.where('add')})",
        )
    if (
        tuple(after._sizes) != tuple(before._sizes)
        or after._dtype is not before._dtype
        or after._device is not before._device
    ):
        ctx.fail(
            f"{what}: before {describe(before)}, after {describe(after)}",
            "the result's sizes, dtype and device must not change (broadcasting and type promotion)",
        )
    if before._data is None:
        if after._data is not None:
            ctx.fail(f"{what}: a meta result came back with data", "")
        return
    if after._data is None or not same_values(after._data, before._data, exact=True):
        ctx.fail(
            f"{what}:\n  before {short(before._data)}\n  after  {short(getattr(after, '_data', None))}",
            f"call the same structured kernel (meta(), then impl()) ({ctx.where('add')})",
        )


def yaml_entries(text: str) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(text)
    return data


def find_entry(entries: list[dict[str, Any]], func: str) -> dict[str, Any] | None:
    return next((e for e in entries if str(e.get("func", "")).strip() == func), None)


def covers(dispatch: dict[str, Any], key: str) -> bool:
    """Does a ``dispatch:`` block give ``key`` a kernel (directly, in a "CPU, CUDA" list, or by an alias)?"""
    for keys in dispatch:
        names = {k.strip() for k in str(keys).split(",")}
        if key in names or names & {"CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"}:
            return True
    return False


# ---- the checks -----------------------------------------------------------------------------------


@EXERCISE.check("8.1", "the after ops.yaml and its build", 2)
def yaml_change(ctx: Context) -> str:
    original = yaml_entries(default_yaml())
    patched_text = after_yaml(ctx)
    try:
        patched = yaml_entries(patched_text)
    except Exception as error:
        ctx.fail(f"patch_ops_yaml returned text that is not valid YAML: {error}", "")
    if not isinstance(patched, dict) or "native_functions" not in patched:
        ctx.fail("the patched yaml has no native_functions section", "change only the add.Tensor entry")
    if patched.get("derivatives") != original.get("derivatives"):
        ctx.fail("the patched yaml changed the derivatives section", "change only the add.Tensor entry")
    before_entries, after_entries = original["native_functions"], patched["native_functions"]
    if len(after_entries) != len(before_entries):
        ctx.fail(
            f"the patched yaml has {len(after_entries)} native_functions entries, the original {len(before_entries)}",
            "change only the add.Tensor entry",
        )
    for old, new in zip(before_entries, after_entries):
        if str(old.get("func")).strip() != ADD_TENSOR and old != new:
            ctx.fail(f"the entry {old.get('func')} changed too", "change only the add.Tensor entry")
    entry = find_entry(after_entries, ADD_TENSOR)
    if entry is None:
        ctx.fail("the patched yaml has no add.Tensor entry", "keep its func: line unchanged")
    problems = []
    if entry.get("manual_cpp_binding") is not True:
        problems.append("manual_cpp_binding: True is missing")
    for field in ("structured_delegate", "structured", "structured_inherits"):
        if field in entry:
            problems.append(f"it still has {field}: (add.Tensor must no longer be structured)")
    if "function" not in str(entry.get("variants", "")) or "method" not in str(entry.get("variants", "")):
        problems.append("variants must stay 'function, method'")
    dispatch = entry.get("dispatch") or {}
    for key in ("CPU", "Meta"):
        if not covers(dispatch, key):
            problems.append(f"dispatch: has no kernel for {key} (the dispatcher path needs one)")
    if problems:
        ctx.fail(
            "the add.Tensor entry after patch_ops_yaml:\n  " + "\n  ".join(problems),
            f"see the module docstring of the exercise ({ctx.where('patch_ops_yaml')})",
        )
    _, after = builds(ctx)
    if after.functions.add is not getattr(ctx.module, "add", None):
        ctx.fail(
            "in the after build, at::add is not your add()", "manual_cpp_binding: True makes functions.add = manual.add"
        )
    if not hasattr(after.functions, "__dispatch_add"):
        ctx.fail("the after build has no functions.__dispatch_add", "")
    return (
        "only add.Tensor changed (manual_cpp_binding, no structured_delegate, CPU/Meta kernels); "
        "the build uses your add"
    )


@EXERCISE.check("8.2", "same results as before: values, dtypes, broadcasting", 2)
def same_results(ctx: Context) -> str:
    before, after = builds(ctx)
    rng = ctx.rng()
    n = 0
    for n in range(1, 25):
        shape = random_shape(rng, max_dims=3)
        other = broadcast_partner(rng, shape)
        if n % 3 == 0:
            shape, other = other, shape
        d1, d2 = DTYPES[int(rng.integers(len(DTYPES)))], DTYPES[int(rng.integers(len(DTYPES)))]
        a, c = random_array(rng, shape, d1), random_array(rng, other, d2)
        alpha: Any = [1, 2, -3, 0.5][n % 4]
        what = f"case {n}: torch.add({d1}{list(shape)}, {d2}{list(other)}, alpha={alpha})"

        def functional(b: ModuleType, a: np.ndarray = a, c: np.ndarray = c, alpha: Any = alpha) -> Any:
            return b.python_torch_functions.add(tensor(b, a), tensor(b, c), alpha=alpha)

        same_result(ctx, what, *call_both(before, after, functional))
        if n % 4 == 1:

            def method(b: ModuleType, a: np.ndarray = a, c: np.ndarray = c) -> Any:
                return tensor(b, a).add(tensor(b, c))

            same_result(
                ctx,
                f"case {n}: x.add(y) with x {d1}{list(shape)}, y {d2}{list(other)}",
                *call_both(before, after, method),
            )
        if n % 4 == 2:
            scalar = float(np.round(rng.standard_normal(), 3))

            def with_number(b: ModuleType, a: np.ndarray = a, scalar: float = scalar) -> Any:
                return b.python_torch_functions.add(tensor(b, a), scalar)

            same_result(
                ctx, f"case {n}: torch.add({d1}{list(shape)}, {scalar})", *call_both(before, after, with_number)
            )
    return f"{n} random calls (broadcasting, mixed dtypes, alpha, Tensor.add, Python numbers) give identical results"


@EXERCISE.check("8.3", "other devices still take the dispatcher path (cuda, meta)", 2)
def other_devices(ctx: Context) -> str:
    from labsupport.grade.instruments import op_counts

    before, after = builds(ctx)
    rng = ctx.rng()
    for device in ("cuda", "meta"):
        for n in range(1, 4):
            shape = random_shape(rng, min_dims=1)
            other = broadcast_partner(rng, shape)
            a, c = random_array(rng, shape, "float32"), random_array(rng, other, "float32")

            def call(b: ModuleType, a: np.ndarray = a, c: np.ndarray = c, device: str = device) -> Any:
                return b.python_torch_functions.add(tensor(b, a, device=device), tensor(b, c, device=device))

            same_result(
                ctx,
                f"{device} case {n}: torch.add({describe(tensor(after, a, device=device))}, "
                f"{describe(tensor(after, c, device=device))})",
                *call_both(before, after, call),
            )
        counts, instrument = op_counts(lambda device=device: call(after))
        if counts.get("aten::add", 0) < 1:
            ctx.fail(
                f"a {device} add in the after build never entered the dispatcher ({instrument} saw {counts})",
                "for non-CPU tensors, call build.functions.__dispatch_add",
            )
    return "cuda and meta tensors go through functions.__dispatch_add and give the same results as before"


@EXERCISE.check("8.4", "Test A: the profiler no longer sees aten::add on CPU", 2)
def profiler_sees_no_add(ctx: Context) -> str:
    from labsupport.grade.instruments import op_counts

    before, after = builds(ctx)
    rng = ctx.rng()
    shape = random_shape(rng, min_dims=1)
    a, c = random_array(rng, shape, "float32"), random_array(rng, shape, "float32")
    runs = {}
    for label, b in (("before", before), ("after", after)):
        x, y = tensor(b, a), tensor(b, c)
        counts, instrument = op_counts(lambda b=b, x=x, y=y: b.python_torch_functions.add(x, y))
        runs[label] = counts
    if runs["before"].get("aten::add", 0) < 1:
        ctx.fail(
            f"the before build's torch.add was not profiled ({instrument} saw {runs['before']})",
            "this is a problem of the lab, not of your exercise",
        )
    if runs["after"].get("aten::add", 0):
        ctx.fail(
            f"the profiler still saw aten::add {runs['after']['aten::add']} time(s) in the after build "
            f"(all it saw: {runs['after']})",
            f"for CPU tensors, call the kernel directly instead of the dispatcher ({ctx.where('add')})",
        )
    seen = ", ".join(f"{k} x{v}" for k, v in runs["before"].items())
    return f"before: {seen}; after: no aten::add (measured with {instrument})"


@EXERCISE.check("8.5", "Test B: fewer instructions per call", 2)
def fewer_instructions(ctx: Context) -> str:
    from labsupport.grade.instruments import instructions_per_call

    before, after = builds(ctx)
    rng = ctx.rng()
    shape = (3, 4)  # a fixed shape: the count is printed, and must be the same every run
    a, c = random_array(rng, shape, "float32"), random_array(rng, shape, "float32")
    counts = {}
    for label, b in (("before", before), ("after", after)):
        x, y = tensor(b, a), tensor(b, c)
        add = b.python_torch_functions.add
        counts[label], instrument = instructions_per_call(lambda add=add, x=x, y=y: add(x, y))
    if counts["after"] >= counts["before"]:
        ctx.fail(
            f"torch.add costs {counts['after']} instructions per call after the change, {counts['before']} "
            "before: the bypass should be cheaper",
            f"the CPU path of add() should go straight to the kernel ({ctx.where('add')})",
        )
    saved = 100.0 * (counts["before"] - counts["after"]) / counts["before"]
    return (
        f"torch.add on CPU: {counts['before']} -> {counts['after']} bytecode instructions per call "
        f"({saved:.0f}% fewer; {instrument})"
    )
