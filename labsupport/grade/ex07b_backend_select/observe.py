"""Worker side of ex07b: run the learner's ``compute_dispatch_key`` and BackendSelect kernels on the
given options and report, as plain JSON, the keys they return and which backend kernel each call
reached with which key set.

Some ``convert`` calls run under an ``IncludeDispatchKeyGuard`` or ``ExcludeDispatchKeyGuard`` on a
backend key (``inputs["guards"]``), so the thread-local sets matter. The operators live on a fresh
``lab.Dispatcher``: a factory ``ex07b::make`` (no tensor argument)
and ``ex07b::convert`` (a tensor plus options, like ``aten::_to_copy``), each with a recording kernel
on every backend key a factory can select. The parent runs these same functions with its reference
kernels to get the expected observations.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import ModuleType
from typing import Any

OPTIONS = "*, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None"
SCHEMAS = (f"make(int[] size, {OPTIONS}) -> Tensor", f"convert(Tensor self, {OPTIONS}) -> Tensor")
BACKEND_KEYS = [
    f"{functionality}{device}"
    for functionality in ("", "Quantized", "Sparse", "SparseCsr")
    for device in ("CPU", "CUDA", "Meta", "XLA")
] + ["MkldnnCPU"]


def compute_keys(learner: ModuleType, inputs: Any) -> Any:
    """What ``compute_dispatch_key`` returns for each ``[dtype, layout, device]``."""
    results = []
    for dtype, layout, device in inputs["options"]:
        key = learner.compute_dispatch_key(dtype, layout, device)
        results.append(getattr(key, "name", key) if not isinstance(key, str) else key)
    return [r if isinstance(r, str) else f"<{type(r).__name__}>" for r in results]


@contextmanager
def operators(learner: ModuleType) -> Iterator[dict[str, Any]]:
    """``{"make": op, "convert": op}`` on a fresh dispatcher, with the learner's BackendSelect kernels."""
    import labsupport as lab

    dispatcher = lab.Dispatcher("grade-ex07b")
    with ExitStack() as stack:
        defs = stack.enter_context(lab.Library("ex07b", "DEF", dispatcher=dispatcher))
        for schema in SCHEMAS:
            defs.define(schema)
        ops = {name: dispatcher.find_schema_or_throw(f"ex07b::{name}") for name in ("make", "convert")}
        for key in BACKEND_KEYS:
            backend = stack.enter_context(lab.Library("ex07b", "IMPL", key, dispatcher=dispatcher))
            for name in ops:
                backend.impl(name, _recording_kernel(key), with_keyset=True)
        select = stack.enter_context(lab.Library("ex07b", "IMPL", "BackendSelect", dispatcher=dispatcher))

        def make_select(ks: Any, *args: Any) -> Any:
            return learner.factory_backend_select(ops["make"], ks, *args)

        def convert_select(ks: Any, *args: Any) -> Any:
            return learner.convert_backend_select(ops["convert"], ks, *args)

        select.impl("make", make_select, with_keyset=True)
        select.impl("convert", convert_select, with_keyset=True)
        yield ops


def _recording_kernel(key: str) -> Any:
    def kernel(ks: Any, *args: Any) -> Any:
        return {"kernel": key, "keys": [k.name for k in ks]}

    kernel.__name__ = kernel.__qualname__ = f"record_{key}"
    return kernel


def _run(fn: Any) -> Any:
    try:
        result = fn()
    except NotImplementedError as error:
        if str(error).startswith("ex07b"):
            raise  # the untouched stub: "not done yet"
        return {"error": f"NotImplementedError: {str(error).splitlines()[0][:300]}"}
    except (RuntimeError, AssertionError, ValueError, TypeError, KeyError, AttributeError) as error:
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"}
    if isinstance(result, dict) and set(result) == {"kernel", "keys"}:
        return result
    return {"error": f"the BackendSelect kernel returned {type(result).__name__}, not what the backend kernel returned"}


def factory_calls(learner: ModuleType, inputs: Any) -> Any:
    """``[{"kernel": key, "keys": [...]}, ...]`` for ``make([2], dtype=..., layout=..., device=...)`` calls."""
    with operators(learner) as ops:
        return [
            _run(lambda d=dtype, la=layout, dev=device: ops["make"]([2], dtype=d, layout=la, device=dev))
            for dtype, layout, device in inputs["options"]
        ]


def tensor_calls(learner: ModuleType, inputs: Any) -> Any:
    """The same for ``convert(t, ...)`` on tensors made from ``inputs["tensors"]``."""
    import labsupport as lab
    import labsupport.torch as torch

    results = []
    guards = inputs.get("guards") or [None] * len(inputs["options"])
    with operators(learner) as ops:
        for spec, (dtype, layout, device), guard in zip(inputs["tensors"], inputs["options"], guards):
            with ExitStack() as stack:
                if spec["inference"]:
                    stack.enter_context(lab.InferenceMode())
                t = torch.tensor([1.0, 2.0], device=spec["device"])
            if spec["requires_grad"]:
                t.requires_grad_(True)
            with ExitStack() as stack:
                if guard is not None:
                    stack.enter_context(_guard(lab, guard))
                results.append(_run(lambda: ops["convert"](t, dtype=dtype, layout=layout, device=device)))  # noqa: B023
    return results


def _guard(lab: ModuleType, guard: Any) -> Any:
    """The TLS guard a call runs under: ``{"kind": "include" | "exclude", "key": name}``."""
    if guard.get("kind") not in ("include", "exclude") or guard.get("key") not in BACKEND_KEYS:
        raise ValueError(f"ex07b: unknown guard {guard!r}")
    cls = lab.IncludeDispatchKeyGuard if guard["kind"] == "include" else lab.ExcludeDispatchKeyGuard
    return cls(guard["key"])
