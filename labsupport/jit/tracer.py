"""The tracer: recording operator calls into a Graph while ``lab.jit.trace`` runs a function.

Stands for ``torch/csrc/jit/frontend/tracer.h`` / ``tracer.cpp`` (``TracingState``, ``getTracingState``,
``setTracingState``, ``addInputs``, ``addOutput``, ``getValue``, ``warn``) and ``ATen/TracerMode.h``.

How the dispatcher gets involved (as in PyTorch 2.13):

* Tracing is thread-local state, not a tensor property. ``set_tracing_state(state)`` also puts the
  ``Tracer`` key into the TLS **include** set (``at::tracer::impl::set_dispatch_enabled``), and
  ``set_tracing_state(None)`` takes it out. Tensors never carry ``Tracer``.
* So while nobody traces, ``Tracer`` is in no call's key set: the generated Tracer kernels
  (``trace_type.py`` in a build, PyTorch's ``TraceType_*.cpp``) exist in every table but are never
  reached, and the common path pays nothing.
* While tracing, ``Tracer`` is the highest key below Autocast, so each operator call reaches its
  Tracer kernel first. The kernel records a node, sets the tracing state to None (which drops
  ``Tracer`` from the include set), redispatches below Tracer, then restores the state and records
  the outputs. Calls made *inside* the operator (``matmul`` calling ``mm``) are therefore not recorded.
"""

from __future__ import annotations

import inspect
import sys
import threading
import warnings
from typing import Any

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import DispatchKeySet
from labsupport.c10.tls import tls
from labsupport.jit.graph import (
    SCALAR_TYPE_CODES,
    Graph,
    Node,
    Value,
    format_double,
    tensor_constant_text,
    tensor_type,
)

TRACER_BIT = int(DispatchKeySet(DispatchKey.Tracer))
AFTER_TRACER_KEYSET = int(DispatchKeySet.full_after(DispatchKey.Tracer))


class TracerWarning(Warning):
    """``torch.jit.TracerWarning``: the trace may not generalize to other inputs."""


# tracer.cpp's warning texts (reason + kind)
WARN_PYTHON_DATAFLOW = (
    " might cause the trace to be incorrect. We can't record the data flow of Python values, so this value "
    "will be treated as a constant in the future. This means that the trace might not generalize to other inputs!"
)
WARN_CONSTRUCTOR = (
    " results are registered as constants in the trace. You can safely ignore this warning if you use this "
    "function to create tensors out of constant variables that would be the same every time you call this "
    "function. In any other case, this might cause the trace to be incorrect."
)
STRICT_TRACER_MSG = (
    " might cause the trace to be incorrect, this is only valid if the container structure does not change "
    "based on the module's inputs. Consider using a constant container instead (e.g. for `list`, use a "
    "`tuple` instead. for `dict`, use a `NamedTuple` instead). If you absolutely need this and know the "
    "side effects, pass strict=False to trace() to allow this behavior."
)


class TracingState:
    """``torch::jit::tracer::TracingState``: the graph being built and which Value each tensor is."""

    def __init__(self) -> None:
        self.graph = Graph()
        self.env: dict[int, tuple[Any, Value]] = {}  # id(tensor) -> (tensor kept alive, its Value)
        self.lookup_var_name_fn: Any = None
        self.strict = True
        self.force_outplace = False

    # -- recording --
    def create_node(self, kind: str, op: Any = None) -> Node:
        return self.graph.create(kind, op)

    def insert_node(self, node: Node) -> Node:
        return self.graph.insert_node(node)

    def set_value(self, tensor: Any, value: Value) -> None:
        self.env[id(tensor)] = (tensor, value)

    def has_value(self, tensor: Any) -> bool:
        return id(tensor) in self.env

    def get_value(self, tensor: Any) -> Value:
        """``TracingState::getValue``: the Value a tensor is; a tensor the trace has not seen (a
        wrapped Python number, a tensor made outside the function) becomes a constant."""
        found = self.env.get(id(tensor))
        if found is not None and found[0] is tensor:
            value = found[1]
            if not value.debug_name and self.lookup_var_name_fn is not None:
                name = self.lookup_var_name_fn(tensor)
                if name:
                    value.set_debug_name(name)
            return value
        if tensor.requires_grad:
            set_tracing_state(None)  # pauseTracing()
            raise RuntimeError(
                "Cannot insert a Tensor that requires grad as a constant. Consider making it a parameter or "
                f"input, or detaching the gradient\nTensor:\n{tensor!r}"
            )
        value = self.graph.insert_constant(tensor, tensor_type(tensor), tensor_constant_text(tensor))
        record_source_location(value.node)
        self.set_value(tensor, value)
        return value


