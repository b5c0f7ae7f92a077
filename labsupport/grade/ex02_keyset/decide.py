"""Exercise 02, parent side: random calls, the key set the lab's real dispatcher computes for each, and
the verdicts.

The reference is not a formula written here but the dispatcher itself: a probe operator
``grade::probe<i>(Tensor[] tensors) -> ()`` on a private Dispatcher, with a boxed fallback on every
runtime key that records the key set it was called with and the key whose slot ran. Each planned call
sets the thread-local sets with ``ForceDispatchKeyGuard`` and calls the probe on stand-in tensors
(objects with a ``_ks``), so the expected answer is whatever ``Dispatcher::call`` really computes.
Only the inputs (tensor key sets, TLS sets, the operator's fallthrough mask) go to the worker.

The misunderstandings the hints name (each is a wrong submission in tests/test_grade_exercises.py):
clearing the exclude set with integer "and not" (drops backend bits: 2.3); forgetting the TLS include
set (2.2); adding the include set after removing the exclude set (2.2); applying the fallthrough mask
before adding the include set (2.4); forgetting the mask (2.4); the lowest-priority key, a
functionality instead of a runtime key, or the key of the tensors alone (2.5); crashing on a call
with no tensors (a factory).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import failed, garbled, most_common, passed, raised

EXERCISE = Exercise(
    id="ex02",
    number=2,
    title="The key set of a call",
    filename="ex02_keyset.py",
    notebook="02 (keys and key sets)",
    observer="labsupport.grade.ex02_keyset.observe",
)

CASES = 150
SECTION_CALL = "notebook 02, section 7 (The key set of a call)"
SECTION_BITS = "notebook 02, section 3 (Functionality bits × backend bits)"
SECTION_TLS = "notebook 02, section 6 (Thread-local state: the include and exclude sets)"
SECTION_SLOT = "notebook 02, sections 4 (From a key set to a table slot) and 8 (Mixed devices)"

# ---- what random calls are made of ---------------------------------------------------------------

TENSOR_KEYS: dict[str, list[str]] = {  # a tensor's keys as PyTorch gives them (TensorImpl constructor)
    "CPU tensor": ["CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"],
    "CUDA tensor": ["CUDA", "ADInplaceOrView", "AutogradCUDA", "AutocastCUDA"],
    "Meta tensor": ["Meta", "ADInplaceOrView", "AutogradMeta"],
    "XLA tensor": ["XLA", "ADInplaceOrView", "AutogradXLA", "AutocastXLA"],
    "Lazy tensor": ["Lazy", "ADInplaceOrView", "AutogradLazy"],
    "inference CPU tensor": ["CPU", "AutocastCPU"],
    "sparse CPU tensor": ["SparseCPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"],
    "sparse CUDA tensor": ["SparseCUDA", "ADInplaceOrView", "AutogradCUDA", "AutocastCUDA"],
    "quantized CPU tensor": ["QuantizedCPU", "ADInplaceOrView", "AutogradCPU"],
    "nested CPU tensor": ["NestedTensorCPU", "ADInplaceOrView", "AutogradNestedTensor"],
    "PrivateUse1 tensor": ["PrivateUse1", "ADInplaceOrView", "AutogradPrivateUse1", "AutocastPrivateUse1"],
}
TENSOR_EXTRAS = [
    "Python",
    "PythonTLSSnapshot",
    "Functionalize",
    "Conjugate",
    "Negative",
    "ZeroTensor",
    "FuncTorchBatched",
    "Batched",
    "FuncTorchGradWrapper",
    "Tracer",
]
DEFAULT_INCLUDE = ["BackendSelect", "ADInplaceOrView"]
INCLUDE_EXTRAS = [
    "Python",
    "PythonDispatcher",
    "PreDispatch",
    "FuncTorchDynamicLayerFrontMode",
    "FuncTorchDynamicLayerBackMode",
    "Functionalize",
    "AutocastCPU",
    "AutocastCUDA",
    "Tracer",
]
EXCLUDE_EXTRAS = [
    "ADInplaceOrView",
    "Python",
    "Functionalize",
    "FuncTorchDynamicLayerFrontMode",
    "BackendSelect",
    "Batched",
    "Tracer",
    "PythonTLSSnapshot",
    "Conjugate",
]
PER_BACKEND_EXCLUDES = [
    "AutogradCPU",
    "AutogradCUDA",
    "AutogradXLA",
    "AutogradMeta",
    "AutogradPrivateUse1",
    "AutogradOther",
    "AutogradNestedTensor",
]
# PyTorch's start-up fallthroughs, and the keys a test operator may additionally fall through
STANDARD_FALLTHROUGHS = [
    "BackendSelect",
    "ADInplaceOrView",
    "AutocastCPU",
    "AutocastMTIA",
    "AutocastMAIA",
    "AutocastXPU",
    "AutocastMPS",
    "AutocastCUDA",
    "FuncTorchVmapMode",
    "VmapMode",
]
EXTRA_FALLTHROUGHS = [
    "Python",
    "Functionalize",
    "Conjugate",
    "Negative",
    "ZeroTensor",
    "Tracer",
    "Batched",
    "FuncTorchBatched",
    "PythonTLSSnapshot",
    "FuncTorchDynamicLayerFrontMode",
    "PreDispatch",
    "AutogradCPU",
    "AutogradCUDA",
    "AutogradXLA",
]


class Probe:
    """A private dispatcher whose every slot records the key set a call arrives with."""

    def __init__(self, fallthroughs: list[str]) -> None:
        import labsupport as lab
        from labsupport.c10.dispatch_key_set import SLOT_KEYS

        self.dispatcher = lab.Dispatcher("grade-ex02", install_fallbacks=False)
        self.seen: tuple[int, Any] | None = None
        self.libraries = [lab.Library("_", "IMPL", dispatcher=self.dispatcher)]
        standard = [k for k in fallthroughs if k in STANDARD_FALLTHROUGHS]
        extra = [k for k in fallthroughs if k not in STANDARD_FALLTHROUGHS]
        for key in SLOT_KEYS:
            if key.name in standard:
                self.libraries[0].fallback(lab.fallthrough_kernel, key)
            else:
                self.libraries[0].fallback(self._recorder(key), key, with_keyset=True)
        definitions = lab.Library("grade", "DEF", dispatcher=self.dispatcher)
        definitions.define("probe(Tensor[] tensors) -> ()")
        impls = lab.Library("grade", "IMPL", dispatcher=self.dispatcher)
        for key in extra:
            impls.impl("probe", lab.fallthrough_kernel, key)
        self.libraries += [definitions, impls]
        self.op = self.dispatcher.find_schema_or_throw("grade::probe")

    def _recorder(self, key: Any) -> Any:
        def record(op: Any, ks: Any, stack: list[Any]) -> None:
            self.seen = (int(ks), key)
            del stack[len(stack) - 1 :]  # pop the one argument

        return record

    def mask(self, tensor_sets: list[int], include: int) -> int:
        union = 0
        for ks in tensor_sets:
            union |= ks
        return self.op.fallthrough_mask(union | include)

    def run(self, tensor_sets: list[int], include: int, exclude: int) -> tuple[int, str]:
        """(key set, name of the key whose slot ran) of one real call."""
        import labsupport as lab

        tensors = [SimpleNamespace(_ks=ks) for ks in tensor_sets]
        self.seen = None
        ks = lab.DispatchKeySet.from_raw
        with lab.ForceDispatchKeyGuard(ks(include), ks(exclude)):
            self.op.call(tensors)
        assert self.seen is not None
        return self.seen[0], self.seen[1].name


_PROBES: dict[tuple[str, ...], Probe] = {}


def probe(fallthroughs: list[str]) -> Probe:
    key = tuple(sorted(fallthroughs))
    if key not in _PROBES:
        _PROBES[key] = Probe(list(key))
    return _PROBES[key]


def _keys(names: list[str]) -> int:
    import labsupport as lab

    return int(lab.DispatchKeySet(names))


def _random_subset(rng: Any, names: list[str], p: float) -> list[str]:
    return [n for n in names if rng.random() < p]


def _random_tensor(rng: Any) -> list[Any]:
    label = list(TENSOR_KEYS)[int(rng.integers(len(TENSOR_KEYS)))]
    extras = _random_subset(rng, TENSOR_EXTRAS, 0.12)
    name = label + (" + " + ", ".join(extras) if extras else "")
    return [name, _keys(TENSOR_KEYS[label] + extras)]


def _case(rng: Any, *, tls: bool, per_backend: bool, fallthroughs: list[str]) -> dict[str, Any]:
    import labsupport as lab

    count = 0 if rng.random() < 0.08 else int(rng.integers(1, 4))  # no tensors: e.g. a factory function
    tensors = [_random_tensor(rng) for _ in range(count)]
    include = exclude = 0
    if tls:
        include = _keys(DEFAULT_INCLUDE + _random_subset(rng, INCLUDE_EXTRAS, 0.2))
        exclude = int(lab.autocast_dispatch_keyset) | _keys(_random_subset(rng, EXCLUDE_EXTRAS, 0.2))
        if rng.random() < 0.25:
            exclude |= int(lab.autograd_dispatch_keyset)  # what AutoDispatchBelowAutograd adds
    if per_backend:
        exclude |= _keys(_random_subset(rng, PER_BACKEND_EXCLUDES, 0.35) or ["AutogradCPU"])
    mask = probe(fallthroughs).mask([raw for _, raw in tensors], include)
    return {"tensors": tensors, "include": include, "exclude": exclude, "fallthroughs": fallthroughs, "mask": mask}


def _operators(rng: Any) -> list[list[str]]:
    """Fallthrough sets of a few operators: PyTorch's start-up ones plus random per-operator ones."""
    return [STANDARD_FALLTHROUGHS] + [
        STANDARD_FALLTHROUGHS + _random_subset(rng, EXTRA_FALLTHROUGHS, 0.3) for _ in range(5)
    ]


