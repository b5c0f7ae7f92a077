"""Exercise 04, parent side: random inputs for myadd / myadd_, the expected results from the lab's own
engine (``labsupport.torch``), and the verdicts.

The worker registers the learner's operators on a fresh dispatcher and reports results, traces
(``[operator, key, key names]``), gradients and versions; nothing it sends decides a grade by itself.

The misunderstandings the hints name (each is a wrong submission in tests/test_grade_exercises.py):
calling the operator again without stepping below autograd (DispatchRecursionError, explained once);
registering the autograd kernel on the CPU key (4.1); an autograd kernel that computes the result
itself (4.4); a guard entered but never left (4.4); numpy broadcasting instead of a shape check (4.3);
one gradient for two inputs, or a graph recorded under no_grad (4.5); an in-place kernel that returns
a new tensor, rebinds the data, or has no ADInplaceOrView kernel (4.6); not returning the DEF library
(4.1, 4.7).
"""

from __future__ import annotations

import re
from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import array, close, describe, failed, garbled, is_tensor, passed, raised, short
from labsupport.grade.jsonable import decode_array, encode_array

EXERCISE = Exercise(
    id="ex04",
    number=4,
    title="Register myadd and myadd_: CPU, Autograd and ADInplaceOrView kernels",
    filename="ex04_register.py",
    notebook="04 (registering operators)",
    observer="labsupport.grade.ex04_register.observe",
)

SCHEMA = "myops::myadd(Tensor self, Tensor other) -> Tensor"
INPLACE_SCHEMA = "myops::myadd_(Tensor(a!) self, Tensor other) -> Tensor(a!)"
S2 = "notebook 04, section 2 (Define the schema)"
S3 = "notebook 04, section 3 (A CPU kernel, registered for the CPU key)"
S6 = "notebook 04, section 6 (An autograd kernel that redispatches)"
S8 = "notebook 04, section 8 (In-place and view operators: ADInplaceOrView)"
S10 = "notebook 04, section 10 (Alias keys and table precedence)"
S11 = "notebook 04, section 11 (Library lifetime: newest wins, closing restores)"
AUTOGRAD_KEYS = ("AutogradCPU", "AutogradOther", "AutogradFunctionality")


# ---- inputs ---------------------------------------------------------------------------------------


def _shape(rng: Any, min_dims: int = 1) -> list[int]:
    from labsupport.grade.tensors import random_shape

    return list(random_shape(rng, min_dims=min_dims, max_dims=3))


def _array(rng: Any, shape: list[int], dtype: str) -> dict[str, Any]:
    from labsupport.grade.tensors import random_array

    return encode_array(random_array(rng, tuple(shape), dtype))


def _dtype(rng: Any) -> str:
    return ("float32", "float64")[int(rng.integers(2))]


def plan_nothing(rng: Any) -> dict[str, Any]:
    return {}


def plan_values(rng: Any) -> dict[str, Any]:
    cases = []
    for _ in range(20):
        shape, dtype = _shape(rng), _dtype(rng)
        cases.append({"a": _array(rng, shape, dtype), "b": _array(rng, shape, dtype)})
    return {"cases": cases}


def plan_shape_errors(rng: Any) -> dict[str, Any]:
    rows, cols = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    pairs = [([rows, cols], [1, cols]), ([rows, 1], [1, cols]), ([rows, cols], [cols])]  # numpy broadcasts all
    order = rng.permutation(len(pairs))
    cases = [{"a": _array(rng, pairs[i][0], "float32"), "b": _array(rng, pairs[i][1], "float32")} for i in order]
    return {"cases": cases}


def plan_kernel_order(rng: Any) -> dict[str, Any]:
    flags = [bool(rng.random() < 0.5) for _ in range(3)] + [False, True]
    cases = []
    for requires_grad in flags:
        shape = _shape(rng)
        a, b = _array(rng, shape, "float32"), _array(rng, shape, "float32")
        cases.append({"a": a, "b": b, "requires_grad": requires_grad})
    return {"cases": cases}


