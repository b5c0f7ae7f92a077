"""Exercise 06 -- write a new structured kernel: sqdiff(self, other) = (self - other) ** 2.

Notebook: 06 (structured kernels), sections 2 (meta(), impl(), set_output and the three wrappers),
3 (TensorIterator), 4 (meta tensors) and 5 (out= tensors).
Grade it: ``make grade EX=ex06`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex06``),
or ``lab.grade("ex06")`` in a notebook cell.

What PyTorch does (seeds 001 and 002): a structured operator is written as two halves, ``meta()``
(``TORCH_META_FUNC``) and ``impl()`` (``TORCH_IMPL_FUNC``); code generation writes everything else, for
every backend: a functional, an in-place and an out= wrapper around them. The ops.yaml entries are
given in ``exercises/ex06_sqdiff.yaml`` (do not edit it). sqdiff behaves like ``sub`` followed by a
square: the same broadcasting, type promotion, devices, out= rules and refusals.

What the lab gives you (names you could not guess):

* your meta class derives from ``TensorIteratorBase`` (labsupport/aten/tensor_iterator.py), the
  TensorIterator of notebook 06, section 3; ``labsupport/aten/meta/binary_ops.py`` holds the meta
  classes of the lab's own binary operators, ``labsupport/aten/native/binary_ops.py`` their impls;
* ``sub_check(self, other)`` (imported below) is the argument check sub runs;
* a tensor's numpy data is ``t._data``; after meta(), ``self.common_dtype`` is the dtype to compute in
  (numpy dtype: ``.np``); ``cast_array(array, numpy_dtype)`` converts the way PyTorch does.

Try it in a notebook cell (the grader builds the same way)::

    from labsupport.grade.ex06_structured.observe import sqdiff_build
    ex06 = lab.load_exercise("ex06")          # your exercises/ex06_structured.py, freshly imported
    build = sqdiff_build(ex06)
    t = build.python_torch_functions          # this build's torch.* functions, sqdiff included
    print(build.dispatcher.dump_table("aten::sqdiff.Tensor"))
"""

from __future__ import annotations

from typing import Any

import numpy as np  # noqa: F401

from labsupport.aten.cast import cast_array  # noqa: F401
from labsupport.aten.native.binary_op_checks import sub_check  # noqa: F401
from labsupport.aten.tensor_iterator import TensorIteratorBase


class structured_sqdiff_Tensor(TensorIteratorBase):
    """at::meta::structured_sqdiff_Tensor: checks the arguments and announces the output (shape,
    dtype, device) -- once for every variant and every backend, meta tensors included (notebook 06, §2-4)."""

    __slots__ = ()

    def meta(self, self_: Any, other: Any) -> None:
        raise NotImplementedError(
            "ex06: write structured_sqdiff_Tensor.meta in exercises/ex06_structured.py (notebook 06, sections 2-4)"
        )


class structured_sqdiff_out(structured_sqdiff_Tensor):
    """at::native::structured_sqdiff_out (CPU and simulated CUDA): computes the values of
    ``(self_ - other) ** 2`` into the output ``out`` that the wrapper prepared; returns nothing
    (notebook 06, §2 and §5)."""

    __slots__ = ()

    def impl(self, self_: Any, other: Any, out: Any) -> None:
        raise NotImplementedError(
            "ex06: write structured_sqdiff_out.impl in exercises/ex06_structured.py (notebook 06, sections 2 and 5)"
        )