# ---- plans ----------------------------------------------------------------------------------------


def plan_tensors_only(rng: Any) -> dict[str, Any]:
    return {"cases": [_case(rng, tls=False, per_backend=False, fallthroughs=[]) for _ in range(CASES)]}


def plan_tls(rng: Any) -> dict[str, Any]:
    return {"cases": [_case(rng, tls=True, per_backend=False, fallthroughs=[]) for _ in range(CASES)]}


def plan_per_backend(rng: Any) -> dict[str, Any]:
    return {"cases": [_case(rng, tls=True, per_backend=True, fallthroughs=[]) for _ in range(CASES)]}


def plan_fallthrough(rng: Any) -> dict[str, Any]:
    operators = _operators(rng)
    cases = []
    for _ in range(CASES):
        fallthroughs = operators[int(rng.integers(len(operators)))]
        cases.append(_case(rng, tls=True, per_backend=rng.random() < 0.3, fallthroughs=fallthroughs))
    return {"cases": cases}


def plan_chosen_key(rng: Any) -> dict[str, Any]:
    operators = [[], *_operators(rng)]
    cases = []
    for _ in range(CASES):
        fallthroughs = operators[int(rng.integers(len(operators)))]
        cases.append(_case(rng, tls=rng.random() < 0.8, per_backend=rng.random() < 0.3, fallthroughs=fallthroughs))
    return {"cases": cases}


