"""Worker side of ex04c: register the learner's autocast kernel on AutocastCPU and AutocastCUDA of a
few operators (fresh ``lab.Dispatcher``), switch autocast on the way notebook 04 does, call the
operators and report what the backend kernels saw, as plain JSON.

What a backend kernel records: the dtypes it received, whether AutocastCPU / AutocastCUDA were in
the TLS exclude set while it ran, and (for nested scenarios) the dtypes an inner operator's backend
kernel saw when called from inside it. The parent runs this same function with its reference kernel
to get the expected observations.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import ModuleType
from typing import Any

OPS = {
    1: "f1(Tensor a) -> Tensor",
    2: "f2(Tensor a, Tensor b) -> Tensor",
    3: "f3(Tensor a, Tensor b, Tensor c) -> Tensor",
}
INNER = "inner(Tensor a) -> Tensor"
AUTOCAST_KEY = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}


def _tensor(device: str, dtype: str) -> Any:
    import labsupport.torch as torch

    return torch.tensor([1.0, 2.0], dtype=getattr(torch, dtype), device=device)


@contextmanager
def autocast(devices: list[str]) -> Iterator[None]:
    """Like ``torch.autocast(device)`` for each device: its Autocast key leaves the TLS exclude set."""
    import labsupport as lab

    include, exclude = lab.tls_include_set(), lab.tls_exclude_set()
    with lab.ForceDispatchKeyGuard(include, exclude - lab.DispatchKeySet([AUTOCAST_KEY[d] for d in devices])):
        yield


def autocast_calls(learner: ModuleType, inputs: Any) -> Any:
    import labsupport as lab
    import labsupport.torch as torch

    dtype = getattr(torch, inputs["autocast_dtype"])
    results = []
    dispatcher = lab.Dispatcher("grade-ex04c")  # each scenario's libraries are closed before the next one
    for scenario in inputs["scenarios"]:
        record: dict[str, Any] = {"backend": [], "inner": [], "autocast_kernel_calls": 0}
        with ExitStack() as stack:
            defs = stack.enter_context(lab.Library("ex04c", "DEF", dispatcher=dispatcher))
            name = OPS[len(scenario["tensors"])].split("(")[0]
            defs.define(OPS[len(scenario["tensors"])])
            defs.define(INNER)
            op = dispatcher.find_schema_or_throw(f"ex04c::{name}")
            inner = dispatcher.find_schema_or_throw("ex04c::inner")
            for device, key in (("cpu", "CPU"), ("cuda", "CUDA")):
                backend = stack.enter_context(lab.Library("ex04c", "IMPL", key, dispatcher=dispatcher))
                backend.impl(name, _backend_kernel(key, record, scenario.get("nested", False), inner))
                backend.impl("inner", _inner_kernel(key, record))
                cast_lib = stack.enter_context(
                    lab.Library("ex04c", "IMPL", AUTOCAST_KEY[device], dispatcher=dispatcher)
                )
                cast_lib.impl(
                    name, _autocast_kernel(learner, op, scenario["policy"], device, dtype, record), with_keyset=True
                )
                cast_lib.impl(
                    "inner",
                    _autocast_kernel(learner, inner, "lower_precision_fp", device, dtype, None),
                    with_keyset=True,
                )
            tensors = [_tensor(t["device"], t["dtype"]) for t in scenario["tensors"]]
            try:
                with autocast(scenario["enabled"]):
                    out = op.call(*tensors)
                record["output"] = str(getattr(out, "dtype", type(out).__name__)).replace("torch.", "")
            except NotImplementedError as error:
                if str(error).startswith("ex04c"):
                    raise
                record["error"] = f"NotImplementedError: {str(error).splitlines()[0][:200]}"
            except (RuntimeError, RecursionError, TypeError, ValueError, AttributeError, AssertionError) as error:
                record["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:400] if str(error) else ''}"
        results.append(record)
    return results


def _excluded() -> dict[str, bool]:
    import labsupport as lab

    exclude = lab.tls_exclude_set()
    return {key: exclude.has(key) for key in ("AutocastCPU", "AutocastCUDA")}


def _backend_kernel(key: str, record: dict[str, Any], nested: bool, inner: Any) -> Any:
    def kernel(*tensors: Any) -> Any:
        record["backend"].append(
            {"kernel": key, "dtypes": [str(t.dtype).replace("torch.", "") for t in tensors], "excluded": _excluded()}
        )
        if nested:  # a kernel built from other operators: the inner calls see this kernel's TLS
            inner.call(_tensor("cpu", "float32"))
            inner.call(_tensor("cuda", "float32"))
        return tensors[0]

    return kernel


def _inner_kernel(key: str, record: dict[str, Any]) -> Any:
    def kernel(a: Any) -> Any:
        record["inner"].append({"kernel": key, "dtype": str(a.dtype).replace("torch.", "")})
        return a

    return kernel


def _autocast_kernel(learner: Any, op: Any, policy: str, device: str, dtype: Any, record: dict[str, Any] | None) -> Any:
    def kernel(ks: Any, *tensors: Any) -> Any:
        if record is not None:
            record["autocast_kernel_calls"] += 1
        return learner.autocast_kernel(op, ks, policy, device, dtype, list(tensors))

    kernel.__name__ = kernel.__qualname__ = "autocast_kernel"
    return kernel
