"""Hand-written Tracer kernels: ``copy_`` and the boxed fallback for operators without a generated one.

Stands for ``torch/csrc/autograd/TraceTypeManual.cpp``:

* ``copy_`` (``torch::TraceType::(anonymous namespace)::copy_``): records ``aten::copy_`` and runs the
  copy under ``NoTracerDispatchMode`` (Tracer *excluded*), instead of nulling the tracing state as
  the generated kernels do.
* ``general_trace_function`` (``torch::jit::general_trace_function``), the ``Tracer`` backend fallback
  registered at ``TraceTypeManual.cpp:296``: a custom operator (``Library("myops", "DEF")``) has no
  generated Tracer kernel, so this boxed kernel records it from its schema, reading the arguments
  off the stack, and redispatches below Tracer.
"""

from __future__ import annotations

from typing import Any

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import DispatchKeySet
from labsupport.c10.tls import ExcludeDispatchKeyGuard
from labsupport.jit import tracer


def copy_(handle: Any, ks: int, self: Any, src: Any, non_blocking: bool) -> Any:
    """torch::TraceType::copy_ (TraceTypeManual.cpp): record aten::copy_, copy with Tracer excluded.
    ``handle`` is the build's ``at::_ops::copy_``."""
    node = None
    state = tracer.get_tracing_state()
    if state is not None:
        node = state.create_node("aten::copy_", handle.op)
        tracer.record_source_location(node)
        tracer.add_inputs(node, "self", self, "Tensor")
        tracer.add_inputs(node, "src", src, "Tensor")
        tracer.add_inputs(node, "non_blocking", non_blocking, "bool")
        state.insert_node(node)
    with ExcludeDispatchKeyGuard(DispatchKey.Tracer):  # at::tracer::impl::NoTracerDispatchMode
        handle.redispatch(ks & tracer.AFTER_TRACER_KEYSET, self, src, non_blocking)
    if state is not None and node is not None:
        tracer.add_output(node, self)
    return self


def general_trace_function(op: Any, ks: DispatchKeySet, stack: list[Any]) -> None:
    """``torch::jit::general_trace_function``: record any operator from its schema, then redispatch."""
    state = tracer.get_tracing_state()
    schema = op.schema
    node = None
    if state is not None and schema is not None:
        node = state.create_node(f"{op.name}", op)
        tracer.record_source_location(node)
        args = stack[len(stack) - len(schema.arguments):]
        for a, value in zip(schema.arguments, args):
            tracer.add_inputs(node, a.name, value, str(a.type))
        state.insert_node(node)
        tracer.set_tracing_state(None)
    op.redispatch_boxed(ks & DispatchKeySet.full_after(DispatchKey.Tracer), stack)
    if state is not None and node is not None:
        tracer.set_tracing_state(state)
        for out in stack[len(stack) - len(schema.returns):]:
            if tracer._is_tensor(out):
                tracer.add_output(node, out)
