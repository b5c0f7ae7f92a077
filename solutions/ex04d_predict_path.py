"""Exercise 04d -- predict the path of a call (reference solution).

Follows ``Dispatcher::call`` (the key set of a call), ``OperatorEntry`` (which kernel a slot holds, and
the fallthrough mask) and what each kind of kernel redispatches with. Notebooks 02, 04 and 07.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab

KS = lab.DispatchKeySet
CEA, CIA = "CompositeExplicitAutograd", "CompositeImplicitAutograd"
AUTOGRAD_KEYS = KS(["AutogradOther", "AutogradCPU"])  # the Autograd functionality (all backends) + AutogradOther
# The start-up fallbacks (PyTorch's CPU build) of the keys these scenarios can reach.
FALLTHROUGH_FALLBACKS = {"BackendSelect", "ADInplaceOrView", "AutocastCPU", "AutocastCUDA"}
FALLBACKS = {"Meta", "Tracer", "AutogradOther", "AutogradCPU", "AutogradCUDA", "AutogradMeta"}
BACKEND_OF = {"AutogradCPU": "CPU", "AutogradCUDA": "CUDA", "AutogradMeta": "Meta"}
DEVICE_KEYS = {
    "cpu": ["CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"],
    "cuda": ["CUDA", "ADInplaceOrView", "AutogradCUDA", "AutocastCUDA"],
    "meta": ["Meta", "ADInplaceOrView", "AutogradMeta"],
}


def predict_path(scenario: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    kernels: dict[str, str] = scenario["kernels"]
    tensor_keys = KS()
    for t in scenario["tensors"]:
        keys = DEVICE_KEYS[t["device"]]
        if t["inference"]:
            keys = [k for k in keys if k != "ADInplaceOrView" and not k.startswith("Autograd")]
        tensor_keys = tensor_keys | KS(keys)
    include = KS(["BackendSelect", "ADInplaceOrView"])
    exclude = lab.autocast_dispatch_keyset
    for guard in scenario["guards"]:
        kind = guard["kind"]
        if kind == "AutoDispatchBelowAutograd":
            exclude = exclude | lab.autograd_dispatch_keyset
        elif kind == "AutoDispatchBelowADInplaceOrView":
            exclude = exclude | lab.autograd_dispatch_keyset | KS("ADInplaceOrView")
        elif kind == "ExcludeDispatchKeyGuard":
            exclude = exclude | KS(guard["keys"])
        elif kind == "IncludeDispatchKeyGuard":
            include = include | KS(guard["keys"])
        elif kind == "autocast_cpu":
            exclude = exclude - KS("AutocastCPU")
        elif kind == "InferenceMode":
            include = include - KS("ADInplaceOrView")
            exclude = exclude | lab.autograd_dispatch_keyset
    path: list[tuple[str, str, list[str]]] = []
    call(kernels, tensor_keys, include, exclude, path)
    return path


def entry(kernels: dict[str, str], key: str) -> tuple[str, str]:
    """(kernel name, kind) of a slot: kind is a kernel kind of the scenario, or fallback/fallthrough/missing."""
    if key in kernels:
        return f"fn_{key}", kernels[key]
    if key in ("CPU", "CUDA", "Meta"):
        if CEA in kernels:
            return f"fn_{CEA}", "backend"
        if CIA in kernels:
            return f"fn_{CIA}", "math"
    if key.startswith("Autograd"):
        backend = BACKEND_OF.get(key)
        has_backend_kernel = CEA in kernels or (backend is not None and backend in kernels)
        if CIA in kernels and not has_backend_kernel:
            return f"fn_{CIA}", "math"
        if "Autograd" in kernels:
            return "fn_Autograd", "autograd"
    if key in FALLTHROUGH_FALLBACKS:
        return "fallback", "fallthrough"
    if key in FALLBACKS:
        return "fallback", "autograd" if key.startswith("Autograd") else key
    return "missing", "missing"


def mask(kernels: dict[str, str], ks: lab.DispatchKeySet) -> lab.DispatchKeySet:
    """The keys a fallthrough entry removes from a call's key set."""
    removed = KS()
    for key in ("BackendSelect", "ADInplaceOrView", "AutocastCPU", "AutocastCUDA"):
        if entry(kernels, key)[1] == "fallthrough":
            removed = removed | KS(key)
    if kernels.get("AutogradCPU") == "fallthrough" and ks.highest_backend().name == "CPUBit":
        removed = removed | KS("AutogradCPU")
    return lab.DispatchKeySet.full() - removed


def call(kernels: dict[str, str], tensor_keys: Any, include: Any, exclude: Any, path: list[Any]) -> None:
    ks = (tensor_keys | include) - exclude
    run(kernels, ks & mask(kernels, ks), tensor_keys, include, exclude, path)


def run(kernels: dict[str, str], ks: Any, tensor_keys: Any, include: Any, exclude: Any, path: list[Any]) -> None:
    key = ks.highest_priority_key().name
    name, kind = entry(kernels, key)
    if kind == "missing":
        return  # nothing runs; the call raises "Could not run ..."
    path.append((key, name, [k.name for k in ks]))
    if kind == "autograd":
        run(kernels, ks & lab.after_autograd_keyset, tensor_keys, include, exclude, path)
    elif kind == "inplace_or_view":
        run(kernels, ks & lab.after_ADInplaceOrView_keyset, tensor_keys, include, exclude, path)
    elif kind == "Tracer":
        run(kernels, ks & lab.DispatchKeySet.full_after("Tracer"), tensor_keys, include, exclude, path)
    elif kind == "autocast":
        call(kernels, tensor_keys, include, exclude | KS("AutocastCPU"), path)