# ---- reading what the worker saw ------------------------------------------------------------------


def _describe_raw(raw: int) -> str:
    from labsupport.c10.dispatch_key import BACKENDS, FUNCTIONALITIES, NUM_BACKENDS

    functionality = [name for i, name in enumerate(FUNCTIONALITIES) if raw >> (NUM_BACKENDS + i) & 1]
    backends = [name for i, name in enumerate(BACKENDS) if raw >> i & 1]
    parts = []
    if functionality:
        parts.append("functionality bits " + ", ".join(functionality))
    if backends:
        parts.append("backend bits " + ", ".join(backends))
    return "; ".join(parts) or "nothing"


def _ks(raw: int) -> str:
    import labsupport as lab
    from labsupport.c10.dispatch_key_set import FULL

    return "all keys" if raw == FULL else repr(lab.DispatchKeySet.from_raw(raw))


def _mask(raw: int) -> str:
    """A fallthrough mask by what it removes (its complement is short, the mask itself is not)."""
    from labsupport.c10.dispatch_key_set import FULL

    return "all keys" if raw == FULL else f"all keys except {_describe_raw(FULL & ~raw)}"


def _inputs(n: int, case: dict[str, Any]) -> str:
    return (
        f"call {n}: tensors [{'; '.join(label for label, _ in case['tensors']) or 'none'}]\n"
        f"  tls_include      = {_ks(case['include'])}\n  tls_exclude      = {_ks(case['exclude'])}\n"
        f"  fallthrough_mask = {_mask(case['mask'])}"
    )


