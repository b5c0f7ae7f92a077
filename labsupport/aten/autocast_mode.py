"""Autocast: the AutocastCPU / AutocastCUDA kernels and their thread-local state.

Stands for aten/src/ATen/autocast_mode.h and autocast_mode.cpp (and, for the Python side, the
functions ``torch.amp.autocast`` calls: ``torch.set_autocast_enabled``, ``torch.get_autocast_dtype``...).

The idea in two lines. Every CPU tensor carries ``AutocastCPU`` (every CUDA tensor ``AutocastCUDA``),
but the TLS *exclude* set holds every Autocast key by default, so the keys are masked out of each call.
Enabling autocast for a device takes that device's key out of the exclude set; from then on, the ops
that have an autocast kernel (``mm``, ``matmul`` ...) run it first: it casts the floating-point inputs
with ``cached_cast``, excludes its own key (``ExcludeDispatchKeyGuard``) and calls the op again from
the top (``at::mm``), so Autograd records the casts and the op on the cast inputs.

The cast policies (which list an op is on) are PyTorch 2.13's, checked against its dispatch tables:

* CPU: ``mm``, ``bmm``, ``matmul`` -> lower_precision_fp. Every other lab op falls through (``sum`` is not on
  the CPU fp32 list; ``add`` is not on any list; ``dot`` and ``mv`` have no CPU policy).
* CUDA: ``mm``, ``bmm``, ``matmul``, ``mv`` -> lower_precision_fp; ``dot`` -> promote; ``sum``,
  ``sum.dim_IntList`` -> fp32_set_opt_dtype.

What the lab simplifies: PyTorch keeps the weight cache in one process-wide map behind a mutex and the
rest of the state in C++ ``thread_local`` variables; the lab keeps the state in a ``threading.local``
and the cache in one process-wide dict (no threads share casts in the lab's notebooks). Devices are
"cpu" and the lab's simulated "cuda"; PyTorch's other autocast devices (xpu, mps, ...) are absent.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from labsupport.aten import dtype as dtypes
from labsupport.aten.dtype import dtype as DType
from labsupport.aten.tensor import AUTOCAST_CPU_BIT, AUTOCAST_CUDA_BIT, Device, is_inference_mode_enabled
from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.kernel_function import KernelFunction
from labsupport.c10.tls import tls

__all__ = [
    "is_autocast_available", "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype",
    "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
    "increment_nesting", "decrement_nesting", "clear_cache", "cached_cast", "is_eligible",
    "get_autocast_dispatch_key_from_device_type", "get_lower_precision_fp_from_device_type",
    "promote_type", "CAST_POLICIES", "register_autocast_kernels",
]

AUTOCAST_CPP = "aten/src/ATen/autocast_mode.cpp"

# device type -> (Autocast functionality key, its raw bit in a key set)
_DEVICE_KEYS: dict[str, tuple[DispatchKey, int]] = {
    "cpu": (DispatchKey.AutocastCPU, AUTOCAST_CPU_BIT),
    "cuda": (DispatchKey.AutocastCUDA, AUTOCAST_CUDA_BIT),
}
# The ``autocast_dtype`` array's initial values: CPU bfloat16, CUDA float16.
_DEFAULT_DTYPES: dict[str, DType] = {"cpu": dtypes.bfloat16, "cuda": dtypes.float16}


def _device_type(device_type: str) -> str:
    """Validate a device string the way ``torch.get_autocast_dtype`` & co. do."""
    kind = Device(device_type).type  # unknown strings raise c10's "Expected one of cpu, cuda, ..." error
    if kind not in _DEVICE_KEYS:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{kind}'")
    return kind


def is_autocast_available(device_type: str) -> bool:
    """``torch.amp.is_autocast_available``: cpu and (simulated) cuda in the lab."""
    try:
        return Device(device_type).type in _DEVICE_KEYS
    except RuntimeError:
        return False


def get_autocast_dispatch_key_from_device_type(device_type: str) -> DispatchKey:
    """``at::autocast::get_autocast_dispatch_key_from_device_type``."""
    return _DEVICE_KEYS[_device_type(device_type)][0]


# ---- thread-local state (autocast_mode.cpp: the thread_local variables) -------------------------------


class _AutocastTLS(threading.local):
    """``autocast_dtype[]``, ``cache_enabled`` and ``nesting``: per thread, as in PyTorch."""

    def __init__(self) -> None:
        self.dtype: dict[str, DType] = dict(_DEFAULT_DTYPES)
        self.cache_enabled = True
        self.nesting = 0


_state = _AutocastTLS()

# TensorImpl* -> (weak reference to the source tensor, its cast). Process-wide, as in PyTorch.
_cached_casts: dict[int, tuple[weakref.ref, Any]] = {}


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """``at::autocast::is_autocast_enabled(device)`` = the device's Autocast key is *not* excluded.
    With no argument it asks about CUDA, as ``torch.is_autocast_enabled()`` does."""
    return not tls.sets[2] & _DEVICE_KEYS[_device_type(device_type)][1]


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """``at::autocast::set_autocast_enabled``: ``tls_set_dispatch_key_excluded(key, !enabled)``."""
    bit = _DEVICE_KEYS[_device_type(device_type)][1]
    excluded = tls.sets[2]
    tls.set_excluded(excluded & ~bit if enabled else excluded | bit)


def get_autocast_dtype(device_type: str) -> DType:
    """``torch.get_autocast_dtype(device)``: the lower-precision dtype of that device's autocast."""
    return _state.dtype[_device_type(device_type)]


