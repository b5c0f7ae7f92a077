"""Exercise 04, worker side: register the learner's operators on a fresh dispatcher, call them, report.

Every observer calls ``register_myadd`` on a new ``lab.Dispatcher`` and closes the returned libraries
afterwards. Which kernels ran, and with which key set, is seen through a dispatcher observer (the hook
the profiler uses) and reported as ``[operator, key, [key names of the key set]]`` triples.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from labsupport.grade.jsonable import attempt, decode_array, error_record, is_stub, tensor, text

NAME = "myops::myadd"
INPLACE = "myops::myadd_"


class Unregistered(Exception):
    """register_myadd itself failed; the record says how."""

    def __init__(self, observation: dict[str, Any]) -> None:
        super().__init__("register_myadd failed")
        self.observation = observation


def _close(libraries: Any) -> None:
    if isinstance(libraries, (list, tuple)):
        for lib in reversed(libraries):
            close = getattr(lib, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    pass


@contextmanager
def registered(learner: ModuleType) -> Iterator[tuple[Any, Any]]:
    """``(dispatcher, libraries)`` after the learner's ``register_myadd``; closed afterwards."""
    import labsupport as lab

    dispatcher = lab.Dispatcher("grade-ex04")
    register = getattr(learner, "register_myadd", None)
    if not callable(register):
        raise Unregistered({"missing": "register_myadd"})
    ok, libraries = attempt(learner, lambda: register(dispatcher))
    if not ok:
        raise Unregistered({"setup_error": libraries})
    try:
        yield dispatcher, libraries
    finally:
        _close(libraries)


def _setup(dispatcher: Any, libraries: Any) -> dict[str, Any]:
    """What register_myadd returned and registered."""
    import labsupport as lab

    info: dict[str, Any] = {"returned": type(libraries).__name__}
    items = list(libraries) if isinstance(libraries, (list, tuple)) else []
    info["all_libraries"] = bool(items) and all(isinstance(lib, lab.Library) for lib in items)
    info["foreign"] = sum(1 for lib in items if isinstance(lib, lab.Library) and lib.dispatcher is not dispatcher)
    for label, name in (("myadd", NAME), ("myadd_", INPLACE)):
        op = dispatcher.find_op(name)
        info[label] = {
            "schema": str(op.schema) if op is not None and op.schema is not None else None,
            "kernels": {
                key.name: [text(getattr(r.kernel, "debug", r), 80) for r in regs] for key, regs in op.kernels.items()
            }
            if op is not None
            else {},
        }
    return info


def _op(dispatcher: Any, name: str) -> Any:
    op = dispatcher.find_op(name)
    return op if op is not None and op.schema is not None else None


def _tensor(data: dict[str, Any], requires_grad: bool = False) -> Any:
    import labsupport.torch as torch
    from labsupport.grade.tensors import make

    t = make(torch.Tensor, decode_array(data))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _observe(learner: ModuleType, body: Any) -> dict[str, Any]:
    """Run ``body(dispatcher, libraries)`` with the learner's registrations; failures become records."""
    try:
        with registered(learner) as (dispatcher, libraries):
            observation = {"setup": _setup(dispatcher, libraries)}
            try:
                observation.update(body(dispatcher, libraries))
            except Exception as error:
                if is_stub(error):
                    raise
                observation["error"] = error_record(error, learner)
            return observation
    except Unregistered as failure:
        return failure.observation


@contextmanager
def _trace() -> Iterator[list[list[Any]]]:
    from labsupport.grade.instruments import observing

    events: list[list[Any]] = []
    with observing() as log:
        yield events
    from labsupport.c10.dispatch_key_set import keys_of

    for name, key, ks, _ in log.events:
        if name.startswith("myops::"):
            events.append([name, key.name, [k.name for k in keys_of(ks)]])


# ---- the observers --------------------------------------------------------------------------------


