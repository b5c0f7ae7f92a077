"""Checks of exercise 02: the key set of a call, compared with the lab's real dispatcher.

The reference is not a formula written here but the dispatcher itself: a probe operator
``grade::probe(Tensor[] tensors) -> ()`` on a private Dispatcher, with a boxed fallback on every
runtime key that records the key set it was called with and the key whose slot ran. Each random case
sets the thread-local sets with ``ForceDispatchKeyGuard`` and calls the probe on stand-in tensors
(objects with a ``_ks``), so the answer is whatever ``Dispatcher::call`` really computes.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from labsupport.grade.checking import CheckFailed, Context, Exercise, describe_exception

EXERCISE = Exercise(
    id="ex02",
    number=2,
    title="The key set of a call",
    filename="ex02_keyset.py",
    notebook="02 (keys and key sets)",
)

CASES = 150

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

    def __init__(self, fallthroughs: list[str], op_variants: list[list[str]]) -> None:
        import labsupport as lab
        from labsupport.c10.dispatch_key_set import SLOT_KEYS

        self.dispatcher = lab.Dispatcher("grade-ex02", install_fallbacks=False)
        self.seen: tuple[int, Any] | None = None
        self.libraries: list[Any] = []
        fallbacks = lab.Library("_", "IMPL", dispatcher=self.dispatcher)
        self.libraries.append(fallbacks)
        for key in SLOT_KEYS:
            if key.name in fallthroughs:
                fallbacks.fallback(lab.fallthrough_kernel, key)
            else:
                fallbacks.fallback(self._recorder(key), key, with_keyset=True)
        definitions = lab.Library("grade", "DEF", dispatcher=self.dispatcher)
        self.libraries.append(definitions)
        self.ops = []
        for i, extra in enumerate(op_variants):
            definitions.define(f"probe{i}(Tensor[] tensors) -> ()")
            op = self.dispatcher.find_schema_or_throw(f"grade::probe{i}")
            impls = lab.Library("grade", "IMPL", dispatcher=self.dispatcher)
            self.libraries.append(impls)
            for key in extra:
                impls.impl(f"probe{i}", lab.fallthrough_kernel, key)
            self.ops.append(op)

    def _recorder(self, key: Any) -> Any:
        def record(op: Any, ks: Any, stack: list[Any]) -> None:
            self.seen = (int(ks), key)
            del stack[len(stack) - 1 :]  # pop the one argument

        return record

    def run(self, op: Any, tensor_sets: list[int], include: int, exclude: int) -> tuple[int, Any, int]:
        """(key set, key of the slot that ran, fallthrough mask) of one real call."""
        import labsupport as lab

        tensors = [SimpleNamespace(_ks=ks) for ks in tensor_sets]
        self.seen = None
        union = 0
        for ks in tensor_sets:
            union |= ks
        mask = op.fallthrough_mask(union | include)
        with lab.ForceDispatchKeyGuard(lab.DispatchKeySet.from_raw(include), lab.DispatchKeySet.from_raw(exclude)):
            op.call(tensors)
        assert self.seen is not None
        return self.seen[0], self.seen[1], mask


def _keys(names: list[str]) -> int:
    import labsupport as lab

    return int(lab.DispatchKeySet(names))


def _random_subset(rng: Any, names: list[str], p: float) -> list[str]:
    return [n for n in names if rng.random() < p]


def _random_tensor(rng: Any) -> tuple[str, int]:
    label = list(TENSOR_KEYS)[int(rng.integers(len(TENSOR_KEYS)))]
    extras = _random_subset(rng, TENSOR_EXTRAS, 0.12)
    name = label + (" + " + ", ".join(extras) if extras else "")
    return name, _keys(TENSOR_KEYS[label] + extras)


def _case(rng: Any, *, tls: bool, per_backend: bool) -> dict[str, Any]:
    count = 0 if rng.random() < 0.08 else int(rng.integers(1, 4))  # no tensors: e.g. a factory function
    tensors = [_random_tensor(rng) for _ in range(count)]
    include = exclude = 0
    if tls:
        include = _keys(DEFAULT_INCLUDE + _random_subset(rng, INCLUDE_EXTRAS, 0.2))
        import labsupport as lab

        exclude = int(lab.autocast_dispatch_keyset) | _keys(_random_subset(rng, EXCLUDE_EXTRAS, 0.2))
        if rng.random() < 0.25:
            exclude |= int(lab.autograd_dispatch_keyset)  # what AutoDispatchBelowAutograd adds
    if per_backend:
        exclude |= _keys(_random_subset(rng, PER_BACKEND_EXCLUDES, 0.35) or ["AutogradCPU"])
    return {"tensors": tensors, "include": include, "exclude": exclude}


def _state(ctx: Context) -> dict[str, Any]:
    """Two probes, built once per exercise: no fallthroughs at all, and PyTorch-like fallthroughs."""
    if "plain" not in ctx.cache:
        rng = ctx.rng(99)
        ctx.cache["plain"] = Probe([], [[]])
        variants = [[]] + [_random_subset(rng, EXTRA_FALLTHROUGHS, 0.3) for _ in range(5)]
        ctx.cache["masked"] = Probe(STANDARD_FALLTHROUGHS, variants)
    return ctx.cache


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


def _compare(ctx: Context, cases: list[dict[str, Any]], probe: Probe, which: str) -> int:
    """Run every case through the learner's function and the dispatcher; fail on the first mismatch."""
    import labsupport as lab

    fn = ctx.function(which)
    for n, case in enumerate(cases, start=1):
        op = probe.ops[case.get("op", 0)]
        sets = [raw for _, raw in case["tensors"]]
        expected, key, mask = probe.run(op, sets, case["include"], case["exclude"])
        args = (
            [lab.DispatchKeySet.from_raw(raw) for raw in sets],
            lab.DispatchKeySet.from_raw(case["include"]),
            lab.DispatchKeySet.from_raw(case["exclude"]),
            lab.DispatchKeySet.from_raw(mask),
        )
        inputs = (
            f"case {n}: tensors [{'; '.join(label for label, _ in case['tensors']) or 'none'}]\n"
            f"  tls_include      = {_ks(case['include'])}\n  tls_exclude      = {_ks(case['exclude'])}\n"
            f"  fallthrough_mask = {_mask(mask)}"
        )
        try:
            got = fn(*args)
        except NotImplementedError:
            raise  # the untouched stub: its message says it all (and stays the same every run)
        except Exception as error:
            message, hint = describe_exception(error, ctx.path, ctx.display)
            raise CheckFailed(f"{message}\nwhile computing {inputs}", hint) from error
        if which == "dispatch_key_for":
            if got is not key:
                raise CheckFailed(
                    f"{inputs}\nthe dispatcher ran the {key.name} kernel, dispatch_key_for returned {got!r}",
                    f"take the highest-priority key of compute_dispatch_key_set(...) ({ctx.where(which)}); if checks "
                    "2.1-2.4 fail, fix compute_dispatch_key_set first",
                )
            continue
        if not isinstance(got, lab.DispatchKeySet):
            raise CheckFailed(
                f"{inputs}\ncompute_dispatch_key_set returned {type(got).__name__} {got!r}, not a DispatchKeySet",
                f"build the result from DispatchKeySet values with | - & ({ctx.where(which)})",
            )
        if int(got) != expected:
            raise CheckFailed(
                f"{inputs}\nexpected {_ks(expected)}\ngot      {_ks(int(got))}\n"
                f"  missing: {_describe_raw(expected & ~int(got))}\n  extra:   {_describe_raw(int(got) & ~expected)}",
                _hint(ctx, case, mask, expected, int(got)),
            )
    return len(cases)


