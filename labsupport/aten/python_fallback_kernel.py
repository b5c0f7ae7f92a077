"""The Python key's backend fallbacks: where ``__torch_dispatch__`` is called from.

Stands for ``aten/src/ATen/core/PythonFallbackKernel.cpp`` (``pythonTLSSnapshotFallback``,
``pythonFallback``) and the part of ``torch/csrc/PyInterpreter.cpp`` / ``python_arg_parser.cpp``
(``handle_torch_function_no_python_arg_parser``) that turns a boxed call into a Python call.

A call reaches these keys when a tensor argument is a subclass with ``__torch_dispatch__`` (its key
set holds ``Python`` and ``PythonTLSSnapshot``) or when a ``TorchDispatchMode`` is active (both keys
are in the TLS include set). The two keys sit at opposite ends of the priority order::

    PythonTLSSnapshot   (near the top)  remember the TLS on entry, step past the key
    Autocast, Autograd, ADInplaceOrView run as for any tensor
    Python              (low, above BackendSelect and the backends)  pythonFallback

so a mode or a subclass sees the operators *after* autograd has recorded them: ``mm`` for a
``matmul``, and the backward pass's own operators. ``pythonFallback`` excludes every key above
``Python`` (``after_Python_keyset``), unpacks the stack into ``args`` / ``kwargs``, and calls the
innermost mode (popped while its handler runs), else the ``__torch_dispatch__`` of each tensor
subclass among the arguments, until one does not return ``NotImplemented``.

What the lab simplifies: PyTorch finds the handler through the ``PyInterpreter`` stored on a
tensor (several Python interpreters can share one process); the lab has one interpreter. The
results are pushed back on the stack as they are, without PyTorch's type checks on them.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from labsupport._ops import OpOverload
from labsupport.c10.backend_fallbacks import provide_fallback_kernel
from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import FULL, DispatchKeySet
from labsupport.c10.dispatcher import observers
from labsupport.c10.kernel_function import push_outputs
from labsupport.c10.operator_entry import OperatorEntry
from labsupport.c10.schema import parse_default
from labsupport.c10.tls import ExcludeDispatchKeyGuard, tls
from labsupport.c10.torch_dispatch_mode_tls import PYTHON_KEYS, StashTorchDispatchModeGuard, stack_len

# Every key above Python (FULL ^ (FULL_AFTER(Python) | Python)): FULL_AFTER keeps PythonDispatcher,
# so the set runs from FuncTorchDynamicLayerBackMode to PreDispatch, as PyTorch 2.13 prints it.
after_Python_keyset = DispatchKeySet.from_raw(
    FULL ^ int(DispatchKeySet.full_after(DispatchKey.Python) | DispatchKeySet(DispatchKey.Python))
)
_after_snapshot = int(DispatchKeySet.full_after(DispatchKey.PythonTLSSnapshot))
_PYTHON_BIT = int(DispatchKeySet(DispatchKey.Python))


class _TLSOnEntry(threading.local):
    """``tls_on_entry``: the TLS key sets when the call entered the dispatcher from Python."""

    value: tuple[int, ...] | None = None


_tls_on_entry = _TLSOnEntry()


def tls_on_entry() -> tuple[int, ...]:
    """``safe_get_tls_on_entry``: the include / exclude sets the current Python-key call started with."""
    value = _tls_on_entry.value
    if value is None:
        raise RuntimeError("Accessing torch dispatch state outside of '__torch_dispatch__' is not allowed.")
    return value


def python_tls_snapshot_fallback(op: OperatorEntry, ks: DispatchKeySet, stack: list[Any]) -> None:
    """``pythonTLSSnapshotFallback``: remember the TLS on entry (``MaybeSetTLSOnEntryGuard``: only the
    outermost call does), then redispatch below ``PythonTLSSnapshot``."""
    state = _tls_on_entry
    set_here = state.value is None
    if set_here:
        state.value = tls.snapshot()
    try:
        op.redispatch_boxed(int(ks) & _after_snapshot, stack)
    finally:
        if set_here:
            state.value = None


def python_fallback(op: OperatorEntry, ks: DispatchKeySet, stack: list[Any]) -> None:
    """``pythonFallback``: hand the call to the innermost mode, else to the tensor subclasses."""
    with ExcludeDispatchKeyGuard(after_Python_keyset):
        schema = op.schema
        n = len(schema.arguments) if schema is not None else len(stack)
        arguments = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        args, kwargs = args_kwargs(op, arguments)
        overloaded = overloaded_args(arguments)
        if observers.active:
            result = _recorded(OpOverload.of(op), overloaded, args, kwargs)
        else:
            result = handle_torch_dispatch(OpOverload.of(op), overloaded, args, kwargs)
    push_outputs(op, stack, result)


def _recorded(func: OpOverload, overloaded: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``handle_torch_dispatch`` inside a ``RECORD_FUNCTION`` scope, as PyTorch 2.13 opens one around the
    handler: ``PythonDispatchMode`` when a mode handles the call, ``PythonSubclass`` otherwise (its
    profiler shows them as rows of their own). Observers that want such scopes define
    ``on_record_function(name, entering)``; the dispatch observers' other methods never see them."""
    name = "PythonDispatchMode" if stack_len() else "PythonSubclass"
    listeners = [item for item in observers.items if hasattr(item, "on_record_function")]
    for listener in listeners:
        listener.on_record_function(name, True)
    try:
        return handle_torch_dispatch(func, overloaded, args, kwargs)
    finally:
        for listener in reversed(listeners):
            listener.on_record_function(name, False)


