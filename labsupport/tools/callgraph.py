"""``rec.call_graph()``: a traced call as a graph, caller above callee.

Edges that leave a ``c10::Dispatcher`` frame are labelled with the key set the dispatcher used and
the key it chose: that is the decision the whole lab is about. In a notebook the graph is an
``image/svg+xml`` picture next to a ``text/plain`` indented tree. The picture is drawn by
graphviz's ``dot`` program when it is installed; without ``dot`` it is the same tree drawn as text,
under a line saying how to install graphviz. The ``text/plain`` tree is the same on every machine
and is what stored notebooks compare (nbval skips SVG: graphviz's embeds its version and layout
numbers), so a notebook refreshed with ``dot`` passes on a machine without it, and the other way.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labsupport.tools.trace import Frame

__all__ = ["GRAPHVIZ_MISSING", "GRAPHVIZ_MISSING_LINES", "CallGraph", "find_dot", "text_svg"]

GRAPHVIZ_MISSING = (
    "(graphviz's `dot` program is not installed, so the graph is shown as text: install it with "
    "`apt-get install graphviz`, `conda install -c conda-forge graphviz` or `brew install graphviz`)"
)

# The same hint, in lines short enough for the text picture a notebook shows instead of the graph.
GRAPHVIZ_MISSING_LINES = (
    "graphviz's `dot` program is not installed, so the call graph is drawn as a text tree.",
    "For the picture, install it (apt-get install graphviz, conda install -c conda-forge graphviz",
    "or brew install graphviz) and re-run this cell.",
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


def text_svg(text: str, notes: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` drawn as an SVG picture in a monospace font, ``notes`` in red above it: what a notebook
    shows where graphviz cannot draw (deterministic, so the same on every machine)."""
    char_w, line_h, pad = 7.8, 17, 8
    rows = [(line, "#c44e52") for line in notes] + ([("", "")] if notes else []) + [
        (line, "#222222") for line in text.splitlines()
    ]
    width = round(2 * pad + char_w * max((len(line) for line, _ in rows), default=1))
    height = 2 * pad + line_h * len(rows)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
        'font-size="13">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for i, (line, color) in enumerate(rows):
        if line:
            y = pad + line_h * (i + 1) - 4
            out.append(f'<text x="{pad}" y="{y}" fill="{color}" xml:space="preserve">{html.escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


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
        """``text/plain``: the tree, identical with or without graphviz (what nbval compares).
        ``image/svg+xml``: dot's drawing, or the tree as a picture with the reason and the fix."""
        from labsupport.tools.bench import ToolMissing

        tree = self.text()
        try:
            picture = self.svg()
        except ToolMissing:
            picture = text_svg(tree, GRAPHVIZ_MISSING_LINES)
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as error:
            picture = text_svg(tree, (f"graphviz could not draw the graph: {error}",))
        return {"image/svg+xml": picture, "text/plain": tree}
