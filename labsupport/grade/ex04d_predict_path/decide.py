"""Parent side of ex04d, "predict the path": random registrations, tensors and guards; the learner
says which kernels run, in which order, with which key sets.

The expected path is what the lab's engine does with the very same scenario: the parent builds the
operator on a fresh ``lab.Dispatcher`` (PyTorch's start-up fallbacks included), makes the tensors,
enters the guards, calls the operator and records every dispatch (call and redispatch) with a
dispatcher observer, the hook ``lab.trace()`` and the profiler use.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import most_common

EXERCISE = Exercise(
    id="ex04d",
    number="4d",
    title="Predict the path of a call",
    filename="ex04d_predict_path.py",
    notebook="04 (registering operators), with 02 and 07",
    observer="labsupport.grade.ex04d_predict_path.observe",
)

SCENARIOS = 12
GUARDS = [
    {"kind": "AutoDispatchBelowAutograd"},
    {"kind": "AutoDispatchBelowADInplaceOrView"},
    {"kind": "ExcludeDispatchKeyGuard", "keys": ["AutogradCPU"]},
    {"kind": "ExcludeDispatchKeyGuard", "keys": ["ADInplaceOrView"]},
    {"kind": "IncludeDispatchKeyGuard", "keys": ["Tracer"]},
    {"kind": "autocast_cpu"},
    {"kind": "InferenceMode"},
]


# ----------------------------------------------------------------------------------------- plan
def _scenario(rng: Any) -> dict[str, Any]:
    kernels: dict[str, str] = {}
    for key in ("CPU", "CUDA", "Meta"):
        if rng.random() < 0.45:
            kernels[key] = "backend"
    roll = rng.random()
    if roll < 0.25:
        kernels["CompositeExplicitAutograd"] = "backend"
    elif roll < 0.4:
        kernels["CompositeImplicitAutograd"] = "math"
    roll = rng.random()
    if roll < 0.45:
        kernels["Autograd"] = "autograd"
    elif roll < 0.6:
        kernels["AutogradCPU"] = "autograd"
    elif roll < 0.72:
        kernels["AutogradCPU"] = "fallthrough"
    if rng.random() < 0.35:
        kernels["ADInplaceOrView"] = "inplace_or_view"
    if rng.random() < 0.3:
        kernels["AutocastCPU"] = "autocast"
    tensors = []
    for _ in range(2):
        tensors.append(
            {
                "device": str(rng.choice(["cpu", "cpu", "cpu", "cuda", "cuda", "meta"])),
                "dtype": str(rng.choice(["float32", "float64", "int64"])),
                "requires_grad": bool(rng.random() < 0.5),
                "inference": bool(rng.random() < 0.15),
            }
        )
    if rng.random() < 0.5:  # most calls use tensors of one device
        tensors[1]["device"] = tensors[0]["device"]
    for t in tensors:
        if t["dtype"] == "int64" or t["inference"]:
            t["requires_grad"] = False
    count = int(rng.choice([0, 0, 1, 1, 2]))
    guards = [GUARDS[int(i)] for i in rng.choice(len(GUARDS), size=count, replace=False)]
    if "autocast_cpu" not in [g["kind"] for g in guards] and "AutocastCPU" in kernels and rng.random() < 0.6:
        guards.append({"kind": "autocast_cpu"})
    inplace = "ADInplaceOrView" in kernels
    schema = (
        "op_(Tensor(a!) self, Tensor other) -> Tensor(a!)" if inplace else "op(Tensor self, Tensor other) -> Tensor"
    )
    return {"schema": schema, "kernels": kernels, "tensors": tensors, "guards": guards}


def plan_paths(rng: Any) -> dict[str, Any]:
    return {"scenarios": [_scenario(rng) for _ in range(SCENARIOS)]}


# ------------------------------------------------------------------------------------ reference
@contextmanager
def _guard(spec: dict[str, Any]) -> Any:
    import labsupport as lab

    kind = spec["kind"]
    if kind == "AutoDispatchBelowAutograd":
        with lab.AutoDispatchBelowAutograd():
            yield
    elif kind == "AutoDispatchBelowADInplaceOrView":
        with lab.AutoDispatchBelowADInplaceOrView():
            yield
    elif kind == "ExcludeDispatchKeyGuard":
        with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet(spec["keys"])):
            yield
    elif kind == "IncludeDispatchKeyGuard":
        with lab.IncludeDispatchKeyGuard(lab.DispatchKeySet(spec["keys"])):
            yield
    elif kind == "autocast_cpu":  # notebook 04's switch: stop excluding AutocastCPU
        include, exclude = lab.tls_include_set(), lab.tls_exclude_set()
        with lab.ForceDispatchKeyGuard(include, exclude - lab.DispatchKeySet("AutocastCPU")):
            yield
    elif kind == "InferenceMode":
        with lab.InferenceMode():
            yield
    else:
        raise ValueError(kind)


class _Recorder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.path: list[list[Any]] = []

    def on_enter(self, event: Any) -> None:
        if event.op.full_name != self.name:
            return
        entry = event.entry
        if entry.label == "missing":
            return  # nothing runs: the call raises "Could not run ..." (a boxed redispatch raises unobserved)
        if entry.label == "backend fallback":
            kernel = "fallback"
        else:
            kernel = entry.registration.debug
        keys = [k.name for k in _keys(int(event.key_set))]
        self.path.append([entry.key.name, kernel, keys])

    def on_exit(self, event: Any) -> None:
        pass


def _keys(raw: int) -> Any:
    import labsupport as lab

    return list(lab.DispatchKeySet.from_raw(raw))


def reference_path(scenario: dict[str, Any]) -> list[list[Any]]:
    """Run the scenario on the lab's engine and return the path it takes."""
    import labsupport as lab
    import labsupport.torch as torch
    from labsupport.c10.dispatcher import observers
    from labsupport.c10.kernel_function import KernelFunction

    dispatcher = lab.Dispatcher("ex04d reference")
    defs = lab.Library("ex04d", "DEF", dispatcher=dispatcher)
    defs.define(scenario["schema"])
    name = "ex04d::" + scenario["schema"].split("(")[0]
    op = dispatcher.find_schema_or_throw(name)
    impl = lab.Library("ex04d", "IMPL", dispatcher=dispatcher)
    libraries = [impl, defs]
    try:
        for key, kind in scenario["kernels"].items():
            impl.impl(name.split("::")[1], _kernel(op, key, kind, KernelFunction), key)
        tensors = []
        for spec in scenario["tensors"]:
            with ExitStack() as stack:
                if spec["inference"]:
                    stack.enter_context(lab.InferenceMode())
                dtype = getattr(torch, spec["dtype"])
                t = torch.tensor([1, 2], dtype=dtype, device=spec["device"])
            if spec["requires_grad"]:
                t.requires_grad_(True)
            tensors.append(t)
        recorder = _Recorder(name)
        observers.add(recorder)
        try:
            with ExitStack() as stack:
                for guard in scenario["guards"]:
                    stack.enter_context(_guard(guard))
                try:
                    op.call(*tensors)
                except NotImplementedError:
                    pass  # a missing kernel, or the Meta fallback: the path ends there
        finally:
            observers.remove(recorder)
        return recorder.path
    finally:
        for library in libraries:
            library.close()