def plan_gradients(rng: Any) -> dict[str, Any]:
    cases = []
    for n in range(5):
        shape, dtype = _shape(rng), _dtype(rng)
        cases.append(
            {
                "a": _array(rng, shape, dtype),
                "b": _array(rng, shape, dtype),
                "other_requires_grad": bool(n == 0 or rng.random() < 0.6),
                "seed": _array(rng, shape, dtype),
            }
        )
    shape = _shape(rng)
    return {"cases": cases, "no_grad": {"a": _array(rng, shape, "float32"), "b": _array(rng, shape, "float32")}}


def plan_inplace(rng: Any) -> dict[str, Any]:
    cases = []
    for _ in range(4):
        shape, dtype = _shape(rng), _dtype(rng)
        cases.append({"a": _array(rng, shape, dtype), "b": _array(rng, shape, dtype)})
    return {"cases": cases}


# ---- expected values (the lab's own add) ----------------------------------------------------------


def expected_sum(case: dict[str, Any]) -> Any:
    import labsupport.torch as torch
    from labsupport.grade.tensors import make

    x, y = make(torch.Tensor, decode_array(case["a"])), make(torch.Tensor, decode_array(case["b"]))
    return torch.add(x, y)._data


# ---- reading observations -------------------------------------------------------------------------

RECURSION_HINTS = (
    f"the misunderstanding: the dispatcher keeps no record of which kernels a call has been through, so a "
    f"call made from inside your autograd kernel does not carry on towards the backend kernel by itself; getting "
    f"past autograd is that kernel's own job ({S6}, 'First, the broken version')",
    f"compare your autograd kernel with the fixed versions in {S6}: what each one changes before calling on, "
    f"and where that change lives (the thread-local state, or the key set it hands over)",
)
# the DispatchRecursionError's own text says what happened and where to read on; these hints name
# the belief behind it in other words, so the report never says the same thing twice


def _normalized(text: str) -> str:
    """An exception's text without the numbers that change with the stack depth, so that the same
    mistake gives the same message in every check (the report then prints it once)."""
    return re.sub(r" \(\d+ times before Python's recursion limit\)", "", text)


def learner_error(record: Any, doing: str) -> Verdict:
    message = _normalized(raised(record) or "an exception")
    if isinstance(record, dict) and record.get("type") == "DispatchRecursionError":
        # the same text in every check it breaks: the report prints it in full once ("same as 4.2")
        return failed(message, *RECURSION_HINTS)
    return failed(
        f"{message}\n(while {doing})",
        f"your code raised while {doing}; the traceback line above is in your file ({S3}, {S6})",
    )


def _precheck(observed: Any, what: str) -> Verdict | dict[str, Any]:
    """Failures of register_myadd itself, shared by every check; else the observation."""
    if not isinstance(observed, dict):
        return garbled(what)
    if isinstance(observed.get("missing"), str):
        return failed(
            f"{EXERCISE.filename} has no function {observed['missing']}",
            f"keep the names and signatures of the stub: the grader calls {observed['missing']}(dispatcher)",
        )
    if "setup_error" in observed:
        return learner_error(observed["setup_error"], "running register_myadd(dispatcher)")
    setup = observed.get("setup")
    if not isinstance(setup, dict):
        return garbled(what)
    if setup.get("all_libraries") is not True:
        return failed(
            f"register_myadd returned {setup.get('returned')}, not a list of the lab.Library objects it created",
            f"the caller closes what you return to undo every registration: return each Library you made ({S11})",
        )
    if setup.get("foreign"):
        return failed(
            f"{setup['foreign']} of the returned libraries register on another dispatcher than the one "
            "register_myadd was given",
            f"every Library must register on the dispatcher passed to register_myadd (the grader passes a fresh "
            f"one each time) ({S2})",
        )
    if observed.get("no_op"):
        return failed(
            f"after register_myadd, the dispatcher has no schema for the operator ({_schemas(setup)})",
            f"define the operators' schemas with a DEF (or FRAGMENT) library first ({S2})",
        )
    if "error" in observed:
        return learner_error(observed["error"], what)
    return observed


def _schemas(setup: dict[str, Any]) -> str:
    parts = []
    for label in ("myadd", "myadd_"):
        info = setup.get(label) if isinstance(setup.get(label), dict) else {}
        parts.append(f"{label}: {info.get('schema') or 'no schema'}")
    return "; ".join(parts)


