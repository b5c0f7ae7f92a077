"""Exercise 08 -- make torch.add bypass the dispatcher for CPU tensors.

Notebook: 08 (bypass the dispatcher): the change in three parts (shown there on ``mul``), the
"before" and "after" builds, Test A (the profiler), Test B (instruction counts) and what the bypass
gives up.
Grade it: ``make grade EX=ex08`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex08``),
or ``lab.grade("ex08")`` in a notebook cell.

What PyTorch does (seed 000, "Codegen Task: update an op to bypass the dispatcher"): the op's entry in
native_functions.yaml gets a hand-written binding; code generation stops writing ``at::add`` /
``Tensor::add``, and the hand-written one calls the CPU kernel directly when it can. Everything else
keeps taking the dispatcher path. Notebook 08 works the change through on ``mul``; here you do it for
``add.Tensor``, which also has ``alpha``.

You write two things:

(a) ``patch_ops_yaml(text)``: the text of the lab's ops.yaml in, the "after" text out, with the
    ``add.Tensor`` entry (and nothing else) changed the way notebook 08 changes ``mul.Tensor``. The
    kernels the dispatcher path needs afterwards are given below: ``add_functional`` (CPU and the
    simulated CUDA) and ``add_functional_meta`` (Meta).
(b) ``add(self, other, alpha=1)``: the hand-written ``at::add``, exactly as the generated one behaves
    (results, dtypes, broadcasting, devices, errors), minus the dispatcher where it can be skipped.

What the lab gives you (names you could not guess): your module is passed to the "after" build twice,
``load_build(after_yaml, "after", manual=ex08, kernels=[ex08])``: ``manual=`` makes the generated
functions API and Tensor methods use your ``add``; ``kernels=`` is where the yaml's ``dispatch:`` names
are looked up. The after build keeps the dispatcher path as ``functions.__dispatch_add``; after
loading, ``bind(after)`` stores the build in the module-level ``build``. A tensor's device is
``t._device`` (``.type`` is ``"cpu"``, ``"cuda"`` or ``"meta"``).

The grader compares your after build with the lab's own before build on random calls (dtypes,
broadcasting, alpha, Python numbers, Tensor.add, CUDA, meta and mixed-device calls), checks which calls
still enter the dispatcher, and runs Test A and Test B.

Try it in a notebook cell (the grader builds the same way)::

    from labsupport.grade.ex08_bypass.observe import before_and_after
    ex08 = lab.load_exercise("ex08")          # your exercises/ex08_bypass.py, freshly imported
    before, after = before_and_after(ex08)
    after.python_torch_functions.add(x, y)    # x, y: tensors of after.python_variable_methods.Tensor
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
    """The "after" ops.yaml: ``add.Tensor`` with a hand-written binding and kernels of its own
    (notebook 08, 'The change, part 1'). ``ADD_TENSOR_FUNC`` is the first line of its entry."""
    raise NotImplementedError("ex08: write patch_ops_yaml in exercises/ex08_bypass.py (notebook 08, part 1)")


# ---- the structured scaffolding, written by hand (given, the same in exercises/) ----------------
# Codegen used to write these for add.Tensor (see build/torch/register_cpu.py, wrapper_CPU_add_Tensor,
# and register_meta.py); after the change of part (a) it no longer does.


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
    """The hand-written ``at::add``: the CPU kernel directly when the dispatcher can be skipped, the
    dispatcher path otherwise (notebook 08, 'The change, part 3')."""
    raise NotImplementedError("ex08: write add in exercises/ex08_bypass.py (notebook 08, part 3)")
