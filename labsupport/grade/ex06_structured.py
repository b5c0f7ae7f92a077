"""Checks of exercise 06: the structured kernel sqdiff, built into a fresh front end.

The yaml entries (exercises/ex06_sqdiff.yaml) are appended to the lab's ops.yaml in a temporary
file; ``load_build(..., kernels=[learner module])`` then generates the wrappers around the learner's
``structured_sqdiff_Tensor`` (meta) and ``structured_sqdiff_out`` (impl). Expected results come from
the same build's own ``sub`` and ``mul`` (the lab's reference engine) and from numpy.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from labsupport.grade.checking import CheckFailed, Context, Exercise
from labsupport.grade.registry import REPO_ROOT
from labsupport.grade.tensors import broadcast_partner, describe, make, random_array, random_shape, same_values, short

EXERCISE = Exercise(
    id="ex06",
    number=6,
    title="A structured kernel: sqdiff = (self - other) ** 2",
    filename="ex06_structured.py",
    notebook="06 (structured kernels)",
)

FRAGMENT = "ex06_sqdiff.yaml"
DTYPE_PAIRS = [
    ("float32", "float32"),
    ("float64", "float64"),
    ("float32", "float64"),
    ("int64", "int64"),
    ("int32", "int64"),
    ("int64", "float32"),
    ("float64", "int32"),
    ("int32", "int32"),
]


def fragment_text(graded_folder: Path | None = None) -> str:
    """The yaml entries of sqdiff: the lab's own copy (learners do not edit it), else the graded folder's."""
    for folder in (REPO_ROOT / "exercises", graded_folder):
        if folder is not None and (folder / FRAGMENT).exists():
            return (folder / FRAGMENT).read_text()
    raise FileNotFoundError(f"{FRAGMENT} not found in the lab's exercises/ folder")


def ops_yaml_with_sqdiff(fragment: str) -> str:
    """The lab's ops.yaml with the sqdiff entries appended to native_functions."""
    from labsupport.codegen.build import DEFAULT_OPS_YAML

    text = DEFAULT_OPS_YAML.read_text()
    marker = "\nderivatives:"
    at = text.index(marker)
    at = text.rfind("\n\n", 0, at) + 1  # before the comment block that introduces derivatives
    return text[:at] + "\n" + fragment.rstrip() + "\n\n" + text[at:]


def sqdiff_build(kernels: ModuleType, out_dir: str | Path | None = None, name: str = "sqdiff") -> ModuleType:
    """Build a front end with sqdiff whose kernels come from ``kernels`` (usable from notebook 06 too)."""
    import labsupport as lab
    from labsupport.codegen import load_build
    from labsupport.grade.tensors import scratch_dir

    folder = Path(out_dir) if out_dir is not None else scratch_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    yaml_path = folder / "ops_with_sqdiff.yaml"
    yaml_path.write_text(ops_yaml_with_sqdiff(fragment_text(Path(kernels.__file__).parent)))
    return load_build(yaml_path, name, kernels=[kernels], out_dir=folder / "build", dispatcher=lab.Dispatcher(name))


def build(ctx: Context) -> ModuleType:
    """The build for this grading run (made once; a failure is reported by every check)."""
    if "build" not in ctx.cache:
        try:
            ctx.cache["build"] = sqdiff_build(ctx.module, name="grade_ex06")
        except Exception as error:
            ctx.cache["build"] = error
    value = ctx.cache["build"]
    if isinstance(value, Exception):
        raise CheckFailed(
            f"building a front end with sqdiff failed:\n{type(value).__name__}: {value}",
            f"keep the two class names of the stub in {ctx.display}",
        )
    return value


def tensors(b: ModuleType, *arrays: np.ndarray, device: str = "cpu") -> list[Any]:
    return [make(b.python_variable_methods.Tensor, a, device=device) for a in arrays]


def reference(b: ModuleType, x: Any, y: Any) -> Any:
    """(x - y) * (x - y) with the build's own sub and mul."""
    d = b.python_torch_functions.sub(x, y)
    return b.python_torch_functions.mul(d, d)