def _kernels(setup: dict[str, Any], label: str) -> dict[str, list[str]]:
    info = setup.get(label) if isinstance(setup.get(label), dict) else {}
    kernels = info.get("kernels")
    if not isinstance(kernels, dict):
        return {}
    return {str(k): [str(n) for n in v] for k, v in kernels.items() if isinstance(v, list)}


# ---- decisions ------------------------------------------------------------------------------------


def decide_registrations(inputs: Any, observed: Any) -> Verdict:
    checked = _precheck(observed, "registering myadd")
    if isinstance(checked, Verdict):
        return checked
    setup = checked["setup"]
    for label, schema in (("myadd", SCHEMA), ("myadd_", INPLACE_SCHEMA)):
        info = setup.get(label) if isinstance(setup.get(label), dict) else {}
        if info.get("schema") != schema:
            hint = f"define exactly the schema string the stub gives ({S2})"
            if info.get("schema") is None and _kernels(setup, label):
                hint = (
                    f"{label} has kernels but no schema any more: a Library nobody keeps is closed when Python "
                    f"frees it, and closing the DEF library undoes the definition; return every Library, the DEF "
                    f"one included ({S11})"
                )
            if label == "myadd_" and isinstance(info.get("schema"), str) and "(a!)" not in info["schema"]:
                hint = (
                    f"myadd_ writes into self, and its schema must say so with an alias annotation: the "
                    f"autograd fallback reads it to know the operator is in-place ({S8})"
                )
            return failed(f"{label}'s schema is {info.get('schema')}, expected {schema}", hint)
    kernels = _kernels(setup, "myadd")
    if "CPU" not in kernels:
        return failed(f"myadd has no CPU kernel (kernels for: {sorted(kernels) or 'nothing'})", f"see {S3}")
    if not any(k in kernels for k in ("Autograd", *AUTOGRAD_KEYS)):
        if len(kernels["CPU"]) > 1:
            return failed(
                f"myadd has {len(kernels['CPU'])} kernels registered for CPU ({', '.join(kernels['CPU'])}) and none "
                "for Autograd",
                f"you registered the autograd kernel on the CPU key: one key holds one active kernel, the newest "
                f"hides the other, so autograd never runs. It belongs to the Autograd alias key ({S6}, {S10})",
                "every CPU tensor carries AutogradCPU, which outranks CPU: a kernel registered for Autograd runs "
                "first, and its call below autograd reaches the CPU kernel",
            )
        return failed(
            f"myadd has no autograd kernel (kernels for: {sorted(kernels)})",
            f"the autograd kernel is registered for the Autograd alias key, not for a backend ({S6}, {S10})",
        )
    inplace = _kernels(setup, "myadd_")
    missing = [k for k in ("CPU", "ADInplaceOrView") if k not in inplace]
    if not any(k in inplace for k in ("Autograd", *AUTOGRAD_KEYS)):
        missing.append("Autograd")
    if missing:
        return failed(
            f"myadd_ has no kernel for {', '.join(missing)} (kernels for: {sorted(inplace) or 'nothing'})",
            f"an in-place operator needs a CPU kernel, an autograd kernel (the not-implemented fallback will do) "
            f"and an ADInplaceOrView kernel that bumps the version ({S8})",
        )
    return passed(f"{SCHEMA} and {INPLACE_SCHEMA}; kernels for myadd: {', '.join(sorted(kernels))}")


def decide_values(inputs: Any, observed: Any) -> Verdict:
    checked = _precheck(observed, "calling myadd")
    if isinstance(checked, Verdict):
        return checked
    results = checked.get("results")
    if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
        return garbled("myadd's results")
    for n, (case, result) in enumerate(zip(inputs["cases"], results), start=1):
        a, b = decode_array(case["a"]), decode_array(case["b"])
        what = f"call {n}: myadd({a.dtype}{list(a.shape)}, {b.dtype}{list(b.shape)})"
        if "error" in result:
            return learner_error(result["error"], what)
        expected = expected_sum(case)
        got = result.get("result")
        if not is_tensor(got):
            return failed(
                f"{what} returned {describe(got)}",
                f"a kernel returns a tensor of the tensor class it was given, with the result's data ({S3})",
            )
        if got["sizes"] != list(expected.shape) or got["dtype"] != str(expected.dtype):
            return failed(
                f"{what} returned {describe(got)}, expected {expected.dtype}{list(expected.shape)} on cpu",
                f"the result keeps the inputs' shape and dtype ({S3})",
            )
        values = array(got.get("values"))
        if got.get("data_dtype") != str(expected.dtype) or not close(values, expected, str(expected.dtype)):
            return failed(
                f"{what}\n  expected {short(expected)}\n  got      {short(values)} (data {got.get('data_dtype')})",
                f"the CPU kernel computes self + other elementwise on the tensors' data ({S3})",
            )
        if result.get("inputs_unchanged") is not True:
            return failed(
                f"{what} changed its inputs' data",
                f"myadd is functional: it must leave self and other alone and return a new tensor ({S3}, {S8})",
            )
    if len(results) != len(inputs["cases"]):
        return garbled("myadd's results")
    return passed(f"{len(results)} random same-shape float32/float64 inputs give self + other")


