"""Exercise 08 -- make torch.add bypass the dispatcher.

Notebook: 08 (bypass the dispatcher): the manual binding, Test A (the profiler) and Test B
(instruction counts), and what the bypass loses. Grade it: ``python -m labsupport.grade ex08``.

What PyTorch does (seed 000, "Codegen Task: update an op to bypass the dispatcher"): ``add.Tensor``
gets ``manual_cpp_binding: True`` in native_functions.yaml and loses its structured metadata. Code
generation then stops writing ``at::add`` / ``Tensor::add``; you write them by hand so that, for CPU
tensors, they call the CPU kernel directly: no key set, no dispatch table, no autograd kernel, no
profiler. The dispatcher path stays available (the lab keeps it as ``functions.__dispatch_add``) for
every other device.

You write two things:

(a) ``patch_ops_yaml(text)``: from the text of the lab's ops.yaml, return the "after" text in which the
    ``add.Tensor`` entry (and nothing else) is changed:

    * add ``manual_cpp_binding: True``;
    * remove ``structured_delegate: add.out`` (add.Tensor is no longer a structured op);
    * add a ``dispatch:`` block so the dispatcher path still has kernels::

          dispatch:
            CPU, CUDA: add_functional
            Meta: add_functional_meta

      Those two kernels are given below: the structured scaffolding that codegen used to write for
      add.Tensor (compare build/torch/register_cpu.py, ``wrapper_CPU_add_Tensor``), written by hand.
    Keep every other line of the entry (func, device_check, variants, tags). add_.Tensor and add.out
    stay structured.

(b) ``add(self, other, alpha=1)``: the hand-written ``at::add``. When both tensors are on the CPU, call
    the CPU kernel ``add_functional`` directly; otherwise take the dispatcher path,
    ``build.functions.__dispatch_add(self, other, alpha)``.

How your module reaches the "after" build: it is passed twice,
``load_build(after_yaml, "after", manual=ex08, kernels=[ex08])``. ``manual=`` makes the generated
functions API and Tensor methods use your ``add``; ``kernels=`` is where the yaml's ``dispatch:`` names
are looked up (as at::native kernels). ``add`` needs the build for the dispatcher path, so after loading
the grader (and notebook 08) calls ``bind(build)``, which stores it in the module-level ``build``.

Try it in a notebook (the grader builds the same way)::

    from labsupport.grade.ex08_bypass import before_and_after
    before, after = before_and_after(ex08)    # ex08: your imported exercises/ex08_bypass.py module
    after.python_torch_functions.add(x, y)    # x, y: tensors of after.python_variable_methods.Tensor

Then measure, as the seed does: the grader profiles ``torch.add`` on CPU tensors in the "before"
build (default ops.yaml) and yours (Test A: aten::add must disappear from the profile) and counts
instructions per call (Test B: yours must be cheaper). Notice what you gave up: on CPU, add no longer
records a grad_fn, and no profiler, tracer or other key can see it.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from labsupport.aten.meta import structured_add_Tensor
from labsupport.aten.native import structured_ufunc_add_CPU

ADD_TENSOR_FUNC = "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"


# ---- (a) the yaml change: your part ---------------------------------------------------------------


def patch_ops_yaml(text: str) -> str:
    """The "after" ops.yaml: add.Tensor gets a hand-written binding and plain (unstructured) kernels."""
    # TODO 1: find the add.Tensor entry: the line starting with ADD_TENSOR_FUNC and the indented
    #         lines after it (its fields). text.splitlines(keepends=True) keeps the newlines.
    # TODO 2: drop its `structured_delegate:` line, add `  manual_cpp_binding: True` and the
    #         `  dispatch:` block shown in the module docstring (4-space indent for the kernels).
    # TODO 3: return the whole text with only that entry changed.
    raise NotImplementedError(
        "ex08: implement patch_ops_yaml in exercises/ex08_bypass.py: give add.Tensor manual_cpp_binding: True, "
        "remove structured_delegate, add a dispatch: block naming add_functional / add_functional_meta (notebook 08)"
    )


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


# ---- (b) the hand-written binding: your part ------------------------------------------------------

build: types.ModuleType | None = None  # the "after" build, set by bind()


def bind(after_build: types.ModuleType) -> None:
    """Tell ``add`` which build it belongs to (the grader and notebook 08 call this after loading)."""
    global build
    build = after_build


def add(self: Any, other: Any, alpha: Any = 1) -> Any:
    """The hand-written ``at::add``: CPU tensors go straight to the kernel, the rest to the dispatcher."""
    # TODO 4: if self and other are both on the CPU (t._device.type == "cpu"), return
    #         add_functional(self, other, alpha) -- the direct call, no dispatcher.
    # TODO 5: otherwise return build.functions.__dispatch_add(self, other, alpha).
    raise NotImplementedError(
        "ex08: implement add in exercises/ex08_bypass.py: call add_functional directly for CPU tensors, "
        "build.functions.__dispatch_add otherwise (notebook 08)"
    )
