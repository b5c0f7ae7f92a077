"""``lab.stop_at(name)``: the real Python stack at the moment a chosen frame starts.

The seed's Exercise 0 sets a gdb breakpoint on ``structured_ufunc_add_CPU::impl`` and types ``bt``.
This is the same experiment on the lab: when a frame whose PyTorch name (or lab name) is ``name``
starts, the interpreter's own stack is captured with ``traceback.extract_stack`` and execution
goes on. Printing it (``bp.format()``, shaped like pdb's ``where``) shows that the frames
``lab.trace()`` reports are exactly the frames Python runs, nothing staged::

    with lab.stop_at("at::native::structured_ufunc_add_CPU::impl") as bp:
        torch.add(a, b)
    print(bp.format())
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, NamedTuple

from labsupport.tools.frame_names import classify_frame, frame_qualname, is_lab_file, source_path

__all__ = ["Breakpoint", "StackEntry", "stop_at"]


class StackEntry(NamedTuple):
    """One frame of the captured stack."""

    file: str  # repo-relative (or <notebook cell>)
    line: int  # the line running in that frame
    function: str  # the code's qualified name
    torch_name: str | None  # the PyTorch frame it stands for, if it stands for one
    layer: str | None
    source: str  # the text of that line
    is_lab: bool  # a file of the lab (package, build, exercises) or a notebook cell


class Breakpoint:
    """Captures the stack the first time the target frame starts (``hits`` counts every time)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.stack: list[StackEntry] = []  # outermost first, the target last (as pdb prints)
        self.summaries: list[traceback.FrameSummary] = []
        self.hits = 0
        self._previous: Callable[[FrameType, str, Any], Any] | None = None

    @property
    def hit(self) -> bool:
        return self.hits > 0

    def __enter__(self) -> Breakpoint:
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        sys.setprofile(self._previous)
        self._previous = None

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = classify_frame(frame)
            if (name is not None and name.torch_name == self.target) or frame_qualname(frame) == self.target:
                self.hits += 1
                if self.hits == 1:
                    self._capture(frame)
        previous = self._previous
        if previous is not None and callable(previous):
            previous(frame, event, arg)

    def _capture(self, frame: FrameType) -> None:
        frames: list[FrameType] = []
        walk: FrameType | None = frame
        while walk is not None:
            frames.append(walk)
            walk = walk.f_back
        frames.reverse()
        self.summaries = list(traceback.extract_stack(frame))
        for f, summary in zip(frames, self.summaries):
            name = classify_frame(f)
            filename = f.f_code.co_filename
            self.stack.append(
                StackEntry(
                    file=source_path(filename), line=summary.lineno or f.f_lineno,
                    function=frame_qualname(f), torch_name=None if name is None else name.torch_name,
                    layer=None if name is None else name.layer, source=(summary.line or "").strip(),
                    is_lab=is_lab_file(filename) and not source_path(filename).startswith("labsupport/tools/"),
                )
            )  # fmt: skip

    def torch_names(self) -> list[str]:
        """The PyTorch names of the captured frames that stand for one, outermost first."""
        return [e.torch_name for e in self.stack if e.torch_name]

    def format(self, *, lab_only: bool = True) -> str:
        """The stack as pdb's ``where`` prints it: outermost first, ``>`` on the stopped frame, each
        frame followed by its current line; ``# name`` gives the PyTorch frame it stands for.
        ``lab_only`` leaves out the interpreter's and Jupyter's own frames."""
        if not self.stack:
            return f"(the breakpoint on {self.target} was not reached)"
        entries = [e for e in self.stack if e.is_lab or not lab_only]
        if self.stack[-1] not in entries:
            entries.append(self.stack[-1])
        lines = []
        for e in entries:
            mark = "> " if e is entries[-1] else "  "
            comment = f"    # {e.torch_name}" if e.torch_name else ""
            lines.append(f"{mark}{e.file}({e.line}){e.function.rpartition('.')[2]}(){comment}")
            if e.source:
                lines.append(f"-> {e.source}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.format()


def stop_at(target: str) -> Breakpoint:
    """A breakpoint on the frame named ``target`` (a PyTorch name such as
    ``"at::native::structured_ufunc_add_CPU::impl"`` or a lab qualname) for a ``with`` block."""
    return Breakpoint(target)
