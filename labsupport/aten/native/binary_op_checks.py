"""Argument checks shared by the binary arithmetic kernels (stands for the inline helpers of
aten/src/ATen/native/BinaryOps.h: ``alpha_check`` and ``sub_check``).

They live in at::native in PyTorch but are called from the at::meta functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten import dtype as dtypes

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = ["alpha_check", "sub_check"]


def alpha_check(dtype: DType, alpha: object) -> None:
    """``alpha`` must fit the computation dtype: no bool alpha unless the result is bool, no float alpha
    for integral/bool results, never a complex alpha."""
    kind = type(alpha)
    if kind is int:  # the common case: nothing to check
        return
    is_bool = kind is bool or isinstance(alpha, np.bool_)
    if is_bool and dtype is not dtypes.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    is_complex = isinstance(alpha, (complex, np.complexfloating))
    is_integral = is_bool or isinstance(alpha, (int, np.integer))
    if not dtype.is_floating_point and not is_integral:
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if is_complex:
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")


def sub_check(self: TensorBase, other: TensorBase) -> None:
    """Subtraction is not defined on bool tensors (``-`` on masks is almost always a bug)."""
    self_is_bool = self._dtype is dtypes.bool
    other_is_bool = other._dtype is dtypes.bool
    if self_is_bool and other_is_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if self_is_bool or other_is_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
