"""Meta functions of the binary arithmetic ops (stands for the ``TORCH_META_FUNC2(add, Tensor)`` etc.
blocks of aten/src/ATen/native/BinaryOps.cpp, i.e. ``at::meta::structured_add_Tensor::meta``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labsupport.aten.native.binary_op_checks import alpha_check, sub_check
from labsupport.aten.tensor_iterator import TensorIteratorBase

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = ["structured_add_Tensor", "structured_sub_Tensor", "structured_mul_Tensor"]


class structured_add_Tensor(TensorIteratorBase):
    """at::meta::structured_add_Tensor: ``add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)``."""

    __slots__ = ()

    def meta(self, self_: TensorBase, other: TensorBase, alpha: object = 1) -> None:
        self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)
        if type(alpha) is not int:  # an int alpha always passes; skip the call on the hot path
            alpha_check(self.common_dtype, alpha)


class structured_sub_Tensor(TensorIteratorBase):
    """at::meta::structured_sub_Tensor: ``sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)``."""

    __slots__ = ()

    def meta(self, self_: TensorBase, other: TensorBase, alpha: object = 1) -> None:
        sub_check(self_, other)
        self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)
        if type(alpha) is not int:
            alpha_check(self.common_dtype, alpha)


class structured_mul_Tensor(TensorIteratorBase):
    """at::meta::structured_mul_Tensor: ``mul.Tensor(Tensor self, Tensor other)``."""

    __slots__ = ()

    def meta(self, self_: TensorBase, other: TensorBase) -> None:
        self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)
