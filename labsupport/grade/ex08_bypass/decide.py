"""Exercise 08, parent side: random torch.add calls, the "before" answers from the parent's own default
front end (``labsupport.torch``: the dispatcher path every op took before the change), and the
verdicts on the learner's "after" build: its yaml, its results, which calls still enter the
dispatcher, Test A (the profiler) and Test B (instructions per call; the "before" count is measured
here, in the parent).

The misunderstandings the hints name (each is a wrong submission in tests/test_grade_exercises.py):
a binding that never bypasses (Test A and B: 8.4, 8.5); bypassing every device, or checking only
self's device (a CPU scalar with a CUDA tensor is a CUDA call: 8.3); dropping alpha (8.2); a yaml entry
that stays structured, has no kernels for the dispatcher path, or changes add_/add.out too (8.1).
"""

from __future__ import annotations

from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import array, close, describe, failed, garbled, is_tensor, passed, raised, short
from labsupport.grade.jsonable import decode_array, encode_array

EXERCISE = Exercise(
    id="ex08",
    number=8,
    title="Bypass the dispatcher for torch.add",
    filename="ex08_bypass.py",
    notebook="08 (bypass the dispatcher)",
    observer="labsupport.grade.ex08_bypass.observe",
)

ADD_TENSOR = "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
DTYPES = ("float32", "float64", "int64", "int32")
P1 = "notebook 08, 'The change, part 1: ops.yaml'"
P3 = "notebook 08, 'The change, part 3: the hand-written binding'"
TEST_A = "notebook 08, 'Test A: the profiler'"
TEST_B = "notebook 08, 'Test B: instruction counts'"

# ---- inputs ---------------------------------------------------------------------------------------


def _spec(rng: Any, shape: tuple[int, ...], dtype: str, device: str = "cpu") -> dict[str, Any]:
    from labsupport.grade.tensors import random_array

    if device == "meta":
        return {"shape": list(shape), "dtype": dtype, "device": "meta"}
    spec = encode_array(random_array(rng, shape, dtype))
    spec["device"] = device
    return spec


