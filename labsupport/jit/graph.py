"""The small IR a trace records: a Graph of Nodes that consume and produce Values.

Stands for ``torch/csrc/jit/ir/ir.h`` / ``ir.cpp`` (``Graph``, ``Node``, ``Value``), and for the parts of
its printer a traced graph uses: value types as ``TensorType`` prints them
(``Float(2, 2, strides=[2, 1], requires_grad=0, device=cpu)``), ``prim::Constant[value=...]`` attributes,
``# file:line:0`` source ranges, and ``Value::setDebugName``'s renaming (``%a`` and ``%a.1``).

The lab's graph holds only straight-line code (no blocks): what a trace can produce.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

# c10::ScalarType numbering (c10/core/ScalarType.h): what a dtype argument becomes in a graph.
SCALAR_TYPE_CODES = {
    "Byte": 0, "Char": 1, "Short": 2, "Int": 3, "Long": 4, "Half": 5, "Float": 6, "Double": 7,
    "ComplexHalf": 8, "ComplexFloat": 9, "ComplexDouble": 10, "Bool": 11, "BFloat16": 15,
}  # fmt: skip

MAX_TENSOR_DISPLAY_SIZE = 10  # ir.cpp: larger tensor constants print as <Tensor>


class Value:
    """``torch::jit::Value``: one SSA value. ``unique`` numbers it (``%3``); a debug name replaces the number."""

    __slots__ = ("debug_name", "graph", "node", "type", "unique")

    def __init__(self, graph: Graph, node: Node | None, type_: str) -> None:
        self.graph = graph
        self.node = node  # the producing node; None for graph inputs
        self.type = type_
        self.unique = graph._next_unique
        graph._next_unique += 1
        self.debug_name = ""

    @property
    def name(self) -> str:
        """``debugName()``: the debug name if set, else the unique number."""
        return self.debug_name or str(self.unique)

    def set_debug_name(self, name: str) -> Value:
        """``Value::setDebugName``: take ``name``; a value that already had it becomes ``name.1`` (``.2``, ...)."""
        names = self.graph._names
        if self.debug_name:
            names.pop(self.debug_name, None)
            self.debug_name = ""
        if not name:
            return self
        owner = names.get(name)
        if owner is not None:
            base, suffix = name, 1
            head, dot, tail = name.rpartition(".")
            if dot and tail.isdigit():
                base, suffix = head, int(tail)
            last = self.graph._suffixes.get(base)
            if last is not None:
                suffix = max(suffix, last + 1)
            while True:  # ir.cpp: ss << name_base << "." << suffix++, until the name is free
                candidate = f"{base}.{suffix}"
                suffix += 1
                if candidate not in names:
                    break
            self.graph._suffixes[base] = suffix
            owner.set_debug_name(candidate)
        names[name] = self
        self.debug_name = name
        return self

    def uses(self) -> list[Node]:
        return [n for n in self.graph.nodes if self in n.inputs]

    def __repr__(self) -> str:
        return f"%{self.name} : {self.type}"


class Node:
    """``torch::jit::Node``: an operator (``aten::add``) or a ``prim::`` node, with its inputs and outputs.

    ``op`` is the lab operator the node replays (None for ``prim::`` nodes); a ``prim::Constant``
    keeps the Python ``value`` it stands for and the ``shown`` text of its ``value`` attribute.
    """

    __slots__ = ("graph", "has_value", "inputs", "kind", "op", "outputs", "shown", "source", "value")

    def __init__(self, graph: Graph, kind: str, op: Any = None) -> None:
        self.graph = graph
        self.kind = kind
        self.op = op
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.source: str | None = None  # "file:line:0", set by recordSourceLocation
        self.value: Any = None
        self.has_value = False  # prim::Constant() (None) has no value attribute
        self.shown = ""

    def add_input(self, value: Value) -> None:
        self.inputs.append(value)

    def add_output(self, type_: str = "Tensor") -> Value:
        value = Value(self.graph, self, type_)
        self.outputs.append(value)
        return value

    @property
    def is_mutating(self) -> bool:
        schema = getattr(self.op, "schema", None)
        return schema is not None and schema.is_mutable

    def render(self, print_source_ranges: bool = True) -> str:
        outs = ", ".join(f"%{v.name} : {v.type}" for v in self.outputs)
        attr = f"[value={self.shown}]" if self.has_value else ""
        args = ", ".join(f"%{v.name}" for v in self.inputs)
        line = f"  {outs} = {self.kind}{attr}({args})"
        if print_source_ranges and self.source:
            line += f" # {self.source}"
        return line

    def __repr__(self) -> str:
        return self.render(False).strip()


class Graph:
    """``torch::jit::Graph``: inputs, nodes in order, and the values it returns."""

    def __init__(self) -> None:
        self._next_unique = 0
        self._names: dict[str, Value] = {}
        self._suffixes: dict[str, int] = {}
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []

    def add_input(self, type_: str) -> Value:
        value = Value(self, None, type_)
        self.inputs.append(value)
        return value

    def create(self, kind: str, op: Any = None) -> Node:
        """``Graph::create``: a node that is not in the graph yet (``insert_node`` puts it at the end)."""
        return Node(self, kind, op)

    def insert_node(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def insert_constant(self, value: Any, type_: str, shown: str | None) -> Value:
        """``Graph::insertConstant``: a ``prim::Constant`` node; ``shown=None`` prints ``prim::Constant()`` (None)."""
        node = self.create("prim::Constant")
        if shown is not None:
            node.has_value, node.shown = True, shown
        node.value = value
        out = node.add_output(type_)
        self.insert_node(node)
        return out

    def register_output(self, value: Value) -> None:
        self.outputs.append(value)

    def eliminate_dead_code(self) -> None:
        """``EliminateDeadCode``: drop nodes whose outputs nobody uses, unless they write to a tensor.

        Value numbers are not reused, so the printed graph keeps the gaps (``%3`` after ``%a``).
        """
        # Alias classes (what AliasDb knows here): an in-place or out= node's output is its written input.
        cls: dict[int, int] = {}

        def find(v: Value) -> int:
            return cls.get(id(v), id(v))

        written: dict[int, list[Value]] = {}
        for node in self.nodes:
            schema = getattr(node.op, "schema", None)
            if schema is None or not schema.is_mutable:
                continue
            targets = [node.inputs[i] for i, a in enumerate(schema.arguments)
                       if a.annotation is not None and a.annotation.is_write and i < len(node.inputs)]  # fmt: skip
            written[id(node)] = targets
            if targets:
                for out in node.outputs:
                    cls[id(out)] = find(targets[0])
        # A write is observable if it reaches a graph input or output, or a value used later.
        live = {find(v) for v in self.outputs} | {find(v) for v in self.inputs}
        kept: list[Node] = []
        for node in reversed(self.nodes):
            writes_live = any(find(v) in live for v in written.get(id(node), ()))
            if writes_live or any(find(v) in live for v in node.outputs):
                kept.append(node)
                live.update(find(v) for v in node.inputs)
        kept.reverse()
        dead = {id(v) for n in self.nodes for v in n.outputs} - {id(v) for n in kept for v in n.outputs}
        for name, value in list(self._names.items()):
            if id(value) in dead:  # a destroyed Value gives its name back
                del self._names[name]
        self.nodes = kept

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def str(self, print_source_ranges: bool = True) -> str:
        """``Graph::toString``: what ``print(traced.graph)`` shows; ``str(False)`` leaves out the ``# file:line``."""
        params = ",\n      ".join(f"%{v.name} : {v.type}" for v in self.inputs)
        lines = [f"graph({params}):"]
        lines += [node.render(print_source_ranges) for node in self.nodes]
        lines.append(f"  return ({', '.join('%' + v.name for v in self.outputs)})")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.str(True)

    def __repr__(self) -> str:
        return self.str(True)

    def op_names(self) -> list[str]:
        """The operator nodes in order (``aten::add``, ...), without ``prim::`` nodes."""
        return [n.kind for n in self.nodes if not n.kind.startswith("prim::")]


