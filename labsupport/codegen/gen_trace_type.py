"""The generator of the Tracer kernels (``trace_type.py`` in a build).

Stands for ``tools/autograd/gen_trace_type.py`` (``TraceType_*.cpp``: ``torch::TraceType::add_Tensor``,
registered with ``TORCH_LIBRARY_IMPL(aten, Tracer, m)``). Each kernel, if a trace is running, records
one node (``aten::<name>``, an input per argument in schema order), sets the tracing state to None
(which takes ``Tracer`` out of the TLS include set), redispatches below ``Tracer``, then restores the
state and records the outputs. When nobody traces, ``Tracer`` is in no key set and these kernels never run.

As in PyTorch: ops without a Tensor return are not traced; ``copy_`` has a hand-written kernel
(``MANUAL_TRACER``, ``TraceTypeManual.cpp``); the node's name is the op's base name (``aten::add`` for
``add.Tensor`` and ``add.out``, ``aten::add_`` for the in-place op); an out= op records its ``out``
argument as a last input. ``torch.jit.trace``'s ``_force_outplace`` mode is not modelled.
"""

from __future__ import annotations

from labsupport.codegen.api import arg_names, py_name
from labsupport.codegen.gen import handle_name, header, type_wrapper_name
from labsupport.codegen.model import NativeFunction, OpsRegistry

# Hand-written Tracer kernels (labsupport/jit/trace_type_manual.py; PyTorch: TraceTypeManual.cpp).
MANUAL_TRACER = {"copy_"}


def should_trace(f: NativeFunction) -> bool:
    """``should_trace``: only ops that return a Tensor (or a list of them) are recorded."""
    return any(r.type.is_tensor_like for r in f.func.returns)


def _kernel(f: NativeFunction) -> str:
    name = type_wrapper_name(f)
    params = ", ".join(arg_names(f.func))
    handle = f"_ops.{handle_name(f)}"
    inputs = [a for a in f.func.arguments if not a.is_out] + [a for a in f.func.arguments if a.is_out]
    add_inputs = "".join(
        f'        tracer.add_inputs(node, "{a.name}", {py_name(a.name)}, "{a.type}")\n' for a in inputs
    )
    outs = [py_name(a.name) for a in f.func.arguments if a.is_out]
    output = outs[0] if outs else "result"
    return (
        f"\n\ndef {name}(ks, {params}):\n"
        f'    """torch::TraceType::{name}: record aten::{f.func.name} in the trace, then run it below Tracer."""\n'
        "    node = None\n"
        "    tracer_state = tracer.get_tracing_state()\n"
        "    if tracer_state is not None:\n"
        f'        node = tracer_state.create_node("aten::{f.func.name}", {handle}.op)\n'
        "        tracer.record_source_location(node)\n"
        f"{add_inputs}"
        "        tracer_state.insert_node(node)\n"
        "        tracer.set_tracing_state(None)\n"
        f"    result = {handle}.redispatch(ks & AFTER_TRACER_KEYSET, {params})\n"
        "    if tracer_state is not None:\n"
        "        tracer.set_tracing_state(tracer_state)\n"
        f"        tracer.add_output(node, {output})\n"
        "    return result\n"
    )


def gen_trace_type(reg: OpsRegistry, source: str) -> str:
    parts = [header("Tracer kernels: record each operator call while lab.jit.trace runs", "torch/csrc/autograd/generated/TraceType_*.cpp", source)]
    parts.append(
        "from . import _ops, dispatcher\n"
        "from labsupport.c10.library import Library\n"
        "from labsupport.jit import trace_type_manual, tracer\n\n"
        "# ks arrives as the set's raw 64 bits (registered with_keyset=\"raw\"):\n"
        "# ks & DispatchKeySet(DispatchKeySet::FULL_AFTER, DispatchKey::Tracer)\n"
        "AFTER_TRACER_KEYSET = tracer.AFTER_TRACER_KEYSET\n"
    )
    regs = []
    manual = []
    for f in reg.functions:
        if not should_trace(f):
            continue
        if f.func.name in MANUAL_TRACER:
            name, handle, params = type_wrapper_name(f), handle_name(f), ", ".join(arg_names(f.func))
            parts.append(
                f"\n\ndef {name}(ks, {params}):\n"
                f'    """torch::TraceType::{name}: hand-written in PyTorch (TraceTypeManual.cpp); see\n'
                f'    labsupport/jit/trace_type_manual.py."""\n'
                f"    return trace_type_manual.{handle}(_ops.{handle}, ks, {params})\n"
            )
            manual.append((f.name, name))
            continue
        parts.append(_kernel(f))
        regs.append((f.name, type_wrapper_name(f)))
    parts.append('\n\nm = Library("aten", "IMPL", "Tracer", dispatcher=dispatcher)\n')
    for op_name, fn in regs:
        parts.append(f'm.impl("{op_name}", {fn}, with_keyset="raw")\n')
    for op_name, fn in manual:
        parts.append(f'm.impl("{op_name}", {fn}, with_keyset="raw")  # TraceTypeManual.cpp\n')
    return "".join(parts)
