"""CPU kernel of sum over dims (stands for ``TORCH_IMPL_FUNC(sum_out)`` in
aten/src/ATen/native/ReduceOps.cpp and aten/src/ATen/native/cpu/SumKernel.cpp).

As on CPU in PyTorch, the input is first converted to the *output* dtype and summed in it: so
``sum(x_float, dtype=int64)`` truncates every element before adding, int64 sums wrap around, and bool
sums into bool are a logical "any". float16 accumulates in float32 and rounds once at the end.
Float sums may differ from torch's cascade summation in the last bits (numpy sums pairwise).
bfloat16 (float32 storage) accumulates in float32 and is rounded to bfloat16 at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten import _numpy_errors  # noqa: F401  (installs the warnings filter)
from labsupport.aten.cast import cast_array
from labsupport.aten.dtype import bfloat16, round_to_bfloat16
from labsupport.aten.meta.reduce_ops import structured_sum_dim_IntList

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = ["structured_sum_out"]


class structured_sum_out(structured_sum_dim_IntList):
    """at::native::structured_sum_out (CPU and CUDA)."""

    __slots__ = ()

    def impl(
        self,
        self_: TensorBase,
        dim: int | Sequence[int] | None,
        keepdim: bool,
        dtype: DType | None,
        out: TensorBase,
    ) -> None:
        target = out._dtype.np
        data = cast_array(self_._data, target)
        accumulate = np.float32 if target == np.float16 else target
        axes = self.reduce_dims if data.ndim else ()
        total = np.sum(data, axis=axes, dtype=accumulate, keepdims=keepdim)
        np.copyto(out._data, cast_array(np.asarray(total), target), casting="unsafe")
        if out._dtype is bfloat16:
            round_to_bfloat16(out._data)
