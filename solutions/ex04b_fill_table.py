"""Exercise 04b -- fill the dispatch table (reference solution).

Mirrors ``OperatorEntry::computeDispatchTableEntryWithDebug`` (aten/src/ATen/core/dispatch/
OperatorEntry.cpp) for the keys this exercise asks about. Notebook 04, section 10 teaches the rules.
"""

from __future__ import annotations

_CIA = "CompositeImplicitAutograd"
_CEA = "CompositeExplicitAutograd"
_CEANF = "CompositeExplicitAutogradNonFunctional"

# The backend keys the exercise uses, and the backend keys each autograd key serves
# (getBackendKeySetFromAutograd).
BACKEND_KEYS = ["CPU", "CUDA", "XLA", "Lazy", "Meta", "FPGA", "QuantizedCPU", "SparseCPU"]
AUTOGRAD_SERVES = {
    "AutogradCPU": ["CPU"],
    "AutogradCUDA": ["CUDA"],
    "AutogradXLA": ["XLA"],
    "AutogradLazy": ["Lazy"],
    "AutogradMeta": ["Meta"],
    "AutogradOther": ["FPGA", "QuantizedCPU", "SparseCPU"],
}


def fill_table(registrations: list[str], fallbacks: dict[str, str], keys: list[str]) -> dict[str, tuple[str, str]]:
    """``{key: (kernel, label)}`` for every key in ``keys``."""
    return {key: _entry(key, set(registrations), fallbacks) for key in keys}


def _entry(key: str, registered: set[str], fallbacks: dict[str, str]) -> tuple[str, str]:
    undefined = key == "Undefined"
    backend = key in BACKEND_KEYS
    autograd = key in AUTOGRAD_SERVES
    if not undefined and key in registered:
        return f"fn_{key}", "kernel"
    if _CEANF in registered and (undefined or (backend and key not in ("XLA", "Lazy", "SparseCPU"))):
        return f"fn_{_CEANF}", "default backend kernel"
    if _CEA in registered and (undefined or backend):
        return f"fn_{_CEA}", "default backend kernel"
    if _CIA in registered and (undefined or backend or autograd):
        if key == "AutogradOther" and registered & set(AUTOGRAD_SERVES["AutogradOther"]):
            return "ambiguous_autogradother", "ambiguous autogradother"
        has_backend_kernel = _CEA in registered or bool(registered & set(AUTOGRAD_SERVES.get(key, [])))
        if not has_backend_kernel:
            return f"fn_{_CIA}", "math kernel"
    if autograd and "Autograd" in registered:
        return "fn_Autograd", "autograd kernel"
    if key in fallbacks:
        return fallbacks[key], "backend fallback"
    return "", "missing"