def _hint(ctx: Context, case: dict[str, Any], mask: int, expected: int, got: int) -> str:
    from labsupport.c10.dispatch_key_set import BACKEND_BITS

    where = ctx.where("compute_dispatch_key_set")
    missing, extra = expected & ~got, got & ~expected
    if missing & BACKEND_BITS and case["exclude"] & BACKEND_BITS:
        return (
            f"removing the exclude set also removed backend bits: use `ks - tls_exclude` (DispatchKeySet.__sub__ "
            f"clears functionality bits only), not `& ~` ({where})"
        )
    if extra & case["exclude"]:
        return f"keys of tls_exclude are still in the result: subtract the exclude set ({where})"
    if missing & case["include"]:
        return f"keys of tls_include are missing: OR the include set in before subtracting ({where})"
    if extra & ~mask:
        return (
            f"keys that are not in fallthrough_mask are still in the result: finish with `& fallthrough_mask` ({where})"
        )
    return f"((union of tensor key sets | tls_include) - tls_exclude) & fallthrough_mask ({where})"


# ---- the checks -----------------------------------------------------------------------------------


@EXERCISE.check("2.1", "union of the tensors' key sets (no TLS, no fallthroughs)", 2)
def tensors_only(ctx: Context) -> str:
    rng = ctx.rng()
    cases = [_case(rng, tls=False, per_backend=False) for _ in range(CASES)]
    n = _compare(ctx, cases, _state(ctx)["plain"], "compute_dispatch_key_set")
    return f"{n} random calls on CPU/CUDA/XLA/Meta/sparse/quantized/nested tensors match the dispatcher"


@EXERCISE.check("2.2", "TLS include and exclude sets", 2)
def tls_sets(ctx: Context) -> str:
    rng = ctx.rng()
    cases = [_case(rng, tls=True, per_backend=False) for _ in range(CASES)]
    n = _compare(ctx, cases, _state(ctx)["plain"], "compute_dispatch_key_set")
    return f"{n} random calls with include/exclude sets (autocast, below-autograd, Python, ...) match"


@EXERCISE.check("2.3", "excluding a per-backend key keeps the backend bits", 2)
def per_backend_exclude(ctx: Context) -> str:
    rng = ctx.rng()
    cases = [_case(rng, tls=True, per_backend=True) for _ in range(CASES)]
    n = _compare(ctx, cases, _state(ctx)["plain"], "compute_dispatch_key_set")
    return f"{n} random calls excluding AutogradCPU, AutogradCUDA, ... match (backend bits kept)"


@EXERCISE.check("2.4", "fallthrough masks", 2)
def fallthrough(ctx: Context) -> str:
    rng = ctx.rng()
    probe = _state(ctx)["masked"]
    cases = []
    for _ in range(CASES):
        case = _case(rng, tls=True, per_backend=rng.random() < 0.3)
        case["op"] = int(rng.integers(len(probe.ops)))
        cases.append(case)
    n = _compare(ctx, cases, probe, "compute_dispatch_key_set")
    return f"{n} random calls on operators with fallthrough kernels (incl. per-backend ones) match"


@EXERCISE.check("2.5", "dispatch_key_for picks the kernel the dispatcher runs", 2)
def chosen_key(ctx: Context) -> str:
    rng = ctx.rng()
    state = _state(ctx)
    for probe in (state["plain"], state["masked"]):
        cases = []
        for _ in range(CASES // 2):
            case = _case(rng, tls=rng.random() < 0.8, per_backend=rng.random() < 0.3)
            case["op"] = int(rng.integers(len(probe.ops)))
            cases.append(case)
        _compare(ctx, cases, probe, "dispatch_key_for")
    return f"{CASES // 2 * 2} random calls: the same kernel key as the dispatcher"
