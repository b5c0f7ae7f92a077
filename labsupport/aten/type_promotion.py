"""Type promotion (stands for ``promoteTypes``/``canCast`` in c10/core/ScalarType.h and
``ResultTypeState``/``result_type`` in aten/src/ATen/native/TypeProperties.cpp).

Operands of an operator are ranked in three tiers; a lower tier can only change the result dtype
if it belongs to a *higher category* (bool < integral < floating) than what the tiers above chose:

1. tensors with at least one dimension,
2. zero-dim tensors,
3. "wrapped numbers": Python scalars the binding turned into 0-dim tensors. A wrapped float counts
   as the *default* dtype (float32), not float64.
"""

from __future__ import annotations

import numpy as np

from labsupport.aten import dtype as dtypes
from labsupport.aten.dtype import dtype as DType

__all__ = [
    "promote_types", "can_cast", "result_type", "ResultTypeState",
    "update_result_type_state", "result_type_from_state", "scalar_type_of_python_number",
]


def promote_types(a: DType, b: DType) -> DType:
    """The smallest dtype both can be converted to without losing category (``torch.promote_types``).

    For the lab's dtypes this is simply: the higher category wins (bool < integral < floating);
    inside one category the wider type wins (uint8 < int32 < int64, float16 < float32 < float64, and
    bfloat16 < float32). float16 and bfloat16 are not ordered (neither holds the other's values), so
    the pair promotes to float32, as in PyTorch's table.
    """
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a._rank == b._rank and a.is_floating_point:
        return dtypes.float32  # {float16, bfloat16}: the two 16-bit floats meet in float32
    return a if a._rank >= b._rank else b


def can_cast(from_: DType, to: DType) -> bool:
    """``torch.can_cast``: casting may not go down a category (float -> int, int -> bool)."""
    return from_.category <= to.category


def scalar_type_of_python_number(value: object) -> DType:
    """The dtype a Python number has as a c10::Scalar: bool -> bool, int -> int64, float -> float64."""
    if isinstance(value, (bool, np.bool_)):
        return dtypes.bool
    if isinstance(value, (int, np.integer)):
        return dtypes.int64
    if isinstance(value, (float, np.floating)):
        return dtypes.float64
    raise TypeError(f"result_type(): expected a Tensor or a Python number, got {type(value).__name__}")


class ResultTypeState:
    """The best dtype seen so far in each tier (None stands for ScalarType::Undefined)."""

    __slots__ = ("dim_result", "zero_result", "wrapped_result")

    def __init__(self) -> None:
        self.dim_result: DType | None = None
        self.zero_result: DType | None = None
        self.wrapped_result: DType | None = None


def _promote_skip_undefined(a: DType | None, b: DType | None) -> DType | None:
    if a is None:
        return b
    if b is None:
        return a
    return promote_types(a, b)


def _combine_categories(higher: DType | None, lower: DType | None) -> DType | None:
    """Let a lower tier win only when it is of a higher category (and always over bool)."""
    if higher is not None and higher.is_floating_point:
        return higher
    if higher is dtypes.bool or (lower is not None and lower.is_floating_point):
        return _promote_skip_undefined(higher, lower)
    return higher if higher is not None else lower


def update_result_type_state(operand: object, state: ResultTypeState) -> ResultTypeState:
    """Fold one operand (a tensor or a Python number) into ``state`` (mutates and returns it)."""
    if isinstance(operand, (bool, int, float, np.bool_, np.integer, np.floating)):
        current = scalar_type_of_python_number(operand)
        if current.is_floating_point:
            current = dtypes.get_default_dtype()
        state.wrapped_result = _promote_skip_undefined(state.wrapped_result, current)
        return state
    current = operand._dtype
    if operand._wrapped_number:
        if current.is_floating_point:
            current = dtypes.get_default_dtype()
        state.wrapped_result = _promote_skip_undefined(state.wrapped_result, current)
    elif operand._sizes:
        state.dim_result = _promote_skip_undefined(state.dim_result, current)
    else:
        state.zero_result = _promote_skip_undefined(state.zero_result, current)
    return state


def result_type_from_state(state: ResultTypeState) -> DType:
    lower_tiers = _combine_categories(state.zero_result, state.wrapped_result)
    result = _combine_categories(state.dim_result, lower_tiers)
    if result is None:
        raise RuntimeError("result_type(): no operands")
    return result


def result_type(*operands: object) -> DType:
    """``torch.result_type`` generalised to any number of tensors / Python numbers."""
    state = ResultTypeState()
    for operand in operands:
        update_result_type_state(operand, state)
    return result_type_from_state(state)
