"""Exercise 07, worker side: register the learner's boxed fallback for Batched, call operators on
batched tensors, report results, dispatch traces and what is left on a boxed call's stack.

The fallback is registered with ``Library("_", "IMPL").fallback(fn, "Batched", with_keyset=True)`` on a
fresh dispatcher that gets its own copy of the generated front end. (A fresh dispatcher starts with
PyTorch's start-up fallbacks, one of which sits on Batched; that slot is cleared first, as a backend
would that takes the key over.) Operators are called through the at:: functions API, so the
dispatcher sees the BatchedTensor's key set. A trace entry is ``[operator, key, key-set names, TLS
exclude names]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from labsupport.grade.jsonable import attempt, build_once, decode_array, tensor

CALLS = {  # operator name in the plan -> (functions API name, dispatcher name, overload)
    "add": ("add", "aten::add", "Tensor"),
    "sub": ("sub", "aten::sub", "Tensor"),
    "mul": ("mul", "aten::mul", "Tensor"),
    "neg": ("neg", "aten::neg", ""),
    "sin": ("sin", "aten::sin", ""),
    "cos": ("cos", "aten::cos", ""),
    "sum": ("sum", "aten::sum", ""),
    "sum.dim_IntList": ("sum_dim_IntList", "aten::sum", "dim_IntList"),
}


def fresh_build_with_fallback(fallback: Any, name: str = "grade-ex07") -> tuple[ModuleType, Any]:
    """The default front end on a new dispatcher, with ``fallback`` as the Batched backend fallback."""
    import labsupport as lab
    from labsupport.c10.dispatch_key_set import SLOT_OF_KEY
    from labsupport.codegen import load_build

    dispatcher = lab.Dispatcher(name)
    dispatcher.fallbacks[SLOT_OF_KEY[lab.DispatchKey.Batched]] = None  # drop the start-up passthrough
    dispatcher._refresh_all()
    from labsupport.grade.tensors import scratch_dir

    # a build name of its own: a second load_build(name="torch") in one process would reuse the first
    # one's generated modules (bound to the first dispatcher)
    build = load_build(name=name.replace("-", "_"), dispatcher=dispatcher, out_dir=scratch_dir(name) / "build")
    library = lab.Library("_", "IMPL", dispatcher=dispatcher)
    library.fallback(fallback, "Batched", with_keyset=True)
    return build, library


def _build(learner: ModuleType) -> tuple[Any, dict[str, Any] | None]:
    def make(name: str) -> Any:
        fallback = getattr(learner, "batched_for_loop_fallback", None)
        if not callable(fallback):
            raise AttributeError("exercises/ex07_boxed_fallback.py has no function batched_for_loop_fallback")
        return fresh_build_with_fallback(fallback, name.replace("_", "-"))  # (build, library): keep both alive

    built, error = build_once("ex07", learner, make)
    return (None, error) if error is not None else (built[0], None)


def _value(learner: ModuleType, build: Any, spec: Any) -> Any:
    """A planned argument: a batched tensor (through the learner's given make_batched), a plain one, a number."""
    from labsupport.grade.tensors import make

    if isinstance(spec, dict) and "batched" in spec:
        return learner.make_batched(make(build.python_variable_methods.Tensor, decode_array(spec["batched"])))
    if isinstance(spec, dict) and "plain" in spec:
        return make(build.python_variable_methods.Tensor, decode_array(spec["plain"]))
    if isinstance(spec, dict) and "list" in spec:
        return list(spec["list"])
    return spec


def result_record(value: Any) -> dict[str, Any]:
    """A result: does it carry the Batched key, and the batch-first tensor it wraps (or itself)."""
    import labsupport as lab

    ks = getattr(value, "_ks", None)
    batched = isinstance(ks, int) and lab.DispatchKeySet.from_raw(ks).has(lab.DispatchKey.Batched)
    inner = getattr(value, "_batched_value", None) if batched else None
    return {"batched": batched, "full": tensor(inner if inner is not None else value)}


class _Trace:
    """A dispatcher observer: every dispatch with its key set and the TLS exclude set of that moment."""

    def __init__(self) -> None:
        self.events: list[list[Any]] = []

    def on_enter(self, event: Any) -> None:
        from labsupport.c10.dispatch_key_set import keys_of

        self.events.append(
            [event.op.full_name, event.key.name, [k.name for k in keys_of(event.key_set)],
             [k.name for k in keys_of(event.excluded)]]
        )  # fmt: skip

    def on_exit(self, event: Any) -> None:
        pass


@contextmanager
def _tracing() -> Iterator[_Trace]:
    from labsupport.c10.dispatcher import observers

    trace = _Trace()
    observers.add(trace)
    try:
        yield trace
    finally:
        observers.remove(trace)


def _call(build: Any, case: dict[str, Any], args: list[Any]) -> Any:
    return getattr(build.functions, CALLS[case["op"]][0])(*args)


# ---- the observers --------------------------------------------------------------------------------


def calls(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """Each planned operator call on batched (and plain) arguments: its result."""
    build, failure = _build(learner)
    if failure is not None:
        return {"build_error": failure}
    results = []
    for case in inputs["cases"]:
        ok, args = attempt(learner, lambda case=case: [_value(learner, build, a) for a in case["args"]])
        if ok:
            ok, value = attempt(learner, lambda case=case, args=args: _call(build, case, args))
        else:
            value = args
        results.append({"result": result_record(value)} if ok else {"raised": value})
    return {"results": results}


def trace(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """One planned call, traced: every dispatch it made, with key sets and the TLS exclude set."""
    import labsupport as lab

    build, failure = _build(learner)
    if failure is not None:
        return {"build_error": failure}
    case = inputs["case"]
    args = [_value(learner, build, a) for a in case["args"]]
    before = int(lab.tls_exclude_set())
    with _tracing() as seen:
        ok, value = attempt(learner, lambda: _call(build, case, args))
    observation: dict[str, Any] = {"events": seen.events, "tls_restored": int(lab.tls_exclude_set()) == before}
    observation.update({"result": result_record(value)} if ok else {"raised": value})
    return observation


def boxed_stack(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """``op.call_boxed(stack)`` with other entries below the operator's arguments: what the stack holds after."""
    build, failure = _build(learner)
    if failure is not None:
        return {"build_error": failure}
    results = []
    for case in inputs["cases"]:
        below = [_value(learner, build, v) for v in case["below"]]
        args = [_value(learner, build, a) for a in case["args"]]
        _, name, overload = CALLS[case["op"]]
        op = build.dispatcher.find_schema_or_throw(name, overload)
        stack = [*below, *args]
        ok, error = attempt(learner, lambda stack=stack, op=op: op.call_boxed(stack))
        record: dict[str, Any] = {
            "length": len(stack),
            "below_kept": [i < len(stack) and stack[i] is v for i, v in enumerate(below)],
            "arguments_left": sum(1 for v in stack if any(v is a for a in args)),
        }
        if not ok:
            record["raised"] = error
        elif len(stack) > len(below):
            record["top"] = result_record(stack[-1])
        results.append(record)
    return {"results": results}