def _results(inputs: Any, observed: Any, what: str) -> list[dict[str, Any]] | Verdict:
    """The observed per-call answers, or a Verdict when they are missing or malformed."""
    if isinstance(observed, dict) and isinstance(observed.get("missing"), str):
        return failed(
            f"{EXERCISE.filename} has no function {observed['missing']}",
            f"keep the names and signatures of the stub: the grader calls {observed['missing']}(...)",
        )
    results = observed.get("results") if isinstance(observed, dict) else None
    cases = inputs["cases"]
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results) or len(results) > len(cases):
        return garbled(what)
    if len(results) < len(cases) and (not results or "error" not in results[-1]):
        return garbled(what)
    return results


def _error_verdict(n: int, case: dict[str, Any], record: Any, function: str) -> Verdict:
    text = raised(record) or "an exception"
    hints = [f"{function} raised on this call; {SECTION_CALL} shows the steps on a real call"]
    if not case["tensors"]:
        hints = [
            f"{function} raised on a call with no tensor arguments at all (a factory function such as "
            f"torch.empty): the union of no key sets is the empty set, not an error ({SECTION_CALL}, and "
            "notebook 02, section 9)"
        ]
    return failed(f"{_inputs(n, case)}\n{function} raised {text}", *hints)


# ---- what went wrong: the common misunderstandings ------------------------------------------------


