"""``TORCH_SHOW_DISPATCH_TRACE``: print every dispatch, one line each, as PyTorch's debug builds do.

Stands for ``show_dispatch_trace()`` / ``detail::_print_dispatch_trace`` in
``aten/src/ATen/core/dispatch/Dispatcher.cpp`` and the ``DispatchTraceNestingGuard`` in
``Dispatcher.h``. Each ``Dispatcher::call`` / ``redispatch`` / ``callBoxed`` / ``redispatchBoxed``
prints, to stderr, one space per nesting level (the outermost call is level 1), its label, the operator
and the highest-priority key of the key set it dispatches on::

     [call] op=[aten::add.Tensor], key=[AutogradCPU]
      [redispatch] op=[aten::add.Tensor], key=[CPU]

Switch it on with the environment variable ``LAB_SHOW_DISPATCH_TRACE=1`` (or PyTorch's own
``TORCH_SHOW_DISPATCH_TRACE=1``) before the lab is imported, with ``set_show_dispatch_trace(True)``,
or for one block with ``with lab.show_dispatch_trace():``. PyTorch compiles the trace only into debug
builds (``!defined(NDEBUG)``), so the release wheels from pip ignore the variable; the lab always has it.

It costs nothing while off: it is a dispatcher observer, so the only check on the call path is the
``observers.active`` flag the profiler and tracer already use.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import TracebackType
from typing import Any, TextIO

from labsupport.c10.dispatch_key_set import highest_priority_key
from labsupport.c10.dispatcher import DispatchEvent, observers

ENV_VARS = ("LAB_SHOW_DISPATCH_TRACE", "TORCH_SHOW_DISPATCH_TRACE")


class DispatchTracePrinter:
    """The observer that prints one line per dispatch (``_print_dispatch_trace``)."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file  # None: sys.stderr at the time of printing (notebooks replace it)

    def on_enter(self, event: DispatchEvent) -> None:
        if event.redispatch:
            label = "[redispatchBoxed]" if event.boxed else "[redispatch]"
        else:
            label = "[callBoxed]" if event.boxed else "[call]"
        key = highest_priority_key(event.key_set).name
        indent = " " * (event.depth + 1)  # DispatchTraceNestingGuard counts before printing
        print(f"{indent}{label} op=[{event.op.full_name}], key=[{key}]", file=self.file or sys.stderr)

    def on_exit(self, event: DispatchEvent) -> None:
        pass


_global_printer: DispatchTracePrinter | None = None


def is_dispatch_trace_enabled() -> bool:
    """``c10::show_dispatch_trace()``: is the process-wide switch on?"""
    return _global_printer is not None


def set_show_dispatch_trace(enabled: bool, file: TextIO | None = None) -> None:
    """Switch the process-wide trace on or off (what the environment variable sets at start-up)."""
    global _global_printer
    if enabled and _global_printer is None:
        _global_printer = DispatchTracePrinter(file)
        observers.add(_global_printer)
    elif not enabled and _global_printer is not None:
        observers.remove(_global_printer)
        _global_printer = None


class show_dispatch_trace:
    """``with lab.show_dispatch_trace():`` prints every dispatch inside the block (to ``file``, default stderr)."""

    def __init__(self, file: TextIO | None = None) -> None:
        self._printer = DispatchTracePrinter(file)

    def __enter__(self) -> show_dispatch_trace:
        observers.add(self._printer)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        observers.remove(self._printer)


def _from_environment(environ: Any = os.environ) -> bool:
    """Read the variables as ``show_dispatch_trace()`` does: "1" on, "0" off, anything else warns."""
    for name in ENV_VARS:
        value = environ.get(name)
        if value is None:
            continue
        if value == "1":
            return True
        if value != "0":
            warnings.warn(f"ignoring invalid value for {name}: {value} valid values are 0 or 1.", stacklevel=2)
        return False
    return False


if _from_environment():
    set_show_dispatch_trace(True)