class _State(threading.local):
    state: TracingState | None = None


_tls_state = _State()


def get_tracing_state() -> TracingState | None:
    """``tracer::getTracingState()``: the current thread's state, None when not tracing."""
    return _tls_state.state


def is_tracing() -> bool:
    """``tracer::isTracing()`` (``torch._C._is_tracing()``)."""
    return _tls_state.state is not None


def set_tracing_state(state: TracingState | None) -> None:
    """``tracer::setTracingState``: set the state and put ``Tracer`` in (or take it out of) the TLS include set."""
    _tls_state.state = state
    sets = tls.sets
    if state is None:
        sets[0] &= ~TRACER_BIT
    else:
        if sets[2] & TRACER_BIT:
            raise RuntimeError("Cannot enable tracing within the scope of NoTracerDispatchMode!")
        sets[0] |= TRACER_BIT


# ------------------------------------------------------------------ where the user's code is

_LAB_MODULES = ("labsupport.", "lab_build_")


def user_frame() -> Any:
    """The innermost Python frame outside the lab (the frame that called the torch function)."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(_LAB_MODULES) and module != "labsupport":
            return frame
        frame = frame.f_back
    return None


def _shown_file(filename: str) -> str:
    """PyTorch prints the frame's file as Python has it (absolute); the lab shortens its own files
    and notebook cells (``<notebook cell>``) so that stored outputs do not depend on the machine."""
    from labsupport.tools.frame_names import is_lab_file, source_path

    return source_path(filename) if is_lab_file(filename) else filename


def record_source_location(node: Node) -> None:
    """``tracer::recordSourceLocation``: the user's ``file:line:0`` (PyTorch prints the absolute file;
    the lab prints repo-relative paths and ``<notebook cell>``, so stored notebooks stay the same)."""
    frame = user_frame()
    if frame is not None:
        node.source = f"{_shown_file(frame.f_code.co_filename)}:{frame.f_lineno}:0"


def interpreter_name_lookup(tensor: Any) -> str:
    """``_create_interpreter_name_lookup_fn(0)``: the name of a local variable of the user's frame
    that holds this tensor (``self`` does not count)."""
    frame = user_frame()
    if frame is None:
        return ""
    for name, value in frame.f_locals.items():
        if value is tensor:
            return name if name != "self" else ""
    return ""


# ------------------------------------------------------------------ addInputs / addOutput


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "_ks") and hasattr(value, "_sizes")


def _none(graph: Graph) -> Value:
    return graph.insert_constant(None, "NoneType", None)


def _generic(node: Node, value: Any, type_: str, shown: str) -> None:
    """``detail::genericAddInput``: a constant with the user's source location."""
    v = node.graph.insert_constant(value, type_, shown)
    record_source_location(v.node)
    node.add_input(v)


def _scalar(node: Node, value: Any) -> None:
    if isinstance(value, bool):
        _generic(node, value, "bool", str(int(value)))
    elif isinstance(value, int):
        _generic(node, value, "int", str(value))
    elif isinstance(value, float):
        _generic(node, value, "float", format_double(value))
    else:
        raise RuntimeError(f"Found an unsupported argument type in the JIT tracer: {type(value).__name__}.")