def key_set_hints(case: dict[str, Any], expected: int, got: int) -> tuple[str, ...]:
    """Hints for a wrong key set, from gentle to specific, naming the misunderstanding the difference shows."""
    from labsupport.c10.dispatch_key_set import BACKEND_BITS, FUNCTIONALITY_BITS

    include, exclude, mask = case["include"], case["exclude"], case["mask"]
    missing, extra = expected & ~got, got & ~expected
    union = 0
    for _, raw in case["tensors"]:
        union |= raw
    if missing & BACKEND_BITS and exclude & BACKEND_BITS and not missing & FUNCTIONALITY_BITS & ~exclude:
        return (
            "removing the exclude set took backend bits with it: excluding a per-backend key such as "
            f"AutogradCPU must leave the CPU backend bit in the set ({SECTION_BITS})",
            "a key set is functionality bits x backend bits; AutogradCPU is the Autograd functionality bit plus "
            "the CPU backend bit, and so is CPU's Dense. Excluding AutogradCPU clears its functionality bit only: "
            "clearing every bit of the exclude set (integer 'and not') also drops the CPU backend, and then no "
            "CPU kernel can be found",
            "DispatchKeySet's own set difference clears functionality bits only, which is what the exclude step "
            "needs; plain integer bit arithmetic does not know the difference",
        )
    if extra & exclude & include & FUNCTIONALITY_BITS and not extra & exclude & ~include & FUNCTIONALITY_BITS:
        return (
            f"a key that is both included and excluded by the thread-local state is in your answer ({SECTION_TLS})",
            "the exclude set wins over the include set: the include set is added to the tensors' keys first, "
            "and the exclude set is removed from the result, not the other way round",
        )
    if extra & exclude & FUNCTIONALITY_BITS:
        return (
            f"keys of the thread-local exclude set are still in your answer ({SECTION_TLS})",
            "guards such as AutoDispatchBelowAutograd and the default Autocast exclusions work by excluding keys: "
            "every functionality of tls_exclude must be gone from the call's key set",
        )
    if missing & include & FUNCTIONALITY_BITS & ~(union & FUNCTIONALITY_BITS):
        return (
            f"keys of the thread-local include set are missing from your answer ({SECTION_TLS})",
            "a call's key set is not only the tensors' keys: the thread-local include set (BackendSelect and "
            "ADInplaceOrView by default, more under modes) joins them before anything is excluded",
        )
    if extra & ~mask:
        if not (extra & ~mask) & ~include & FUNCTIONALITY_BITS:
            return (
                "a fallthrough key that came from the include set is still in your answer: the operator's "
                f"fallthrough mask applies to the whole key set of the call ({SECTION_CALL})",
                "the mask is not a property of the tensors: BackendSelect, for instance, comes from the include "
                "set and is a fallthrough for most operators, so the mask must be applied after the TLS sets",
            )
        return (
            f"keys whose kernel is a fallthrough for this operator are still in your answer ({SECTION_CALL})",
            "a fallthrough kernel never runs: the dispatcher drops those keys with the operator's fallthrough mask "
            "before it picks a slot; keys outside fallthrough_mask must not be in the result",
        )
    if missing & union:
        return (
            f"keys that the tensor arguments carry are missing from your answer ({SECTION_CALL})",
            "the call's key set starts from the keys of every tensor argument together (their union), not the "
            "first tensor's or the last one's",
        )
    return (
        f"your key set differs from the dispatcher's; {SECTION_CALL} computes one step by step",
        "four inputs, four steps: the tensors' keys together, the include set, the exclude set, the mask",
    )


def key_hints(case: dict[str, Any], expected_set: int, expected_key: str, got: str) -> tuple[str, ...]:
    """Hints for a wrong chosen key."""
    import labsupport as lab
    from labsupport.c10.dispatch_key_set import highest_priority_key, keys_of

    keys = [k.name for k in keys_of(expected_set)]
    union = 0
    for _, raw in case["tensors"]:
        union |= raw
    if len(keys) > 1 and got == keys[0]:
        return (
            f"you picked the lowest-priority key of the call's key set ({SECTION_SLOT})",
            "a key set lists its keys from lowest to highest priority; the kernel that runs is the one of the "
            "highest-priority key",
        )
    functionality = lab.DispatchKeySet.from_raw(expected_set).highest_functionality_key().name
    if got == functionality and got != expected_key:
        return (
            f"you answered with a functionality ({got}), not a runtime key ({SECTION_SLOT})",
            "for a per-backend functionality (Dense, Sparse, AutogradFunctionality, ...) the runtime key also "
            "takes the highest backend bit of the set: Dense with CUDA is the CUDA key",
        )
    if got in keys and got.endswith(tuple(k for k in ("CPU", "CUDA", "XLA", "Meta", "Lazy"))):
        return (
            f"you picked the right functionality with the wrong backend ({SECTION_SLOT})",
            "with several backends in one set (mixed devices), the highest backend bit decides the runtime key",
        )
    if union and got == highest_priority_key(union).name:
        return (
            f"you picked the key from the tensors' keys alone ({SECTION_CALL})",
            "the kernel is chosen from the call's whole key set: the TLS sets and the operator's fallthrough "
            "mask change which key is highest",
        )
    return (
        f"the dispatcher ran another kernel; {SECTION_SLOT} show how a key set selects one",
        "the key whose kernel runs is the highest-priority key of the key set of the call",
    )


# ---- decisions ------------------------------------------------------------------------------------


