"""Exercise 04c -- an autocast kernel with a cast policy (reference solution).

Follows ``WrapFunction_<policy>::call`` in aten/src/ATen/autocast_mode.h: exclude the kernel's own
Autocast key, cast the _eligible inputs (``cached_cast``), call the operator again. Notebook 04,
section 9; seed 003's Autocast section.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab
import labsupport.torch as torch

_AUTOCAST_KEY = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}


def cast(t: Any, dtype: Any) -> Any:
    """A copy of lab tensor ``t`` with dtype ``dtype`` (same device), made without the dispatcher."""
    return type(t)._make(t._data.astype(dtype.np), t._sizes, dtype, t._device)


def _eligible(t: Any, device_type: str) -> bool:
    return t.device.type == device_type and t.is_floating_point() and t.dtype is not torch.float64


def autocast_kernel(
    op: Any, ks: lab.DispatchKeySet, policy: str, device_type: str, autocast_dtype: Any, tensors: list[Any]
) -> Any:
    with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet(_AUTOCAST_KEY[device_type])):
        if policy == "lower_precision_fp":
            target = autocast_dtype
        elif policy == "fp32":
            target = torch.float32
        else:  # promote: the widest eligible type, starting from the autocast dtype
            widest = [t.dtype for t in tensors if _eligible(t, device_type)]
            target = torch.float32 if torch.float32 in widest else autocast_dtype
        args = [cast(t, target) if _eligible(t, device_type) and t.dtype is not target else t for t in tensors]
        return op.call(*args)
