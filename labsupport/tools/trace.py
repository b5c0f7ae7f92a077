"""``lab.trace()``: record the frames of a call, as gdb's ``bt`` shows them in the seed's Exercise 0.

::

    with lab.trace() as rec:
        torch.add(a, b)
    print(rec.backtrace())     # innermost first, like gdb
    rec.table()                # every recorded frame, outermost first
    rec.call_graph()           # a graphviz view (text tree when `dot` is missing)

Two hooks do the work, and only inside the ``with`` block (nothing is installed otherwise, so the
cost when off is zero):

* ``sys.setprofile`` sees every Python call and return. Each frame that stands for a PyTorch frame
  (see ``labsupport.tools.frame_names``) becomes a :class:`Frame`; the rest is left out.
* a dispatcher observer (``labsupport.c10.dispatcher.observers``) hands over the key-set details of
  each dispatch, which are attached to the ``c10::Dispatcher::call`` / ``redispatch`` frame.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from labsupport.c10.dispatch_key_set import DispatchKeySet
from labsupport.tools.frame_names import FrameName, classify_frame, frame_qualname, source_path

if TYPE_CHECKING:
    from labsupport.c10.dispatch_key import DispatchKey
    from labsupport.c10.dispatcher import DispatchEvent
    from labsupport.tools.callgraph import CallGraph

ProfileFunction = Callable[[FrameType, str, Any], Any]


class Frame:
    """One recorded frame: which layer, the lab's function, the PyTorch frame it stands for.

    Dispatcher frames also carry ``key_set`` (what the table was indexed with), ``parts`` (where
    its bits came from), ``key`` (the chosen key), ``kernel`` and ``label`` (the table entry) and
    ``redispatch``. On a ``call`` the parts are ``tensor_keys``, ``tls_include``, ``tls_exclude`` and
    ``fallthrough_mask``; a ``redispatch`` uses the set its caller computed as is, so its only part is
    ``from_caller``. Autograd kernel frames carry ``grad_fn``: the node they attached, if any.
    """

    __slots__ = (
        "_kernels", "children", "depth", "file", "grad_fn", "kernel", "key", "key_set", "label", "layer", "line",
        "module", "name", "op", "parent", "parts", "redispatch", "torch_name",
    )  # fmt: skip

    def __init__(self, layer: str, name: str, torch_name: str, file: str, line: int, depth: int, module: str) -> None:
        self.layer = layer
        self.name = name
        self.torch_name = torch_name
        self.file = file
        self.line = line
        self.depth = depth
        self.module = module
        self.parent: Frame | None = None
        self.children: list[Frame] = []
        self.key_set: DispatchKeySet | None = None
        self.parts: dict[str, DispatchKeySet] = {}
        self.key: DispatchKey | None = None
        self.kernel: str | None = None
        self.label: str | None = None
        self.redispatch: bool | None = None
        self.op: str | None = None
        self.grad_fn: str | None = None
        self._kernels: dict[Any, FrameName] | None = None  # dispatcher frames: the chosen kernel's code

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def dispatch_summary(self) -> str:
        """``DispatchKeySet(CPU, AutogradCPU) -> AutogradCPU`` on dispatcher frames, else ``""``."""
        if self.key_set is None or self.key is None:
            return ""
        return f"{self.key_set!r} -> {self.key.name}"

    def ancestors(self) -> list[Frame]:
        """This frame's callers among the recorded frames, innermost first."""
        found, frame = [], self.parent
        while frame is not None:
            found.append(frame)
            frame = frame.parent
        return found

    def as_dict(self) -> dict[str, Any]:
        """Plain data (names and strings only), e.g. for JSON or a grader."""
        return {
            "layer": self.layer, "name": self.name, "torch_name": self.torch_name, "file": self.file,
            "line": self.line, "depth": self.depth,
            "key_set": None if self.key_set is None else repr(self.key_set),
            "parts": {k: repr(v) for k, v in self.parts.items()},
            "key": None if self.key is None else self.key.name, "kernel": self.kernel, "label": self.label,
            "redispatch": self.redispatch, "op": self.op, "grad_fn": self.grad_fn,
        }  # fmt: skip

    def __repr__(self) -> str:
        extra = f" {self.dispatch_summary()}" if self.key_set is not None else ""
        if self.grad_fn:
            extra += f" grad_fn={self.grad_fn}"
        return f"<Frame {self.layer} {self.torch_name} ({self.where}){extra}>"


