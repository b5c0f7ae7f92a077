"""Exercise 06 -- a new structured kernel, sqdiff = (self - other) ** 2 (reference solution).

The yaml entries are in exercises/ex06_sqdiff.yaml. Code generation writes the functional,
in-place and out= wrappers (for CPU, CUDA and Meta) around the two classes below.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labsupport.aten.cast import cast_array
from labsupport.aten.native.binary_op_checks import sub_check
from labsupport.aten.tensor_iterator import TensorIteratorBase


class structured_sqdiff_Tensor(TensorIteratorBase):
    """at::meta::structured_sqdiff_Tensor: checks the arguments and announces the output."""

    __slots__ = ()

    def meta(self, self_: Any, other: Any) -> None:
        sub_check(self_, other)  # like sub: no bool tensors
        # Broadcast shape, promoted dtype, common device, out= checks; then set_output_raw_strided.
        self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)


class structured_sqdiff_out(structured_sqdiff_Tensor):
    """at::native::structured_sqdiff_out (CPU and simulated CUDA): computes the values into ``out``."""

    __slots__ = ()

    def impl(self, self_: Any, other: Any, out: Any) -> None:
        common = self.common_dtype.np  # type promotion already happened in meta()
        diff = np.subtract(cast_array(self_._data, common), cast_array(other._data, common))
        np.copyto(out._data, cast_array(np.multiply(diff, diff), out._data.dtype), casting="unsafe")
