"""``lab.jit.trace(fn, example_inputs)``: run a function once under the tracer and keep its graph.

Stands for ``torch/jit/_trace.py`` (``torch.jit.trace``, ``_check_trace``) and, for calling the result,
``torch::jit::GraphFunction`` (a ``ScriptFunction`` that runs its graph). The lab's traced function
replays its graph node by node through the dispatcher, each ``aten::`` node as a fresh call of the
operator it recorded.

Differences from PyTorch, on purpose: the lab replays the graph with a small interpreter instead of
compiling it, ``.code`` prints one statement per node instead of TorchScript's inlined code, and
``_force_outplace``, modules and dict inputs are not modelled.
"""

from __future__ import annotations

import warnings
from typing import Any

from labsupport.jit.graph import Graph, Node, tensor_type
from labsupport.jit.tracer import TracerWarning, _is_tensor, get_callable_argument_names, trace_graph


class TracingCheckError(Exception):
    """``torch.jit.TracingCheckError``: the graph changed when the function was traced again."""

    def __init__(self, graph_diff_error: str, tensor_compare_error: str | None = None, extra_msg: str = "") -> None:
        self.message = "Tracing failed sanity checks!\n" + extra_msg + "\n" + graph_diff_error
        if tensor_compare_error:
            self.message += "\n" + tensor_compare_error
        super().__init__(self.message)


NONDETERMINISTIC = {"aten::randn", "aten::normal_", "aten::rand", "aten::bernoulli", "aten::dropout"}


def _clone(t: Any) -> Any:
    """A copy of an example input for the check runs (``_clone_inputs``)."""
    data = None if t._data is None else t._data.copy()
    copy = type(t)._make(data, t._sizes, t._dtype, t._device)
    copy._ks = t._ks
    if t.requires_grad:
        copy.requires_grad_(True)
    return copy


def _flatten(out: Any) -> list[Any]:
    if _is_tensor(out):
        return [out]
    return [t for item in out for t in _flatten(item)]


class TracedFunction:
    """What ``lab.jit.trace`` returns (``torch.jit.ScriptFunction``): call it, read ``.graph`` and ``.code``."""

    def __init__(self, fn: Any, graph: Graph, name: str) -> None:
        self._fn = fn
        self.graph = graph
        self.name = name
        self.__name__ = name

    def __call__(self, *args: Any) -> Any:
        """Run the graph on new inputs: every ``aten::`` node calls its operator through the dispatcher."""
        graph = self.graph
        if len(args) != len(graph.inputs):
            raise RuntimeError(
                f"{self.name}() expected at most {len(graph.inputs)} argument(s) but received {len(args)} argument(s)."
            )
        env: dict[int, Any] = {id(v): a for v, a in zip(graph.inputs, args)}
        for node in graph.nodes:
            env[id(node.outputs[0])] = self._run(node, [env[id(v)] for v in node.inputs])
        return env[id(graph.outputs[0])]

    @staticmethod
    def _run(node: Node, inputs: list[Any]) -> Any:
        kind = node.kind
        if kind == "prim::Constant":
            return node.value
        if kind == "prim::ListConstruct":
            return list(inputs)
        if kind == "prim::TupleConstruct":
            return tuple(inputs)
        return node.op.call(*inputs)

    @property
    def code(self) -> str:
        """The graph as Python-like code, one statement per operator node.

        PyTorch's ``.code`` is TorchScript's printer: it also inlines values used once and drops
        arguments equal to their defaults; the lab keeps every node and argument visible.
        """
        graph = self.graph
        names: dict[int, str] = {id(v): v.debug_name or f"x{v.unique}" for v in graph.inputs}
        params = ",\n    ".join(f"{names[id(v)]}: Tensor" for v in graph.inputs)
        lines = [f"def {self.name}({params}) -> Tensor:"]
        k = 0
        for node in graph.nodes:
            out = node.outputs[0]
            if node.kind == "prim::Constant" and not _is_tensor(node.value):
                names[id(out)] = _literal(node)
                continue
            if node.kind == "prim::ListConstruct":
                names[id(out)] = "[" + ", ".join(names[id(v)] for v in node.inputs) + "]"
                continue
            if node.kind == "prim::TupleConstruct":
                items = [names[id(v)] for v in node.inputs]
                names[id(out)] = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
                continue
            target = f"_{k}"
            k += 1
            if node.kind == "prim::Constant":
                lines.append(f"  {target} = CONSTANTS.c{k - 1}")
            else:
                args = ", ".join(names[id(v)] for v in node.inputs)
                lines.append(f"  {target} = {node.kind.replace('aten::', 'torch.')}({args})")
            names[id(out)] = target
        lines.append(f"  return {names[id(graph.outputs[0])]}")
        return "\n".join(lines) + "\n"

    def call_graph(self) -> Any:
        """The recorded nodes in the lab's call-graph view (``rec.call_graph()``'s tree and graphviz picture):
        the traced function on top, one box per recorded operator call below, in order."""
        from labsupport.jit.tracer import _shown_file
        from labsupport.tools.callgraph import CallGraph
        from labsupport.tools.trace import Frame

        code = getattr(self._fn, "__code__", None)
        file = _shown_file(code.co_filename) if code is not None else "<traced>"
        root = Frame("binding", self.name, f"graph {self.name}", file, code.co_firstlineno if code else 0, 0, "")
        for node in self.graph.nodes:
            if node.kind.startswith("prim::"):
                continue
            file, _, rest = (node.source or "?:0:0").rpartition(":")[0].rpartition(":")
            label = node.render(False).strip()
            child = Frame("kernel", node.kind, label, file or "?", int(rest or 0) if rest.isdigit() else 0, 1, "")
            child.parent = root
            root.children.append(child)
        return CallGraph([root])

    def __repr__(self) -> str:
        return f"<lab.jit traced function {self.name}>"


