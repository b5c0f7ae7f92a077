"""Exercise 07, parent side: random calls on batched tensors, the expected results from the lab's own
engine (the operator run on each batch element with the default front end, then stacked), and the
verdicts on results, dispatch traces and boxed stacks.

The misunderstandings the hints name (each is a wrong submission in tests/test_grade_exercises.py):
no exclude guard around the per-element calls (seen in the trace's TLS exclude sets: 7.4); taking the
whole stack instead of the operator's arguments (stacks with the caller's entries below: 7.5); running
the operator once on the whole batch (make_batched's ValueError on a reduction: 7.3); leaving the
arguments on the stack (7.5); splitting plain tensors too (7.2); results not wrapped as batched (7.1).
"""

from __future__ import annotations

from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import array, close, describe, failed, garbled, is_tensor, passed, raised, short
from labsupport.grade.jsonable import decode_array, encode_array

EXERCISE = Exercise(
    id="ex07",
    number=7,
    title="A boxed fallback: batching every operator with a for loop",
    filename="ex07_boxed_fallback.py",
    notebook="07 (boxing, fallbacks, BackendSelect)",
    observer="labsupport.grade.ex07_boxed_fallback.observe",
)

S1 = "notebook 07, section 1 (Unboxed and boxed kernels)"
S3 = "notebook 07, section 3 (A boxed fallback that works for every operator)"
S4 = "notebook 07, section 4 (The batched for-loop fallback)"
FUNCTIONS = {"add": "add", "sub": "sub", "mul": "mul", "neg": "neg", "sin": "sin", "cos": "cos",
             "sum": "sum", "sum.dim_IntList": "sum_dim_IntList"}  # fmt: skip

# ---- inputs ---------------------------------------------------------------------------------------


def _batch(rng: Any, min_dims: int = 0) -> tuple[int, tuple[int, ...], str]:
    from labsupport.grade.tensors import FLOAT_DTYPES, random_shape

    size = int(rng.integers(2, 6))
    return size, random_shape(rng, min_dims=min_dims, max_dims=2), FLOAT_DTYPES[int(rng.integers(2))]


def _data(rng: Any, shape: tuple[int, ...], dtype: str) -> dict[str, Any]:
    from labsupport.grade.tensors import random_array

    return encode_array(random_array(rng, shape, dtype))


def _binary(rng: Any, mixed: bool) -> dict[str, Any]:
    size, shape, dtype = _batch(rng, min_dims=1 if mixed else 0)
    op = ("add", "sub", "mul")[int(rng.integers(3))]
    x = {"batched": _data(rng, (size, *shape), dtype)}
    if mixed:
        plain_shape = shape[int(rng.integers(len(shape) + 1)) :]  # a trailing part of the element shape
        y: dict[str, Any] = {"plain": _data(rng, plain_shape, dtype)}
    else:
        y = {"batched": _data(rng, (size, *shape), dtype)}
    args: list[Any] = [y, x] if mixed and rng.random() < 0.5 else [x, y]
    if op != "mul":
        args.append(int(rng.integers(-3, 4)) or 2)  # alpha
    return {"op": op, "args": args}


def _unary(rng: Any) -> dict[str, Any]:
    op = ("neg", "sin", "cos", "sum", "sum.dim_IntList")[int(rng.integers(5))]
    size, shape, dtype = _batch(rng, min_dims=1 if op == "sum.dim_IntList" else 0)
    x = {"batched": _data(rng, (size, *shape), dtype)}
    if op == "sum":
        return {"op": op, "args": [x, None]}
    if op == "sum.dim_IntList":
        return {"op": op, "args": [x, {"list": [int(rng.integers(len(shape)))]}, bool(rng.random() < 0.5), None]}
    return {"op": op, "args": [x]}


def plan_batched(rng: Any) -> dict[str, Any]:
    return {"cases": [_binary(rng, mixed=False) for _ in range(4)]}


def plan_mixed(rng: Any) -> dict[str, Any]:
    return {"cases": [_binary(rng, mixed=True) for _ in range(4)]}


def plan_unary(rng: Any) -> dict[str, Any]:
    cases = [_unary(rng) for _ in range(5)]
    size, shape, dtype = _batch(rng, min_dims=1)
    cases.append({"op": "sum", "args": [{"batched": _data(rng, (size, *shape), dtype)}, None]})  # always one
    return {"cases": cases}