def set_autocast_dtype(device_type: str, dtype: DType) -> None:
    """``torch.set_autocast_dtype(device, dtype)``."""
    _state.dtype[_device_type(device_type)] = dtype


def get_lower_precision_fp_from_device_type(device_type: str) -> DType:
    """``at::autocast::get_lower_precision_fp_from_device_type``."""
    return _state.dtype[device_type]


def is_autocast_cache_enabled() -> bool:
    """``torch.is_autocast_cache_enabled()`` (True by default)."""
    return _state.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """``torch.set_autocast_cache_enabled``."""
    _state.cache_enabled = bool(enabled)


def increment_nesting() -> int:
    """``torch.autocast_increment_nesting()``: one more autocast context (enabled or not)."""
    _state.nesting += 1
    return _state.nesting


def decrement_nesting() -> int:
    """``torch.autocast_decrement_nesting()``: returns the new depth; 0 means the outermost exited."""
    _state.nesting -= 1
    return _state.nesting


def clear_cache() -> None:
    """``torch.clear_autocast_cache()``: forget every cached weight cast."""
    _cached_casts.clear()


# ---- casting (autocast_mode.h / .cpp) -------------------------------------------------------------------


def is_eligible(arg: Any, device_type: str) -> bool:
    """``is_eligible``: a floating-point tensor of the autocast's device that is not double."""
    dt = arg._dtype
    return arg._device.type == device_type and dt.is_floating_point and dt is not dtypes.float64


def _tensor_to(arg: Any, to_type: DType) -> Any:
    return arg.to(to_type)


def cached_cast(
    to_type: DType, arg: Any, device_type: str, to: Callable[[Any, DType], Any] = _tensor_to
) -> Any:
    """``at::autocast::cached_cast``: ``arg`` cast to ``to_type`` if eligible, else ``arg`` itself.

    ``to`` is the build's ``at::Tensor::to`` (a full dispatch of ``aten::to.dtype``, so autograd
    records ``ToCopyBackward0``); by default, the tensor's own ``.to`` method, which is what a
    kernel written in a notebook uses. The cast of a float32 leaf that requires grad (a weight) is cached
    until the outermost autocast exits, unless the cache is disabled or inference mode is on, or the
    argument is a view (``!arg.is_view()``: a view's ``_base``, set by the autograd layer, is not None).
    """
    if not (hasattr(arg, "_dtype") and is_eligible(arg, device_type)) or arg._dtype is to_type:
        return arg
    can_try_cache = (
        to_type is _state.dtype[device_type]
        and arg._dtype is dtypes.float32
        and arg.requires_grad
        and arg.grad_fn is None  # is_leaf
        and getattr(arg, "_base", None) is None  # !arg.is_view()
        and _state.cache_enabled
        and not is_inference_mode_enabled()
    )
    if not can_try_cache:
        return to(arg, to_type)
    hit = _cached_casts.get(id(arg))
    if hit is not None and hit[0]() is arg:
        return hit[1]
    casted = to(arg, to_type)
    _cached_casts[id(arg)] = (weakref.ref(arg), casted)
    return casted