def _kernel(op: Any, key: str, kind: str, kernel_function: Any) -> Any:
    import labsupport as lab

    if kind == "fallthrough":
        return lab.fallthrough_kernel
    if kind in ("backend", "math"):

        def kernel(self: Any, other: Any) -> Any:
            return self

        return kernel_function.from_unboxed(kernel, debug=f"fn_{key}")
    if kind == "autograd":

        def autograd(ks: Any, self: Any, other: Any) -> Any:
            return op.redispatch(ks & lab.after_autograd_keyset, self, other)

        return kernel_function.from_unboxed(autograd, with_keyset=True, debug=f"fn_{key}")
    if kind == "inplace_or_view":

        def inplace_or_view(ks: Any, self: Any, other: Any) -> Any:
            return op.redispatch(ks & lab.after_ADInplaceOrView_keyset, self, other)

        return kernel_function.from_unboxed(inplace_or_view, with_keyset=True, debug=f"fn_{key}")
    if kind == "autocast":

        def autocast(self: Any, other: Any) -> Any:
            with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet("AutocastCPU")):
                return op.call(self, other)

        return kernel_function.from_unboxed(autocast, debug=f"fn_{key}")
    raise ValueError(kind)


# --------------------------------------------------------------------------------------- decide
S02, S04, S07 = (
    "notebook 02 (TLS include/exclude sets)",
    "notebook 04",
    "notebook 07, section 5 (fallthrough and the mask)",
)
HINTS: dict[str, tuple[str, ...]] = {
    "requires_grad": (
        f"requires_grad does not change a tensor's dispatch keys ({S02}, tensor key sets)",
        "every non-inference CPU tensor carries CPU, ADInplaceOrView, AutogradCPU and AutocastCPU whether or not "
        "it requires grad; the Autograd entry runs either way (only inference tensors lack the autograd keys)",
    ),
    "autocast_excluded": (
        f"the Autocast keys are in the default TLS exclude set ({S02}; {S04}, section 9)",
        "a call's key set is ((tensor keys | TLS include) - TLS exclude) & mask; AutocastCPU only survives while "
        "autocast is switched on (the autocast_cpu guard), and an autocast kernel excludes its own key again",
    ),
    "mask": (
        f"fallthrough keys are masked out before the lookup ({S07})",
        "BackendSelect and ADInplaceOrView come from the TLS include set, but both are global fallthroughs: they "
        "stay in the key set only if the operator has a real kernel there. A per-operator fallthrough (on "
        "AutogradCPU) clears that key for calls whose highest backend is CPU",
    ),
    "guards": (
        f"a guard changes the TLS sets of every call inside it ({S02}, guards; {S04}, section 6)",
        "AutoDispatchBelowAutograd excludes the autograd keys; AutoDispatchBelowADInplaceOrView also "
        "ADInplaceOrView; ExcludeDispatchKeyGuard(AutogradCPU) clears the Autograd functionality for every "
        "backend; IncludeDispatchKeyGuard(Tracer) adds Tracer; InferenceMode drops ADInplaceOrView from the "
        "include set and excludes the autograd keys",
    ),
    "inference": (
        f"tensors made under inference mode carry only their backend and Autocast keys ({S02}, tensor key sets)",
        "an inference tensor has no ADInplaceOrView and no Autograd keys, so a call on it alone skips autograd",
    ),
    "backend": (
        f"with tensors on several devices, the highest backend bit wins ({S02}, highest priority key)",
        "a key set's functionality keys pair with every backend bit; the slot is the highest functionality key "
        "combined with the highest backend (Meta > CUDA > CPU)",
    ),
    "redispatch": (
        f"what a kernel redispatches with decides the next step ({S04}, sections 6 and 8)",
        "an autograd kernel (and the autograd fallback) redispatches with its key set restricted to the keys after "
        "autograd, which keeps ADInplaceOrView; an ADInplaceOrView kernel to the keys after ADInplaceOrView; the "
        "autocast kernel makes a fresh call with AutocastCPU excluded (the TLS and the mask apply again); "
        "Tracer's fallback steps past Tracer",
    ),
    "table": (
        f"the kernel a slot holds follows the table precedence ({S04}, section 10; exercise ex04b)",
        "direct kernel > CompositeExplicitAutograd > CompositeImplicitAutograd (on autograd keys only when the "
        "backend has no kernel) > Autograd alias > global fallback > missing",
    ),
    "stop": (
        f"a path ends at a kernel that does not redispatch ({S04})",
        "backend and math kernels compute the result; the Meta fallback raises and a missing entry runs "
        "nothing (the call raises 'Could not run ...'): the path ends there. "
        "Autograd kernels, the autograd fallback, ADInplaceOrView, autocast and Tracer continue",
    ),
    "format": ("return a list of steps [key, kernel, [keys of the key set]] (see predict_path's docstring)",),
}

