"""``rec.call_graph()``: a traced call as a graph, caller above callee.

Edges that leave a ``c10::Dispatcher`` frame are labelled with the key set the dispatcher used and
the key it chose: that is the decision the whole lab is about. In a notebook the graph is an SVG
drawn by graphviz's ``dot`` program when it is installed; the ``text/plain`` form, an indented
tree, is always there and is the same on every machine (graphviz's SVG is not: it embeds its
version and layout numbers), so stored notebooks compare the text.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labsupport.tools.trace import Frame

__all__ = ["GRAPHVIZ_MISSING", "CallGraph", "find_dot"]

GRAPHVIZ_MISSING = (
    "(graphviz's `dot` program is not installed, so the graph is shown as text: install it with "
    "`apt-get install graphviz`, `conda install -c conda-forge graphviz` or `brew install graphviz`)"
)

LAYER_COLORS = {
    "binding": "#f3e6c8",
    "api": "#f3e6c8",
    "op_handle": "#e3ecd5",
    "dispatcher": "#d5e3f3",
    "autograd": "#f3d5d5",
    "ad_inplace_or_view": "#f3d5d5",
    "kernel": "#dff0e8",
    "meta": "#eeeeee",
    "native": "#c9ead7",
    "boxing": "#ece0f3",
    "fallback": "#ece0f3",
    "autograd_node": "#f8e0ec",
    "engine": "#f8e0ec",
}


def find_dot() -> str | None:
    """Where graphviz's ``dot`` program is, or None (tests replace this to simulate either case)."""
    return shutil.which("dot")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class CallGraph:
    """Recorded frames as a call graph: ``.source`` (DOT), ``.text()`` (a tree), SVG in notebooks."""

    def __init__(self, roots: list[Frame]) -> None:
        self.roots = list(roots)

    def _walk(self) -> Iterator[Frame]:
        stack = list(reversed(self.roots))
        while stack:
            frame = stack.pop()
            yield frame
            stack.extend(reversed(frame.children))

    @staticmethod
    def edge_label(caller: Frame) -> str:
        """The label of edges leaving ``caller``: its key set and chosen key on dispatcher frames."""
        return caller.dispatch_summary()

    @property
    def source(self) -> str:
        """The graph in graphviz's DOT language (deterministic: nodes numbered in call order)."""
        ids = {id(frame): f"n{i}" for i, frame in enumerate(self._walk())}
        lines = [
            "digraph call_graph {",
            '  graph [rankdir=TB, fontname="Helvetica"];',
            '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
            '  edge [fontname="Helvetica", fontsize=9];',
        ]
        for frame in self._walk():
            color = LAYER_COLORS.get(frame.layer, "#ffffff")
            label = f"{frame.torch_name}\n{frame.where}"
            lines.append(f"  {ids[id(frame)]} [label={_quote(label)}, fillcolor={_quote(color)}];")
        for frame in self._walk():
            label = self.edge_label(frame)
            attrs = f" [label={_quote(label.replace(' -> ', chr(10) + '-> '))}]" if label else ""
            for child in frame.children:
                lines.append(f"  {ids[id(frame)]} -> {ids[id(child)]}{attrs};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def text(self) -> str:
        """An indented tree; a child of a dispatcher frame shows ``[key set -> key]`` on its edge."""
        lines: list[str] = []

        def walk(frame: Frame, prefix: str, branch: str, edge: str) -> None:
            lines.append(f"{prefix}{branch}{edge}{frame.torch_name}  ({frame.where})")
            inner = prefix + ("" if not branch else "    " if branch.startswith("└") else "│   ")
            label = self.edge_label(frame)
            for i, child in enumerate(frame.children):
                last = i == len(frame.children) - 1
                walk(child, inner, "└── " if last else "├── ", f"[{label}] " if label else "")

        for root in self.roots:
            walk(root, "", "", "")
        return "\n".join(lines)

    __repr__ = text

    def svg(self) -> str:
        """The graph drawn by ``dot -Tsvg``; raises ``ToolMissing`` when graphviz is not installed."""
        from labsupport.tools.bench import ToolMissing

        dot = find_dot()
        if dot is None:
            raise ToolMissing(GRAPHVIZ_MISSING.strip("()"))
        done = subprocess.run([dot, "-Tsvg"], input=self.source, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"dot failed: {done.stderr.strip()}")
        return done.stdout

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        tree = self.text()
        if find_dot() is None:
            return {"text/plain": f"{tree}\n{GRAPHVIZ_MISSING}"}
        try:
            return {"image/svg+xml": self.svg(), "text/plain": tree}
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as error:
            return {"text/plain": f"{tree}\n(graphviz could not draw the graph: {error})"}