def decide_shape_errors(inputs: Any, observed: Any) -> Verdict:
    checked = _precheck(observed, "calling myadd on different shapes")
    if isinstance(checked, Verdict):
        return checked
    results = checked.get("results")
    if not isinstance(results, list) or len(results) != len(inputs["cases"]):
        return garbled("myadd's results")
    for case, result in zip(inputs["cases"], results):
        sa, sb = case["a"]["shape"], case["b"]["shape"]
        what = f"myadd(float32{sa}, float32{sb})"
        if not isinstance(result, dict):
            return garbled("myadd's results")
        if "raised" not in result:
            return failed(
                f"{what} returned {describe(result.get('result'))}: numpy broadcast the two shapes",
                f"myadd takes two tensors of the same shape and refuses others itself; numpy would broadcast them "
                f"silently ({S3})",
            )
        record = result["raised"]
        if isinstance(record, dict) and record.get("type") == "DispatchRecursionError":
            return learner_error(record, f"calling {what}")
        text = str(record.get("message", "")) if isinstance(record, dict) else ""
        if "shape" not in text.lower() and "size" not in text.lower():
            return failed(
                f"{what} raised {raised(record)}\nbut the message does not say the shapes differ",
                f"an error should tell the caller what was wrong: name both shapes ({S3})",
            )
    return passed("inputs of different shapes raise an error that names the shapes")


def _keys(events: Any) -> list[tuple[str, str, list[str]]] | None:
    if not isinstance(events, list):
        return None
    out = []
    for event in events:
        if (
            not isinstance(event, list)
            or len(event) != 3
            or not all(isinstance(e, str) for e in event[:2])
            or not isinstance(event[2], list)
        ):
            return None
        out.append((event[0], event[1], [str(k) for k in event[2]]))
    return out


def decide_kernel_order(inputs: Any, observed: Any) -> Verdict:
    checked = _precheck(observed, "tracing a myadd call")
    if isinstance(checked, Verdict):
        return checked
    calls = checked.get("calls")
    if not isinstance(calls, list) or not calls:
        return garbled("the traces")
    for case, call in zip(inputs["cases"], calls):
        if not isinstance(call, dict):
            return garbled("the traces")
        what = f"myadd on a CPU tensor (requires_grad={case['requires_grad']})"
        if "error" in call:
            return learner_error(call["error"], what)
        events = _keys(call.get("events"))
        if events is None:
            return garbled("the traces")
        mine = [(key, ks) for name, key, ks in events if name == "myops::myadd"]
        keys = [key for key, _ in mine]
        if not keys or keys[0] not in AUTOGRAD_KEYS:
            return failed(
                f"{what}: the first kernel that ran was {keys[0] if keys else 'none'}, expected AutogradCPU "
                f"(kernels in order: {keys})",
                f"the autograd kernel must run first, for every call: register it for the Autograd alias key, "
                f"which every CPU tensor carries as AutogradCPU ({S6}, {S10})",
            )
        cpu = [ks for key, ks in mine if key == "CPU"]
        if not cpu:
            return failed(
                f"{what}: the CPU kernel never ran (kernels in order: {keys})",
                f"your autograd kernel computes the result itself instead of calling myadd again below autograd: "
                f"the dispatcher must choose the backend kernel ({S6})",
                "an autograd kernel only records the graph; the values come from whatever kernel the dispatcher "
                "finds below autograd (CPU here, CUDA or another backend elsewhere)",
            )
        leaked = [k for k in cpu[0] if k.startswith("Autograd")]
        if leaked:
            return failed(
                f"{what}: the CPU kernel ran with the key set {cpu[0]}: {', '.join(leaked)} still in it",
                f"your autograd kernel reached CPU without stepping below autograd: the key set of the inner call "
                f"must not contain the autograd keys any more ({S6})",
            )
        if keys != [keys[0], "CPU"]:
            return failed(
                f"{what}: one call ran these kernels in this order: {keys}; expected [AutogradCPU, CPU]",
                f"the autograd kernel calls myadd once, below autograd ({S6})",
            )
        if call.get("tls_restored") is not True:
            return failed(
                f"{what}: after myadd returned, the thread-local include/exclude sets were not restored",
                f"a guard must be left when the call below autograd is done, whatever happens in it: use it as a "
                f"context manager ({S6})",
            )
    if len(calls) != len(inputs["cases"]):
        return garbled("the traces")
    return passed("kernels ran as [AutogradCPU, CPU], the CPU one below autograd; TLS restored afterwards")


