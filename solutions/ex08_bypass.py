"""Exercise 08 -- make torch.add bypass the dispatcher (reference solution).

Seed 000 ("Codegen Task: update an op to bypass the dispatcher"): give ``add.Tensor``
``manual_cpp_binding: True`` and drop its structured metadata, hand-write ``at::add`` so that it
calls the CPU kernel directly, then measure what changed: the profiler no longer sees aten::add
(Test A) and a call costs fewer instructions (Test B).

How the pieces reach the "after" build: this module is passed to the build twice,
``load_build(after_yaml, "after", manual=<this module>, kernels=[<this module>])``:

* ``manual=``: the generated ``functions.py`` and Tensor methods use ``manual.add`` (this ``add``)
  and keep the dispatcher path as ``functions.__dispatch_add``;
* ``kernels=``: the yaml's ``dispatch:`` names (``add_functional``, ``add_functional_meta``) are
  looked up here, as at::native kernels.

After loading, call ``bind(build)``: ``add`` needs the build for its dispatcher path.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from labsupport.aten.meta import structured_add_Tensor
from labsupport.aten.native import structured_ufunc_add_CPU

ADD_TENSOR_FUNC = "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"


# ---- (a) the yaml change --------------------------------------------------------------------------


def patch_ops_yaml(text: str) -> str:
    """The "after" ops.yaml: add.Tensor gets a hand-written binding and plain (unstructured) kernels."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(ADD_TENSOR_FUNC))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):  # the entry's indented fields
        end += 1
    structured = ("structured_delegate:", "structured:", "structured_inherits:")
    fields = [line for line in lines[start + 1 : end] if not line.strip().startswith(structured)]
    entry = [
        lines[start],
        "  manual_cpp_binding: True\n",
        *fields,
        "  dispatch:\n",
        "    CPU, CUDA: add_functional\n",
        "    Meta: add_functional_meta\n",
    ]
    return "".join(lines[:start] + entry + lines[end:])


# ---- the structured scaffolding, written by hand (given, the same in exercises/) ----------------
# Codegen used to write these for add.Tensor (see build/torch/register_cpu.py, wrapper_CPU_add_Tensor,
# and register_meta.py); with manual_cpp_binding and no structured_delegate it no longer does.


def allocate_output(tensor_type: type, sizes: Any, options: Any) -> Any:
    """A new output tensor (no data on the meta device), like the generated ``create_out``."""
    sizes = tuple(sizes)
    data = None if options.device.type == "meta" else np.empty(sizes, options.dtype.np)
    return tensor_type._make(data, sizes, options.dtype, options.device)


class structured_add_functional(structured_ufunc_add_CPU):
    """The functional variant of the structured add kernel: meta() allocates, impl() fills in."""

    __slots__ = ("output", "tensor_type")

    def __init__(self, tensor_type: type) -> None:
        self.output = None
        self.tensor_type = tensor_type

    def set_output_raw_strided(
        self, output_idx: int, sizes: Any, strides: Any, options: Any, names: Any = None
    ) -> None:
        self.output = allocate_output(self.tensor_type, sizes, options)

    def maybe_get_output(self, output_idx: int = 0) -> Any:
        return self.output


class structured_add_functional_meta(structured_add_Tensor):
    """The same for meta tensors: only meta() runs, and the output has no data."""

    __slots__ = ("output", "tensor_type")

    def __init__(self, tensor_type: type) -> None:
        self.output = None
        self.tensor_type = tensor_type

    def set_output_raw_strided(
        self, output_idx: int, sizes: Any, strides: Any, options: Any, names: Any = None
    ) -> None:
        self.output = allocate_output(self.tensor_type, sizes, options)

    def maybe_get_output(self, output_idx: int = 0) -> Any:
        return self.output


def add_functional(self: Any, other: Any, alpha: Any = 1) -> Any:
    """at::native kernel of add.Tensor for CPU and (simulated) CUDA: meta(), then impl()."""
    op = structured_add_functional(type(self))
    op.meta(self, other, alpha)
    op.impl(self, other, alpha, op.output)
    return op.output


def add_functional_meta(self: Any, other: Any, alpha: Any = 1) -> Any:
    """at::native kernel of add.Tensor for Meta: shapes and dtypes only."""
    op = structured_add_functional_meta(type(self))
    op.meta(self, other, alpha)
    return op.output


# ---- (b) the hand-written binding -----------------------------------------------------------------

build: types.ModuleType | None = None  # the "after" build, set by bind()


def bind(after_build: types.ModuleType) -> None:
    """Tell ``add`` which build it belongs to (the grader and notebook 08 call this after loading)."""
    global build
    build = after_build


def add(self: Any, other: Any, alpha: Any = 1) -> Any:
    """The hand-written ``at::add``: CPU tensors go straight to the kernel, the rest to the dispatcher."""
    if self._device.type == "cpu" and other._device.type == "cpu":
        return add_functional(self, other, alpha)  # no key set, no table, no autograd, no profiler
    if build is None:
        raise RuntimeError("ex08: call bind(build) after loading the after build")
    return build.functions.__dispatch_add(self, other, alpha)
