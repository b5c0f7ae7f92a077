"""Exercise 06, parent side: random sqdiff calls, the expected results from the lab's own engine (the
default front end's ``sub`` then ``mul``, its in-place and out= variants), and the verdicts.

The worker builds a front end around the learner's kernels and reports tensor records; whether a
result is right (shape, dtype, the storage's own dtype, values, aliasing) is decided here.

The misunderstandings the hints name (each is a wrong submission in tests/test_grade_exercises.py):
rebinding ``out._data`` instead of writing into the storage (the out tensor reports one dtype and
holds another, aliases never see the result: 6.3, 6.4); no bool check in meta() (numpy's TypeError:
6.1); a meta() that announces no output (6.1); the unary builder, i.e. the output of self alone (6.1);
an impl() that returns a new tensor instead of filling the output (6.2).
"""

from __future__ import annotations

from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import array, close, describe, failed, garbled, is_tensor, passed, raised, short
from labsupport.grade.jsonable import decode_array, encode_array

EXERCISE = Exercise(
    id="ex06",
    number=6,
    title="A structured kernel: sqdiff = (self - other) ** 2",
    filename="ex06_structured.py",
    notebook="06 (structured kernels)",
    observer="labsupport.grade.ex06_structured.observe",
)

S2 = "notebook 06, section 2 (The structured split: meta(), impl(), set_output)"
S3 = "notebook 06, section 3 (TensorIterator integration)"
S4 = "notebook 06, section 4 (Shape checking with meta tensors)"
S5 = "notebook 06, section 5 (out= tensors: resizing and dtypes)"
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

# ---- inputs ---------------------------------------------------------------------------------------


def _spec(rng: Any, shape: tuple[int, ...], dtype: str, device: str = "cpu") -> dict[str, Any]:
    from labsupport.grade.tensors import random_array

    if device == "meta":
        return {"shape": list(shape), "dtype": dtype, "device": "meta"}
    spec = encode_array(random_array(rng, shape, dtype))
    spec["device"] = device
    return spec