def decide_gradients(inputs: Any, observed: Any) -> Verdict:
    checked = _precheck(observed, "calling myadd with inputs that require grad")
    if isinstance(checked, Verdict):
        return checked
    results = checked.get("results")
    if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
        return garbled("the gradients")
    for n, (case, result) in enumerate(zip(inputs["cases"], results), start=1):
        what = f"call {n}: z = myadd(x, y), x requires grad, y {'does' if case['other_requires_grad'] else 'does not'}"
        if "error" in result:
            return learner_error(result["error"], what)
        if result.get("grad_fn") in (None, "NoneType") or result.get("requires_grad") is not True:
            return failed(
                f"{what}: z has no grad_fn",
                f"when an input requires grad, the autograd kernel records a backward node on the result, with one "
                f"edge per input ({S6})",
            )
        if "backward_error" in result:
            return learner_error(result["backward_error"], f"{what}; z.backward(g)")
        seed = decode_array(case["seed"])
        for name, requires in (("self", True), ("other", case["other_requires_grad"])):
            grad = result.get(f"{name}_grad")
            if not requires:
                if grad is not None:
                    return failed(f"{what}: {name} does not require grad but got a .grad", f"see {S6}")
                continue
            if not is_tensor(grad):
                return failed(
                    f"{what}: after z.backward(g), {name}.grad is {describe(grad)}",
                    f"the backward node returns one gradient per input of myadd ({S6})",
                )
            if not close(array(grad.get("values")), seed, str(seed.dtype)):
                return failed(
                    f"{what}: {name}.grad is {short(array(grad.get('values')))}, expected the incoming gradient "
                    f"{short(seed)}",
                    f"d(self + other)/d{name} is 1: each input receives the incoming gradient unchanged ({S6})",
                )
    no_grad = checked.get("no_grad")
    if not isinstance(no_grad, dict):
        return garbled("the gradients")
    if "error" in no_grad:
        return learner_error(no_grad["error"], "calling myadd under no_grad()")
    if no_grad.get("grad_fn") != "NoneType":
        return failed(
            "under no_grad(), myadd still recorded a grad_fn",
            f"record the graph only when some input requires grad in the current grad mode ({S6})",
        )
    return passed("grad_fn recorded; backward() gives each input the incoming gradient; nothing under no_grad")