def add_inputs(node: Node, name: str, value: Any, type_: str) -> None:
    """``tracer::addInputs(node, name, value)``: one argument of the call, by its schema type."""
    state = get_tracing_state()
    assert state is not None
    graph = state.graph
    base = type_.rstrip("?")
    optional = type_.endswith("?")
    if base == "Tensor":
        if value is None:
            node.add_input(_none(graph))
        else:
            node.add_input(state.get_value(value))
        return
    if base == "Tensor[]":
        lst = graph.create("prim::ListConstruct")
        for t in value:
            lst.add_input(state.get_value(t))
        out = lst.add_output("Tensor[]")
        graph.insert_node(lst)
        node.add_input(out)
        return
    if value is None:
        if not optional and base not in ("Generator",):
            raise RuntimeError(f"Tracer: argument '{name}' of type {type_} is None")
        node.add_input(_none(graph))
        return
    if base == "Generator":
        raise RuntimeError("Found an unsupported argument type in the JIT tracer: at::Generator. File a bug report.")
    if base in ("Scalar", "int", "SymInt", "float", "bool"):
        if base == "bool":
            _generic(node, bool(value), "bool", str(int(bool(value))))
        elif base == "float":
            _generic(node, float(value), "float", format_double(float(value)))
        elif base in ("int", "SymInt"):
            _generic(node, int(value), "int", str(int(value)))
        else:
            _scalar(node, value)
        return
    if base.startswith(("int[", "SymInt[")):
        items = [value] if isinstance(value, int) else list(value)
        lst = graph.create("prim::ListConstruct")
        for item in items:
            v = graph.insert_constant(int(item), "int", str(int(item)))
            record_source_location(v.node)
            lst.add_input(v)
        out = lst.add_output("int[]")
        graph.insert_node(lst)
        node.add_input(out)
        return
    if base == "ScalarType":
        _generic(node, value, "int", str(SCALAR_TYPE_CODES[value.scalar_type_name]))
        return
    if base == "Device":
        device = str(value)
        _generic(node, value, "Device", f'"{device}"')
        return
    if base in ("Layout", "MemoryFormat"):
        code = {"strided": 0, "torch.strided": 0, "contiguous_format": 0, "torch.contiguous_format": 0,
                "preserve_format": 1, "torch.preserve_format": 1}.get(str(value))  # fmt: skip
        if code is None:
            raise RuntimeError(f"Tracer: unsupported {base} value {value!r} for argument '{name}'")
        _generic(node, value, "int", str(code))
        return
    if base == "str":
        _generic(node, value, "str", f'"{value}"')
        return
    raise RuntimeError(f"Found an unsupported argument type in the JIT tracer: {type_}. File a bug report.")


def add_output(node: Node, output: Any) -> None:
    """``tracer::addOutput``: the node's output Value, typed from the tensor, now stands for it."""
    value = node.add_output(tensor_type(output))
    state = get_tracing_state()
    assert state is not None
    state.set_value(output, value)


def warn(reason: str, kind: str = "") -> None:
    """``tracer::warn``: a TracerWarning pointing at the user's line (only while tracing)."""
    if not is_tracing():
        return
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_LAB_MODULES):
        frame, level = frame.f_back, level + 1
    warnings.warn(reason + kind, TracerWarning, stacklevel=level)


# ------------------------------------------------------------------ Python bindings that warn while tracing

# (Tensor method, the words of the warning): THPVariable_item, _float_scalar, ... in python_variable_methods.cpp
_CONVERSIONS = (
    ("item", "Converting a tensor to a Python number"),
    ("__float__", "Converting a tensor to a Python float"),
    ("__int__", "Converting a tensor to a Python integer"),
    ("__bool__", "Converting a tensor to a Python boolean"),
    ("tolist", "Converting a tensor to a Python list"),
    ("numpy", "Converting a tensor to a NumPy array"),
)