def plan_trace(rng: Any) -> dict[str, Any]:
    case = _binary(rng, mixed=bool(rng.random() < 0.5)) if rng.random() < 0.5 else _unary(rng)
    return {"case": case}


def plan_stack(rng: Any) -> dict[str, Any]:
    cases = []
    for n in range(3):
        case = _binary(rng, mixed=bool(rng.random() < 0.5)) if n % 2 else _unary(rng)
        size, shape, dtype = _batch(rng)
        pool: list[Any] = [
            int(rng.integers(100)),
            "an entry of the caller",
            {"plain": _data(rng, shape, dtype)},
            {"batched": _data(rng, (size, *shape), dtype)},
        ]
        count = 1 + int(rng.integers(3))
        case["below"] = [pool[int(i)] for i in rng.permutation(len(pool))[:count]]
        cases.append(case)
    return {"cases": cases}


# ---- expected values: the operator on each element, with the lab's default front end --------------


def _element(spec: Any, index: int) -> Any:
    import labsupport.torch as torch
    from labsupport.grade.tensors import make

    if isinstance(spec, dict) and "batched" in spec:
        return make(torch.Tensor, decode_array(spec["batched"])[index])
    if isinstance(spec, dict) and "plain" in spec:
        return make(torch.Tensor, decode_array(spec["plain"]))
    if isinstance(spec, dict) and "list" in spec:
        return list(spec["list"])
    return spec


def batch_size(case: dict[str, Any]) -> int:
    return next(a["batched"]["shape"][0] for a in case["args"] if isinstance(a, dict) and "batched" in a)


def expected(case: dict[str, Any]) -> Any:
    """The batch-first result a for-loop over the batch gives."""
    import numpy as np

    import labsupport.torch as torch

    fn = getattr(torch._build.functions, FUNCTIONS[case["op"]])
    return np.stack([fn(*[_element(a, i) for a in case["args"]])._data for i in range(batch_size(case))])


def describe_call(case: dict[str, Any]) -> str:
    parts = []
    for a in case["args"]:
        if isinstance(a, dict) and "batched" in a:
            shape = a["batched"]["shape"]
            parts.append(f"batched({shape[0]} x {a['batched']['dtype']}{shape[1:]})")
        elif isinstance(a, dict) and "plain" in a:
            parts.append(f"plain {a['plain']['dtype']}{a['plain']['shape']}")
        elif isinstance(a, dict) and "list" in a:
            parts.append(str(a["list"]))
        else:
            parts.append(repr(a))
    return f"{case['op']}({', '.join(parts)})"


# ---- verdicts -------------------------------------------------------------------------------------

NOT_SPLIT = (
    f"your fallback ran the operator once on the whole batch instead of once per batch element ({S4})",
    "elementwise operators hide this mistake, because numpy broadcasts over the batch dimension too; a "
    "reduction does not: summing the whole batch at once leaves no batch dimension",
)
NO_GUARD = (
    f"the per-element calls ran with the Batched key still enabled: the loop must run below the Batched key "
    f"(excluded in the thread-local state) ({S4})",
    "excluding the key for the loop is what guarantees that nothing inside the per-element calls (an argument "
    "that is still batched, an operator that calls other operators) comes back into this fallback; functorch's "
    "fallback (aten/src/ATen/functorch/BatchedFallback.cpp) makes each per-element call with FuncTorchBatched "
    "excluded. Notebook 02, section 6 shows the guards",
)
POP_ALL = (
    f"your fallback took entries of the stack that were not its arguments: a boxed kernel owns only the top "
    f"entries, as many as the operator's schema has arguments ({S1}, {S3})",
    "the entries below the arguments belong to whoever called call_boxed (the interpreter, another boxed "
    "kernel); they must still be there, untouched, when the fallback returns",
)


RAISED = f"your fallback raised on this call; the line above is in your file ({S4})"