def decide_inplace(inputs: Any, observed: Any) -> Verdict:
    checked = _precheck(observed, "calling myadd_")
    if isinstance(checked, Verdict):
        return checked
    results = checked.get("results")
    if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
        return garbled("myadd_'s results")
    for n, (case, result) in enumerate(zip(inputs["cases"], results), start=1):
        a = decode_array(case["a"])
        what = f"call {n}: x.myadd_(y) with x {a.dtype}{list(a.shape)}"
        if "error" in result:
            return learner_error(result["error"], what)
        expected = expected_sum(case)
        if result.get("is_self") is not True:
            return failed(
                f"{what} returned {describe(result.get('returned'))}, a new tensor, not x itself",
                f"an in-place operator returns its own input: the (a!) in the schema says the result IS self ({S8})",
                "code that writes y = x.myadd_(z) expects y and x to be one tensor; returning a fresh tensor "
                "breaks every alias of x",
            )
        if result.get("same_storage") is not True:
            return failed(
                f"{what}: x's data now lives in a new array; the array x had before the call still holds "
                f"{short(array(result.get('old_storage')))}",
                f"in-place means writing into the storage self already has; replacing the array loses every view "
                f"and alias that shares it ({S8})",
            )
        self_record = result.get("self")
        values = array(self_record.get("values")) if isinstance(self_record, dict) else None
        if not close(values, expected, str(expected.dtype)):
            return failed(
                f"{what}: x holds {short(values)}, expected {short(expected)}",
                f"myadd_ adds other into self ({S8})",
            )
        version = result.get("version_change")
        events = _keys(result.get("events")) or []
        keys = [key for name, key, _ in events if name == "myops::myadd_"]
        if version != 1:
            if "ADInplaceOrView" not in keys:
                return failed(
                    f"{what}: x._version changed by {version}, expected 1 (kernels that ran: {keys})",
                    f"nothing bumped the version counter: for a custom in-place operator the ADInplaceOrView key is "
                    f"a fallthrough until you register a kernel for it ({S8})",
                    "autograd checks saved tensors' versions in backward; without a bump, an overwritten input "
                    "goes unnoticed",
                )
            return failed(
                f"{what}: x._version changed by {version}, expected 1 (kernels that ran: {keys})",
                f"one in-place write is one version bump, done once by the ADInplaceOrView kernel ({S8})",
            )
    return passed("myadd_ writes into x's own storage, returns x and bumps its version once")


def decide_closing(inputs: Any, observed: Any) -> Verdict:
    if isinstance(observed, dict) and isinstance(observed.get("missing"), str):
        return _precheck(observed, "")  # type: ignore[return-value]
    attempts = observed.get("attempts") if isinstance(observed, dict) else None
    if not isinstance(attempts, list) or not attempts or not all(isinstance(a, dict) for a in attempts):
        return garbled("closing")
    for n, attempt in enumerate(attempts, start=1):
        if "setup_error" in attempt:
            return failed(
                f"calling register_myadd a second time on the same dispatcher, after closing the libraries of the "
                f"first call, failed:\n{_normalized(raised(attempt['setup_error']) or '')}",
                f"closing every returned Library undoes all its registrations, so a notebook cell can run again; "
                f"return all of them, the DEF one included ({S11})",
            )
        left = attempt.get("left")
        if not isinstance(left, list):
            return garbled("closing")
        if left:
            return failed(
                f"after closing the {attempt.get('count')} returned libraries (call {n}), registrations are left:\n"
                + "\n".join(str(x) for x in left),
                f"return every Library you created, the DEF one included: the caller closes exactly those ({S11})",
            )
    if len(attempts) != 2:
        return garbled("closing")
    return passed("after close() nothing is left, and register_myadd can run again (re-runnable notebook cell)")


# ---- the checks -----------------------------------------------------------------------------------

EXERCISE.add_check(
    "4.1", "schemas and kernels: myadd (CPU, Autograd), myadd_ (CPU, Autograd, ADInplaceOrView)", 1,
    plan=plan_nothing, observe="registrations", decide=decide_registrations,
)  # fmt: skip
EXERCISE.add_check(
    "4.2", "CPU kernel: values on random inputs", 2, plan=plan_values, observe="values", decide=decide_values
)
EXERCISE.add_check(
    "4.3", "different shapes: a clear error", 1,
    plan=plan_shape_errors, observe="shape_errors", decide=decide_shape_errors,
)  # fmt: skip
EXERCISE.add_check(
    "4.4", "the Autograd kernel runs first, the CPU kernel below autograd", 2,
    plan=plan_kernel_order, observe="kernel_order", decide=decide_kernel_order,
)  # fmt: skip
EXERCISE.add_check(
    "4.5", "gradients: grad_fn and backward()", 2, plan=plan_gradients, observe="gradients", decide=decide_gradients
)
EXERCISE.add_check(
    "4.6", "in-place myadd_: writes into self, returns self, bumps the version", 1,
    plan=plan_inplace, observe="inplace", decide=decide_inplace,
)  # fmt: skip
EXERCISE.add_check(
    "4.7", "closing the returned libraries undoes every registration", 1,
    plan=plan_nothing, observe="closing", decide=decide_closing,
)  # fmt: skip