def decide_key_sets(inputs: Any, observed: Any) -> Verdict:
    results = _results(inputs, observed, "compute_dispatch_key_set")
    if isinstance(results, Verdict):
        return results
    wrong: list[tuple[tuple[str, ...], str]] = []  # (hints, message) of every wrong call
    for n, (case, result) in enumerate(zip(inputs["cases"], results), start=1):
        if "error" in result:
            return _error_verdict(n, case, result["error"], "compute_dispatch_key_set")
        expected, _ = probe(case["fallthroughs"]).run(
            [raw for _, raw in case["tensors"]], case["include"], case["exclude"]
        )
        if not isinstance(result.get("raw"), int) or result.get("type") != "DispatchKeySet":
            return failed(
                f"{_inputs(n, case)}\ncompute_dispatch_key_set returned {result.get('type')} "
                f"{result.get('repr', result.get('raw'))!s}, not a DispatchKeySet",
                f"the answer is a DispatchKeySet, built from the DispatchKeySet arguments with set operations "
                f"({SECTION_CALL})",
            )
        got = result["raw"]
        if got != expected:
            wrong.append((
                key_set_hints(case, expected, got),
                f"{_inputs(n, case)}\nexpected {_ks(expected)}\ngot      {_ks(got)}\n"
                f"  missing: {_describe_raw(expected & ~got)}\n  extra:   {_describe_raw(got & ~expected)}",
            ))
    if wrong:  # the misunderstanding most of the wrong calls show (one call can fit a narrower one)
        hints, message = most_common(wrong)
        return failed(f"{message}\n({len(wrong)} of {len(results)} calls wrong)", *hints)
    return passed(f"{len(results)} random calls match the key set the dispatcher computed")


def decide_chosen_keys(inputs: Any, observed: Any) -> Verdict:
    results = _results(inputs, observed, "dispatch_key_for")
    if isinstance(results, Verdict):
        return results
    for n, (case, result) in enumerate(zip(inputs["cases"], results), start=1):
        if "error" in result:
            return _error_verdict(n, case, result["error"], "dispatch_key_for")
        expected_set, key = probe(case["fallthroughs"]).run(
            [raw for _, raw in case["tensors"]], case["include"], case["exclude"]
        )
        if result.get("type") != "DispatchKey" or not isinstance(result.get("key"), str):
            return failed(
                f"{_inputs(n, case)}\ndispatch_key_for returned {result.get('type')} {result.get('repr')!s}, "
                "not a DispatchKey",
                f"the answer is one DispatchKey, the key whose kernel runs ({SECTION_SLOT})",
            )
        if result["key"] != key:
            return failed(
                f"{_inputs(n, case)}\nthe dispatcher ran the {key} kernel, dispatch_key_for returned {result['key']}",
                *key_hints(case, expected_set, key, result["key"]),
            )
    return passed(f"{len(results)} random calls: the same kernel key as the dispatcher")


# ---- the checks -----------------------------------------------------------------------------------

EXERCISE.add_check(
    "2.1",
    "union of the tensors' key sets (no TLS, no fallthroughs)",
    2,
    plan=plan_tensors_only,
    observe="key_sets",
    decide=decide_key_sets,
)
EXERCISE.add_check(
    "2.2", "TLS include and exclude sets", 2, plan=plan_tls, observe="key_sets", decide=decide_key_sets
)
EXERCISE.add_check(
    "2.3",
    "excluding a per-backend key keeps the backend bits",
    2,
    plan=plan_per_backend,
    observe="key_sets",
    decide=decide_key_sets,
)
EXERCISE.add_check(
    "2.4", "fallthrough masks", 2, plan=plan_fallthrough, observe="key_sets", decide=decide_key_sets
)
EXERCISE.add_check(
    "2.5",
    "dispatch_key_for picks the kernel the dispatcher runs",
    2,
    plan=plan_chosen_key,
    observe="chosen_keys",
    decide=decide_chosen_keys,
)
