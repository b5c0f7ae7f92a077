"""Exercise 04d -- predict the path of a call (reference solution).

Follows ``Dispatcher::call`` (the key set of a call), ``OperatorEntry`` (which kernel a slot holds, and
the fallthrough mask) and what each kind of kernel redispatches with. Notebooks 02, 04 and 07.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab

_KS = lab.DispatchKeySet
_CEA, _CIA = "CompositeExplicitAutograd", "CompositeImplicitAutograd"
# The start-up fallbacks (PyTorch's CPU build) of the keys these scenarios can reach.
_FALLTHROUGH_FALLBACKS = {"BackendSelect", "ADInplaceOrView", "AutocastCPU", "AutocastCUDA"}
_FALLBACKS = {"Meta", "Tracer", "AutogradOther", "AutogradCPU", "AutogradCUDA", "AutogradMeta"}
_BACKEND_OF = {"AutogradCPU": "CPU", "AutogradCUDA": "CUDA", "AutogradMeta": "Meta"}
_DEVICE_KEYS = {
    "cpu": ["CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"],
    "cuda": ["CUDA", "ADInplaceOrView", "AutogradCUDA", "AutocastCUDA"],
    "meta": ["Meta", "ADInplaceOrView", "AutogradMeta"],
}


def predict_path(scenario: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    kernels: dict[str, str] = scenario["kernels"]
    tensor_keys = _KS()
    for t in scenario["tensors"]:
        keys = _DEVICE_KEYS[t["device"]]
        if t["inference"]:
            keys = [k for k in keys if k != "ADInplaceOrView" and not k.startswith("Autograd")]
        tensor_keys = tensor_keys | _KS(keys)
    include = _KS(["BackendSelect", "ADInplaceOrView"])
    exclude = lab.autocast_dispatch_keyset
    for guard in scenario["guards"]:
        kind = guard["kind"]
        if kind == "AutoDispatchBelowAutograd":
            exclude = exclude | lab.autograd_dispatch_keyset
        elif kind == "AutoDispatchBelowADInplaceOrView":
            exclude = exclude | lab.autograd_dispatch_keyset | _KS("ADInplaceOrView")
        elif kind == "ExcludeDispatchKeyGuard":
            exclude = exclude | _KS(guard["keys"])
        elif kind == "IncludeDispatchKeyGuard":
            include = include | _KS(guard["keys"])
        elif kind == "autocast_cpu":
            exclude = exclude - _KS("AutocastCPU")
        elif kind == "InferenceMode":
            include = include - _KS("ADInplaceOrView")
            exclude = exclude | lab.autograd_dispatch_keyset
    path: list[tuple[str, str, list[str]]] = []
    _call(kernels, tensor_keys, include, exclude, path)
    return path


def _entry(kernels: dict[str, str], key: str) -> tuple[str, str]:
    """(kernel name, kind) of a slot: kind is a kernel kind of the scenario, or fallback/fallthrough/missing."""
    if key in kernels:
        return f"fn_{key}", kernels[key]
    if key in ("CPU", "CUDA", "Meta"):
        if _CEA in kernels:
            return f"fn_{_CEA}", "backend"
        if _CIA in kernels:
            return f"fn_{_CIA}", "math"
    if key.startswith("Autograd"):
        backend = _BACKEND_OF.get(key)
        has_backend_kernel = _CEA in kernels or (backend is not None and backend in kernels)
        if _CIA in kernels and not has_backend_kernel:
            return f"fn_{_CIA}", "math"
        if "Autograd" in kernels:
            return "fn_Autograd", "autograd"
    if key in _FALLTHROUGH_FALLBACKS:
        return "fallback", "fallthrough"
    if key in _FALLBACKS:
        return "fallback", "autograd" if key.startswith("Autograd") else key
    return "missing", "missing"


def _mask(kernels: dict[str, str], ks: lab.DispatchKeySet) -> lab.DispatchKeySet:
    """The keys a fallthrough entry removes from a call's key set."""
    removed = _KS()
    for key in ("BackendSelect", "ADInplaceOrView", "AutocastCPU", "AutocastCUDA"):
        if _entry(kernels, key)[1] == "fallthrough":
            removed = removed | _KS(key)
    if kernels.get("AutogradCPU") == "fallthrough" and ks.highest_backend().name == "CPUBit":
        removed = removed | _KS("AutogradCPU")
    return lab.DispatchKeySet.full() - removed


def _call(kernels: dict[str, str], tensor_keys: Any, include: Any, exclude: Any, path: list[Any]) -> None:
    ks = (tensor_keys | include) - exclude
    _run(kernels, ks & _mask(kernels, ks), tensor_keys, include, exclude, path)


def _run(kernels: dict[str, str], ks: Any, tensor_keys: Any, include: Any, exclude: Any, path: list[Any]) -> None:
    key = ks.highest_priority_key().name
    name, kind = _entry(kernels, key)
    if kind == "missing":
        return  # nothing runs; the call raises "Could not run ..."
    path.append((key, name, [k.name for k in ks]))
    if kind == "autograd":
        _run(kernels, ks & lab.after_autograd_keyset, tensor_keys, include, exclude, path)
    elif kind == "inplace_or_view":
        _run(kernels, ks & lab.after_ADInplaceOrView_keyset, tensor_keys, include, exclude, path)
    elif kind == "Tracer":
        _run(kernels, ks & lab.DispatchKeySet.full_after("Tracer"), tensor_keys, include, exclude, path)
    elif kind == "autocast":
        _call(kernels, tensor_keys, include, exclude | _KS("AutocastCPU"), path)
