"""Exercise 06 -- write a new structured kernel: sqdiff(self, other) = (self - other) ** 2.

Notebook: 06 (structured kernels), the cells on meta() / impl(), the functional / inplace / out=
wrappers, set_output_raw_strided and meta tensors. Grade it: ``python -m labsupport.grade ex06``.

What PyTorch does (seeds 001 and 002): a structured operator is written as two halves,

* ``TORCH_META_FUNC`` -- ``at::meta::structured_<op>::meta()``: check the arguments, work out the
  output's shape and dtype, and announce it with ``set_output_raw_strided``. Elementwise ops inherit
  from ``TensorIteratorBase``, whose ``build_borrowing_binary_op(out, a, b)`` does broadcasting, type
  promotion, the device checks and the out= checks in one call.
* ``TORCH_IMPL_FUNC`` -- ``at::native::structured_<op>_out::impl()``: compute the values into an
  output that already exists.

Code generation writes everything else: for every backend (CPU, CUDA, Meta) a functional wrapper that
allocates the output, an in-place one that checks ``self`` can hold the result, and an out= one that
resizes ``out``. Meta tensors run only ``meta()``: shapes and dtypes with no data.

The ops.yaml entries are given in ``exercises/ex06_sqdiff.yaml`` (do not edit it). You write:

* ``structured_sqdiff_Tensor.meta(self_, other)``: like ``sub``, reject bool tensors
  (``labsupport.aten.native.binary_op_checks.sub_check``), then call
  ``self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)``. Compare with
  ``structured_sub_Tensor`` in labsupport/aten/meta/binary_ops.py.
* ``structured_sqdiff_out.impl(self_, other, out)``: after meta(), ``self.common_dtype`` is the
  promoted dtype. Convert both inputs' numpy data (``t._data``) to ``self.common_dtype.np``,
  compute ``(a - b) * (a - b)`` (numpy broadcasts) and write it *into* ``out._data`` (``np.copyto``,
  converting to ``out._data.dtype``). Do not create a new tensor: the wrapper owns the output.
  Compare with ``structured_sub_out`` in labsupport/aten/native/binary_ops.py.

Try it in a notebook (the grader builds the same way)::

    from labsupport.grade.ex06_structured import sqdiff_build
    build = sqdiff_build(ex06)              # ex06: your imported exercises/ex06_structured.py module
    torch_ = build.python_torch_functions   # this build's torch.* functions, sqdiff included
    print(build.dispatcher.dump_table("aten::sqdiff.Tensor"))
"""

from __future__ import annotations

from typing import Any

import numpy as np  # noqa: F401

from labsupport.aten.cast import cast_array  # noqa: F401
from labsupport.aten.native.binary_op_checks import sub_check  # noqa: F401
from labsupport.aten.tensor_iterator import TensorIteratorBase


class structured_sqdiff_Tensor(TensorIteratorBase):
    """at::meta::structured_sqdiff_Tensor: checks the arguments and announces the output."""

    __slots__ = ()

    def meta(self, self_: Any, other: Any) -> None:
        # TODO 1: sub_check(self_, other)  -- bool tensors are rejected, as for sub
        # TODO 2: self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)
        raise NotImplementedError(
            "ex06: implement structured_sqdiff_Tensor.meta in exercises/ex06_structured.py: sub_check, then "
            "build_borrowing_binary_op(self.maybe_get_output(0), self_, other) (notebook 06)"
        )


class structured_sqdiff_out(structured_sqdiff_Tensor):
    """at::native::structured_sqdiff_out (CPU and simulated CUDA): computes the values into ``out``."""

    __slots__ = ()

    def impl(self, self_: Any, other: Any, out: Any) -> None:
        # TODO 3: convert both inputs' data to the computation dtype, self.common_dtype.np
        #         (cast_array converts the way PyTorch does).
        # TODO 4: compute (a - b) * (a - b) -- numpy broadcasts the shapes for you.
        # TODO 5: write the result *into* out._data, converted to out's dtype
        #         (np.copyto(..., casting="unsafe")); return nothing.
        raise NotImplementedError(
            "ex06: implement structured_sqdiff_out.impl in exercises/ex06_structured.py: compute "
            "(self - other) ** 2 in self.common_dtype and write it into out._data (notebook 06)"
        )