AUTOGRAD = {"AutogradCPU", "AutogradCUDA", "AutogradMeta", "AutogradOther"}
BACKENDS = {"CPU", "CUDA", "Meta"}


def _valid(path: Any) -> list[list[Any]] | None:
    if not isinstance(path, list):
        return None
    steps = []
    for step in path:
        if not (isinstance(step, list) and len(step) == 3 and isinstance(step[0], str) and isinstance(step[1], str)):
            return None
        if not (isinstance(step[2], list) and all(isinstance(k, str) for k in step[2])):
            return None
        steps.append([step[0], step[1], sorted(step[2])])
    return steps


def _classify(scenario: dict[str, Any], index: int, given: list[Any] | None, expected: list[Any] | None) -> str:
    if given is None or expected is None:
        return "stop" if index > 0 else "format"
    gk, ek = set(given[2]), set(expected[2])
    if gk != ek:
        extra, lacking = gk - ek, ek - gk
        guards = {g["kind"] for g in scenario["guards"]}
        if index > 0 and not (extra | lacking) & {"AutocastCPU"}:
            return "redispatch"
        if extra & {"AutocastCPU", "AutocastCUDA"}:
            return "autocast_excluded"
        if extra & {"ADInplaceOrView", "BackendSelect"} or (extra & AUTOGRAD and "AutogradCPU" in scenario["kernels"]):
            return (
                "mask"
                if not guards & {"InferenceMode", "ExcludeDispatchKeyGuard", "AutoDispatchBelowADInplaceOrView"}
                else "guards"
            )
        if lacking & AUTOGRAD and not guards and not any(t["inference"] for t in scenario["tensors"]):
            return "requires_grad"
        if (extra | lacking) & AUTOGRAD and any(t["inference"] for t in scenario["tensors"]) and not guards:
            return "inference"
        if (extra | lacking) & BACKENDS:
            return "backend"
        return "guards"
    if given[0] != expected[0]:
        return "backend"
    return "table"


