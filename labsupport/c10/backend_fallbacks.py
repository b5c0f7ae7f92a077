"""The backend fallbacks PyTorch 2.13 registers at start-up, one per dispatch-table slot.

Stands for the ``TORCH_LIBRARY_IMPL(_, Key, m) { m.fallback(...); }`` blocks spread over ATen
(VariableFallbackKernel.cpp, BackendSelectFallbackKernel.cpp, autocast_mode.cpp, ...). The debug
strings name the real file and line, so dumps read like PyTorch's.

What each lab fallback does:

* fallthrough (BackendSelect, ADInplaceOrView, six Autocast keys, the two VmapMode keys): never run;
  the key is masked out of every call's key set.
* the autograd fallback (AutogradOther, AutogradCPU, ...): PyTorch's "warn" mode; see
  ``labsupport.autograd.variable_fallback``. c10 does not import the autograd layer: that layer
  provides its kernel with ``provide_fallback_kernel("autograd", fn)`` when it is imported, and every
  dispatcher's autograd slots switch to it. Until then (c10 used on its own) the slots hold
  ``autograd_fallback_below``, which only steps below autograd: PyTorch's "nothing" mode.
* the functorch keys (FuncTorchDynamicLayerFrontMode / BackMode, FuncTorchBatched): pass-through
  until ``labsupport.functorch`` provides the DynamicLayer fallbacks and the vmap for-loop fallback
  (``provide_fallback_kernel("functorch_front", ...)`` and so on), as the autograd layer does.
* Meta: raises, because an operator with no Meta kernel cannot compute output shapes.
* Python and PythonTLSSnapshot: ``labsupport.aten.python_fallback_kernel`` provides ``pythonFallback``
  (kind "python": hand the call to the innermost ``__torch_dispatch__`` mode or tensor subclass) and
  ``pythonTLSSnapshotFallback`` (kind "python_tls_snapshot": remember the TLS on entry) when imported;
  until then both only step past their key. PreDispatch stays a pass-through, as in PyTorch.
* Tracer: ``labsupport.jit`` provides ``general_trace_function`` (kind "tracer") when imported; until
  then the slot only steps past Tracer (nothing traces without labsupport.jit).
* the others (Functionalize, Conjugate, Tracer, Batched, ...) stand for machinery the lab
  does not model; each one only steps past its own key and redispatches, which is also what the real
  ones do when their feature is not in use.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import DispatchKeySet
from labsupport.c10.kernel_function import KernelFunction, fallthrough_kernel

if TYPE_CHECKING:
    from labsupport.c10.dispatcher import Dispatcher
    from labsupport.c10.operator_entry import OperatorEntry

ATEN = "aten/src/ATen/"

# (key, file:line of the real registration, kind)
BACKEND_FALLBACKS: tuple[tuple[str, str, str], ...] = (
    ("Meta", ATEN + "core/MetaFallbackKernel.cpp:23", "meta"),
    ("BackendSelect", ATEN + "core/BackendSelectFallbackKernel.cpp:3", "fallthrough"),
    ("Python", ATEN + "core/PythonFallbackKernel.cpp:192", "python"),
    ("FuncTorchDynamicLayerBackMode", ATEN + "functorch/DynamicLayer.cpp:479", "functorch_back"),
    ("Functionalize", ATEN + "FunctionalizeFallbackKernel.cpp:411", "pass"),
    ("Conjugate", ATEN + "ConjugateFallback.cpp:17", "pass"),
    ("Negative", ATEN + "native/NegateFallback.cpp:18", "pass"),
    ("ZeroTensor", ATEN + "ZeroTensorFallback.cpp:115", "pass"),
    ("ADInplaceOrView", ATEN + "core/VariableFallbackKernel.cpp:103", "fallthrough"),
    ("AutogradOther", ATEN + "core/VariableFallbackKernel.cpp:62", "autograd"),
    ("AutogradCPU", ATEN + "core/VariableFallbackKernel.cpp:66", "autograd"),
    ("AutogradXPU", ATEN + "core/VariableFallbackKernel.cpp:70", "autograd"),
    ("AutogradCUDA", ATEN + "core/VariableFallbackKernel.cpp:74", "autograd"),
    ("AutogradMTIA", ATEN + "core/VariableFallbackKernel.cpp:78", "autograd"),
    ("AutogradMAIA", ATEN + "core/VariableFallbackKernel.cpp:82", "autograd"),
    ("AutogradXLA", ATEN + "core/VariableFallbackKernel.cpp:86", "autograd"),
    ("AutogradLazy", ATEN + "core/VariableFallbackKernel.cpp:90", "autograd"),
    ("AutogradMPS", ATEN + "core/VariableFallbackKernel.cpp:94", "autograd"),
    ("AutogradMeta", ATEN + "core/VariableFallbackKernel.cpp:98", "autograd"),
    ("AutogradHPU", ATEN + "core/VariableFallbackKernel.cpp:107", "autograd"),
    ("AutogradPrivateUse1", ATEN + "core/VariableFallbackKernel.cpp:111", "autograd"),
    ("Tracer", "torch/csrc/autograd/TraceTypeManual.cpp:296", "tracer"),
    ("AutocastCPU", ATEN + "autocast_mode.cpp:330", "fallthrough"),
    ("AutocastMTIA", ATEN + "autocast_mode.cpp:472", "fallthrough"),
    ("AutocastMAIA", ATEN + "autocast_mode.cpp:510", "fallthrough"),
    ("AutocastXPU", ATEN + "autocast_mode.cpp:548", "fallthrough"),
    ("AutocastMPS", ATEN + "autocast_mode.cpp:221", "fallthrough"),
    ("AutocastCUDA", ATEN + "autocast_mode.cpp:177", "fallthrough"),
    ("FuncTorchBatched", ATEN + "functorch/LegacyBatchingRegistrations.cpp:730", "functorch_batched"),
    ("BatchedNestedTensor", ATEN + "functorch/LegacyBatchingRegistrations.cpp:757", "pass"),
    ("FuncTorchVmapMode", ATEN + "functorch/VmapModeRegistrations.cpp:22", "fallthrough"),
    ("Batched", ATEN + "LegacyBatchingRegistrations.cpp:1072", "pass"),
    ("VmapMode", ATEN + "VmapModeRegistrations.cpp:32", "fallthrough"),
    ("FuncTorchGradWrapper", ATEN + "functorch/TensorWrapper.cpp:210", "pass"),
    ("PythonTLSSnapshot", ATEN + "core/PythonFallbackKernel.cpp:200", "python_tls_snapshot"),
    ("FuncTorchDynamicLayerFrontMode", ATEN + "functorch/DynamicLayer.cpp:475", "functorch_front"),
    # preDispatchFallback: a real (non-fallthrough) kernel that only redispatches, so that pre-dispatch
    # export tracing can put a Python kernel on the PreDispatch key; the lab keeps it a pass-through.
    ("PreDispatch", ATEN + "core/PythonFallbackKernel.cpp:204", "pass"),
    ("PythonDispatcher", ATEN + "core/PythonFallbackKernel.cpp:196", "pass"),
)


def meta_fallback(op: OperatorEntry, ks: DispatchKeySet, stack: list[Any]) -> None:
    """``MetaFallbackKernel.cpp``: an operator without a Meta kernel cannot run on meta tensors."""
    raise NotImplementedError(
        f"{op.full_name}: attempted to run this operator with Meta tensors, but there was no Meta kernel "
        "registered. Meta tensors have shapes and dtypes but no data, so every operator needs a kernel "
        "(or a structured meta() function) that computes its output shape."
    )


def make_passthrough_fallback(key: DispatchKey) -> KernelFunction:
    """A boxed fallback that steps past ``key`` and redispatches (what the lab models of that feature)."""
    below = DispatchKeySet.full_after(key)

    def passthrough(op: OperatorEntry, ks: DispatchKeySet, stack: list[Any]) -> None:
        op.redispatch_boxed(ks & below, stack)

    passthrough.__qualname__ = f"{key.name.lower()}_passthrough_fallback"
    return KernelFunction.from_boxed(passthrough, with_keyset=True)


def autograd_fallback_below(op: OperatorEntry, ks: DispatchKeySet, stack: list[Any]) -> None:
    """The autograd slots before the autograd layer provides its fallback: step below autograd
    (``torch._C._set_autograd_fallback_mode("nothing")``)."""
    from labsupport.c10.dispatch_key_set import after_ADInplaceOrView_keyset, after_autograd_keyset

    mutates = op.schema is not None and op.schema.is_mutable
    op.redispatch_boxed(ks & (after_autograd_keyset if mutates else after_ADInplaceOrView_keyset), stack)


# Kernels that layers above c10 provide for a kind of fallback ("autograd"), and the dispatchers
# whose fallbacks must follow them (weakly held: a build's dispatcher may go away).
_provided: dict[str, Callable[..., None]] = {"autograd": autograd_fallback_below}
_dispatchers: weakref.WeakSet[Dispatcher] = weakref.WeakSet()


def provide_fallback_kernel(kind: str, fn: Callable[..., None]) -> None:
    """A layer above c10 supplies the boxed kernel (``fn(op, ks, stack)``) for one kind of fallback.

    Every dispatcher that installed PyTorch's start-up fallbacks switches its slots of that kind to
    ``fn`` (the autograd layer calls this for "autograd", as PyTorch registers its autograd fallback
    from torch/csrc/autograd).
    """
    _provided[kind] = fn
    sites = {where for _, where, k in BACKEND_FALLBACKS if k == kind}
    for dispatcher in list(_dispatchers):
        for registration in dispatcher.fallbacks:
            if registration is not None and registration.owner is dispatcher and registration.kernel.source in sites:
                registration.kernel = _make_kernel(kind, DispatchKey.Undefined, registration.kernel.source)
        dispatcher._refresh_all()


def _make_kernel(kind: str, key: DispatchKey, where: str) -> KernelFunction:
    if kind == "fallthrough":
        kernel = KernelFunction.from_unboxed(fallthrough_kernel)
    elif kind in _provided:
        kernel = KernelFunction.from_boxed(_provided[kind], with_keyset=True)
    elif kind == "meta":
        kernel = KernelFunction.from_boxed(meta_fallback, with_keyset=True)
    else:
        kernel = make_passthrough_fallback(key)
    kernel.source = where
    return kernel


def install_backend_fallbacks(dispatcher: Dispatcher) -> None:
    """Register PyTorch's start-up fallbacks on a fresh dispatcher."""
    _dispatchers.add(dispatcher)
    for name, where, kind in BACKEND_FALLBACKS:
        key = DispatchKey[name]
        kernel = _make_kernel(kind, key, where)
        dispatcher.register_fallback(key, kernel, f"registered at {where}", owner=dispatcher)
