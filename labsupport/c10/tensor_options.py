"""Which backend a factory function should use: ``computeDispatchKey(dtype, layout, device)``.

Stands for ``c10/core/TensorOptions.h``. BackendSelect kernels call it because a factory such as
``randn(2, device="meta")`` has no tensor argument whose keys could say where the result lives.
"""

from __future__ import annotations

from typing import Any

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import DispatchKeySet

_DEVICE_KEYS = {"cpu": DispatchKey.CPU, "cuda": DispatchKey.CUDA, "meta": DispatchKey.Meta}
_RAW = {name: int(DispatchKeySet(key)) for name, key in _DEVICE_KEYS.items()}


def device_type_of(device: Any) -> str:
    """``"cpu"`` for None, ``"cuda"`` for ``"cuda:0"`` or a Device object, ..."""
    if device is None:
        return "cpu"
    text = device if isinstance(device, str) else getattr(device, "type", str(device))
    return text.split(":")[0]


def compute_dispatch_key(dtype: Any = None, layout: Any = None, device: Any = None) -> DispatchKey:
    """``computeDispatchKey``: strided layout only in the lab, so the device decides."""
    if layout is not None and str(layout) not in ("strided", "torch.strided"):
        raise RuntimeError(f"Dispatcher Lab only models strided tensors, got layout {layout}")
    kind = device_type_of(device)
    if kind not in _DEVICE_KEYS:
        raise RuntimeError(f"Expected one of cpu, cuda, meta device type at start of device string: {kind}")
    return _DEVICE_KEYS[kind]


def compute_dispatch_key_set(dtype: Any = None, layout: Any = None, device: Any = None) -> DispatchKeySet:
    """``DispatchKeySet(computeDispatchKey(...))``, as generated BackendSelect kernels use it."""
    return DispatchKeySet.from_raw(_RAW[compute_dispatch_key(dtype, layout, device).name.lower()])
