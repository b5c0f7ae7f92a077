"""``lab.jit``: tracing on the ``Tracer`` dispatch key (``torch.jit.trace``).

::

    traced = lab.jit.trace(fn, (a, b))   # runs fn with Tracer in the TLS include set
    print(traced.graph)                  # graph(%a : Float(2, 2, ...), ...): %2 : int = prim::Constant[value=1]() ...
    traced(x, y)                         # replays the graph through the dispatcher

Modules: ``graph`` (the IR, ir.cpp), ``tracer`` (TracingState and addInputs, tracer.cpp),
``trace_type_manual`` (TraceTypeManual.cpp: copy_ and the boxed Tracer fallback), ``_trace``
(torch/jit/_trace.py). The per-operator Tracer kernels are generated into each build
(``build/torch/trace_type.py``, by ``labsupport/codegen/gen_trace_type.py``).
"""

from __future__ import annotations

from labsupport.c10.backend_fallbacks import provide_fallback_kernel
from labsupport.jit._trace import TracedFunction, TracingCheckError, trace
from labsupport.jit.graph import Graph, Node, Value
from labsupport.jit.trace_type_manual import general_trace_function
from labsupport.jit.tracer import TracerWarning, get_tracing_state, is_tracing

# TORCH_LIBRARY_IMPL(_, Tracer, m) { m.fallback(...general_trace_function...); } (TraceTypeManual.cpp:296)
provide_fallback_kernel("tracer", general_trace_function)

__all__ = [
    "Graph", "Node", "TracedFunction", "TracerWarning", "TracingCheckError", "Value", "get_tracing_state",
    "is_tracing", "trace",
]  # fmt: skip