def registrations(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    return _observe(learner, lambda d, libs: {})


def values(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """myadd on same-shape inputs: the result and whether the inputs were left alone."""

    def body(dispatcher: Any, libraries: Any) -> dict[str, Any]:
        import numpy as np

        op = _op(dispatcher, NAME)
        if op is None:
            return {"no_op": True}
        results = []
        for case in inputs["cases"]:
            x, y = _tensor(case["a"]), _tensor(case["b"])
            a, b = np.array(x._data, copy=True), np.array(y._data, copy=True)
            ok, value = attempt(learner, lambda x=x, y=y: op(x, y))
            if not ok:
                results.append({"error": value})
                break
            unchanged = bool(np.array_equal(x._data, a) and np.array_equal(y._data, b))
            results.append({"result": tensor(value), "inputs_unchanged": unchanged})
        return {"results": results}

    return _observe(learner, body)


def shape_errors(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """myadd on inputs of different shapes: what it raised (or returned)."""

    def body(dispatcher: Any, libraries: Any) -> dict[str, Any]:
        op = _op(dispatcher, NAME)
        if op is None:
            return {"no_op": True}
        results = []
        for case in inputs["cases"]:
            x, y = _tensor(case["a"]), _tensor(case["b"])
            ok, value = attempt(learner, lambda x=x, y=y: op(x, y))
            results.append({"result": tensor(value)} if ok else {"raised": value})
        return {"results": results}

    return _observe(learner, body)


def kernel_order(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """Which kernels one myadd call runs, with which key sets, and whether the TLS is restored."""

    def body(dispatcher: Any, libraries: Any) -> dict[str, Any]:
        import labsupport as lab

        op = _op(dispatcher, NAME)
        if op is None:
            return {"no_op": True}
        calls = []
        for case in inputs["cases"]:
            x, y = _tensor(case["a"], case["requires_grad"]), _tensor(case["b"])
            before = (int(lab.tls_include_set()), int(lab.tls_exclude_set()))
            with _trace() as events:
                ok, value = attempt(learner, lambda x=x, y=y: op(x, y))
            restored = (int(lab.tls_include_set()), int(lab.tls_exclude_set())) == before
            calls.append({"events": events, "tls_restored": restored, **({} if ok else {"error": value})})
            if not ok:
                break
        return {"calls": calls}

    return _observe(learner, body)


def gradients(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """grad_fn and the gradients backward() leaves on both inputs; and a call under no_grad()."""

    def body(dispatcher: Any, libraries: Any) -> dict[str, Any]:
        import labsupport.torch as torch

        op = _op(dispatcher, NAME)
        if op is None:
            return {"no_op": True}
        results = []
        for case in inputs["cases"]:
            x, y = _tensor(case["a"], True), _tensor(case["b"], case["other_requires_grad"])
            ok, z = attempt(learner, lambda x=x, y=y: op(x, y))
            if not ok:
                results.append({"error": z})
                break
            record: dict[str, Any] = {
                "grad_fn": type(getattr(z, "grad_fn", None)).__name__,
                "requires_grad": bool(getattr(z, "requires_grad", False)),
            }
            if record["grad_fn"] != "NoneType":
                ok, error = attempt(learner, lambda z=z, case=case: z.backward(_tensor(case["seed"])))
                if not ok:
                    record["backward_error"] = error
                else:
                    record["self_grad"] = None if x.grad is None else tensor(x.grad)
                    record["other_grad"] = None if y.grad is None else tensor(y.grad)
            results.append(record)
        case = inputs["no_grad"]
        with torch.no_grad():
            ok, z = attempt(learner, lambda: op(_tensor(case["a"], True), _tensor(case["b"])))
        no_grad = {"grad_fn": type(getattr(z, "grad_fn", None)).__name__} if ok else {"error": z}
        return {"results": results, "no_grad": no_grad}

    return _observe(learner, body)


def inplace(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """myadd_: is the result self, is self's storage written (not replaced), the version, the kernels run."""

    def body(dispatcher: Any, libraries: Any) -> dict[str, Any]:
        import numpy as np

        op = _op(dispatcher, INPLACE)
        if op is None:
            return {"no_op": True}
        results = []
        for case in inputs["cases"]:
            x, y = _tensor(case["a"]), _tensor(case["b"])
            storage, version = x._data, x._version
            with _trace() as events:
                ok, value = attempt(learner, lambda x=x, y=y: op(x, y))
            if not ok:
                results.append({"error": value, "events": events})
                break
            results.append(
                {
                    "is_self": value is x,
                    "same_storage": x._data is storage,
                    "old_storage": _values(np, storage),
                    "self": tensor(x),
                    "returned": tensor(value),
                    "version_change": int(x._version - version),
                    "events": events,
                }
            )
        return {"results": results}

    return _observe(learner, body)


def _values(np: Any, array: Any) -> Any:
    from labsupport.grade.jsonable import values as as_values

    return as_values(array) if isinstance(array, np.ndarray) else None


def closing(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """Register, close the returned libraries, twice on one dispatcher: what is left each time."""
    import labsupport as lab

    dispatcher = lab.Dispatcher("grade-ex04-close")
    register = getattr(learner, "register_myadd", None)
    if not callable(register):
        return {"missing": "register_myadd"}
    attempts = []
    for _ in range(2):
        ok, libraries = attempt(learner, lambda: register(dispatcher))
        if not ok:
            attempts.append({"setup_error": libraries})
            break
        count = len(libraries) if isinstance(libraries, (list, tuple)) else None
        _close(libraries)
        left = []
        for name in (NAME, INPLACE):
            op = dispatcher.find_op(name)
            if op is not None and (op.schema is not None or op.kernels):
                left.append(text(dispatcher.dump(name), 600))
        attempts.append({"returned": type(libraries).__name__, "count": count, "left": left})
    return {"attempts": attempts}