class _BindingChecks:
    """The ``if (jit::tracer::isTracing()) warn(...)`` checks of PyTorch's Python bindings.

    PyTorch compiles the check into each binding. The lab's tensor methods are shared hand-written
    Python, so the checks are put in place while a trace runs and removed after it: code that does
    not trace never runs them.
    """

    def __init__(self) -> None:
        self._saved: list[tuple[type, str, Any]] = []

    def __enter__(self) -> _BindingChecks:
        from labsupport.aten.tensor import TensorBase

        for method, words in _CONVERSIONS:
            original = TensorBase.__dict__[method]
            self._saved.append((TensorBase, method, original))
            setattr(TensorBase, method, _warning_method(original, words))
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, method, original in reversed(self._saved):
            setattr(cls, method, original)
        self._saved.clear()


def _warning_method(original: Any, words: str) -> Any:
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = get_tracing_state()
        if state is None:
            return original(self, *args, **kwargs)
        warn(words, WARN_PYTHON_DATAFLOW)
        set_tracing_state(None)  # the conversion itself (e.g. __float__ calling item) is not traced again
        try:
            return original(self, *args, **kwargs)
        finally:
            set_tracing_state(state)

    checked.__name__ = checked.__qualname__ = getattr(original, "__name__", "checked")
    checked.__wrapped__ = original  # type: ignore[attr-defined]
    return checked


# ------------------------------------------------------------------ tracer::trace


def get_callable_argument_names(fn: Any) -> list[str]:
    """``torch._jit_internal.get_callable_argument_names``: positional-or-keyword parameter names."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [n for n, p in signature.parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]


def _output_value(state: TracingState, out: Any, i: int) -> Value:
    """``TracingState::getOutput``."""
    graph = state.graph
    if _is_tensor(out):
        found = state.env.get(id(out))
        if found is None or found[0] is not out:
            raise RuntimeError(
                f"output {i} ({out!r}) of traced region did not have observable data dependence with trace "
                "inputs; this probably indicates your program cannot be understood by the tracer."
            )
        return found[1]
    if isinstance(out, list):
        if state.strict:
            warn("Encountering a list at the output of the tracer", STRICT_TRACER_MSG)
        node = graph.create("prim::ListConstruct")
        for item in out:
            node.add_input(_output_value(state, item, i))
        value = node.add_output("Tensor[]")
        graph.insert_node(node)
        return value
    if isinstance(out, tuple):
        node = graph.create("prim::TupleConstruct")
        for item in out:
            node.add_input(_output_value(state, item, i))
        value = node.add_output("(" + ", ".join(v.type for v in node.inputs) + ")")
        graph.insert_node(node)
        return value
    raise RuntimeError(
        "Only tensors, lists, tuples of tensors, or dictionary of tensors can be output from traced functions"
    )


def trace_graph(fn: Any, inputs: tuple[Any, ...], *, strict: bool = True,
                argument_names: list[str] | None = None) -> tuple[Graph, Any]:  # fmt: skip
    """``tracer::trace``: run ``fn(*inputs)`` with a fresh TracingState; return the graph and the outputs."""
    if is_tracing():
        raise RuntimeError("Tracing can't be nested")
    state = TracingState()
    for i, t in enumerate(inputs):
        if not _is_tensor(t):
            raise RuntimeError(
                "Type 'Tuple[...]' cannot be traced. Only Tensors and (possibly nested) Lists, Dicts, and Tuples "
                f"of Tensors can be traced (lab: example input {i} is a {type(t).__name__})"
            )
        value = state.graph.add_input(tensor_type(t))
        state.set_value(t, value)
    names = argument_names if argument_names is not None else get_callable_argument_names(fn)
    if len(names) == len(inputs):
        for value, name in zip(state.graph.inputs, names):
            value.set_debug_name(name)
    state.lookup_var_name_fn = interpreter_name_lookup
    state.strict = strict
    set_tracing_state(state)
    try:
        with _BindingChecks():
            out = fn(*inputs)
        state.graph.register_output(_output_value(state, out, 0))
    finally:
        set_tracing_state(None)  # tracer::abandon() on errors
    state.graph.eliminate_dead_code()
    return state.graph, out