def _raised_verdict(what: str, record: Any) -> Verdict:
    text = raised(record) or "an exception"
    message = str(record.get("message", "")) if isinstance(record, dict) else ""
    if "make_batched needs" in message:
        return failed(f"{what} raised {text}", *NOT_SPLIT)
    if "_batched_value" in message:
        return failed(
            f"{what} raised {text}",
            f"only the batched arguments are split into elements: plain tensors and non-tensor arguments are "
            f"passed to every per-element call as they are ({S4})",
        )
    if "NoneType" in message or "has no data" in message:
        return failed(
            f"{what} raised {text}",
            f"the per-element calls must get batch elements (plain tensors with data), not the batched tensor "
            f"itself: a BatchedTensor has no data of its own ({S4})",
        )
    return failed(f"{what} raised {text}", RAISED)


def _result_verdict(what: str, record: Any, want: Any, size: int) -> Verdict | None:
    if not isinstance(record, dict):
        return garbled("the results")
    full = record.get("full")
    if record.get("batched") is not True:
        return failed(
            f"{what} returned {describe(full)} without the Batched key",
            f"the fallback pushes one batched result per return of the schema: the per-element results stacked "
            f"along a new first dimension and wrapped as a batched tensor ({S4})",
        )
    if not is_tensor(full):
        return failed(f"{what}: the batched result wraps {describe(full)}", f"see {S4}")
    if full["sizes"] != list(want.shape):
        if len(full["sizes"]) == len(want.shape) - 1 or (full["sizes"] and full["sizes"][0] != size):
            return failed(
                f"{what}: the batched result wraps sizes {full['sizes']}, expected {list(want.shape)} (batch first)",
                *NOT_SPLIT,
            )
        return failed(
            f"{what}: the batched result wraps sizes {full['sizes']}, expected {list(want.shape)} (batch first)",
            f"stack the per-element results along a new first dimension ({S4})",
        )
    values = array(full.get("values"))
    if not close(values, want, full["dtype"]):
        return failed(
            f"{what}:\n  expected {short(want)}\n  got      {short(values)}",
            f"element i of the result is the operator applied to element i of each batched argument ({S4})",
        )
    return None


def decide_calls(inputs: Any, observed: Any) -> Verdict:
    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    results = observed.get("results") if isinstance(observed, dict) else None
    if not isinstance(results, list) or len(results) != len(inputs["cases"]):
        return garbled("the results")
    for case, result in zip(inputs["cases"], results):
        what = describe_call(case)
        if not isinstance(result, dict):
            return garbled("the results")
        if "raised" in result:
            return _raised_verdict(what, result["raised"])
        verdict = _result_verdict(what, result.get("result"), expected(case), batch_size(case))
        if verdict is not None:
            return verdict
    return passed(f"{len(results)} random calls give the per-element results, stacked")


def _build_failed(observed: dict[str, Any]) -> Verdict:
    return failed(
        f"registering batched_for_loop_fallback for Batched failed:\n{raised(observed['build_error'])}",
        f"keep the name and signature of the stub, batched_for_loop_fallback(op, ks, stack) ({S3})",
    )


def _events(value: Any) -> list[tuple[str, str, list[str], list[str]]] | None:
    if not isinstance(value, list):
        return None
    out = []
    for e in value:
        if not (isinstance(e, list) and len(e) == 4 and isinstance(e[0], str) and isinstance(e[1], str)):
            return None
        if not (isinstance(e[2], list) and isinstance(e[3], list)):
            return None
        out.append((e[0], e[1], [str(k) for k in e[2]], [str(k) for k in e[3]]))
    return out


