"""Exercise 07b -- BackendSelect: factory operators pick their backend (reference solution).

``compute_dispatch_key`` follows ``c10::computeDispatchKey`` (c10/core/TensorOptions.h); the two
kernels follow what torchgen's ``ComputeBackendSelect`` writes into RegisterBackendSelect.cpp.
Notebook 07, section 6.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab

_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "xla": "XLA"}
_QUANTIZED_DTYPES = {"qint8", "quint8", "qint32"}


def compute_dispatch_key(dtype: str | None, layout: str | None, device: str | None) -> str:
    backend = _DEVICE_KEYS[(device or "cpu").split(":")[0]]
    layout = layout or "strided"
    if layout in ("strided", "jagged"):
        return f"Quantized{backend}" if dtype in _QUANTIZED_DTYPES else backend
    if layout == "sparse_coo":
        return f"Sparse{backend}"
    if layout == "_mkldnn":
        return "MkldnnCPU"
    return f"SparseCsr{backend}"


def factory_backend_select(
    op: Any, ks: lab.DispatchKeySet, size: list[int], dtype: Any, layout: Any, device: Any, pin_memory: Any
) -> Any:
    key_set = lab.DispatchKeySet(compute_dispatch_key(dtype, layout, device))
    return op.redispatch(key_set, size, dtype, layout, device, pin_memory)


def convert_backend_select(
    op: Any, ks: lab.DispatchKeySet, self: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any
) -> Any:
    wanted = lab.DispatchKeySet(compute_dispatch_key(dtype, layout, device)) | lab.dispatch_keys(self)
    computed = (wanted | lab.tls_include_set()) - lab.tls_exclude_set()  # c10::impl::computeDispatchKeySet
    key_set = computed & lab.DispatchKeySet.full_after("BackendSelect")
    return op.redispatch(key_set, self, dtype, layout, device, pin_memory)