def _literal(node: Node) -> str:
    value = node.value
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if hasattr(value, "scalar_type_name"):
        return node.shown
    return repr(str(value))


def _compare_outputs(traced: Any, eager: Any) -> str | None:
    import numpy as np

    for i, (a, b) in enumerate(zip(_flatten(traced), _flatten(eager))):
        if a._sizes != b._sizes or a._dtype is not b._dtype:
            return (
                f"Output nr {i + 1}. of the traced function does not match the corresponding output of the "
                "Python function."
            )
        if a._data is not None and not np.allclose(a._data, b._data, rtol=1e-5, atol=1e-5, equal_nan=True):
            return (
                f"Output nr {i + 1}. of the traced function does not match the corresponding output of the Python "
                "function. Detailed error:\nTensor-likes are not close!"
            )
    return None


def trace(fn: Any, example_inputs: Any, *, check_trace: bool = True, strict: bool = True) -> TracedFunction:
    """``torch.jit.trace(fn, example_inputs)``: the ``Tracer`` key records ``fn``'s operator calls into a graph.

    As in PyTorch 2.13, ``fn`` runs three times by default: once to trace, and with ``check_trace``
    once more under the tracer and once eagerly on copies of the inputs. The second graph must equal
    the first (else ``TracingCheckError``); outputs that differ from the eager run give a
    ``TracerWarning``, as do nondeterministic nodes (``aten::randn``...).
    """
    inputs = (example_inputs,) if _is_tensor(example_inputs) else tuple(example_inputs)
    name = getattr(fn, "__name__", "fn")
    name = "_lambda" if name == "<lambda>" else name
    argument_names = get_callable_argument_names(fn)
    check_inputs = [_clone(t) for t in inputs] if check_trace else None
    graph, _ = trace_graph(fn, inputs, strict=strict, argument_names=argument_names)
    traced = TracedFunction(fn, graph, name)
    if check_inputs is not None:
        _check_trace(traced, fn, check_inputs, strict, argument_names)
    return traced


def _check_trace(traced: TracedFunction, fn: Any, inputs: list[Any], strict: bool, names: list[str]) -> None:
    """``torch.jit._trace._check_trace``: trace again, compare graphs, compare with an eager run."""
    copies = [_clone(t) for t in inputs]
    check_graph, _ = trace_graph(fn, tuple(copies), strict=strict, argument_names=names)
    if check_graph.str(False) != traced.graph.str(False):
        raise TracingCheckError(
            "Graphs differed across invocations!",
            extra_msg="",
        )
    nondeterministic = [n for n in traced.graph.nodes if n.kind in NONDETERMINISTIC]
    if nondeterministic:
        shown = "\n".join("\t" + n.render(True).strip() for n in nondeterministic)
        warnings.warn(
            "Trace had nondeterministic nodes. Did you forget call .eval() on your model? Nodes:\n"
            f"{shown}\nThis may cause errors in trace checking. To disable trace checking, pass "
            "check_trace=False to torch.jit.trace()",
            TracerWarning,
            stacklevel=3,
        )
    replay_inputs = [_clone(t) for t in inputs]
    eager_out = fn(*inputs)
    traced_out = traced(*replay_inputs)
    problem = _compare_outputs(traced_out, eager_out)
    if problem:
        warnings.warn(problem, TracerWarning, stacklevel=3)


__all__ = ["TracedFunction", "TracingCheckError", "tensor_type", "trace"]