def promote_type(current: DType, device_type: str, *args: Any) -> DType:
    """``at::autocast::promote_type`` (the ``promote`` policy): start from the lower-precision guess and
    let each floating tensor of the device vote through ``prioritize``: float64 tensors are ignored,
    any float32 makes it float32, lower-precision with lower-precision stays; another mix is an error."""
    lower = _state.dtype[device_type]
    for arg in args:
        if not hasattr(arg, "_dtype") or arg._device.type != device_type or not arg._dtype.is_floating_point:
            continue
        if current is dtypes.float64:
            raise RuntimeError("promote type is double in at::autocast::prioritize")
        nxt = arg._dtype
        if nxt is dtypes.float64:
            continue
        if current is dtypes.float32 or nxt is dtypes.float32:
            current = dtypes.float32
        elif current is lower and nxt is lower:
            current = lower
        else:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return current


# ---- the wrappers: one class per CastPolicy (WrapFunction_<policy, device_type, ..., F>::call) ---------


class _WrapFunction:
    """What every policy shares: the device, the key to exclude, and the function to call again
    (``F``: the build's ``at::_ops::<op>::call``, a fresh full dispatch, as ``ATEN_FN(op)`` in the
    KERNEL macros). In C++ each (policy, device, op) is its own template instance, e.g.
    ``at::autocast::WrapFunction_<(at::autocast::CastPolicy)0, (c10::DeviceType)0, ..., &at::_ops::mm::call,
    ...>::call``; the lab has one class per policy and one instance per (device, op)."""

    policy = ""

    def __init__(self, device_type: str, fn: Callable[..., Any], to: Callable[[Any, DType], Any]) -> None:
        self.device_type = device_type
        self.key_bit = _DEVICE_KEYS[device_type][1]
        self.fn = fn
        self.to = to


class WrapFunction_lower_precision_fp(_WrapFunction):
    """``CastPolicy::lower_precision_fp``: cast every eligible input to the autocast dtype."""

    policy = "lower_precision_fp"

    def call(self, *args: Any) -> Any:
        sets = tls.sets  # c10::impl::ExcludeDispatchKeyGuard no_autocast(<this device's key>)
        keep, excluded = sets[1], sets[2]
        sets[1], sets[2] = keep & ~self.key_bit, excluded | self.key_bit
        try:
            device, to = self.device_type, self.to
            to_type = _state.dtype[device]
            return self.fn(*[cached_cast(to_type, a, device, to) for a in args])
        finally:
            sets[1], sets[2] = keep, excluded


class WrapFunction_fp32(_WrapFunction):
    """``CastPolicy::fp32``: cast every eligible input to float32."""

    policy = "fp32"

    def call(self, *args: Any) -> Any:
        sets = tls.sets
        keep, excluded = sets[1], sets[2]
        sets[1], sets[2] = keep & ~self.key_bit, excluded | self.key_bit
        try:
            device, to = self.device_type, self.to
            return self.fn(*[cached_cast(dtypes.float32, a, device, to) for a in args])
        finally:
            sets[1], sets[2] = keep, excluded


class WrapFunction_fp32_set_opt_dtype(_WrapFunction):
    """``CastPolicy::fp32_set_opt_dtype``: if the first argument is eligible, run the op with
    ``dtype=float32`` (unless the caller gave a dtype); otherwise call it unchanged. The op's
    ``ScalarType? dtype`` argument is its last one in the lab's ops (``sum``, ``sum.dim_IntList``)."""

    policy = "fp32_set_opt_dtype"

    def call(self, *args: Any) -> Any:
        sets = tls.sets
        keep, excluded = sets[1], sets[2]
        sets[1], sets[2] = keep & ~self.key_bit, excluded | self.key_bit
        try:
            if is_eligible(args[0], self.device_type) and args[-1] is None:
                return self.fn(*args[:-1], dtypes.float32)
            return self.fn(*args)
        finally:
            sets[1], sets[2] = keep, excluded