def random_pair(rng: Any, pair: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    shape = random_shape(rng, min_dims=0, max_dims=3)
    other = broadcast_partner(rng, shape)
    if rng.random() < 0.5:
        shape, other = other, shape
    return random_array(rng, shape, pair[0]), random_array(rng, other, pair[1])


def expect_same(ctx: Context, what: str, got: Any, expected: Any, a: np.ndarray, b: np.ndarray) -> None:
    """``got`` must match the reference tensor in sizes, dtype, device and values."""
    if not hasattr(got, "_sizes"):
        ctx.fail(f"{what} returned {type(got).__name__}, not a tensor", "")
    if tuple(got._sizes) != tuple(expected._sizes):
        ctx.fail(
            f"{what}: sizes {list(got._sizes)}, expected the broadcast shape {list(expected._sizes)}",
            "meta() must call build_borrowing_binary_op(self.maybe_get_output(0), self_, other)",
        )
    if got._dtype is not expected._dtype:
        ctx.fail(
            f"{what}: dtype {got._dtype}, expected {expected._dtype} (type promotion, as for sub)",
            "the output dtype comes from build_borrowing_binary_op; compute in self.common_dtype",
        )
    if got._device is not expected._device:
        ctx.fail(f"{what}: device {got._device}, expected {expected._device}", "")
    if expected._data is None:
        return
    numpy_value = np.square(a.astype(np.float64) - b.astype(np.float64)).astype(expected._data.dtype)
    if got._data is None or not same_values(got._data, expected._data):
        ctx.fail(
            f"{what}:\n  self  = {short(a)}\n  other = {short(b)}\n  expected {short(expected._data)}\n"
            f"  got      {short(got._data)}",
            f"impl() must write (a - b) * (a - b), computed in self.common_dtype, into out._data "
            f"({ctx.where('structured_sqdiff_out')})",
        )
    if not same_values(got._data, numpy_value) and got._dtype.is_floating_point:
        ctx.fail(f"{what}: {short(got._data)} differs from numpy's {short(numpy_value)}", "")


# ---- the checks -----------------------------------------------------------------------------------


@EXERCISE.check("6.1", "meta(): shapes and dtypes on meta tensors, errors", 2)
def meta(ctx: Context) -> str:
    b = build(ctx)
    rng = ctx.rng()
    tensor_type = b.python_variable_methods.Tensor
    fns = b.python_torch_functions
    for n, pair in enumerate(DTYPE_PAIRS, start=1):
        a, c = random_pair(rng, pair)
        x = make(tensor_type, None, shape=a.shape, dtype=pair[0], device="meta")
        y = make(tensor_type, None, shape=c.shape, dtype=pair[1], device="meta")
        got = fns.sqdiff(x, y)
        expected = fns.sub(x, y)
        expect_same(ctx, f"case {n}: sqdiff({describe(x)}, {describe(y)})", got, expected, a, c)
        if got._data is not None:
            ctx.fail(f"case {n}: a meta tensor came back with data", "meta tensors never run impl()")
    for sa, sb in (((2, 3), (4, 3)), ((5,), (2,))):
        x = make(tensor_type, None, shape=sa, dtype="float32", device="meta")
        y = make(tensor_type, None, shape=sb, dtype="float32", device="meta")
        try:
            fns.sqdiff(x, y)
        except RuntimeError:
            pass
        else:
            ctx.fail(
                f"sqdiff({describe(x)}, {describe(y)}) did not raise: the shapes cannot broadcast",
                "build_borrowing_binary_op checks the shapes; call it in meta()",
            )
    flags = make(tensor_type, np.array([True, False]))
    try:
        fns.sqdiff(flags, flags)
    except RuntimeError:
        pass
    else:
        ctx.fail(
            "sqdiff on bool tensors did not raise",
            f"call sub_check(self_, other) in meta() ({ctx.where('structured_sqdiff_Tensor')})",
        )
    return (
        f"{len(DTYPE_PAIRS)} dtype pairs on meta tensors: broadcast shape and promoted dtype, no data; "
        "bad shapes and bools rejected"
    )


@EXERCISE.check("6.2", "functional sqdiff: values, broadcasting, type promotion", 3)
def functional(ctx: Context) -> str:
    b = build(ctx)
    rng = ctx.rng()
    fns = b.python_torch_functions
    count = 0
    for n, pair in enumerate(DTYPE_PAIRS * 2, start=1):
        a, c = random_pair(rng, pair)
        x, y = tensors(b, a, c)
        expect_same(ctx, f"case {n}: sqdiff({describe(x)}, {describe(y)})", fns.sqdiff(x, y), reference(b, x, y), a, c)
        count += 1
    a, c = random_pair(rng, ("float32", "float32"))
    x, y = tensors(b, a, c, device="cuda")
    expect_same(ctx, f"sqdiff({describe(x)}, {describe(y)})", fns.sqdiff(x, y), reference(b, x, y), a, c)
    a = random_array(rng, random_shape(rng, min_dims=1), "int64")
    (x,) = tensors(b, a)
    scalar = float(np.round(rng.standard_normal(), 2))
    wrapped = b.python_variable_methods.scalar_to_tensor(scalar)  # a Python number, as bindings wrap it
    expected = reference(b, x, wrapped)
    value = np.array(scalar, dtype=np.float32)
    expect_same(ctx, f"sqdiff({describe(x)}, wrapped number {scalar})", fns.sqdiff(x, wrapped), expected, a, value)
    expect_same(ctx, f"x.sqdiff(wrapped number {scalar})", x.sqdiff(wrapped), expected, a, value)
    return f"{count} random CPU cases, a simulated-CUDA case and a wrapped-number case match sub-then-mul and numpy"


@EXERCISE.check("6.3", "in-place sqdiff_", 2)
def inplace(ctx: Context) -> str:
    b = build(ctx)
    rng = ctx.rng()
    for n, pair in enumerate(
        [("float32", "float32"), ("float64", "float32"), ("int64", "int32"), ("float32", "int64")], 1
    ):
        shape = random_shape(rng, min_dims=1)
        a, c = random_array(rng, shape, pair[0]), random_array(rng, broadcast_partner(rng, shape), pair[1])
        x, y = tensors(b, a, c)
        expected = reference(b, *tensors(b, a, c))
        result = x.sqdiff_(y)
        if result is not x:
            ctx.fail(
                f"case {n}: x.sqdiff_(y) returned a new tensor, not x itself",
                "in-place variants return self (the generated wrapper does this if impl() writes into out)",
            )
        expect_same(ctx, f"case {n}: x.sqdiff_(y) with x {pair[0]}{list(shape)}, y {describe(y)}", x, expected, a, c)
    x, y = tensors(b, random_array(rng, (3, 1), "float32"), random_array(rng, (1, 4), "float32"))
    try:
        x.sqdiff_(y)
    except RuntimeError:
        pass
    else:
        ctx.fail("x.sqdiff_(y) with x [3, 1] and y [1, 4] did not raise: the result [3, 4] does not fit in x", "")
    x, y = tensors(b, random_array(rng, (3,), "int64"), random_array(rng, (3,), "float32"))
    try:
        x.sqdiff_(y)
    except RuntimeError:
        pass
    else:
        ctx.fail("int64 x.sqdiff_(float32 y) did not raise: a float result cannot be stored in an int tensor", "")
    return "writes into self and returns it; rejects results that do not fit self's shape or dtype"


@EXERCISE.check("6.4", "out= variant: sqdiff(a, b, out=o)", 2)
def out_variant(ctx: Context) -> str:
    b = build(ctx)
    rng = ctx.rng()
    fns = b.python_torch_functions
    for n, pair in enumerate([("float32", "float32"), ("int64", "int64"), ("float32", "float64")], 1):
        a, c = random_pair(rng, pair)
        x, y = tensors(b, a, c)
        expected = reference(b, x, y)
        (out,) = tensors(b, np.zeros((0,), dtype=expected._data.dtype))  # empty: the wrapper resizes it
        result = fns.sqdiff(x, y, out=out)
        if result is not out:
            ctx.fail(f"case {n}: sqdiff(..., out=o) did not return o", "")
        expect_same(ctx, f"case {n}: sqdiff({describe(x)}, {describe(y)}, out=o)", out, expected, a, c)
    return "fills (and resizes) out= and returns it"


@EXERCISE.check("6.5", "the generated wrappers: dispatch table and at::cpu::sqdiff", 1)
def wrappers(ctx: Context) -> str:
    b = build(ctx)
    table = b.dispatcher.dump_table("aten::sqdiff.Tensor")
    for line in (
        "CPU: wrapper_CPU_sqdiff_Tensor [kernel]",
        "CUDA: wrapper_CUDA_sqdiff_Tensor [kernel]",
        "Meta: wrapper_Meta_sqdiff_Tensor [kernel]",
    ):
        if line not in table:
            ctx.fail(f"the dispatch table of aten::sqdiff.Tensor has no line {line!r}:\n{table}", "")
    rng = ctx.rng()
    a, c = random_pair(rng, ("float64", "float64"))
    x, y = tensors(b, a, c)
    expect_same(
        ctx,
        "at::cpu::sqdiff (the CPU wrapper called without the dispatcher)",
        b.cpu_functions.sqdiff(x, y),
        reference(b, x, y),
        a,
        c,
    )
    return "CPU/CUDA/Meta slots hold the generated wrappers; at::cpu::sqdiff calls your meta() and impl() directly"
