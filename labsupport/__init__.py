"""Dispatcher Lab: a pure-Python miniature of PyTorch's operator dispatcher.

The public API (see DESIGN.md section 4)::

    import labsupport as lab
    lab.DispatchKey, lab.DispatchKeySet, lab.dispatch_keys(t)
    lab.tls_include_set(), lab.tls_exclude_set(), the guards (lab.ExcludeDispatchKeyGuard, ...)
    lab.FunctionSchema.parse(text)
    lab.Library(ns, kind), lab.fallthrough_kernel
    lab.dispatcher.dump(name), lab.dispatcher.dump_table(name)
    lab.dispatcher.check_invariants(), .find_dangling_impls(), .registrations_for_dispatch_key(key)
    lab.show_dispatch_trace()           # TORCH_SHOW_DISPATCH_TRACE (or LAB_SHOW_DISPATCH_TRACE=1)
    lab.pytorch_dump_style()            # dumps name Python kernels by registration site, as torch.library's
    lab.PythonDispatcher()
    lab.ops.<namespace>.<op>(...)        # torch.ops: OpOverloadPacket / OpOverload (labsupport/_ops.py)
    lab.trace(), lab.stop_at(name)       # the frames of a call (gdb's bt), the real stack at a frame
    lab.profiler.profile()               # operators seen by Dispatcher::call (torch.profiler)
    lab.count_instructions(fn), lab.bench # bytecode counts, timings, callgrind, before/after
    lab.show_keyset(ks, parts=...), lab.KeySetExplorer()
    lab.vmap(fn, in_dims=0, out_dims=0)  # torch.vmap: FuncTorchBatched + levels (labsupport.functorch)

The generated front end is ``import labsupport.torch as torch``.
"""

from __future__ import annotations

import importlib.util as _importlib_util
import sys as _sys
from typing import Any

if _importlib_util.find_spec("numpy") is None:  # before anything imports numpy: say what to do instead
    raise ModuleNotFoundError(
        f"the Dispatcher Lab needs numpy, which this Python ({_sys.executable}) does not have. Use the lab's "
        "own Python: `make grade` / `make grade EX=ex04` (or `.venv/bin/python -m labsupport.grade`) to grade, "
        "`make lab` for the notebooks (`make venv` creates .venv).",
        name="labsupport",  # so `python -m labsupport.grade` prints this one line, not a traceback
    )

from labsupport import jit
from labsupport._ops import ops  # torch.ops: ops.aten.add.Tensor is the OpOverload a handler's func is
from labsupport.autograd.variable_fallback import (
    autograd_not_implemented_fallback,
    autograd_not_implemented_inplace_or_view_fallback,
)
from labsupport.c10.dispatch_key import BackendComponent, DispatchKey
from labsupport.c10.dispatch_key_set import (
    DispatchKeySet,
    after_ADInplaceOrView_keyset,
    after_autograd_keyset,
    autocast_dispatch_keyset,
    autograd_dispatch_keyset,
    register_html_view,
)
from labsupport.c10.dispatch_trace import set_show_dispatch_trace, show_dispatch_trace
from labsupport.c10.dispatcher import Dispatcher, DispatchRecursionError, dispatcher
from labsupport.c10.inference_mode import InferenceMode, is_inference_mode_enabled
from labsupport.c10.kernel_function import KernelFunction, fallthrough_kernel
from labsupport.c10.library import Library, pytorch_dump_style
from labsupport.c10.python_dispatcher import PythonDispatcher
from labsupport.c10.schema import FunctionSchema, SchemaParseError
from labsupport.c10.tls import (
    AutoDispatchBelowADInplaceOrView,
    AutoDispatchBelowAutograd,
    AutoNonVariableTypeMode,
    ExcludeDispatchKeyGuard,
    ForceDispatchKeyGuard,
    IncludeDispatchKeyGuard,
    tls_exclude_set,
    tls_include_set,
)
from labsupport.functorch import register_frame_names as _register_functorch_frames
from labsupport.functorch import vmap
from labsupport.tools import bench, profiler
from labsupport.tools import frame_names as _frame_names
from labsupport.tools.bench import count_instructions
from labsupport.tools.breakpoint import stop_at
from labsupport.tools.explorer import KeySetExplorer
from labsupport.tools.keyset_view import keyset_html, show_keyset
from labsupport.tools.trace import trace

_register_functorch_frames(_frame_names.LAB_RULES)  # lab.trace names functorch frames as PyTorch does

register_html_view(keyset_html)  # tools' HTML key-set view, registered with c10 from above it


def dispatch_keys(tensor: Any) -> DispatchKeySet:
    """A tensor's dispatch key set (``torch._C._dispatch_keys(t)``)."""
    return DispatchKeySet.from_raw(tensor._ks)


__all__ = [
    "AutoDispatchBelowADInplaceOrView",
    "AutoDispatchBelowAutograd",
    "AutoNonVariableTypeMode",
    "BackendComponent",
    "DispatchKey",
    "DispatchKeySet",
    "DispatchRecursionError",
    "Dispatcher",
    "ExcludeDispatchKeyGuard",
    "ForceDispatchKeyGuard",
    "FunctionSchema",
    "IncludeDispatchKeyGuard",
    "InferenceMode",
    "KernelFunction",
    "KeySetExplorer",
    "Library",
    "PythonDispatcher",
    "SchemaParseError",
    "after_ADInplaceOrView_keyset",
    "after_autograd_keyset",
    "autocast_dispatch_keyset",
    "autograd_dispatch_keyset",
    "autograd_not_implemented_fallback",
    "autograd_not_implemented_inplace_or_view_fallback",
    "bench",
    "count_instructions",
    "dispatch_keys",
    "dispatcher",
    "fallthrough_kernel",
    "is_inference_mode_enabled",
    "jit",
    "ops",
    "profiler",
    "pytorch_dump_style",
    "set_show_dispatch_trace",
    "show_dispatch_trace",
    "show_keyset",
    "stop_at",
    "tls_exclude_set",
    "tls_include_set",
    "trace",
    "vmap",
]

# the grader, last (it uses everything above). ``lab.grade`` is the package itself, and callable:
# ``lab.grade("ex04")`` grades, ``import labsupport.grade.checking`` still finds the submodules.
from labsupport import grade  # noqa: E402
from labsupport.grade import load_exercise  # noqa: E402

__all__ += ["grade", "load_exercise"]