def _pair(rng: Any, pair: tuple[str, str], device: str = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    from labsupport.grade.tensors import broadcast_partner, random_shape

    shape = random_shape(rng, min_dims=0, max_dims=3)
    other = broadcast_partner(rng, shape)
    if rng.random() < 0.5:
        shape, other = other, shape
    return _spec(rng, shape, pair[0], device), _spec(rng, other, pair[1], device)


def plan_meta(rng: Any) -> dict[str, Any]:
    cases = []
    for pair in DTYPE_PAIRS:
        x, y = _pair(rng, pair, "meta")
        cases.append({"self": x, "other": y})
    rows = int(rng.integers(2, 5))
    for sa, sb in (((rows, 3), (rows + 1, 3)), ((rows + 2,), (rows,))):  # shapes that cannot broadcast
        cases.append({"self": _spec(rng, sa, "float32", "meta"), "other": _spec(rng, sb, "float32", "meta")})
    flags = _spec(rng, (int(rng.integers(1, 5)),), "bool")
    numbers = _spec(rng, tuple(flags["shape"]), ("float32", "int64")[int(rng.integers(2))])
    cases.append({"self": flags, "other": flags})
    cases.append({"self": numbers, "other": flags} if rng.random() < 0.5 else {"self": flags, "other": numbers})
    return {"cases": cases}


def plan_functional(rng: Any) -> dict[str, Any]:
    cases = []
    for pair in DTYPE_PAIRS * 2:
        x, y = _pair(rng, pair)
        cases.append({"self": x, "other": y, "via": "method" if rng.random() < 0.25 else "function"})
    x, y = _pair(rng, ("float32", "float32"), "cuda")
    cases.append({"self": x, "other": y})
    x, _ = _pair(rng, ("int64", "int64"))
    cases.append({"self": x, "other": x, "wrapped": float(round(float(rng.standard_normal()), 2))})
    return {"cases": cases}


def plan_inplace(rng: Any) -> dict[str, Any]:
    from labsupport.grade.tensors import broadcast_partner, random_shape

    cases = []
    for pair in [("float32", "float32"), ("float64", "float32"), ("int64", "int32"), ("float32", "int64")]:
        shape = random_shape(rng, min_dims=1)
        cases.append({"self": _spec(rng, shape, pair[0]), "other": _spec(rng, broadcast_partner(rng, shape), pair[1])})
    cases.append({"self": _spec(rng, (3, 1), "float32"), "other": _spec(rng, (1, 4), "float32")})  # does not fit
    cases.append({"self": _spec(rng, (3,), "int64"), "other": _spec(rng, (3,), "float32")})  # float into int
    return {"cases": cases}


def plan_out(rng: Any) -> dict[str, Any]:
    from labsupport.grade.tensors import broadcast_partner, random_shape

    cases = []
    for inputs, out_dtype, resize in (
        (("float32", "float32"), "float64", False),  # a wider out=: computed in float32, stored as float64
        (("float32", "float32"), "float32", True),  # an empty out=: the wrapper resizes it
        (("int64", "int64"), "int64", False),
        (("float32", "float64"), "float64", bool(rng.random() < 0.5)),
    ):
        shape = random_shape(rng, min_dims=1)
        other = broadcast_partner(rng, shape)
        out_shape = (0,) if resize else shape
        cases.append(
            {
                "self": _spec(rng, shape, inputs[0]),
                "other": _spec(rng, other, inputs[1]),
                "out": _spec(rng, out_shape, out_dtype),
            }
        )
    order = rng.permutation(len(cases))
    return {"cases": [cases[i] for i in order]}


def plan_table(rng: Any) -> dict[str, Any]:
    x, y = _pair(rng, ("float64", "float64"))
    return {"cases": [{"self": x, "other": y, "via": "at::cpu"}]}


# ---- expected values: the lab's own sub and mul ---------------------------------------------------


def _lab_tensor(spec: dict[str, Any]) -> Any:
    import labsupport.torch as torch
    from labsupport.grade.tensors import make

    if spec.get("device") == "meta":
        return make(torch.Tensor, None, shape=tuple(spec["shape"]), dtype=spec["dtype"], device="meta")
    return make(torch.Tensor, decode_array(spec), device=spec.get("device", "cpu"))


def _other(case: dict[str, Any]) -> Any:
    return float(case["wrapped"]) if case.get("wrapped") is not None else _lab_tensor(case["other"])


def reference(case: dict[str, Any]) -> tuple[Any, str | None]:
    """(the expected tensor, None) or (None, the error the reference raised) for a functional call."""
    import labsupport.torch as torch

    try:
        d = torch.sub(_lab_tensor(case["self"]), _other(case))
        return torch.mul(d, d), None
    except RuntimeError as error:
        return None, str(error)


def reference_inplace(case: dict[str, Any]) -> tuple[Any, str | None]:
    try:
        x = _lab_tensor(case["self"])
        x.sub_(_lab_tensor(case["other"]))
        return x.mul_(x), None
    except RuntimeError as error:
        return None, str(error)


def reference_out(case: dict[str, Any]) -> tuple[Any, str | None]:
    """The expected out tensor: the value computed in the common dtype, then stored in out's dtype."""
    import labsupport.torch as torch

    expected, error = reference(case)
    if error is not None:
        return None, error
    try:
        o = _lab_tensor(case["out"])
        torch.sub(_lab_tensor(case["self"]), _lab_tensor(case["other"]), out=o)  # the out= checks, as for sub
    except RuntimeError as err:
        return None, str(err)
    o._data = expected._data.astype(o._data.dtype)  # the parent's own copy: set the expected values
    return o, None


# ---- verdicts -------------------------------------------------------------------------------------

BOOL_HINTS = (
    f"meta() let bool tensors through: sqdiff, like sub, is not defined on bool tensors, and that dtype check "
    f"belongs in meta(), before any output is announced ({S2})",
    "every variant and every backend (Meta included) runs meta() first, so an argument check written there "
    "protects all of them; impl() then never sees a bool tensor (numpy refuses to subtract booleans)",
)
NO_OUTPUT_HINTS = (
    f"meta() announced no output, so the generated wrapper had nothing to return: meta() works out the "
    f"output's shape, dtype and device and announces it ({S2}, {S3})",
    "for an elementwise operator the TensorIterator base class does broadcasting, type promotion, the device "
    "checks and the announcement in one call (compare sub's meta in labsupport/aten/meta/binary_ops.py)",
)
REBIND_HINTS = (
    f"impl() replaced the output's array instead of writing into it: the out= variant writes into the "
    f"storage it is given, and set_output (generated per variant) decides what the output is ({S2}, {S5})",
    "after impl() the tensor still reports the dtype and shape that set_output gave it, but holds whatever array "
    "you attached; every view or alias of the old storage never sees the result, and an in-place call stops "
    "being in place",
)


def _build_failed(observed: dict[str, Any]) -> Verdict:
    return failed(
        f"building a front end with your sqdiff kernels failed:\n{raised(observed['build_error'])}",
        f"codegen looks up the two classes of the stub by name in your file, and meta() must accept "
        f"(self_, other) ({S2})",
    )


def _cases(observed: Any, inputs: Any, what: str) -> list[dict[str, Any]] | Verdict:
    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    if isinstance(observed, dict) and isinstance(observed.get("missing"), list):
        return failed(
            f"{EXERCISE.filename} has no {', '.join(map(str, observed['missing']))}",
            "keep the two class names of the stub: codegen derives them from the yaml entries",
        )
    cases = observed.get("cases") if isinstance(observed, dict) else None
    if (
        not isinstance(cases, list)
        or len(cases) != len(inputs["cases"])
        or not all(isinstance(c, dict) and ("result" in c or "raised" in c) for c in cases)
    ):
        return garbled(what)
    return cases


def _label(spec: dict[str, Any]) -> str:
    return f"{spec['dtype']}{list(spec['shape'])} on {spec.get('device', 'cpu')}"


def _call(case: dict[str, Any], form: str = "sqdiff({x}, {y})") -> str:
    other = f"the number {case['wrapped']}" if case.get("wrapped") is not None else _label(case["other"])
    return form.format(x=_label(case["self"]), y=other)


def _learner_raised(what: str, record: Any) -> Verdict:
    text = raised(record) or "an exception"
    if isinstance(record, dict) and record.get("type") == "TypeError" and "boolean" in str(record.get("message")):
        return failed(f"{what} raised {text}", *BOOL_HINTS)
    if isinstance(record, dict) and record.get("type") == "ValueError" and "broadcast" in str(record.get("message")):
        return failed(
            f"{what} raised {text}",
            f"numpy could not fit the values into the output: the output meta() announced does not have the "
            f"inputs' broadcast shape ({S3}, {S4})",
        )
    return failed(
        f"{what} raised {text}",
        f"your kernel raised where sub-then-mul gives a result; the line above is in your file ({S2}, {S3})",
    )


def _compare(
    what: str, got: Any, expected: Any, *, check_values: bool = True, case: dict[str, Any] | None = None
) -> Verdict | None:
    """None when ``got`` (an observed record) matches the reference tensor ``expected``."""
    if not is_tensor(got):
        if isinstance(got, dict) and got.get("class") == "NoneType":
            return failed(f"{what} returned None", *NO_OUTPUT_HINTS)
        return failed(f"{what} returned {describe(got)}", *NO_OUTPUT_HINTS)
    want = f"{expected._dtype.name}{list(expected._sizes)} on {expected._device}"
    mine = case["self"] if case is not None else None
    if (
        mine is not None
        and [got["sizes"], got["dtype"]] == [mine["shape"], mine["dtype"]]
        and [got["sizes"], got["dtype"]] != [list(expected._sizes), expected._dtype.name]
    ):
        return failed(
            f"{what} is {describe(got)}, the shape and dtype of self alone; expected {want}",
            f"your meta() announced the output from self alone, the way a unary operator does: sqdiff is binary, "
            f"so its output has the broadcast shape and the promoted dtype of both inputs ({S3})",
            "TensorIteratorBase has one builder per kind of operator; the unary one keeps its single input's shape "
            "and dtype, the binary one broadcasts and promotes",
        )
    if got["sizes"] != list(expected._sizes):
        return failed(
            f"{what} has sizes {got['sizes']}, expected the broadcast shape {list(expected._sizes)}",
            f"the output's shape is the inputs' broadcast shape, worked out in meta() ({S3}, {S4})",
        )
    if got["dtype"] != expected._dtype.name:
        return failed(
            f"{what} has dtype {got['dtype']}, expected {expected._dtype.name} (type promotion, as for sub)",
            f"the output's dtype comes from type promotion in meta(), the same as for sub ({S3})",
        )
    if got["device"] != str(expected._device):
        return failed(f"{what} is {describe(got)}, expected {want}", f"the output lives on the inputs' device ({S3})")
    if expected._data is None:
        if got.get("has_data"):
            return failed(f"{what}: a meta tensor came back with data", f"meta tensors run meta() only ({S4})")
        return None
    if got.get("data_dtype") != str(expected._data.dtype):
        return failed(
            f"{what} reports dtype {got['dtype']} but its storage holds {got.get('data_dtype')} data",
            *REBIND_HINTS,
        )
    values = array(got.get("values"))
    if check_values and not close(values, expected._data, str(expected._data.dtype)):
        return failed(
            f"{what}\n  expected {short(expected._data)}\n  got      {short(values)}",
            f"impl() computes (self - other) squared in the common dtype that meta() found, then stores it in "
            f"the output's dtype ({S2}, {S3})",
        )
    return None


def decide_meta(inputs: Any, observed: Any) -> Verdict:
    cases = _cases(observed, inputs, "sqdiff on meta tensors")
    if isinstance(cases, Verdict):
        return cases
    for case, seen in zip(inputs["cases"], cases):
        what = _call(case)
        expected, error = reference(case)
        if error is not None:
            if "raised" in seen and seen["raised"].get("type") == "RuntimeError":
                continue
            if "bool" in case["self"]["dtype"] + case["other"]["dtype"]:
                if "raised" in seen:
                    return failed(f"{what} raised {raised(seen['raised'])}", *BOOL_HINTS)
                return failed(f"{what} returned {describe(seen['result'])} instead of refusing bool", *BOOL_HINTS)
            return failed(
                f"{what} {'raised ' + str(raised(seen['raised'])) if 'raised' in seen else 'did not raise'}: "
                "these shapes cannot broadcast (sub raises RuntimeError)",
                f"meta() is where the shapes are checked; meta tensors have no data, so only meta() can refuse "
                f"them ({S4})",
            )
        if "raised" in seen:
            return _learner_raised(what, seen["raised"])
        verdict = _compare(what, seen["result"], expected, case=case)
        if verdict is not None:
            return verdict
    return passed(
        f"{len(DTYPE_PAIRS)} dtype pairs on meta tensors: broadcast shape and promoted dtype, no data; "
        "shapes that cannot broadcast and bool tensors are refused"
    )


def decide_functional(inputs: Any, observed: Any) -> Verdict:
    cases = _cases(observed, inputs, "sqdiff calls")
    if isinstance(cases, Verdict):
        return cases
    for case, seen in zip(inputs["cases"], cases):
        what = _call(case, "{x}.sqdiff({y})" if case.get("via") == "method" else "sqdiff({x}, {y})")
        expected, error = reference(case)
        if "raised" in seen:
            return _learner_raised(what, seen["raised"])
        if error is not None:
            return garbled("sqdiff calls")
        verdict = _compare(what, seen["result"], expected, case=case)
        if verdict is not None:
            return verdict
    return passed(f"{len(cases)} random calls (CPU, simulated CUDA, a wrapped number) match sub-then-mul")


def decide_inplace(inputs: Any, observed: Any) -> Verdict:
    cases = _cases(observed, inputs, "sqdiff_ calls")
    if isinstance(cases, Verdict):
        return cases
    for case, seen in zip(inputs["cases"], cases):
        what = _call(case, "x.sqdiff_(y) with x {x}, y {y}")
        expected, error = reference_inplace(case)
        if error is not None:
            if "raised" in seen and seen["raised"].get("type") == "RuntimeError":
                continue
            return failed(
                f"{what} {'raised ' + str(raised(seen['raised'])) if 'raised' in seen else 'did not raise'}: the "
                f"result cannot be stored in x (sub_ raises RuntimeError: {error})",
                f"an in-place output cannot be resized or hold a wider dtype: meta() refuses it when it announces "
                f"the output ({S3}, {S5})",
            )
        if "raised" in seen:
            return _learner_raised(what, seen["raised"])
        if seen.get("is_self") is not True:
            return failed(
                f"{what} returned {describe(seen['result'])}, not x itself",
                f"the generated in-place wrapper returns self; impl() only writes the values into the output it "
                f"is given ({S2})",
            )
        if seen.get("same_storage") is not True:
            return failed(f"{what}: x's array was replaced by a new one", *REBIND_HINTS)
        verdict = _compare(what, seen.get("self"), expected)
        if verdict is not None:
            return verdict
    return passed("writes into x's own storage and returns x; refuses results that do not fit x's shape or dtype")


def decide_out(inputs: Any, observed: Any) -> Verdict:
    cases = _cases(observed, inputs, "sqdiff out= calls")
    if isinstance(cases, Verdict):
        return cases
    for case, seen in zip(inputs["cases"], cases):
        what = _call(case, "sqdiff({x}, {y}, out=o) with o " + _label(case["out"]))
        expected, error = reference_out(case)
        if "raised" in seen:
            return _learner_raised(what, seen["raised"])
        if error is not None:
            return garbled("sqdiff out= calls")
        if seen.get("is_out") is not True:
            return failed(f"{what} did not return o", f"the out= wrapper returns the tensor it was given ({S5})")
        resized = case["out"]["shape"] != list(expected._sizes)
        if not resized and seen.get("same_storage") is not True:
            verdict = _compare(what + ": o", seen.get("out"), expected, check_values=False)
            if verdict is not None and verdict.hints == REBIND_HINTS:
                return verdict
            return failed(f"{what}: o already had the right shape, but its array was replaced", *REBIND_HINTS)
        verdict = _compare(what + ": o", seen.get("out"), expected)
        if verdict is not None:
            return verdict
    return passed("fills o in place (resizing an empty one), in o's own dtype, and returns it")


def decide_table(inputs: Any, observed: Any) -> Verdict:
    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    table = observed.get("table") if isinstance(observed, dict) else None
    if not isinstance(table, str):
        return garbled("the dispatch table")
    for line in (
        "CPU: wrapper_CPU_sqdiff_Tensor [kernel]",
        "CUDA: wrapper_CUDA_sqdiff_Tensor [kernel]",
        "Meta: wrapper_Meta_sqdiff_Tensor [kernel]",
    ):
        if line not in table:
            return failed(
                f"the dispatch table of aten::sqdiff.Tensor has no line {line!r}:\n{table}",
                "keep exercises/ex06_sqdiff.yaml as given: codegen writes one wrapper per backend from it",
            )
    verdict = decide_functional(inputs, observed)
    if not verdict.passed:
        return verdict
    return passed("CPU, CUDA and Meta slots hold the generated wrappers; at::cpu::sqdiff runs your meta() and impl()")


# ---- the checks -----------------------------------------------------------------------------------

EXERCISE.add_check(
    "6.1", "meta(): shapes and dtypes on meta tensors; bad shapes and bool refused", 2,
    plan=plan_meta, observe="functional", decide=decide_meta,
)  # fmt: skip
EXERCISE.add_check(
    "6.2", "functional sqdiff: values, broadcasting, type promotion", 2,
    plan=plan_functional, observe="functional", decide=decide_functional,
)  # fmt: skip
EXERCISE.add_check(
    "6.3", "in-place sqdiff_", 2, plan=plan_inplace, observe="inplace", decide=decide_inplace
)
EXERCISE.add_check(
    "6.4", "out= variant: sqdiff(a, b, out=o) writes into o", 3,
    plan=plan_out, observe="out_variant", decide=decide_out,
)  # fmt: skip
EXERCISE.add_check(
    "6.5", "the generated wrappers in the dispatch table", 1,
    plan=plan_table, observe="dispatch_table", decide=decide_table,
)  # fmt: skip