def decide_trace(inputs: Any, observed: Any) -> Verdict:
    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    case = inputs["case"]
    what = describe_call(case)
    size = batch_size(case)
    events = _events(observed.get("events")) if isinstance(observed, dict) else None
    if events is None:
        return garbled("the dispatch trace")
    if "raised" in observed:
        return _raised_verdict(what, observed["raised"])
    if not events or events[0][1] != "Batched":
        return failed(
            f"{what}: the first kernel was {events[0][1] if events else 'none'}, expected the Batched fallback",
            f"see {S3}",
        )
    name = events[0][0]
    inner = [e for e in events[1:] if e[0] == name]
    batched_inner = [e for e in inner if "Batched" in e[2]]
    if batched_inner:
        return failed(
            f"{what}: {len(batched_inner)} inner call(s) of {name} still had Batched in their key set",
            f"the per-element calls must get batch elements, not the batched tensors ({S4})",
        )
    backend = [e for e in inner if e[1] == "CPU"]
    if len(backend) != size:
        hints = NOT_SPLIT if len(backend) == 1 else (f"call the operator once per batch element ({S4})",)
        return failed(
            f"{what} on a batch of {size}: the CPU kernel of {name} ran {len(backend)} time(s), expected {size}",
            *hints,
        )
    unguarded = [e for e in inner if "Batched" not in e[3]]
    if unguarded:
        return failed(
            f"{what}: the per-element calls were dispatched with the thread-local exclude set "
            f"{unguarded[0][3] or '(empty)'}, which does not hold Batched",
            *NO_GUARD,
        )
    if observed.get("tls_restored") is not True:
        return failed(
            f"{what}: after the call, the thread-local exclude set was not restored",
            f"a guard must be left when the loop is done, whatever happens in it: use it as a context manager "
            f"({S4})",
        )
    verdict = _result_verdict(what, observed.get("result"), expected(case), size)
    if verdict is not None:
        return verdict
    return passed(
        f"{what}: one Batched fallback call, then {size} CPU calls on the elements with Batched excluded"
    )


def decide_stack(inputs: Any, observed: Any) -> Verdict:
    if isinstance(observed, dict) and "build_error" in observed:
        return _build_failed(observed)
    results = observed.get("results") if isinstance(observed, dict) else None
    if not isinstance(results, list) or len(results) != len(inputs["cases"]):
        return garbled("the boxed stacks")
    for case, result in zip(inputs["cases"], results):
        if not isinstance(result, dict) or not isinstance(result.get("below_kept"), list):
            return garbled("the boxed stacks")
        below = len(case["below"])
        what = (
            f"call_boxed of {describe_call(case)} on a stack with {below} entr{'y' if below == 1 else 'ies'} of the "
            "caller below the arguments"
        )
        if "raised" in result:
            verdict = _raised_verdict(what, result["raised"])
            if below and verdict.hints == (RAISED,):  # the caller's entries below are what is new in this check
                return failed(
                    verdict.message,
                    "your fallback raised when the stack held entries of the caller below this call's arguments: "
                    "did it take them as arguments too? A boxed kernel owns only the top entries, as many as the "
                    f"operator's schema has arguments ({S1}, {S3})",
                    *POP_ALL[1:],
                )
            return verdict
        length = result.get("length")
        if not all(k is True for k in result["below_kept"]) or not isinstance(length, int) or length < below + 1:
            return failed(
                f"{what}: afterwards the stack holds {length} entries and the caller's entries below are "
                f"{'kept' if all(k is True for k in result['below_kept']) else 'gone or replaced'}; expected "
                f"the {below} entries of the caller, then the result",
                *POP_ALL,
            )
        if result.get("arguments_left") or length != below + 1:
            return failed(
                f"{what}: afterwards the stack holds {length} entries ({result.get('arguments_left')} of them the "
                f"call's own arguments); expected the {below} entries of the caller, then the result",
                f"a boxed kernel pops its arguments off the stack, then pushes its results ({S1}, {S3})",
            )
        verdict = _result_verdict(what, result.get("top"), expected(case), batch_size(case))
        if verdict is not None:
            return verdict
    return passed("boxed calls pop exactly the operator's arguments and push one result; the caller's entries stay")


# ---- the checks -----------------------------------------------------------------------------------

EXERCISE.add_check(
    "7.1", "add, sub, mul of two batched tensors (alpha too)", 2,
    plan=plan_batched, observe="calls", decide=decide_calls,
)  # fmt: skip
EXERCISE.add_check(
    "7.2", "a batched and an unbatched argument", 2, plan=plan_mixed, observe="calls", decide=decide_calls
)
EXERCISE.add_check(
    "7.3", "unary operators and reductions (sum, sum over a dim)", 2,
    plan=plan_unary, observe="calls", decide=decide_calls,
)  # fmt: skip
EXERCISE.add_check(
    "7.4", "the dispatch trace: one call per element, below the Batched key", 2,
    plan=plan_trace, observe="trace", decide=decide_trace,
)  # fmt: skip
EXERCISE.add_check(
    "7.5", "the boxed stack: pop only the arguments, push the results", 2,
    plan=plan_stack, observe="boxed_stack", decide=decide_stack,
)  # fmt: skip
