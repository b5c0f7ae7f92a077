"""Parent side of ex07b, BackendSelect: factory operators pick their backend from their options.

The reference is PyTorch's ``c10::computeDispatchKey(dtype, layout, device)`` (c10/core/TensorOptions.h)
and the two shapes of kernel torchgen's ``ComputeBackendSelect`` generates (RegisterBackendSelect.cpp):
without tensor arguments ``DispatchKeySet(computeDispatchKey(...))``; with tensor arguments
``computeDispatchKeySet(that | tensor keys, FULL_AFTER(BackendSelect))``. The parent runs the
worker's own observer functions with these reference kernels on the lab's engine, so the expected
observations come from the same operators, tensors and options the learner's kernels saw.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import compare_records, most_common
from labsupport.grade.ex07b_backend_select import observe

EXERCISE = Exercise(
    id="ex07b",
    number="7b",
    title="BackendSelect: factories pick their backend",
    filename="ex07b_backend_select.py",
    notebook="07 (boxing, fallbacks, BackendSelect), section 6",
    observer="labsupport.grade.ex07b_backend_select.observe",
)

DTYPES = [None, "float32", "float16", "float64", "int64", "qint8", "quint8", "qint32"]
LAYOUTS = [None, "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged"]
DEVICES = [None, "cpu", "cuda", "cuda:1", "meta", "xla"]
QUANTIZED = {"qint8", "quint8", "qint32"}
SECTION = "notebook 07, section 6 (factory functions and BackendSelect)"


# ----------------------------------------------------------------------------------------- plan
def _options(rng: Any, n: int) -> list[list[Any]]:
    options = []
    for _ in range(n):
        dtype = DTYPES[int(rng.integers(len(DTYPES)))]
        layout = LAYOUTS[int(rng.integers(len(LAYOUTS)))] if rng.random() < 0.6 else None
        device = DEVICES[int(rng.integers(len(DEVICES)))]
        if layout == "_mkldnn" and device not in (None, "cpu"):
            device = "cpu"
        options.append([dtype, layout, device])
    return options


def plan_keys(rng: Any) -> dict[str, Any]:
    return {"options": _options(rng, 24)}


def plan_factory(rng: Any) -> dict[str, Any]:
    return {"options": _options(rng, 16)}


def plan_tensor(rng: Any) -> dict[str, Any]:
    options = _options(rng, 16)
    tensors = [
        {
            "device": str(rng.choice(["cpu", "cpu", "cuda", "meta"])),
            "requires_grad": bool(rng.random() < 0.5),
            "inference": bool(rng.random() < 0.2),
        }
        for _ in options
    ]
    for t in tensors:
        t["requires_grad"] = t["requires_grad"] and not t["inference"]
    return {"options": options, "tensors": tensors, "guards": _guards(rng, options, tensors)}


TENSOR_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}


def _guards(rng: Any, options: list[list[Any]], tensors: list[dict[str, Any]]) -> list[Any]:
    """For some calls, a guard that changes the thread-local include or exclude set on a backend key:
    ``{"kind": "include" | "exclude", "key": name}`` (None: no guard). Each guard is chosen so that it
    changes the key set PyTorch's generated kernel redispatches with (``computeDispatchKeySet`` applies
    the TLS sets before the mask), so a kernel that skips the TLS sets reaches another kernel or key set."""
    import labsupport as lab

    guards: list[Any] = [None] * len(options)
    pools = []
    for option, spec in zip(options, tensors):
        wanted = lab.DispatchKeySet(reference_key(*option)) | lab.DispatchKeySet(TENSOR_KEYS[spec["device"]])
        includes = [k for k in observe.BACKEND_KEYS if wanted | lab.DispatchKeySet(k) != wanted]
        # excluding a key removes its functionality (backend bits stay); keep one functionality to run
        excludes = [
            k
            for k in observe.BACKEND_KEYS
            if (wanted - lab.DispatchKeySet(k)) != wanted
            and (wanted - lab.DispatchKeySet(k)).highest_priority_key().name in observe.BACKEND_KEYS
        ]
        pools.append({"include": includes, "exclude": excludes})
    kinds: dict[int, str] = {}
    # at least one exclude (a kernel that only looks at the key set it received gets the includes right,
    # not the excludes) and one include, then more calls with a guard of a random kind
    can_exclude = [n for n, pool in enumerate(pools) if pool["exclude"]]
    if can_exclude:
        kinds[can_exclude[int(rng.integers(len(can_exclude)))]] = "exclude"
    others = [n for n in range(len(options)) if n not in kinds and pools[n]["include"]]
    kinds[others[int(rng.integers(len(others)))]] = "include"
    for n in range(len(options)):
        if n not in kinds and rng.random() < 0.35:
            kind = "exclude" if rng.random() < 0.5 else "include"
            kinds[n] = kind if pools[n][kind] else ("include" if kind == "exclude" else "exclude")
    for n, kind in sorted(kinds.items()):
        pool = pools[n][kind]
        if pool:
            guards[n] = {"kind": kind, "key": pool[int(rng.integers(len(pool)))]}
    return guards


# ------------------------------------------------------------------------------------ reference
def reference_key(dtype: str | None, layout: str | None, device: str | None) -> str:
    """``c10::computeDispatchKey`` for the devices and layouts of this exercise."""
    kind = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "xla": "XLA"}[(device or "cpu").split(":")[0]]
    layout = layout or "strided"
    if layout in ("strided", "jagged"):
        return f"Quantized{kind}" if (dtype or "float32") in QUANTIZED else kind
    if layout == "sparse_coo":
        return f"Sparse{kind}"
    if layout == "_mkldnn":
        return "MkldnnCPU"
    return f"SparseCsr{kind}"  # sparse_csr, sparse_csc, sparse_bsr, sparse_bsc


def _reference_factory(op: Any, ks: Any, size: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any) -> Any:
    import labsupport as lab

    return op.redispatch(
        lab.DispatchKeySet(reference_key(dtype, layout, device)), size, dtype, layout, device, pin_memory
    )


def _reference_convert(op: Any, ks: Any, self: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any) -> Any:
    import labsupport as lab

    wanted = lab.DispatchKeySet(reference_key(dtype, layout, device)) | lab.dispatch_keys(self)
    computed = (wanted | lab.tls_include_set()) - lab.tls_exclude_set()
    dk = computed & lab.DispatchKeySet.full_after("BackendSelect")
    return op.redispatch(dk, self, dtype, layout, device, pin_memory)


REFERENCE = SimpleNamespace(
    compute_dispatch_key=reference_key,
    factory_backend_select=_reference_factory,
    convert_backend_select=_reference_convert,
)


# --------------------------------------------------------------------------------------- decide
HINTS: dict[str, tuple[str, ...]] = {
    "raised": (
        f"your kernel raised for some options (the message says which): every option listed in the exercise's "
        f"docstring selects a backend kernel ({SECTION})",
        "the lab's own tensor_options helper (notebook 07) models strided cpu, cuda and meta tensors only, and "
        "raises for the other options; the key comes from your compute_dispatch_key",
    ),
    "device": (
        f"the device option decides the backend ({SECTION}; c10::computeDispatchKey)",
        "no device means CPU; 'cuda:1' is a CUDA device (the index does not matter for the key); meta and xla "
        "have keys of their own",
    ),
    "dtype": (
        f"a quantized dtype selects the Quantized key of the device ({SECTION}; c10::computeDispatchKey)",
        "with a strided (or jagged) layout, qint8 / quint8 / qint32 give Quantized<Device>; every other dtype, "
        "and no dtype at all, gives the dense <Device> key",
    ),
    "layout": (
        f"the layout option selects the functionality ({SECTION}; c10::computeDispatchKey)",
        "sparse_coo gives Sparse<Device>, the compressed layouts (csr, csc, bsr, bsc) give SparseCsr<Device>, "
        "_mkldnn gives MkldnnCPU; strided and jagged use the dense (or quantized) key, whatever the dtype of a "
        "sparse layout",
    ),
    "key_only": (
        f"a BackendSelect kernel redispatches with a key set that holds the computed key ({SECTION})",
        "without tensor arguments the generated kernel computes one backend key from dtype, layout and device "
        "alone and redispatches to a key set made of that key; the key set it received only holds BackendSelect",
    ),
    "tensor_keys": (
        f"an operator with tensor arguments combines the options' key with the tensors' keys (torchgen's "
        f"ComputeBackendSelect, {SECTION})",
        "the generated kernel unions the key computed from the options with the tensors' key sets, so the "
        "highest backend of both wins: a CUDA tensor converted with device='cpu' still reaches the CUDA kernel",
    ),
    "mask": (
        f"the redispatch key set must only hold keys below BackendSelect ({SECTION}; notebook 04, section 6)",
        "the generated kernel applies the TLS sets and masks with DispatchKeySet.full_after('BackendSelect'): "
        "otherwise Autograd, ADInplaceOrView or Autocast keys of the tensor stay in the set and the redispatch "
        "lands on them again",
    ),
    "tls": (
        f"the generated kernel applies the thread-local include/exclude sets before masking: some calls ran "
        f"under a guard that includes or excludes a backend key ({SECTION}; notebook 02 on the thread-local sets)",
        "with tensor arguments torchgen's kernel goes through c10::impl::computeDispatchKeySet, the step the "
        "dispatcher itself takes for every call: a key the include set holds joins the key set, the "
        "functionality of a key the exclude set holds leaves it, and only then does the mask drop what is "
        "not below BackendSelect; the key set the kernel received is no substitute, it never saw the options",
    ),
    "format": ("return the key's name as a string, e.g. 'CPU' (see compute_dispatch_key's docstring)",),
}


def _key_reason(given: str, expected: str, option: list[Any]) -> str:
    dtype, layout, device = option
    base = {"Quantized", "Sparse", "SparseCsr", "Mkldnn"}

    def functionality(key: str) -> str:
        for prefix in ("SparseCsr", "Sparse", "Quantized", "Mkldnn"):
            if key.startswith(prefix):
                return prefix
        return ""

    if functionality(given) != functionality(expected):
        if (layout or "strided") not in ("strided", "jagged") or functionality(given) in base - {"Quantized"}:
            return "layout"
        return "dtype"
    return "device"


def decide_keys(inputs: Any, observed: Any) -> Verdict:
    options = inputs["options"]
    if not isinstance(observed, list) or len(observed) != len(options):
        return Verdict(False, "compute_dispatch_key gave no answer for some options", HINTS["format"])
    wrong = []
    for option, given in zip(options, observed):
        expected = reference_key(*option)
        if given != expected:
            reason = "format" if not isinstance(given, str) else _key_reason(given, expected, option)
            wrong.append((reason, option, given, expected))
    if not wrong:
        return Verdict(True, f"the right key for all {len(options)} random (dtype, layout, device) options")
    reason, option, given, expected = most_common(wrong)
    return Verdict(
        False,
        f"{len(wrong)} of {len(options)} keys wrong, e.g. dtype={option[0]!r}, layout={option[1]!r}, "
        f"device={option[2]!r}: you returned {given!r}, PyTorch's computeDispatchKey gives {expected!r}",
        HINTS[reason],
    )


def _decide_calls(inputs: Any, observed: Any, observer: Any, with_tensors: bool) -> Verdict:
    expected_all = observer(REFERENCE, inputs)
    calls = compare_records(observed, expected_all, _valid_call, HINTS["format"])
    if isinstance(calls, Verdict):
        return calls
    specs = inputs.get("tensors") or [{}] * len(expected_all)
    guards = inputs.get("guards") or [None] * len(expected_all)
    wrong = [
        (_call_reason(given, expected, inputs["options"][number], with_tensors, specs[number]), number, given, expected)
        for number, given, expected in calls
    ]
    if not wrong:
        return Verdict(True, f"all {len(expected_all)} calls reached the right backend kernel with the right key set")
    unguarded = [w for w in wrong if guards[w[1]] is None]
    if unguarded:
        wrong = unguarded  # a plain call shows the misunderstanding without the guards in the way
    else:
        # every call without a guard is right. A guarded call whose result is what PyTorch's kernel
        # gives for the same call without the guard skipped the TLS sets; others show another mistake
        ignored = observer(REFERENCE, {**inputs, "guards": [None] * len(expected_all)})
        options = inputs["options"]
        wrong = [
            (
                "tls" if given == ignored[n] else _guarded_reason(reason, given, expected, options[n]),
                n,
                given,
                expected,
            )
            for reason, n, given, expected in wrong
        ]
    reason, number, given, expected = most_common(wrong)
    dtype, layout, device = inputs["options"][number]
    call = f"dtype={dtype!r}, layout={layout!r}, device={device!r}"
    if with_tensors:
        spec = inputs["tensors"][number]
        call = f"convert(<{spec['device']} tensor{', inference' if spec['inference'] else ''}>, {call})"
        guard = guards[number]
        if guard is not None:
            name = "IncludeDispatchKeyGuard" if guard["kind"] == "include" else "ExcludeDispatchKeyGuard"
            call = f"{call} under {name}({guard['key']})"
    else:
        call = f"make([2], {call})"
    seen = given.get("error") if isinstance(given, dict) and "error" in given else _describe(given)
    return Verdict(
        False,
        f"{len(wrong)} of {len(expected_all)} calls went wrong, e.g. {call}: {seen}; expected {_describe(expected)}",
        HINTS[reason],
    )


ABOVE_BACKEND_SELECT = {
    "BackendSelect", "ADInplaceOrView", "AutogradOther", "AutogradCPU", "AutogradCUDA", "AutogradMeta",
    "AutocastCPU", "AutocastCUDA",
}  # fmt: skip


def _backend(key: str) -> str:
    for prefix in ("SparseCsr", "Sparse", "Quantized", "Mkldnn"):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return key


def _call_reason(
    given: dict[str, Any], expected: dict[str, Any], option: list[Any], with_tensors: bool, spec: Any
) -> str:
    """Which misunderstanding a wrong call shows (``given`` is a valid call record)."""
    if "error" in given:
        # an unmasked key set re-enters the kernel (recursion) or reaches a fallthrough kernel that the
        # dispatcher's mask should have removed: both come from redispatching with keys above BackendSelect
        symptoms = ("re-entered", "Recursion", "fallthrough_kernel was executed")
        if not any(symptom in given["error"] for symptom in symptoms):
            return "raised"
        return "mask" if with_tensors else "key_only"
    keys, kernel = set(given["keys"]), given["kernel"]
    if with_tensors and keys & ABOVE_BACKEND_SELECT:
        return "mask"
    reason = _key_reason(kernel, expected["kernel"], option)
    if kernel != expected["kernel"] and reason != "device":
        return reason  # the functionality (dtype or layout) is wrong, whatever the tensors
    if with_tensors and set(expected["keys"]) - keys:
        return "tensor_keys"  # the tensor's own backend is missing from the key set
    if kernel != expected["kernel"]:
        if with_tensors and _backend(expected["kernel"]).lower() == str(spec.get("device", "")).lower():
            return "tensor_keys"
        return "device"
    return "key_only"


def _guarded_reason(reason: str, given: dict[str, Any], expected: dict[str, Any], option: list[Any]) -> str:
    """The mistake a wrong call under a guard shows (the guard's own key is in both sets, or the call
    would have been read as skipping the TLS sets): a key of the options' device that only the learner's
    set holds is the key they computed; else the functionality of the keys that differ."""
    if "error" in given:
        return reason
    wanted = reference_key(*option)
    extra = sorted(set(given["keys"]) - set(expected["keys"]))
    computed = [key for key in extra if _backend(key) == _backend(wanted)]
    if computed:
        return _key_reason(computed[0], wanted, option)
    differ = set(given["keys"]) ^ set(expected["keys"])
    if any(key.startswith(("Sparse", "Mkldnn")) for key in differ):
        return "layout"  # the layout decides first: a quantized dtype only counts with a strided layout
    if any(key.startswith("Quantized") for key in differ):
        return "dtype"
    return reason


def _valid_call(result: Any) -> bool:
    """``{"kernel": str, "keys": [str, ...]}`` or ``{"error": str}`` (the observations are untrusted)."""
    if not isinstance(result, dict):
        return False
    if set(result) == {"error"}:
        return isinstance(result["error"], str)
    keys = result.get("keys")
    return (
        set(result) == {"kernel", "keys"}
        and isinstance(result["kernel"], str)
        and isinstance(keys, list)
        and all(isinstance(k, str) for k in keys)
    )


def _describe(result: Any) -> str:
    if isinstance(result, dict) and "kernel" in result:
        return f"the {result['kernel']} kernel with DispatchKeySet({', '.join(map(str, result.get('keys', [])))})"
    return repr(result)[:120]


def decide_factory(inputs: Any, observed: Any) -> Verdict:
    return _decide_calls(inputs, observed, observe.factory_calls, with_tensors=False)


def decide_tensor(inputs: Any, observed: Any) -> Verdict:
    return _decide_calls(inputs, observed, observe.tensor_calls, with_tensors=True)


EXERCISE.add_check(
    "7b.1", "compute_dispatch_key on random (dtype, layout, device)", 3,
    plan=plan_keys, observe="compute_keys", decide=decide_keys,
)  # fmt: skip
EXERCISE.add_check(
    "7b.2", "a factory without tensor arguments reaches the chosen backend", 3,
    plan=plan_factory, observe="factory_calls", decide=decide_factory,
)  # fmt: skip
EXERCISE.add_check(
    "7b.3", "a tensor plus options (like _to_copy): tensor keys, TLS and the mask", 4,
    plan=plan_tensor, observe="tensor_calls", decide=decide_tensor,
)  # fmt: skip