def _shapes(rng: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    from labsupport.grade.tensors import broadcast_partner, random_shape

    shape = random_shape(rng, max_dims=3)
    other = broadcast_partner(rng, shape)
    return (other, shape) if rng.random() < 0.3 else (shape, other)


def plan_nothing(rng: Any) -> dict[str, Any]:
    return {}


def plan_cpu(rng: Any) -> dict[str, Any]:
    cases = []
    for n in range(24):
        a, b = _shapes(rng)
        d1, d2 = DTYPES[int(rng.integers(len(DTYPES)))], DTYPES[int(rng.integers(len(DTYPES)))]
        alpha: Any = [1, 2, -3, 0.5][int(rng.integers(4))]
        other: Any = _spec(rng, b, d2)
        if n % 6 == 5:
            other = float(round(float(rng.standard_normal()), 3))  # a Python number: a wrapped 0-dim CPU tensor
        cases.append({"self": _spec(rng, a, d1), "other": other, "alpha": alpha,
                      "via": "method" if n % 4 == 1 else "function"})  # fmt: skip
    return {"cases": cases}


def plan_devices(rng: Any) -> dict[str, Any]:
    from labsupport.grade.tensors import random_shape

    cases = []
    for device in ("cuda", "meta"):
        for _ in range(2):
            a, b = _shapes(rng)
            cases.append({"self": _spec(rng, a, "float32", device), "other": _spec(rng, b, "float32", device),
                          "alpha": int(rng.integers(1, 3)), "via": "function"})  # fmt: skip
    shape = random_shape(rng, min_dims=1)
    scalar, cuda = _spec(rng, (), "float32"), _spec(rng, shape, "float32", "cuda")
    mixed = [
        {"self": scalar, "other": cuda, "alpha": 1, "via": "function"},  # a CPU scalar joins a CUDA tensor
        {"self": cuda, "other": scalar, "alpha": 2, "via": "function"},
        {"self": _spec(rng, shape, "float32"), "other": cuda, "alpha": 1, "via": "function"},  # refused
    ]
    order = rng.permutation(len(cases) + len(mixed))
    every = cases + mixed
    return {"cases": [every[i] for i in order]}


def plan_cpu_pair(rng: Any) -> dict[str, Any]:
    from labsupport.grade.tensors import random_shape

    shape = random_shape(rng, min_dims=1)
    return {"self": _spec(rng, shape, "float32"), "other": _spec(rng, shape, "float32")}


def plan_fixed_pair(rng: Any) -> dict[str, Any]:
    shape = (3, 4)  # a fixed shape: the instruction count is printed and must be the same every run
    return {"self": _spec(rng, shape, "float32"), "other": _spec(rng, shape, "float32")}


# ---- the "before" answers -------------------------------------------------------------------------


def _before_tensor(spec: Any) -> Any:
    import labsupport.torch as torch
    from labsupport.grade.tensors import make

    if not isinstance(spec, dict):
        return spec
    if spec.get("device") == "meta":
        return make(torch.Tensor, None, shape=tuple(spec["shape"]), dtype=spec["dtype"], device="meta")
    return make(torch.Tensor, decode_array(spec), device=spec.get("device", "cpu"))


def before(case: dict[str, Any], alpha: Any = None) -> tuple[Any, BaseException | None]:
    """torch.add before the change (the parent's default front end): (result, None) or (None, error)."""
    import labsupport.torch as torch

    alpha = case["alpha"] if alpha is None else alpha
    try:
        x, y = _before_tensor(case["self"]), _before_tensor(case["other"])
        if case.get("via") == "method":
            return x.add(y, alpha=alpha), None
        return torch.add(x, y, alpha=alpha), None
    except Exception as error:  # the reference refuses the call: the after build must refuse it too
        return None, error


def all_cpu(case: dict[str, Any]) -> bool:
    return all(not isinstance(s, dict) or s.get("device", "cpu") == "cpu" for s in (case["self"], case["other"]))


def describe_case(case: dict[str, Any]) -> str:
    def one(spec: Any) -> str:
        if isinstance(spec, dict):
            return f"{spec['dtype']}{list(spec['shape'])} on {spec.get('device', 'cpu')}"
        return f"the number {spec}"

    call = "x.add(y, alpha={a}) with x {x}, y {y}" if case.get("via") == "method" else "torch.add({x}, {y}, alpha={a})"
    return call.format(x=one(case["self"]), y=one(case["other"]), a=case["alpha"])


# ---- verdicts -------------------------------------------------------------------------------------

BYPASS_ALL = (
    f"your add skipped the dispatcher for a call that is not on the CPU: only CPU tensors may go straight to the "
    f"CPU kernel, every other device still needs the dispatcher to find its kernel ({P3})",
    "the bypass is a shortcut for one case, both tensors on the CPU; a CPU scalar with a CUDA tensor is a CUDA "
    "call, and a meta tensor has no data for the CPU kernel to compute with",
)


def _build_failed(observed: dict[str, Any]) -> Verdict:
    return failed(
        f"building the after ops.yaml failed:\n{raised(observed['build_error'])}",
        f"codegen looks up the yaml's dispatch: names among your file's kernels, and manual_cpp_binding needs "
        f"your add ({P1}, {P3})",
    )


def _parse(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        return error


def _covers(dispatch: dict[str, Any], key: str) -> bool:
    for keys in dispatch:
        names = {k.strip() for k in str(keys).split(",")}
        if key in names or names & {"CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"}:
            return True
    return False


def decide_yaml(inputs: Any, observed: Any) -> Verdict:
    from labsupport.grade.ex08_bypass.observe import default_yaml

    if not isinstance(observed, dict):
        return garbled("patch_ops_yaml")
    if isinstance(observed.get("missing"), str):
        return failed(f"{EXERCISE.filename} has no function patch_ops_yaml", "keep the names of the stub")
    if "raised" in observed:
        return failed(f"patch_ops_yaml raised {raised(observed['raised'])}", f"see {P1}")
    if not isinstance(observed.get("text"), str) or observed.get("truncated"):
        return failed(
            f"patch_ops_yaml returned {observed.get('type')}"
            + (" (far longer than ops.yaml)" if observed.get("truncated") else ", not the yaml text"),
            f"it returns the whole text of ops.yaml, with the add.Tensor entry changed ({P1})",
        )
    original, patched = _parse(default_yaml()), _parse(observed["text"])
    if isinstance(patched, Exception) or not isinstance(patched, dict) or "native_functions" not in patched:
        return failed(
            f"patch_ops_yaml returned text that is not ops.yaml any more ({type(patched).__name__})",
            f"change only the add.Tensor entry; every other line stays as it was ({P1})",
        )
    if patched.get("derivatives") != original.get("derivatives"):
        return failed("the patched yaml changed the derivatives section", f"change only the add.Tensor entry ({P1})")
    old_entries, new_entries = original["native_functions"], patched["native_functions"]
    if not isinstance(new_entries, list) or len(new_entries) != len(old_entries):
        return failed("the patched yaml has a different number of entries", f"change only the add.Tensor entry ({P1})")
    for old, new in zip(old_entries, new_entries):
        if str(old.get("func")).strip() != ADD_TENSOR and old != new:
            hint = f"change only the add.Tensor entry ({P1})"
            if str(old.get("func")).startswith(("add_.", "add.out")):
                hint = (
                    f"{old.get('func')} changed too: the in-place and out= variants stay structured; only the "
                    f"functional add.Tensor gets the hand-written binding ({P1})"
                )
            return failed(f"the entry {old.get('func')} changed too", hint)
    entry = next((e for e in new_entries if isinstance(e, dict) and str(e.get("func", "")).strip() == ADD_TENSOR), None)
    if entry is None:
        return failed("the patched yaml has no add.Tensor entry", f"keep its func: line unchanged ({P1})")
    if entry.get("manual_cpp_binding") is not True:
        return failed(
            "the add.Tensor entry has no manual_cpp_binding: True",
            f"without it codegen keeps writing at::add and Tensor.add itself, so your add is never called ({P1})",
        )
    for field in ("structured_delegate", "structured", "structured_inherits"):
        if field in entry:
            return failed(
                f"the add.Tensor entry still has {field}:",
                f"a structured add.Tensor gets its wrappers generated from add.out; once you write the binding it "
                f"must stop being structured and name kernels of its own ({P1})",
            )
    variants = str(entry.get("variants", ""))
    if "function" not in variants or "method" not in variants:
        return failed("add.Tensor's variants changed", f"torch.add and Tensor.add both stay ({P1})")
    dispatch = entry.get("dispatch") if isinstance(entry.get("dispatch"), dict) else {}
    missing = [key for key in ("CPU", "CUDA", "Meta") if not _covers(dispatch, key)]
    if missing:
        return failed(
            f"the add.Tensor entry's dispatch: block has no kernel for {', '.join(missing)}",
            f"the dispatcher path stays for every device the binding does not bypass, and a dispatcher path "
            f"without a kernel fails; the hand-written kernels are given in the exercise file ({P1})",
        )
    if "build_error" in observed:
        return _build_failed(observed)
    if observed.get("add_is_yours") is not True:
        return failed("in the after build, at::add is not your add()", f"see {P3}")
    if observed.get("dispatch_path") is not True:
        return failed("the after build has no functions.__dispatch_add", f"see {P3}")
    return passed(
        "only add.Tensor changed (manual binding, no longer structured, own kernels); the build uses your add"
    )


DROPS_ALPHA = (
    f"your add drops alpha: add.Tensor computes self + alpha * other (and refuses an alpha the dtype cannot "
    f"hold), and the bypass must pass alpha on to the kernel ({P3})"
)


def _result(what: str, seen: Any, case: dict[str, Any]) -> Verdict | None:
    """Compare one after-build call with the before answer."""
    want, error = before(case)
    if not isinstance(seen, dict) or not isinstance(seen.get("dispatched"), int):
        return garbled("the results")
    if error is not None:
        got = seen.get("raised")
        if isinstance(got, dict) and got.get("type") == type(error).__name__:
            return None
        if not all_cpu(case) and seen["dispatched"] == 0:
            after = "raised " + str(raised(got)) if got else "returned a result"
            return failed(f"{what}: before the change it raised {type(error).__name__}: {error}; after it {after}",
                          *BYPASS_ALL)  # fmt: skip
        message = (
            f"{what}: before the change it raised {type(error).__name__}: {error}; after it "
            f"{'raised ' + str(raised(got)) if got else 'returned ' + describe(seen.get('result'))}"
        )
        if not got and case["alpha"] != 1 and before(case, alpha=1)[1] is None:  # the refusal was alpha's
            return failed(message, DROPS_ALPHA)
        return failed(
            message,
            f"your add must behave exactly like the generated at::add, refusals included ({P3})",
        )
    if "raised" in seen:
        message = str(seen["raised"].get("message", "")) if isinstance(seen["raised"], dict) else ""
        if "positional argument" in message or "alpha" in message:
            hints: tuple[str, ...] = (
                f"your add does not take add.Tensor's arguments: the hand-written binding replaces at::add, so it "
                f"takes exactly what the schema lists, alpha included ({P3})",
            )
        elif not all_cpu(case) and seen["dispatched"] == 0:
            hints = BYPASS_ALL
        else:
            hints = (f"your add raised where the generated at::add gives a result ({P3})",)
        return failed(f"{what}: after the change it raised {raised(seen['raised'])}", *hints)
    got = seen.get("result")
    expected_label = f"{want._dtype.name}{list(want._sizes)} on {want._device}"
    if not is_tensor(got) or got["sizes"] != list(want._sizes) or got["dtype"] != want._dtype.name \
            or got["device"] != str(want._device):  # fmt: skip
        return failed(
            f"{what}: before {expected_label}, after {describe(got)}",
            f"the hand-written add calls the same kernel the dispatcher would, so broadcasting, type promotion and "
            f"the device stay the same ({P3})",
        )
    if want._data is None:
        if got.get("has_data"):
            return failed(f"{what}: a meta result came back with data", *BYPASS_ALL)
        return None
    values = array(got.get("values"))
    if not close(values, want._data, want._dtype.name):
        one, _ = before(case, alpha=1)
        if case["alpha"] != 1 and one is not None and close(values, one._data, want._dtype.name):
            return failed(
                f"{what}:\n  before {short(want._data)}\n  after  {short(values)} (what alpha=1 gives)", DROPS_ALPHA
            )
        return failed(f"{what}:\n  before {short(want._data)}\n  after  {short(values)}", f"see {P3}")
    return None


def _results(observed: Any, inputs: Any) -> list[Any] | Verdict:
    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    results = observed.get("results") if isinstance(observed, dict) else None
    if not isinstance(results, list) or len(results) != len(inputs["cases"]):
        return garbled("the results")
    return results


def decide_cpu(inputs: Any, observed: Any) -> Verdict:
    results = _results(observed, inputs)
    if isinstance(results, Verdict):
        return results
    for case, seen in zip(inputs["cases"], results):
        verdict = _result(describe_case(case), seen, case)
        if verdict is not None:
            return verdict
    return passed(f"{len(results)} random CPU calls (broadcasting, dtypes, alpha, Tensor.add, numbers) as before")


def decide_devices(inputs: Any, observed: Any) -> Verdict:
    results = _results(observed, inputs)
    if isinstance(results, Verdict):
        return results
    for case, seen in zip(inputs["cases"], results):
        what = describe_case(case)
        verdict = _result(what, seen, case)
        if verdict is not None:
            return verdict
        if "raised" not in seen and seen["dispatched"] < 1:
            return failed(f"{what} never entered the dispatcher in the after build", *BYPASS_ALL)
    return passed("CUDA, meta and mixed-device calls still take the dispatcher path and agree with before")


def decide_profile(inputs: Any, observed: Any) -> Verdict:
    import labsupport.torch as torch
    from labsupport.grade.instruments import op_counts

    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    if isinstance(observed, dict) and "raised" in observed:
        return failed(f"torch.add in the after build raised {raised(observed['raised'])}", f"see {P3}")
    counts = observed.get("counts") if isinstance(observed, dict) else None
    if not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values()):
        return garbled("the profile")
    x, y = _before_tensor(inputs["self"]), _before_tensor(inputs["other"])
    reference, _ = op_counts(lambda: torch.add(x, y))
    if counts.get("aten::add", 0):
        return failed(
            f"the profiler still saw aten::add {counts['aten::add']} time(s) in the after build "
            f"(before: {reference}; after: {counts})",
            f"a CPU add in the after build still enters the dispatcher: the profiler records every operator that "
            f"passes through Dispatcher::call, and the point of the change is that CPU calls do not ({TEST_A})",
        )
    seen = ", ".join(f"{k} x{v}" for k, v in reference.items())
    return passed(f"before: {seen}; after: no aten::add")


def decide_instructions(inputs: Any, observed: Any) -> Verdict:
    import labsupport.torch as torch
    from labsupport.grade.instruments import instructions_per_call

    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    if isinstance(observed, dict) and "raised" in observed:
        return failed(f"torch.add in the after build raised {raised(observed['raised'])}", f"see {P3}")
    count = observed.get("count") if isinstance(observed, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        return garbled("the instruction count")
    x, y = _before_tensor(inputs["self"]), _before_tensor(inputs["other"])
    reference, instrument = instructions_per_call(lambda: torch.add(x, y))
    if observed.get("instrument") != instrument:
        return garbled("the instruction count")
    if count >= reference:
        return failed(
            f"torch.add costs {count} instructions per call after the change, {reference} before",
            f"the CPU path of your add still does the dispatcher's work (key set, table, autograd kernel) before "
            f"the kernel runs ({TEST_B})",
        )
    saved = 100.0 * (reference - count) / reference
    return passed(f"torch.add on CPU: {reference} -> {count} bytecode instructions per call ({saved:.0f}% fewer)")


# ---- the checks -----------------------------------------------------------------------------------

EXERCISE.add_check(
    "8.1", "the after ops.yaml and its build", 2, plan=plan_nothing, observe="patched_yaml", decide=decide_yaml
)
EXERCISE.add_check(
    "8.2", "same results as before on CPU: values, dtypes, broadcasting, alpha", 2,
    plan=plan_cpu, observe="results", decide=decide_cpu,
)  # fmt: skip
EXERCISE.add_check(
    "8.3", "other and mixed devices still take the dispatcher path", 2,
    plan=plan_devices, observe="results", decide=decide_devices,
)  # fmt: skip
EXERCISE.add_check(
    "8.4", "Test A: the profiler no longer sees aten::add on CPU", 2,
    plan=plan_cpu_pair, observe="profile", decide=decide_profile,
)  # fmt: skip
EXERCISE.add_check(
    "8.5", "Test B: fewer instructions per call", 2,
    plan=plan_fixed_pair, observe="instructions", decide=decide_instructions,
)  # fmt: skip