def args_kwargs(op: OperatorEntry, arguments: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``parseIValuesToPyArgsKwargs``: positional arguments up to the last one that differs from its
    default go in ``args``; keyword-only ones go in ``kwargs``, and only when they differ from their
    default (``sum(a, dim=[0])`` gives ``args == (a, [0])``: ``keepdim=False`` is left out)."""
    schema = op.schema
    if schema is None:
        return tuple(arguments), {}
    params = schema.arguments
    kwarg_only_start = len(arguments)
    while kwarg_only_start > 0 and params[kwarg_only_start - 1].kwarg_only:
        kwarg_only_start -= 1
    positional_end = kwarg_only_start
    while positional_end > 0 and _is_default(params[positional_end - 1], arguments[positional_end - 1]):
        positional_end -= 1
    kwargs = {
        params[i].name: _to_python(arguments[i])
        for i in range(kwarg_only_start, len(arguments))
        if not _is_default(params[i], arguments[i])
    }
    return tuple(_to_python(value) for value in arguments[:positional_end]), kwargs


def _to_python(value: Any) -> Any:
    """``toPyObject``: a wrapped-number tensor (a Python scalar the binding wrapped) goes back to Python
    as the number it was."""
    if getattr(value, "_tkey", 0) & 1 and value._data is not None:
        return value._data.item()
    return value


def _is_default(param: Any, value: Any) -> bool:
    if param.default is None:
        return False
    if hasattr(value, "_ks"):  # a tensor never equals a schema default
        return False
    default = parse_default(param.default, param.type)
    if isinstance(default, (list, tuple)) or isinstance(value, (list, tuple)):
        return isinstance(value, (list, tuple)) and list(value) == list(default)  # type: ignore[arg-type]
    return (type(value) is type(default) and value == default) or (value is None and default is None)


def overloaded_args(arguments: list[Any]) -> list[Any]:
    """The tensors whose class has its own ``__torch_dispatch__``, one per class, a subclass before
    its base classes (``append_overloaded_tensor``)."""
    found: list[Any] = []
    for value in arguments:
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            ks = getattr(item, "_ks", 0)
            if not ks & _PYTHON_BIT or not has_torch_dispatch(type(item)):
                continue
            cls = type(item)
            if any(type(seen) is cls for seen in found):
                continue
            at = len(found)
            for i, seen in enumerate(found):
                if issubclass(cls, type(seen)):
                    at = i
                    break
            found.insert(at, item)
    return found


def has_torch_dispatch(cls: type) -> bool:
    """``check_has_torch_dispatch``: a tensor class that overrides ``__torch_dispatch__``."""
    handler = getattr(cls, "__torch_dispatch__", None)
    return handler is not None and getattr(handler, "__func__", handler) is not _disabled_impl()


def _disabled_impl() -> Any:
    from labsupport.aten.tensor import TensorBase

    return TensorBase.__dict__["__torch_dispatch__"].__func__


def handle_torch_dispatch(
    func: OpOverload, overloaded: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``handle_torch_function_no_python_arg_parser`` for ``__torch_dispatch__``: the innermost mode
    first (popped while it runs), then each subclass; PyTorch's TypeError when all decline."""
    types = tuple(type(t) for t in overloaded)
    tried: list[str] = []
    if stack_len():
        with StashTorchDispatchModeGuard() as mode:
            result = mode.__torch_dispatch__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
        tried.append(f"  - mode object {mode!r}")
    for tensor in overloaded:
        result = type(tensor).__torch_dispatch__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
        tried.append(f"  - tensor subclass {type(tensor)!r}")
    if not tried:  # PyTorch: an internal assert ("no arguments had PyInterpreter")
        raise RuntimeError(
            f"{func}: hit the Python dispatch key, but no mode is active and no argument is a tensor subclass with "
            "__torch_dispatch__ (lab: a tensor carries the Python key without a handler)"
        )
    handlers = "\n".join(tried)
    raise TypeError(
        f"Multiple dispatch failed for '{func.__module__}.{func.__name__}'; all __torch_dispatch__ handlers "
        f"returned NotImplemented:\n\n{handlers}\n\nFor more information, try re-running with "
        "TORCH_LOGS=not_implemented"
    )


# What lab.trace calls these frames: the C++ names in PyTorch 2.13's libtorch (``nm -C``). In the
# wheel pythonTLSSnapshotFallback is inlined into ``c10::BoxedKernel::make_boxed_function<&...>``.
FRAME_RULES = (
    (r"python_fallback", "fallback", "(anonymous namespace)::pythonFallback"),
    (r"python_tls_snapshot_fallback", "fallback", "(anonymous namespace)::pythonTLSSnapshotFallback"),
    (r"handle_torch_dispatch", "binding", "torch::handle_torch_function_no_python_arg_parser"),
)


def install() -> None:
    """Register both fallbacks with every dispatcher (``TORCH_LIBRARY_IMPL(_, Python, m)`` and
    ``(_, PythonTLSSnapshot, m)``), and tell lab.trace, if loaded, what to call their frames."""
    provide_fallback_kernel("python", python_fallback)
    provide_fallback_kernel("python_tls_snapshot", python_tls_snapshot_fallback)
    frame_names = sys.modules.get("labsupport.tools.frame_names")
    if frame_names is not None:
        register_frame_names(frame_names.LAB_RULES)


def register_frame_names(lab_rules: dict[str, Any]) -> None:
    """Tell lab.trace which PyTorch frame each function here stands for."""
    lab_rules.setdefault(__name__, FRAME_RULES)
    lab_rules.setdefault("labsupport._ops", ((r"OpOverload\.__call__", "binding", "torch._ops.OpOverload.__call__"),))


install()

__all__ = [
    "PYTHON_KEYS",
    "after_Python_keyset",
    "args_kwargs",
    "handle_torch_dispatch",
    "has_torch_dispatch",
    "overloaded_args",
    "python_fallback",
    "python_tls_snapshot_fallback",
    "register_frame_names",
    "tls_on_entry",
]
