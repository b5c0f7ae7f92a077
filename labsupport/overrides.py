"""``__torch_function__``: the hook at the Python binding, before the dispatcher.

Stands for ``torch/overrides.py`` (``has_torch_function``, ``handle_torch_function``,
``TorchFunctionMode``), the C++ half in ``torch/csrc/utils/python_arg_parser.cpp``
(``handle_torch_function``, ``handle_torch_function_no_python_arg_parser``), the switches of
``torch/csrc/utils/disable_torch_function.cpp`` and the thread-local state of
``aten/src/ATen/PythonTorchFunctionTLS.cpp`` (the mode stack and the disabled state).

The idea in one line: a generated binding (``torch.add``, ``Tensor.add``) parses its arguments; if
one of them is a Tensor *subclass* (or any object) with a ``__torch_function__``, or a
``TorchFunctionMode`` is active, it hands the call to Python instead of calling the operator::

    mode.__torch_function__(func, types, args, kwargs)      # innermost mode first (popped while it runs)
    type(arg).__torch_function__(func, types, args, kwargs)  # then each overloaded argument's class

``func`` is the public Python function that was called (``torch.add`` or ``Tensor.add``), not an
aten operator: this hook runs above the dispatcher, so it never sees ``aten.add.Tensor``, the
autograd kernels, or what the backward pass runs. ``__torch_dispatch__`` (the Python key,
``labsupport.utils._python_dispatch``) is the hook below autograd.

Plain tensors must not pay for it: the generated fast path tests ``type(x) is _FastTensor``, one
type test it already made; ``_FastTensor`` is the Tensor class, and the lab rebinds it to ``None``
while a mode is on, so every call takes the slow path that checks. (PyTorch's C++ makes the same
check per argument in ``FunctionSignature::parse``; rebinding a global is the lab's way of keeping the
check off the fast path. ``torch.add``'s bytecode count is measured by benchmarks/hooks_overhead.py.)

Lab simplifications: only the generated bindings (and ``Tensor.backward``, ``Tensor.__rsub__``) check;
hand-written Tensor accessors (``dim()``, ``shape``, ``detach()``) do not, where PyTorch's do;
``get_default_nowrap_functions`` is empty (the lab has no ``_base``/``grad`` property bindings).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "TorchFunctionMode", "enable_torch_function_mode",
    "get_default_nowrap_functions", "handle_torch_function", "has_torch_function", "has_torch_function_unary",
    "has_torch_function_variadic", "is_torch_function_enabled", "register_fast_path_module",
    "collect_overloaded", "handle_binding_torch_function", "plain_tensor_types", "tensor_torch_function",
]  # fmt: skip

# at::impl::TorchFunctionDisabledState
ENABLED, SUBCLASSES_DISABLED, ALL_DISABLED = 0, 1, 2


class _TorchFunctionTLS(threading.local):
    """``at::impl::PythonTorchFunctionTLS``: the mode stack and the disabled state, per thread."""

    def __init__(self) -> None:
        self.stack: list[TorchFunctionMode] = []
        self.disabled = ENABLED


_tls = _TorchFunctionTLS()

# The generated binding modules whose fast path tests ``type(x) is _FastTensor``, and their Tensor
# classes: the "plain" tensors, never overloaded at a binding (THPVariable_CheckTypeExact).
_fast_path_modules: list[dict[str, Any]] = []
plain_tensor_types: set[type] = set()
_modes_entered = 0  # modes entered and not yet exited, in every thread


def register_fast_path_module(namespace: dict[str, Any]) -> None:
    """Called by a generated binding module (build/<name>/python_*.py) with its globals."""
    _fast_path_modules.append(namespace)
    plain_tensor_types.add(namespace["Tensor"])
    _sync_fast_paths()


def _sync_fast_paths() -> None:
    """The fast path is open only while no mode is entered in any thread (the lab's stand-in for
    ``torch_function_mode_enabled()`` in ``check_has_torch_function``; the slow path asks the TLS)."""
    for namespace in _fast_path_modules:
        namespace["_FastTensor"] = None if _modes_entered else namespace["Tensor"]


def _tensor_base() -> type:
    from labsupport.aten.tensor import TensorBase

    return TensorBase


# --- the disabled state (torch/csrc/utils/disable_torch_function.cpp) -------------------------------

def is_torch_function_enabled() -> bool:
    """``torch._C._is_torch_function_enabled``: False under either Disable guard."""
    return _tls.disabled == ENABLED


def _is_torch_function_mode_enabled() -> bool:
    """``torch._C._is_torch_function_mode_enabled``."""
    return bool(_tls.stack) and _tls.disabled != ALL_DISABLED


@contextlib.contextmanager
def _disabled_state(state: int) -> Iterator[None]:
    previous = _tls.disabled
    _tls.disabled = state
    try:
        yield
    finally:
        _tls.disabled = previous


def DisableTorchFunctionSubclass() -> contextlib.AbstractContextManager[None]:  # noqa: N802 -- torch._C's name
    """``torch._C.DisableTorchFunctionSubclass``: subclasses' ``__torch_function__`` is skipped, modes
    still run. The default ``Tensor.__torch_function__`` calls ``func`` under it."""
    return _disabled_state(max(_tls.disabled, SUBCLASSES_DISABLED))


def DisableTorchFunction() -> contextlib.AbstractContextManager[None]:  # noqa: N802 -- torch._C's name
    """``torch._C.DisableTorchFunction``: neither subclasses nor modes are consulted."""
    return _disabled_state(ALL_DISABLED)


def _disabled_torch_function_impl(func: Callable[..., Any], types: Any, args: tuple = (),
                                  kwargs: dict | None = None) -> Any:
    """``torch._C._disabled_torch_function_impl``: a class that sets ``__torch_function__`` to this
    opts out; its instances behave like plain tensors at the binding."""
    with DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))


# --- which arguments are overloaded (check_has_torch_function, append_overloaded_arg) -----------------

def _has_torch_function_attr(obj: Any) -> bool:
    """The object's type defines a ``__torch_function__`` that is not the disabled one, and is not a
    plain Tensor class (whose default would only call the function)."""
    tp = type(obj)
    if tp in plain_tensor_types or getattr(tp, "_is_batched_class", False):
        # functorch's BatchedTensor classes stand for a C++ TensorImpl (BatchedTensorImpl), whose
        # Python type in PyTorch is torch.Tensor itself: never overloaded
        return False
    impl = getattr(tp, "__torch_function__", None)
    if impl is None:
        return False
    return getattr(impl, "__func__", impl) is not _disabled_torch_function_impl


def _append_overloaded(overloaded: list[Any], obj: Any) -> None:
    """``append_overloaded_arg``: one entry per type; a subclass goes before its first superclass
    already in the list, otherwise arguments keep their left-to-right order."""
    tp = type(obj)
    for existing in overloaded:
        if type(existing) is tp:
            return
    for i, existing in enumerate(overloaded):
        if issubclass(tp, type(existing)):
            overloaded.insert(i, obj)
            return
    overloaded.append(obj)


def collect_overloaded(objs: Any) -> list[Any]:
    """The overloaded arguments among ``objs`` (tensors and tensor lists), in PyTorch's order; empty
    when subclasses are disabled."""
    if _tls.disabled != ENABLED:
        return []
    overloaded: list[Any] = []
    for obj in objs:
        if isinstance(obj, (list, tuple)):
            for item in obj:
                if _has_torch_function_attr(item):
                    _append_overloaded(overloaded, item)
        elif _has_torch_function_attr(obj):
            _append_overloaded(overloaded, obj)
    return overloaded


# --- calling the handlers (handle_torch_function_no_python_arg_parser) --------------------------------

def _dispatch(overloaded: list[Any], func: Callable[..., Any], args: tuple, kwargs: dict | None,
              name: str, *, binding: bool) -> Any:
    """Try the innermost mode, then each overloaded argument's class; the first answer that is not
    NotImplemented wins. ``binding`` selects the C++ binding's error text (python_arg_parser.cpp)
    over the Python API's (torch/overrides.py)."""
    types = tuple(type(arg) for arg in overloaded)
    tried: list[str] = []
    if _is_torch_function_mode_enabled():
        mode = _tls.stack.pop()  # the mode is popped while its handler runs (StashTorchFunctionModeGuard)
        try:
            result = mode.__torch_function__(func, types, args, kwargs)
        finally:
            _tls.stack.append(mode)
        if result is not NotImplemented:
            return result
        tried.append(f"  - mode object {mode!r}")
    for arg in overloaded:
        handler = type(arg).__torch_function__
        if not hasattr(handler, "__self__"):  # a plain method: PyTorch warns and binds it to the instance
            _warn_plain_method(binding)
            handler = handler.__get__(arg, type(arg))
        result = handler(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
        tried.append(f"  - tensor subclass {type(arg)}")
    if binding:
        raise TypeError(
            f"Multiple dispatch failed for '{name}'; all __torch_function__ handlers returned NotImplemented:\n\n"
            + "\n".join(tried)
            + "\n\nFor more information, try re-running with TORCH_LOGS=not_implemented"
        )
    raise TypeError(
        f"no implementation found for '{name}' on types that implement __torch_function__: "
        f"{[type(arg) for arg in overloaded]}"
    )


_plain_method_warned = False


def _warn_plain_method(binding: bool) -> None:
    """PyTorch's warning for ``def __torch_function__(self, ...)``: from a binding a UserWarning once
    per process (TORCH_WARN_ONCE, python_arg_parser.cpp), from torch/overrides.py a DeprecationWarning
    every time (its text lacks a closing backtick, as in 2.13)."""
    global _plain_method_warned
    if binding:
        if not _plain_method_warned:
            _plain_method_warned = True
            warnings.warn(
                "Defining your `__torch_function__` as a plain method is deprecated and will be an error in "
                "future, please define it as a classmethod.", UserWarning, stacklevel=5,
            )
        return
    warnings.warn(
        "Defining your `__torch_function__ as a plain method is deprecated and will be an error in future, "
        "please define it as a classmethod.", DeprecationWarning, stacklevel=5,
    )


def handle_binding_torch_function(overloaded: list[Any], func: Callable[..., Any], args: tuple,
                                  kwargs: dict | None, module: str) -> Any:
    """What a generated binding calls when its parse found overloaded arguments or a mode is on
    (``handle_torch_function(PythonArgs&, ...)`` in python_arg_parser.cpp). ``args`` is the call as
    made (``self`` first for a method), ``kwargs`` None when no keyword was given."""
    return _dispatch(overloaded, func, args, kwargs or None, f"{module}.{func.__name__}", binding=True)


# --- the Python API (torch/overrides.py) --------------------------------------------------------------

def has_torch_function(relevant_args: Any) -> bool:
    """``torch.overrides.has_torch_function``: a mode is on, or an argument is an overloaded type."""
    if _is_torch_function_mode_enabled():
        return True
    return bool(collect_overloaded(relevant_args))


def has_torch_function_unary(obj: Any) -> bool:
    """``torch.overrides.has_torch_function_unary``."""
    return has_torch_function((obj,))


def has_torch_function_variadic(*args: Any) -> bool:
    """``torch.overrides.has_torch_function_variadic``."""
    return has_torch_function(args)


def handle_torch_function(public_api: Callable[..., Any], relevant_args: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.overrides.handle_torch_function``: call the overrides for a Python-level function.

    Unlike a binding, PyTorch's Python-level version also lists plain tensors among the overloaded
    arguments (their class has the default ``__torch_function__``), so ``types`` contains ``Tensor``.
    """
    if _tls.disabled == ENABLED:
        overloaded: list[Any] = []
        for arg in relevant_args:
            if hasattr(type(arg), "__torch_function__") and not _is_disabled_impl(type(arg)):
                _append_overloaded(overloaded, arg)
    else:
        overloaded = []
    name = _resolve_name(public_api)
    return _dispatch(overloaded, public_api, args, kwargs, name, binding=False)


def _is_disabled_impl(tp: type) -> bool:
    impl = tp.__torch_function__
    return getattr(impl, "__func__", impl) is _disabled_torch_function_impl


def _resolve_name(func: Callable[..., Any]) -> str:
    """``torch.overrides.resolve_name``: ``torch.add``, ``torch.Tensor.add``, ``torch.Tensor.backward``."""
    qualname = getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))
    module = getattr(func, "__module__", None) or ""
    if module.endswith(".python_variable_methods") and not qualname.startswith("Tensor."):
        return f"torch.Tensor.{qualname}"  # a method binding, defined at module level then attached
    if module.endswith((".python_torch_functions", ".python_variable_methods")):
        return f"torch.{qualname}"
    return f"{module}.{qualname}"


def get_default_nowrap_functions() -> set[Callable[..., Any]]:
    """Functions whose results the default ``__torch_function__`` does not rewrap. PyTorch lists the
    getters of ``Tensor._base`` and ``Tensor.grad``, which the lab does not route through bindings."""
    return set()


# --- Tensor.__torch_function__ and _convert (torch/_tensor.py) ----------------------------------------

def _convert(ret: Any, cls: type) -> Any:
    """``torch._tensor._convert``: results that are tensors but not ``cls`` become ``cls`` (through
    ``as_subclass``); tuples and lists are converted element by element."""
    if cls in plain_tensor_types:
        return ret
    if isinstance(ret, _tensor_base()) and not isinstance(ret, cls):
        ret = ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)):
        ret = type(ret)(_convert(r, cls) for r in ret)
    return ret


def tensor_torch_function(cls: type, func: Callable[..., Any], types: Any, args: tuple = (),
                          kwargs: dict | None = None) -> Any:
    """The default ``Tensor.__torch_function__`` (a classmethod): run ``func`` with subclass handling
    off, then rewrap tensor results in ``cls``. So a subclass that overrides nothing still gets its own
    type back from ``torch.add``."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        ret = func(*args, **kwargs)
        if func in get_default_nowrap_functions():
            return ret
        return _convert(ret, cls)


# --- modes (torch/overrides.py TorchFunctionMode, torch/_C._push_on_torch_function_stack) -------------

class TorchFunctionMode:
    """Override ``__torch_function__(self, func, types, args=(), kwargs=None)``; ``with Mode():`` makes
    every binding call go through it, plain tensors included. Modes nest: the innermost runs first and
    is popped while it runs, so ``func(*args, **kwargs)`` inside it reaches the next mode out."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        raise NotImplementedError

    def __enter__(self) -> TorchFunctionMode:
        global _modes_entered
        _tls.stack.append(self)
        _modes_entered += 1
        _sync_fast_paths()
        return self

    def __exit__(self, *exc: object) -> None:
        global _modes_entered
        _tls.stack.pop()
        _modes_entered -= 1
        _sync_fast_paths()

    @classmethod
    def push(cls, *args: Any, **kwargs: Any) -> TorchFunctionMode:
        """``TorchFunctionMode.push`` (deprecated in PyTorch): make an instance and enter it."""
        return cls(*args, **kwargs)


def _get_current_function_mode_stack() -> list[TorchFunctionMode]:
    """``torch.overrides._get_current_function_mode_stack``: outermost first."""
    return list(_tls.stack)


@contextlib.contextmanager
def enable_torch_function_mode(mode: TorchFunctionMode) -> Iterator[TorchFunctionMode]:
    """Push ``mode`` for the duration of a ``with`` block (``with mode:`` does the same)."""
    with mode:
        yield mode