class WrapFunction_promote(_WrapFunction):
    """``CastPolicy::promote``: cast eligible inputs to the widest floating type among them."""

    policy = "promote"

    def call(self, *args: Any) -> Any:
        sets = tls.sets
        keep, excluded = sets[1], sets[2]
        sets[1], sets[2] = keep & ~self.key_bit, excluded | self.key_bit
        try:
            device, to = self.device_type, self.to
            to_type = promote_type(_state.dtype[device], device, *args)
            return self.fn(*[cached_cast(to_type, a, device, to) for a in args])
        finally:
            sets[1], sets[2] = keep, excluded


_POLICY_CLASSES: dict[str, type[_WrapFunction]] = {
    cls.policy: cls
    for cls in (
        WrapFunction_lower_precision_fp, WrapFunction_fp32, WrapFunction_fp32_set_opt_dtype, WrapFunction_promote,
    )
}

# (device, op name, policy, the line of autocast_mode.cpp PyTorch 2.13's dump names). Which list an op
# is on comes from AT_FORALL_LOWER_PRECISION_FP / AT_FORALL_FP32_SET_OPT_DTYPE and the CPU block's
# KERNEL_CPU lines, checked with torch._C._dispatch_dump_table on the 2.13 wheel.
CAST_POLICIES: tuple[tuple[str, str, str, int], ...] = (
    ("cpu", "mm", "lower_precision_fp", 335),
    ("cpu", "matmul", "lower_precision_fp", 335),
    ("cpu", "bmm", "lower_precision_fp", 335),
    ("cuda", "mm", "lower_precision_fp", 181),
    ("cuda", "matmul", "lower_precision_fp", 181),
    ("cuda", "bmm", "lower_precision_fp", 181),
    ("cuda", "mv", "lower_precision_fp", 181),
    ("cuda", "dot", "promote", 181),
    ("cuda", "sum", "fp32_set_opt_dtype", 181),
    ("cuda", "sum.dim_IntList", "fp32_set_opt_dtype", 181),
)


def register_autocast_kernels(dispatcher: Any, ops: Any, tensor_body: Any) -> list[Any]:
    """The ``TORCH_LIBRARY_IMPL(aten, AutocastCPU, m)`` / ``(aten, Autocast, m)`` blocks, for one build.

    ``ops`` is the build's ``at::_ops`` module: ``F`` is ``at::_ops::<op>::call`` (``ATEN_FN(op)``, a
    fresh dispatch from the top), and ``tensor_body`` its C++ Tensor class (``at::Tensor::to`` for
    the casts). Ops the build does not define are skipped, so builds made
    from a smaller ops.yaml still load. Returns the Library objects (kept alive by the build).
    """
    from labsupport.c10.library import Library

    to = getattr(tensor_body, "to", None)
    libraries = []
    for device in ("cpu", "cuda"):
        key = _DEVICE_KEYS[device][0].name
        m = Library("aten", "IMPL", key, dispatcher=dispatcher)
        for dev, op_name, policy, line in CAST_POLICIES:
            if dev != device or dispatcher.find_op(f"aten::{op_name}") is None:
                continue
            handle = getattr(ops, op_name.replace(".", "_"), None)  # at::_ops::mm, at::_ops::sum_dim_IntList
            if handle is None or (to is None and policy != "fp32_set_opt_dtype"):
                continue
            wrapper = _POLICY_CLASSES[policy](device, handle.call, to)
            kernel = KernelFunction.from_unboxed(wrapper.call, debug=f"registered at {AUTOCAST_CPP}:{line}")
            m.impl(op_name, kernel)
        libraries.append(m)
    return libraries