def decide_paths(inputs: Any, observed: Any) -> Verdict:
    scenarios = inputs["scenarios"]
    if not isinstance(observed, list) or len(observed) != len(scenarios):
        return Verdict(False, "predict_path did not return one path per scenario", HINTS["format"])
    reasons: list[tuple[str, int, Any, Any]] = []
    for number, (scenario, answer) in enumerate(zip(scenarios, observed)):
        given = _valid(answer)
        if given is None:
            return Verdict(
                False, f"predict_path returned {str(answer)[:80]!r}, not a list of [key, kernel, keys]", HINTS["format"]
            )
        expected = [[k, n, sorted(ks)] for k, n, ks in reference_path(scenario)]
        if given == expected:
            continue
        index = next(
            i
            for i in range(max(len(given), len(expected)))
            if i >= len(given) or i >= len(expected) or given[i] != expected[i]
        )
        g = given[index] if index < len(given) else None
        e = expected[index] if index < len(expected) else None
        reasons.append((_classify(scenario, index, g, e), number, index, (g, e)))
    if not reasons:
        return Verdict(True, f"all {len(scenarios)} random paths predicted step by step")
    reason, number, index, (g, e) = most_common(reasons)
    scenario = scenarios[number]
    message = (
        f"{len(reasons)} of {len(scenarios)} paths wrong. For example, kernels {scenario['kernels']}, tensors "
        f"{[_short(t) for t in scenario['tensors']]}, guards {[_guard_name(x) for x in scenario['guards']]}: "
        f"step {index + 1} is {_step(e)}, you predicted {_step(g)}"
    )
    return Verdict(False, message, HINTS[reason])


def _short(t: dict[str, Any]) -> str:
    flags = (
        [t["device"], t["dtype"]]
        + (["requires_grad"] if t["requires_grad"] else [])
        + (["inference"] if t["inference"] else [])
    )
    return " ".join(flags)


def _guard_name(g: dict[str, Any]) -> str:
    return f"{g['kind']}({', '.join(g['keys'])})" if "keys" in g else g["kind"]


def _step(step: Any) -> str:
    if step is None:
        return "(the end of the path)"
    return f"{step[0]}: {step[1]} with {{{', '.join(step[2])}}}"


EXERCISE.add_check(
    "4d.1", "kernels, order and key sets of random calls", 10,
    plan=plan_paths, observe="predict_paths", decide=decide_paths,
)  # fmt: skip