# ------------------------------------------------------------------ types and constants as the JIT prints them


def contiguous_strides(sizes: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def tensor_type(t: Any) -> str:
    """``TensorType`` of a traced tensor: ``Float(2, 2, strides=[2, 1], requires_grad=0, device=cpu)``.

    The lab's tensors are contiguous unless they say otherwise (a ``stride()`` method), so the strides
    are the contiguous ones; PyTorch prints a view's own strides (``expand`` gives ``strides=[0, 2, 1]``).
    """
    sizes = tuple(t._sizes)
    stride = getattr(t, "stride", None)
    strides = list(stride()) if callable(stride) else contiguous_strides(sizes)
    device = t._device
    shown_device = f"{device.type}:0" if device.type == "cuda" and device.index is None else str(device)
    parts = [str(s) for s in sizes]
    if sizes:
        parts.append(f"strides=[{', '.join(map(str, strides))}]")
    parts.append(f"requires_grad={int(bool(t.requires_grad))}")
    parts.append(f"device={shown_device}")
    return f"{t._dtype.scalar_type_name}({', '.join(parts)})"


def format_double(x: float) -> str:
    """A ``float`` constant's value as the JIT prints it: 17 significant digits, ``3.`` for whole numbers."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    text = f"{x:.17g}"
    if not any(c in text for c in ".e"):
        text += "."
    return text


def _cpp_default(x: float) -> str:
    """``std::ostream << double`` with the default format (``%g``, 6 significant digits)."""
    return f"{x:g}"


def tensor_constant_text(t: Any) -> str:
    """A tensor constant's ``value=``: ``{1}`` for one element (a boxed scalar), the C++ print of up to
    ten elements with newlines turned into spaces, ``<Tensor>`` beyond (``Node::printAttrValue``)."""
    data = t._data
    numel = math.prod(t._sizes)
    if numel == 1:
        item = data.reshape(()).item()
        if t._dtype.is_floating_point:
            return "{" + _cpp_default(float(item)) + "}"
        return "{" + str(int(item)) + "}"
    if numel > MAX_TENSOR_DISPLAY_SIZE or len(t._sizes) > 2:
        return "<Tensor>"
    return cpp_print(t).replace("\n", " ")


def _print_format(values: list[float]) -> tuple[float, int, str]:
    """``__printFormat`` (aten/src/ATen/core/Formatting.cpp): scale, field width and number format."""
    int_mode = all(not math.isfinite(z) or z == math.ceil(z) for z in values)
    finite = [z for z in values if math.isfinite(z)]
    if not finite:
        exp_min = exp_max = 1.0
    else:
        exp_min = exp_max = abs(finite[0])
        for z in finite:
            if abs(z) < exp_min:
                exp_min = abs(z)
            if z > exp_max:  # sic: Formatting.cpp compares the signed value here
                exp_max = abs(z)
        exp_min = math.floor(math.log10(exp_min)) + 1 if exp_min != 0 else 1
        exp_max = math.floor(math.log10(exp_max)) + 1 if exp_max != 0 else 1
    if int_mode:
        if exp_max > 9:
            return 1.0, 11, "sci"
        return 1.0, int(exp_max) + 1, "default"
    if exp_max - exp_min > 4:
        sz = 11 + (1 if abs(exp_max) > 99 or abs(exp_min) > 99 else 0)
        return 1.0, sz, "sci"
    if exp_max > 5 or exp_max < 0:
        return 10.0 ** (exp_max - 1), 7, "fixed"
    return 1.0, 7 if exp_max == 0 else int(exp_max) + 6, "fixed"


def _fmt(x: float, mode: str, sz: int) -> str:
    text = {"sci": f"{x:.4e}", "fixed": f"{x:.4f}", "default": _cpp_default(x)}[mode]
    return text.rjust(sz)


def cpp_type_string(t: Any) -> str:
    """``CPUFloatType``: the deprecated type name C++ prints under a tensor."""
    backend = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}.get(t._device.type, t._device.type)
    return f"{backend}{t._dtype.scalar_type_name}Type"


def cpp_print(t: Any) -> str:
    """``at::print(stream, tensor, 80)`` for 1-D and 2-D tensors."""
    values = [float(v) for v in t._data.astype("float64").reshape(-1)]
    scale, sz, mode = _print_format(values)
    lines: list[str] = []
    if scale != 1:
        lines.append(f"{_cpp_default(scale)} *")
    if len(t._sizes) == 1:
        lines += [_fmt(v / scale, mode, sz) for v in values]
        tail = f"{{{t._sizes[0]}}}"
    else:
        rows, cols = t._sizes
        per_line = 80 // (sz + 1)
        if per_line < cols:  # the "Columns a to b" layout of wide matrices: not needed for <= 10 elements
            return "<Tensor>"
        for r in range(rows):
            row = values[r * cols : (r + 1) * cols]
            lines.append(" ".join(_fmt(v / scale, mode, sz) for v in row))
        tail = f"{{{rows},{cols}}}"
    lines.append(f"[ {cpp_type_string(t)}{tail} ]")
    return "\n".join(lines)