class Trace:
    """A recording of the frames of the calls made inside a ``with lab.trace() as rec:`` block."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []  # every recorded frame, outermost first (call order)
        self.roots: list[Frame] = []
        self._open: list[Frame] = []
        self._pystack: list[tuple[FrameType, Frame | None]] = []
        self._previous: ProfileFunction | None = None
        self._thread = 0
        self._state = "new"

    # ------------------------------------------------------------------ recording
    def __enter__(self) -> Trace:
        from labsupport.c10.dispatcher import observers

        if self._state != "new":
            raise RuntimeError("a lab.trace() recording can be used once; start a new one with lab.trace()")
        self._state = "recording"
        self._thread = threading.get_ident()
        self._previous = sys.getprofile()
        observers.add(self)
        sys.setprofile(self._profile)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        from labsupport.c10.dispatcher import observers

        sys.setprofile(self._previous)
        observers.remove(self)
        self._previous = None
        self._state = "done"
        self._open.clear()
        self._pystack.clear()

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = classify_frame(frame)
            if name is None:
                name = self._kernel_name(frame)
                if name is None:
                    self._pystack.append((frame, None))
                    return self._forward(frame, event, arg)
            code = frame.f_code
            parent = self._open[-1] if self._open else None
            rec = Frame(
                name.layer, frame_qualname(frame), name.torch_name, source_path(code.co_filename),
                code.co_firstlineno, 0 if parent is None else parent.depth + 1, frame.f_globals.get("__name__", ""),
            )  # fmt: skip
            if parent is None:
                self.roots.append(rec)
            else:
                rec.parent = parent
                parent.children.append(rec)
            self.frames.append(rec)
            self._open.append(rec)
            self._pystack.append((frame, rec))
        elif event == "return":
            stack = self._pystack
            if stack and stack[-1][0] is frame:
                rec = stack.pop()[1]
                if rec is not None:
                    self._open.pop()
                    if rec.layer == "autograd" and arg is not None:
                        rec.grad_fn = _grad_fn_name(arg)
        return self._forward(frame, event, arg)

    def _forward(self, frame: FrameType, event: str, arg: Any) -> None:
        """Pass events on to a profile function that was installed before ours (a nested trace)."""
        if self._previous is not None and callable(self._previous):
            self._previous(frame, event, arg)

    def _kernel_name(self, frame: FrameType) -> FrameName | None:
        """A kernel the table does not name (a user's kernel, a boxed fallback): ask the dispatcher
        frame that is calling it, through any boxing adapters in between."""
        for rec in reversed(self._open):
            if rec.layer == "boxing":
                continue
            if rec.layer == "dispatcher" and rec._kernels:
                return rec._kernels.get(frame.f_code)
            return None
        return None

    # dispatcher observer (labsupport.c10.dispatcher.observers)
    def on_enter(self, event: DispatchEvent) -> None:
        if threading.get_ident() != self._thread:
            return
        for rec in reversed(self._open):
            if rec.layer == "dispatcher":
                if rec.key_set is None:
                    _attach(rec, event)
                break

    def on_exit(self, event: DispatchEvent) -> None:
        pass

    # ------------------------------------------------------------------ reading
    def __iter__(self) -> Iterator[Frame]:
        return iter(self.frames)

    def __len__(self) -> int:
        return len(self.frames)

    def find(self, name: str) -> Frame | None:
        """The first frame whose PyTorch name (or lab name) is ``name``."""
        for frame in self.frames:
            if frame.torch_name == name or frame.name == name:
                return frame
        return None

    def find_all(self, name: str) -> list[Frame]:
        return [f for f in self.frames if f.torch_name == name or f.name == name]

    def torch_names(self) -> list[str]:
        return [f.torch_name for f in self.frames]

    def _stop_frame(self, at: str | Frame | None) -> Frame | None:
        if isinstance(at, Frame):
            return at
        if at is not None:
            found = self.find(at)
            if found is None:
                raise KeyError(f"no recorded frame is named {at!r}; recorded: {', '.join(self.torch_names())}")
            return found
        # Where the seed puts its breakpoint: the first native kernel, else the deepest frame.
        for frame in self.frames:
            if frame.layer == "native":
                return frame
        return max(self.frames, key=lambda f: f.depth, default=None)

    def backtrace(self, at: str | Frame | None = None) -> str:
        """gdb's ``bt`` at frame ``at`` (default: the first native kernel): innermost first, ``#0`` on top."""
        frame = self._stop_frame(at)
        if frame is None:
            return "No stack."
        lines = []
        for number, f in enumerate([frame, *frame.ancestors()]):
            line = f"#{number:<3}{f.torch_name}  ({f.where})"
            if f.key_set is not None:
                line += f"  ks={f.dispatch_summary()}"
            if f.grad_fn:
                line += f"  grad_fn={f.grad_fn}"
            lines.append(line)
        return "\n".join(lines)

    def table(self) -> str:
        """Every recorded frame, outermost first, nested by depth: a text table."""
        header = ("#", "layer", "PyTorch frame", "lab function", "where", "dispatch")
        rows = [header]
        for i, f in enumerate(self.frames):
            dispatch = f.dispatch_summary()
            if f.label:
                dispatch += f" [{f.label}]"
            if f.grad_fn:
                dispatch = f"{dispatch} grad_fn={f.grad_fn}".strip()
            rows.append((str(i), f.layer, "  " * f.depth + f.torch_name, f.name, f.where, dispatch))
        widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)

    def call_graph(self) -> CallGraph:
        """The recorded calls as a graph: SVG through graphviz's ``dot``, text tree otherwise."""
        from labsupport.tools.callgraph import CallGraph

        return CallGraph(self.roots)

    def __repr__(self) -> str:
        if self._state == "recording":
            return "<lab.trace: recording>"
        return self.table() if self.frames else "<lab.trace: no frames recorded>"


