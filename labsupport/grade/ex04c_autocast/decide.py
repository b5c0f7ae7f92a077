"""Parent side of ex04c, an autocast kernel with a cast policy.

PyTorch's autocast kernels (aten/src/ATen/autocast_mode.h, ``WrapFunction_<policy>::call``) exclude
their own Autocast key with an ``ExcludeDispatchKeyGuard`` and call the operator again with the
eligible inputs cast (``cached_cast``): a tensor is eligible when it is on the autocast's device, is
floating point and is not float64. ``lower_precision_fp`` casts to the autocast dtype, ``fp32`` to
float32, ``promote`` to the widest eligible type (``promote_type``: float32 if any eligible input is
float32, else the autocast dtype). The parent runs the worker's observer with that reference kernel
on the lab's engine and compares what the backend kernels saw.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import compare_records, most_common
from labsupport.grade.ex04c_autocast import observe

EXERCISE = Exercise(
    id="ex04c",
    number="4c",
    title="An autocast kernel with a cast policy",
    filename="ex04c_autocast.py",
    notebook="04 (registering operators), section 9",
    observer="labsupport.grade.ex04c_autocast.observe",
)

POLICIES = ["lower_precision_fp", "fp32", "promote"]
DTYPES = ["float32", "float32", "float16", "float64", "int64"]
SECTION = "notebook 04, section 9 (autocast)"


# ----------------------------------------------------------------------------------------- plan
def _scenario(rng: Any, nested: bool) -> dict[str, Any]:
    arity = int(rng.integers(1, 4))
    device = str(rng.choice(["cpu", "cuda"]))
    tensors = [{"device": device, "dtype": str(rng.choice(DTYPES))} for _ in range(arity)]
    if arity > 1 and rng.random() < 0.3:
        tensors[-1]["device"] = "cuda" if device == "cpu" else "cpu"
    enabled = [["cpu"], ["cuda"], ["cpu", "cuda"], ["cpu", "cuda"]][int(rng.integers(4))]
    if not nested and rng.random() < 0.2:
        enabled = [d for d in ("cpu", "cuda") if d != device]
    return {"policy": str(rng.choice(POLICIES)), "tensors": tensors, "enabled": enabled, "nested": nested}


def plan_casts(rng: Any) -> dict[str, Any]:
    return {"autocast_dtype": "float16", "scenarios": [_scenario(rng, False) for _ in range(14)]}


def plan_nested(rng: Any) -> dict[str, Any]:
    scenarios = [_scenario(rng, True) for _ in range(6)]
    for s in scenarios:
        s["enabled"] = ["cpu", "cuda"]
        s["tensors"] = [{"device": s["tensors"][0]["device"], "dtype": "float32"} for _ in s["tensors"]]
    return {"autocast_dtype": "float16", "scenarios": scenarios}


# ------------------------------------------------------------------------------------ reference
def _eligible(t: Any, device: str) -> bool:
    return t.device.type == device and t.is_floating_point() and str(t.dtype) != "torch.float64"


def reference_autocast_kernel(
    op: Any, ks: Any, policy: str, device: str, autocast_dtype: Any, tensors: list[Any]
) -> Any:
    import labsupport as lab
    import labsupport.torch as torch

    with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet(observe.AUTOCAST_KEY[device])):
        if policy == "lower_precision_fp":
            target = autocast_dtype
        elif policy == "fp32":
            target = torch.float32
        else:
            eligible = [t for t in tensors if _eligible(t, device)]
            target = torch.float32 if any(t.dtype is torch.float32 for t in eligible) else autocast_dtype
        cast = [_cast(t, target) if _eligible(t, device) and t.dtype is not target else t for t in tensors]
        return op.call(*cast)


def _cast(t: Any, dtype: Any) -> Any:
    return type(t)._make(t._data.astype(dtype.np), t._sizes, dtype, t._device)


REFERENCE = SimpleNamespace(autocast_kernel=reference_autocast_kernel)


# --------------------------------------------------------------------------------------- decide
HINTS: dict[str, tuple[str, ...]] = {
    "guard": (
        f"an autocast kernel must exclude its own Autocast key before calling the operator again: the key it is "
        f"registered on, which device_type names ({SECTION})",
        "without that exclusion (or with another device's Autocast key excluded instead) the call comes straight "
        "back to the same autocast kernel; the tutorial (seed 003) excludes the Autocast key for the whole call "
        "with a guard",
    ),
    "nested_guard": (
        f"the exclusion must cover everything the operator does, not only the next dispatch ({SECTION})",
        "a redispatch with the Autocast key masked out skips your kernel once, but operators called from inside "
        "the backend kernel are autocast again; PyTorch's kernels hold an ExcludeDispatchKeyGuard (TLS) for the "
        "whole call",
    ),
    "own_key_only": (
        f"an autocast kernel excludes only its own key ({SECTION}; in PyTorch 2.13 a CPU autocast kernel "
        "excludes AutocastCPU and nothing else)",
        "excluding every Autocast key switches off the other device's autocast for everything called inside: "
        "the kernel registered on AutocastCPU steps past AutocastCPU only, the one on AutocastCUDA past "
        "AutocastCUDA only",
    ),
    "eligibility": (
        f"only eligible inputs are cast ({SECTION}; cached_cast in aten/src/ATen/autocast_mode.h)",
        "a tensor is eligible when it lives on the autocast's own device, is floating point and is not float64; "
        "integer and float64 tensors, and tensors of the other device, pass through unchanged",
    ),
    "policy": (
        f"each policy casts to its own dtype ({SECTION}; the CastPolicy list in aten/src/ATen/autocast_mode.h)",
        "lower_precision_fp: the autocast dtype; fp32: float32; promote: the widest eligible input type "
        "(float32 if any eligible input is float32, otherwise the autocast dtype)",
    ),
    "raised": (
        f"your autocast kernel raised on some inputs (the message says which); {SECTION} has a working kernel",
        "cast with the provided cast(t, dtype), pass the tensors to op.call in their order, and return its result",
    ),
    "format": ("return what the operator returns (the result of calling it again)",),
}


def _classify(scenario: dict[str, Any], given: dict[str, Any], expected: dict[str, Any]) -> str:
    if "error" in given:
        return "guard" if "Recursion" in given["error"] or "re-entered" in given["error"] else "raised"
    if given.get("autocast_kernel_calls", 0) > expected.get("autocast_kernel_calls", 0):
        return "guard"
    gb, eb = given.get("backend", []), expected.get("backend", [])
    if [b.get("excluded") for b in gb] != [b.get("excluded") for b in eb]:
        flags = [b.get("excluded", {}) for b in gb]
        if any(sum(f.values()) > sum(e.get("excluded", {}).values()) for f, e in zip(flags, eb)):
            return "own_key_only"
        return "nested_guard"
    if given.get("inner") != expected.get("inner"):
        gi, ei = given.get("inner", []), expected.get("inner", [])
        if any(g.get("dtype") == "float32" and e.get("dtype") == "float16" for g, e in zip(gi, ei)):
            return "own_key_only"
        return "nested_guard"
    if [b.get("dtypes") for b in gb] != [b.get("dtypes") for b in eb]:
        for g, e, t in zip(gb[0]["dtypes"] if gb else [], eb[0]["dtypes"] if eb else [], scenario["tensors"]):
            if g != e and (t["dtype"] in ("float64", "int64") or t["device"] not in scenario["enabled"]):
                return "eligibility"
        return "policy"
    return "policy"


def _decide(inputs: Any, observed: Any) -> Verdict:
    scenarios = inputs["scenarios"]
    calls = compare_records(observed, observe.autocast_calls(REFERENCE, inputs), _valid_record, HINTS["format"])
    if isinstance(calls, Verdict):
        return calls
    wrong = [(_classify(scenarios[n], given, expected), n, given, expected) for n, given, expected in calls]
    if not wrong:
        return Verdict(True, f"all {len(scenarios)} random autocast calls cast, guarded and redispatched right")
    reason, number, given, expected = most_common(wrong)
    s = scenarios[number]
    call = (
        f"policy {s['policy']}, inputs {[t['device'] + ' ' + t['dtype'] for t in s['tensors']]}, autocast on for "
        f"{s['enabled']}{', with inner calls' if s['nested'] else ''}"
    )
    return Verdict(
        False,
        f"{len(wrong)} of {len(scenarios)} calls went wrong, e.g. {call}: {_describe(given)}; "
        f"expected {_describe(expected)}",
        HINTS[reason],
    )


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _valid_record(record: Any) -> bool:
    """The shape ``observe.autocast_calls`` reports (the observations are untrusted data)."""
    if not isinstance(record, dict):
        return False
    if "error" in record:
        return isinstance(record["error"], str)
    backend, inner = record.get("backend"), record.get("inner")
    if not (isinstance(backend, list) and isinstance(inner, list) and isinstance(record.get("output"), str)):
        return False
    if type(record.get("autocast_kernel_calls")) is not int:
        return False
    for run in backend:
        if not (isinstance(run, dict) and isinstance(run.get("kernel"), str) and _strings(run.get("dtypes"))):
            return False
        excluded = run.get("excluded")
        if not (isinstance(excluded, dict) and all(isinstance(v, bool) for v in excluded.values())):
            return False
    return all(
        isinstance(i, dict) and isinstance(i.get("kernel"), str) and isinstance(i.get("dtype"), str) for i in inner
    )


def _describe(record: dict[str, Any]) -> str:
    if "error" in record:
        return record["error"]
    parts = [
        f"{b['kernel']} kernel got {b['dtypes']} (excluded: {[k for k, v in b['excluded'].items() if v]})"
        for b in record.get("backend", [])
    ]
    if record.get("inner"):
        parts.append(f"inner calls saw {[i['kernel'] + ' ' + i['dtype'] for i in record['inner']]}")
    return "; ".join(parts) or "no backend kernel ran"


EXERCISE.add_check(
    "4c.1", "casts per policy, eligibility and the guard on random calls", 6,
    plan=plan_casts, observe="autocast_calls", decide=_decide,
)  # fmt: skip
EXERCISE.add_check(
    "4c.2", "operators called inside the kernel: the guard holds, only the own key is excluded", 4,
    plan=plan_nested, observe="autocast_calls", decide=_decide,
)  # fmt: skip
