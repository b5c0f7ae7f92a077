"""Meta functions of unary ops (stands for the ``TORCH_META_FUNC(neg)``/``CREATE_UNARY_FLOAT_META_FUNC``
blocks of aten/src/ATen/native/UnaryOps.cpp)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labsupport.aten import dtype as dtypes
from labsupport.aten.tensor_iterator import TensorIteratorBase

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = ["structured_neg", "structured_sin", "structured_cos"]


class structured_neg(TensorIteratorBase):
    """at::meta::structured_neg: the result keeps the input dtype; bool tensors are rejected."""

    __slots__ = ()

    def meta(self, self_: TensorBase) -> None:
        if self_._dtype is dtypes.bool:
            raise RuntimeError(
                "Negation, the `-` operator, on a bool tensor is not supported. "
                "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
            )
        self.build_borrowing_unary_op(self.maybe_get_output(0), self_)


class structured_sin(TensorIteratorBase):
    """at::meta::structured_sin: a "unary float op" (integer inputs give the default float dtype)."""

    __slots__ = ()

    def meta(self, self_: TensorBase) -> None:
        self.build_borrowing_unary_float_op(self.maybe_get_output(0), self_)


class structured_cos(TensorIteratorBase):
    """at::meta::structured_cos: a "unary float op" (integer inputs give the default float dtype)."""

    __slots__ = ()

    def meta(self, self_: TensorBase) -> None:
        self.build_borrowing_unary_float_op(self.maybe_get_output(0), self_)