def _attach(rec: Frame, event: DispatchEvent) -> None:
    wrap = DispatchKeySet.from_raw
    entry = event.entry
    registration = entry.registration
    if registration is not None:
        layer = "fallback" if entry.label == "backend fallback" else "kernel"
        kernel = registration.kernel
        rec._kernels = {}
        for fn in (kernel.unboxed, kernel.boxed):
            code = getattr(fn, "__code__", None)
            if code is not None:
                debug = registration.debug
                label = fn.__qualname__ if debug.startswith("registered at") else debug
                rec._kernels[code] = FrameName(layer, label)
    rec.key_set = wrap(event.key_set)
    rec.key = event.key
    rec.kernel = event.entry.kernel_name
    rec.label = event.entry.label
    rec.redispatch = event.redispatch
    rec.op = event.op.full_name
    if event.redispatch:
        rec.parts = {"from_caller": wrap(event.key_set)}
    else:
        rec.parts = {
            "tensor_keys": wrap(event.tensor_keys),
            "tls_include": wrap(event.included),
            "tls_exclude": wrap(event.excluded),
            "fallthrough_mask": wrap(event.mask),
        }


def _grad_fn_name(result: Any) -> str | None:
    values = result if isinstance(result, (tuple, list)) else (result,)
    for value in values:
        node = getattr(value, "grad_fn", None)
        if node is not None:
            name = getattr(node, "name", None)
            return name() if callable(name) else type(node).__name__
    return None


def trace() -> Trace:
    """Record the frames of the calls in a ``with`` block (gdb's ``bt``, for the whole call tree)."""
    return Trace()
