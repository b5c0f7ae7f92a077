"""Batching rules for the lab's operators, registered on the ``FuncTorchBatched`` key.

Stands for ``aten/src/ATen/functorch/BatchRules*.cpp`` and the generated plumbing of
``VmapGeneratedPlumbing.h``. Each operator gets a *plumbing* kernel named like PyTorch's
(``add_Tensor_generated_plumbing``): exclude ``FuncTorchBatched``, take the current vmap level, call
the operator unchanged if no argument is batched at that level, else unwrap this level's tensors
into (value, bdim), run the *rule* and wrap its result with ``makeBatched(result, bdim, level)``.

Which operator has which rule is PyTorch 2.13's (``_dispatch_dump_table``, FuncTorchBatched row):

=======================================  ========================================  =========================
operators                                rule (the function PyTorch registers)     registered at
=======================================  ========================================  =========================
add.Tensor, sub.Tensor, mul.Tensor        binary_pointwise_batch_rule               BatchRulesBinaryOps.cpp:353
add_.Tensor, sub_.Tensor, mul_.Tensor     binary_pointwise_inplace_batch_rule       BatchRulesBinaryOps.cpp:353
copy_                                     copy__batch_rule                          BatchRulesBinaryOps.cpp:353
neg, sin, cos, _to_copy                   BasicUnaryBatchRuleHelper::apply          BatchRulesUnaryOps.cpp:63
neg_, sin_, fill_.Scalar, zero_           unary_inplace_batch_rule                  BatchRulesUnaryOps.cpp:63
sum                                       sum_decomp (calls sum.dim_IntList)        BatchRulesReduceOps.cpp:458
sum.dim_IntList                           boxed_reduction_batch_rule                BatchRulesReduceOps.cpp:458
expand                                    expand_batch_rule                         BatchRulesViews.cpp:578
view, _unsafe_view                        view_batching_rule                        BatchRulesViews.cpp:578
transpose.int, t, select.int, slice.Tensor  transpose_int / t / select / slice rules  BatchRulesViews.cpp:578
unsqueeze, squeeze, squeeze.dim(s)        unsqueeze / squeeze rules                 BatchRulesViews.cpp:578
alias, clone                              BasicUnaryBatchRuleHelper::apply          BatchRulesUnaryOps.cpp:63
mm, bmm                                   mm_batch_rule, bmm_batch_rule             BatchRulesLinearAlgebra.cpp:816
squeeze_, squeeze_.dim(s) (in-place views) squeeze_dims__batching_rule              LegacyBatchingRegistrations.cpp:734
mv, dot                                   mv_batch_rule (tv_batch_rule), dot_batch_rule  BatchRulesLinearAlgebra.cpp:816
matmul, to.dtype, reshape (FTBDecomp.)   their own composite kernels               BatchRulesDecompositions.cpp:35
randn, normal_ (FuncTorchVmapMode key)    randomness kernels                        BatchRulesRandomness.cpp:375
=======================================  ========================================  =========================

``matmul`` has no rule of its own: PyTorch registers its CompositeImplicitAutograd kernel again on the
``FuncTorchBatchedDecomposition`` alias key (``OP_DECOMPOSE(matmul)``), so under vmap it runs on the
per-example shapes and reaches the rules of the ops it calls (``mm``, ``bmm``, the view ops; the dump
labels that row ``[batched kernel]``). The lab does the same with its ``at::native::matmul``, so the
per-example ranks decide.

``mm``'s and ``bmm``'s rules call ``at::matmul`` on the physical tensors, as PyTorch's do; the ``mv`` and
``dot`` rules take the path matmul would take on their physical shapes by hand (a fold into one
``at::mm`` / ``at::mv``, or ``at::bmm``), all dispatched. Under nested vmap the inner call meets the
outer level's BatchedTensor and reaches the same rules again.

The out= overloads and the factories have no rule: they reach the for-loop fallback
(batched_fallback.py), which refuses out= ops as PyTorch does. Where a PyTorch rule calls
``movedim`` / ``view`` / ``to`` (dispatched ops), the lab moves dims and casts with numpy.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from labsupport.aten.type_promotion import (
    ResultTypeState,
    promote_types,
    result_type_from_state,
    update_result_type_state,
)
from labsupport.aten.wrap_dim import maybe_wrap_dim
from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.kernel_function import KernelFunction
from labsupport.c10.tls import ExcludeDispatchKeyGuard
from labsupport.functorch.batched_tensor import (
    BATCHED_KEY,
    is_batched_at_level,
    is_batchedtensor,
    make_batched,
    move_dim,
)
from labsupport.functorch.dynamic_layer import current_layer

FUNCTORCH = "aten/src/ATen/functorch/"
BINARY = FUNCTORCH + "BatchRulesBinaryOps.cpp:353"
UNARY = FUNCTORCH + "BatchRulesUnaryOps.cpp:63"
REDUCE = FUNCTORCH + "BatchRulesReduceOps.cpp:458"
VIEWS = FUNCTORCH + "BatchRulesViews.cpp:578"
RANDOMNESS = FUNCTORCH + "BatchRulesRandomness.cpp:375"
LINALG = FUNCTORCH + "BatchRulesLinearAlgebra.cpp:816"
DECOMPOSITIONS = FUNCTORCH + "BatchRulesDecompositions.cpp:35"
LEGACY = FUNCTORCH + "LegacyBatchingRegistrations.cpp:734"

# ---- helpers (BatchRulesHelper.h) ---------------------------------------------------------------


def move_batch_dim_to_front(value: Any, bdim: int | None) -> Any:
    """``moveBatchDimToFront``: a view of ``value`` with its batch dim first."""
    if bdim is None:
        return value
    return move_dim(value, bdim, 0)


def rank_without_batch_dim(value: Any, bdim: int | None) -> int:
    """``rankWithoutBatchDim``."""
    return len(value._sizes) - (0 if bdim is None else 1)


def maybe_pad_to_logical_rank(value: Any, bdim: int | None, logical_rank: int) -> Any:
    """``maybePadToLogicalRank``: give a batched value (batch dim first) size-1 dims after the batch
    dim until it has ``logical_rank`` logical dims, so broadcasting lines up per example."""
    if bdim is None:
        return value
    missing = logical_rank - (len(value._sizes) - 1)
    if missing <= 0:
        return value
    return _reshape(value, (value._sizes[0],) + (1,) * missing + tuple(value._sizes[1:]))


def _reshape(value: Any, shape: tuple[int, ...]) -> Any:
    if is_batchedtensor(value):  # a lower level's tensor: reshape its logical dims around its bdim
        inner, bdim, level = value._bt_value, value._bt_bdim, value._bt_level
        front = move_dim(inner, bdim, 0)
        return make_batched(_reshape(front, (front._sizes[0], *shape)), 0, level)
    return type(value)._make(value._data.reshape(shape), shape, value._dtype, value._device)


def _cast(value: Any, dtype: Any) -> Any:
    """``Tensor.to(dtype)`` inside a rule (PyTorch calls at::to, a dispatched op)."""
    if value._dtype is dtype:
        return value
    if is_batchedtensor(value):
        return make_batched(_cast(value._bt_value, dtype), value._bt_bdim, value._bt_level)
    data = None if value._data is None else value._data.astype(dtype.np)
    return type(value)._make(data, value._sizes, dtype, value._device)


def logical_result_type(*operands: tuple[Any, int | None]) -> Any:
    """``at::result_type`` of the per-example tensors: a batched operand counts as 0-dim or not by
    its logical rank (``_binary_pointwise_helper`` promotes on logical tensors)."""
    state = ResultTypeState()
    for value, bdim in operands:
        if bdim is None:
            update_result_type_state(value, state)
        elif rank_without_batch_dim(value, bdim) == 0:
            state.zero_result = (
                value._dtype if state.zero_result is None else promote_types(state.zero_result, value._dtype)
            )
        else:
            state.dim_result = (
                value._dtype if state.dim_result is None else promote_types(state.dim_result, value._dtype)
            )
    return result_type_from_state(state)


def vmap_incompatible_inplace_error(name: str) -> RuntimeError:
    """``vmapIncompatibleInplaceError`` (BatchRulesHelper.h), PyTorch 2.13's words."""
    return RuntimeError(
        f"vmap: {name}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args "
        "that has more elements than `self`. This happened due to `other` being vmapped over but `self` not "
        f"being vmapped over in a vmap. Please try to use out-of-place operators instead of {name}. If said "
        "operator is being called inside the PyTorch framework, please file a bug report instead."
    )


# ---- the rules ----------------------------------------------------------------------------------


def binary_pointwise_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, other: Any, other_bdim: int | None, *extra: Any
) -> tuple[Any, int]:
    """``_binary_pointwise_batch_rule`` / ``_binary_pointwise_helper``: batch dims to the front, a
    logical scalar promoted as a 0-dim tensor would be, pad to the larger logical rank, call the op."""
    self_rank = rank_without_batch_dim(self_, self_bdim)
    other_rank = rank_without_batch_dim(other, other_bdim)
    a = move_batch_dim_to_front(self_, self_bdim)
    b = move_batch_dim_to_front(other, other_bdim)
    if (self_rank == 0 and self_bdim is not None) or (other_rank == 0 and other_bdim is not None):
        # a logical scalar is physically 1-d: promote as the per-example tensors would
        common = logical_result_type((self_, self_bdim), (other, other_bdim))
        a, b = _cast(a, common), _cast(b, common)
    rank = max(self_rank, other_rank)
    a = maybe_pad_to_logical_rank(a, self_bdim, rank)
    b = maybe_pad_to_logical_rank(b, other_bdim, rank)
    return op.call(a, b, *extra), 0


def binary_pointwise_inplace_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, other: Any, other_bdim: int | None, *extra: Any
) -> None:
    """``binary_pointwise_inplace_batch_rule``: write into self's value (batch dim moved to the
    front as a view), other padded to self's logical rank. An unbatched self with a batched other
    is refused (``vmapIncompatibleInplaceError``), except for ``add_``, whose 2.13 rule lets the
    kernel report the shape mismatch."""
    if self_bdim is None and other_bdim is not None and op.name != "aten::add_":
        raise vmap_incompatible_inplace_error("inplace arithmetic")
    self_rank = rank_without_batch_dim(self_, self_bdim)
    other_rank = rank_without_batch_dim(other, other_bdim)
    a = move_batch_dim_to_front(self_, self_bdim)
    b = move_batch_dim_to_front(other, other_bdim)
    if other_rank == 0 and other_bdim is not None and self_rank != 0:
        b = _cast(b, logical_result_type((self_, self_bdim), (other, other_bdim)))
    b = maybe_pad_to_logical_rank(b, other_bdim, self_rank)
    op.call(a, b, *extra)


def basic_unary_batch_rule(op: Any, self_: Any, self_bdim: int | None, *extra: Any) -> tuple[Any, int | None]:
    """``BasicUnaryBatchRuleHelper::apply``: the op on the value; the batch dim stays where it is."""
    return op.call(self_, *extra), self_bdim


def unary_inplace_batch_rule(op: Any, self_: Any, self_bdim: int | None, *extra: Any) -> None:
    """``unary_inplace_batch_rule`` (and fill_ / zero_): the in-place op on the whole value."""
    op.call(self_, *extra)


def boxed_reduction_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, dim: Any, keepdim: bool, dtype: Any
) -> tuple[Any, int]:
    """``boxed_reduction_batch_rule`` for sum.dim_IntList: logical dims -> physical dims + 1."""
    logical_rank = rank_without_batch_dim(self_, self_bdim)
    value = move_batch_dim_to_front(self_, self_bdim)
    if logical_rank == 0:  # a logical scalar: view it as [B, 1] and reduce the 1
        value = _reshape(value, (value._sizes[0], 1))
        dims = [maybe_wrap_dim(d, 0) + 1 for d in (dim or [0])]
        out = op.call(value, dims, keepdim, dtype)
        return out, 0
    dims = range(logical_rank) if not dim else [maybe_wrap_dim(d, logical_rank) for d in dim]
    return op.call(value, [d + 1 for d in dims], keepdim, dtype), 0


def expand_batch_rule(op: Any, self_: Any, self_bdim: int | None, size: Any, implicit: bool) -> tuple[Any, int]:
    """``expand_batch_rule`` (BatchRulesViews.cpp): view [B, *sizes] as [B, 1.., *sizes], expand."""
    self_dim = len(self_._sizes)
    size = list(size)
    if self_dim - 1 > len(size):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(size)}) must be greater or equal to the number "
            f"of dimensions in the tensor ({self_dim - 1})"
        )
    value = move_batch_dim_to_front(self_, self_bdim)
    batch_size = value._sizes[0]
    extra_dims = len(size) - (self_dim - 1)
    view_shape = (batch_size,) + (1,) * extra_dims + tuple(value._sizes[1:])
    return op.call(_reshape(value, view_shape), [batch_size, *size], implicit), 0


# ---- views (BatchRulesViews.cpp): batch dim to the front, logical dims shifted by one -------------


def _logical_front(self_: Any, self_bdim: int | None) -> tuple[Any, int]:
    value = move_batch_dim_to_front(self_, self_bdim)
    return value, len(value._sizes) - 1


def view_batching_rule(op: Any, self_: Any, self_bdim: int | None, size: Any) -> tuple[Any, int]:
    """``view_batching_rule``: view the value as [B, *size] (also ``_unsafe_view``)."""
    value, _ = _logical_front(self_, self_bdim)
    return op.call(value, [value._sizes[0], *size]), 0


def transpose_int_batch_rule(op: Any, self_: Any, self_bdim: int | None, dim0: int, dim1: int) -> tuple[Any, int]:
    """``transpose_int_batch_rule``: a logical scalar comes back as it is, else transpose dims + 1."""
    value, rank = _logical_front(self_, self_bdim)
    if rank == 0:
        return value, 0
    return op.call(value, maybe_wrap_dim(dim0, rank) + 1, maybe_wrap_dim(dim1, rank) + 1), 0


def t_batch_rule(op: Any, self_: Any, self_bdim: int | None) -> tuple[Any, int]:
    """``t``: the per-example rank check, then a transpose of the logical dims (``at::transpose``)."""
    value, rank = _logical_front(self_, self_bdim)
    if rank > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {rank}D")
    if rank < 2:
        return value, 0
    return _VIEW_HANDLES["transpose_int"].call(value, 1, 2), 0


def select_batching_rule(op: Any, self_: Any, self_bdim: int | None, dim: int, index: int) -> tuple[Any, int]:
    """``select_batching_rule``: select on the logical dim + 1."""
    value, rank = _logical_front(self_, self_bdim)
    return op.call(value, maybe_wrap_dim(dim, rank) + 1, index), 0


def slice_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, dim: int, start: Any, end: Any, step: int
) -> tuple[Any, int]:
    """``slice_batch_rule``: slice the logical dim + 1."""
    value, rank = _logical_front(self_, self_bdim)
    return op.call(value, maybe_wrap_dim(dim, rank) + 1, start, end, step), 0


def unsqueeze_batch_rule(op: Any, self_: Any, self_bdim: int | None, dim: int) -> tuple[Any, int]:
    """``unsqueeze_batch_rule``: the new dim goes after the batch dim."""
    value, rank = _logical_front(self_, self_bdim)
    return op.call(value, maybe_wrap_dim(dim, rank + 1) + 1), 0


def squeeze_batch_rule(op: Any, self_: Any, self_bdim: int | None) -> tuple[Any, int]:
    """``squeeze_batch_rule``: drop the logical size-1 dims, never the batch dim (even when B == 1)."""
    value, rank = _logical_front(self_, self_bdim)
    dims = [d + 1 for d in range(rank) if value._sizes[d + 1] == 1]
    return _VIEW_HANDLES["squeeze_dims"].call(value, dims), 0


def squeeze_dims_batch_rule(op: Any, self_: Any, self_bdim: int | None, dim: Any) -> tuple[Any, int]:
    """``squeeze_dims_batch_rule`` (also squeeze.dim): the logical dims + 1; a logical scalar stays."""
    value, rank = _logical_front(self_, self_bdim)
    if rank == 0:
        if isinstance(dim, int):
            maybe_wrap_dim(dim, 0)
        return value, 0
    if isinstance(dim, int):
        return op.call(value, maybe_wrap_dim(dim, rank) + 1), 0
    return op.call(value, [maybe_wrap_dim(d, rank) + 1 for d in dim]), 0


_VIEW_HANDLES: dict[str, Any] = {}


def copy__batch_rule(
    op: Any, self_: Any, self_bdim: int | None, src: Any, src_bdim: int | None, non_blocking: bool
) -> None:
    """``copy_`` (BatchRulesBinaryOps.cpp): self's value, batch dim first, receives src padded."""
    if self_bdim is None and src_bdim is not None:
        raise vmap_incompatible_inplace_error("inplace arithmetic")
    a = move_batch_dim_to_front(self_, self_bdim)
    b = maybe_pad_to_logical_rank(
        move_batch_dim_to_front(src, src_bdim), src_bdim, rank_without_batch_dim(self_, self_bdim)
    )
    op.call(a, b, non_blocking)


def mm_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, other: Any, other_bdim: int | None
) -> tuple[Any, int]:
    """``mm_batch_rule`` (BatchRulesLinearAlgebra.cpp): both operands must be logical matrices; batch
    dims go to the front and ``at::matmul`` on the physical tensors does the rest, bdim 0 out. matmul
    takes its own paths: a batched self alone ([B, n, k] @ [k, m]) folds into one ``at::mm`` of
    [B*n, k] @ [k, m]; a batched other is ``expand`` + ``at::bmm``."""
    self_rank = rank_without_batch_dim(self_, self_bdim)
    other_rank = rank_without_batch_dim(other, other_bdim)
    if self_rank != 2 or other_rank != 2:
        raise RuntimeError(
            f"Shape mismatch: Got incorrect dims for mm(a, b). a has dim {self_rank}and b has dim "
            f"{other_rank}but expected them to have dim 2 and dim 2"
        )  # sic: PyTorch 2.13's message has no space before "and" / "but"
    a = move_batch_dim_to_front(self_, self_bdim)
    b = move_batch_dim_to_front(other, other_bdim)
    return _MATMUL_HANDLE[0].call(a, b), 0


def bmm_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, other: Any, other_bdim: int | None
) -> tuple[Any, int]:
    """``bmm_batch_rule`` (BatchRulesLinearAlgebra.cpp): two logical 3-D tensors; batch dims to the
    front and ``at::matmul`` of the 4-D (or 3-D x 4-D) physical tensors, bdim 0 out."""
    self_rank = rank_without_batch_dim(self_, self_bdim)
    other_rank = rank_without_batch_dim(other, other_bdim)
    if self_rank != 3 or other_rank != 3:
        raise RuntimeError(
            f"Shape mismatch: Got incorrect dims for bmm(a, b). a has dim {self_rank}and b has dim "
            f"{other_rank}but expected them to have dim 3 and dim 3"
        )  # sic, as mm's
    a = move_batch_dim_to_front(self_, self_bdim)
    b = move_batch_dim_to_front(other, other_bdim)
    return _MATMUL_HANDLE[0].call(a, b), 0


def mv_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, other: Any, other_bdim: int | None
) -> tuple[Any, int]:
    """``mv_batch_rule`` -> ``tv_batch_rule`` (BatchRulesLinearAlgebra.cpp): a matrix and a vector per
    example. Both batched: [B, O, I] @ [B, I, 1] (bmm), squeezed, bdim 0. Self only: matmul folds
    [B, O, I] into one ``at::mv`` of [B*O, I]. Other only: [O, I] @ [I, B] is one ``at::mm``, bdim 1."""
    self_rank = rank_without_batch_dim(self_, self_bdim)
    other_rank = rank_without_batch_dim(other, other_bdim)
    if self_rank != 2 or other_rank != 1:
        raise RuntimeError(
            f"Shape mismatch: Got incorrect dims for mv(a, b). a has dim {self_rank}and b has dim "
            f"{other_rank}but expected them to have dim 2 and dim 1"
        )  # sic, as mm's
    if self_bdim is not None and other_bdim is not None:
        a = move_batch_dim_to_front(self_, self_bdim)
        b = move_batch_dim_to_front(other, other_bdim)
        batch, o, i = a._sizes
        out = _BMM_HANDLE[0].call(a, _reshape(b, (b._sizes[0], b._sizes[1], 1)))
        return _reshape(out, (batch, o)), 0
    if self_bdim is not None:
        a = move_batch_dim_to_front(self_, self_bdim)
        batch, o, i = a._sizes
        return _reshape(op.call(_reshape(a, (batch * o, i)), other), (batch, o)), 0
    return _MM_HANDLE[0].call(self_, move_dim(other, other_bdim, 1)), 1


def dot_batch_rule(
    op: Any, self_: Any, self_bdim: int | None, other: Any, other_bdim: int | None
) -> tuple[Any, int]:
    """``dot_batch_rule`` (BatchRulesLinearAlgebra.cpp): two vectors per example. Both batched:
    [B, 1, I] @ [B, I, 1] (bmm) squeezed to [B]; one batched: ``matmul(A, B.t())``, which is one
    ``at::mv`` ([B, I] @ [I]) or, for a batched other, ``unsqueeze(0) + at::mm + squeeze_(0)``."""
    if rank_without_batch_dim(self_, self_bdim) != 1 or rank_without_batch_dim(other, other_bdim) != 1:
        raise RuntimeError("Got wrong shapes for dot")
    a = move_batch_dim_to_front(self_, self_bdim)
    b = move_batch_dim_to_front(other, other_bdim)
    if self_bdim is not None and other_bdim is not None:
        batch, i = a._sizes
        out = _BMM_HANDLE[0].call(_reshape(a, (batch, 1, i)), _reshape(b, (b._sizes[0], b._sizes[1], 1)))
        return _reshape(out, (batch,)), 0
    if self_bdim is not None:
        return _MV_HANDLE[0].call(a, b), 0
    out = _MM_HANDLE[0].call(_reshape(a, (1, a._sizes[0])), move_dim(b, 0, 1))
    return _reshape(out, (out._sizes[1],)), 0


_MM_HANDLE: list[Any] = []
_MV_HANDLE: list[Any] = []
_BMM_HANDLE: list[Any] = []
_MATMUL_HANDLE: list[Any] = []


# ---- in-place views (LegacyBatchingRegistrations.cpp): they change the BatchedTensor itself ------


def _make_squeeze__kernel(handle: Any, squeeze_dims_: Any) -> Callable[..., Any]:
    """``squeeze_dims__batching_rule`` (and squeeze_, squeeze_.dim, which call it): squeeze the wrapped
    tensor in place at the logical dims shifted past the batch dim, then move the BatchedTensor's bdim
    left by the squeezed dims before it and refresh its logical sizes. Registered directly, with no
    plumbing, because it must update the BatchedTensor it was given."""

    def squeeze_dims__batching_rule(self_: Any, *dim: Any) -> Any:
        with ExcludeDispatchKeyGuard(BATCHED_KEY):
            if not is_batched_at_level(self_, current_layer().level):
                return handle.call(self_, *dim)
            value, bdim = self_._bt_value, self_._bt_bdim
            rank = len(self_._sizes)
            if not dim:  # squeeze_(): every logical dim of size 1
                dims = [d for d, n in enumerate(self_._sizes) if n == 1]
            else:
                dims = [dim[0]] if isinstance(dim[0], int) else list(dim[0])
            if rank == 0:
                for d in dims:
                    maybe_wrap_dim(d, 0)
                return self_
            physical = [d if d < bdim else d + 1 for d in (maybe_wrap_dim(d, rank) for d in dims)]
            new_bdim = bdim - sum(1 for d in set(physical) if d < bdim and value._sizes[d] == 1)
            squeeze_dims_.call(value, physical)
            self_._bt_bdim = new_bdim
            self_._sizes = value._sizes[:new_bdim] + value._sizes[new_bdim + 1 :]
            return self_

    return squeeze_dims__batching_rule


# ---- plumbing (VmapGeneratedPlumbing.h) -------------------------------------------------------


def _plumbing_template(
    op: Any, handle: Any, rule: Callable[..., Any], tensor_args: tuple[int, ...], inplace: bool
) -> Callable[..., Any]:
    def generated_plumbing(*args: Any) -> Any:
        with ExcludeDispatchKeyGuard(BATCHED_KEY):
            level = current_layer().level
            if not any(is_batched_at_level(args[i], level) for i in tensor_args):
                return handle.call(*args)
            rule_args: list[Any] = []
            for i, a in enumerate(args):
                if i in tensor_args:
                    if is_batched_at_level(a, level):
                        rule_args += [a._bt_value, a._bt_bdim]
                    else:
                        rule_args += [a, None]
                else:
                    rule_args.append(a)
            if inplace:
                rule(handle, *rule_args)
                return args[0]
            result, bdim = rule(handle, *rule_args)
            return make_batched(result, bdim, level)

    return generated_plumbing


def make_plumbing(
    op: Any, handle: Any, rule: Callable[..., Any], tensor_args: tuple[int, ...], inplace: bool
) -> Callable[..., Any]:
    """A kernel whose frame is named ``<op>_generated_plumbing``, as each C++ instantiation is."""
    fn = _plumbing_template(op, handle, rule, tensor_args, inplace)
    name = handle.__name__ + "_generated_plumbing"
    code = (
        fn.__code__.replace(co_name=name, co_qualname=name)
        if hasattr(fn.__code__, "co_qualname")
        else fn.__code__.replace(co_name=name)
    )
    plumbing = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    plumbing.__qualname__ = name
    return plumbing


def sum_decomp(self_: Any, dtype: Any) -> Any:
    """``sum_decomp`` (BatchRulesReduceOps.cpp): ``sum(self, range(self.dim()), false, dtype)``."""
    handle = _SUM_DIM_HANDLE[0]
    return handle.call(self_, list(range(len(self_._sizes))), False, dtype)


_SUM_DIM_HANDLE: list[Any] = []

# op full name -> (handle name in the build's _ops, rule, tensor argument positions, in place?, site)
RULES: dict[str, tuple[str, Callable[..., Any], tuple[int, ...], bool, str]] = {
    "aten::add.Tensor": ("add_Tensor", binary_pointwise_batch_rule, (0, 1), False, BINARY),
    "aten::sub.Tensor": ("sub_Tensor", binary_pointwise_batch_rule, (0, 1), False, BINARY),
    "aten::mul.Tensor": ("mul_Tensor", binary_pointwise_batch_rule, (0, 1), False, BINARY),
    "aten::add_.Tensor": ("add__Tensor", binary_pointwise_inplace_batch_rule, (0, 1), True, BINARY),
    "aten::sub_.Tensor": ("sub__Tensor", binary_pointwise_inplace_batch_rule, (0, 1), True, BINARY),
    "aten::mul_.Tensor": ("mul__Tensor", binary_pointwise_inplace_batch_rule, (0, 1), True, BINARY),
    "aten::copy_": ("copy_", copy__batch_rule, (0, 1), True, BINARY),
    "aten::neg": ("neg", basic_unary_batch_rule, (0,), False, UNARY),
    "aten::sin": ("sin", basic_unary_batch_rule, (0,), False, UNARY),
    "aten::cos": ("cos", basic_unary_batch_rule, (0,), False, UNARY),
    "aten::neg_": ("neg_", unary_inplace_batch_rule, (0,), True, UNARY),
    "aten::sin_": ("sin_", unary_inplace_batch_rule, (0,), True, UNARY),
    "aten::fill_.Scalar": ("fill__Scalar", unary_inplace_batch_rule, (0,), True, UNARY),
    "aten::zero_": ("zero_", unary_inplace_batch_rule, (0,), True, UNARY),
    "aten::sum.dim_IntList": ("sum_dim_IntList", boxed_reduction_batch_rule, (0,), False, REDUCE),
    "aten::expand": ("expand", expand_batch_rule, (0,), False, VIEWS),
    "aten::view": ("view", view_batching_rule, (0,), False, VIEWS),
    "aten::_unsafe_view": ("_unsafe_view", view_batching_rule, (0,), False, VIEWS),
    "aten::transpose.int": ("transpose_int", transpose_int_batch_rule, (0,), False, VIEWS),
    "aten::t": ("t", t_batch_rule, (0,), False, VIEWS),
    "aten::select.int": ("select_int", select_batching_rule, (0,), False, VIEWS),
    "aten::slice.Tensor": ("slice_Tensor", slice_batch_rule, (0,), False, VIEWS),
    "aten::unsqueeze": ("unsqueeze", unsqueeze_batch_rule, (0,), False, VIEWS),
    "aten::squeeze": ("squeeze", squeeze_batch_rule, (0,), False, VIEWS),
    "aten::squeeze.dim": ("squeeze_dim", squeeze_dims_batch_rule, (0,), False, VIEWS),
    "aten::squeeze.dims": ("squeeze_dims", squeeze_dims_batch_rule, (0,), False, VIEWS),
    "aten::alias": ("alias", basic_unary_batch_rule, (0,), False, UNARY),
    "aten::clone": ("clone", basic_unary_batch_rule, (0,), False, UNARY),
    "aten::_to_copy": ("_to_copy", basic_unary_batch_rule, (0,), False, UNARY),
    "aten::mm": ("mm", mm_batch_rule, (0, 1), False, LINALG),
    "aten::bmm": ("bmm", bmm_batch_rule, (0, 1), False, LINALG),
    "aten::mv": ("mv", mv_batch_rule, (0, 1), False, LINALG),
    "aten::dot": ("dot", dot_batch_rule, (0, 1), False, LINALG),
}

# Operators whose CompositeImplicitAutograd kernel is registered again on FuncTorchBatchedDecomposition
# (BatchRulesDecompositions.cpp, ``OP_DECOMPOSE``): op full name -> site.
DECOMPOSED: dict[str, str] = {
    "aten::matmul": DECOMPOSITIONS, "aten::to.dtype": DECOMPOSITIONS, "aten::reshape": DECOMPOSITIONS,
}


# ---- randomness (BatchRulesRandomness.cpp), on the FuncTorchVmapMode key -------------------------


def _random_error() -> RuntimeError:
    return RuntimeError(
        "vmap: called random operation while in randomness error mode. Please either use the 'same' or "
        "'different' randomness flags on vmap or perform the randomness operation out of vmap"
    )


def _make_randn_kernel(handle: Any) -> Callable[..., Any]:
    def randn_batching_rule(size: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any) -> Any:
        """``randn`` under vmap: an error, one draw for all ('same') or a batch of draws ('different')."""
        layer = current_layer()
        with ExcludeDispatchKeyGuard(DispatchKey.FuncTorchVmapMode):
            if layer.randomness == "error":
                raise _random_error()
            if layer.randomness == "same":
                return handle.call(size, dtype, layout, device, pin_memory)
            return make_batched(
                handle.call([layer.batch_size, *size], dtype, layout, device, pin_memory), 0, layer.level
            )

    return randn_batching_rule


def _make_normal_kernel(handle: Any) -> Callable[..., Any]:
    def normal__batching_rule(self_: Any, mean: float, std: float, generator: Any) -> Any:
        """``normal_`` under vmap: an error in 'error' mode, else the draw on the whole value."""
        layer = current_layer()
        with ExcludeDispatchKeyGuard(DispatchKey.FuncTorchVmapMode):
            if layer.randomness == "error":
                raise _random_error()
            return handle.call(self_, mean, std, generator)

    return normal__batching_rule


def register_batch_rules(build: Any, owner: object) -> list[Callable[[], None]]:
    """Register the plumbing kernels of ``RULES`` (and sum_decomp, the randomness kernels) with the
    build's dispatcher, each under the C++ site PyTorch 2.13's dump names. Returns the undo functions."""
    dispatcher = build.dispatcher
    ops = build._ops
    undo: list[Callable[[], None]] = []

    def register(full_name: str, key: DispatchKey, fn: Callable[..., Any], site: str) -> None:
        if dispatcher.operators.get(full_name) is None:
            return  # a build without this operator
        debug = f"registered at {site}"
        kernel = KernelFunction.from_unboxed(fn, debug=debug)
        undo.append(dispatcher.register_impl(full_name, key, kernel, debug, owner))

    for full_name, (handle_name, rule, tensor_args, inplace, site) in RULES.items():
        handle = getattr(ops, handle_name, None)
        if handle is None:
            continue
        register(full_name, BATCHED_KEY, make_plumbing(full_name, handle, rule, tensor_args, inplace), site)
    _MM_HANDLE[:] = [getattr(ops, "mm", None)]
    _VIEW_HANDLES.update({name: getattr(ops, name, None) for name in ("transpose_int", "squeeze_dims")})
    _MV_HANDLE[:] = [getattr(ops, "mv", None)]
    _BMM_HANDLE[:] = [getattr(ops, "bmm", None)]
    _MATMUL_HANDLE[:] = [getattr(ops, "matmul", None)]
    sum_dim = getattr(ops, "sum_dim_IntList", None)
    if sum_dim is not None:
        _SUM_DIM_HANDLE[:] = [sum_dim]
        register("aten::sum", BATCHED_KEY, sum_decomp, REDUCE)
    for full_name, site in DECOMPOSED.items():
        entry = dispatcher.operators.get(full_name)
        composite = None if entry is None else entry.kernels.get(DispatchKey.CompositeImplicitAutograd)
        if composite:  # the same kernel object: vmap runs the op's own decomposition on logical shapes
            debug = f"registered at {site}"
            undo.append(
                dispatcher.register_impl(
                    full_name, DispatchKey.FuncTorchBatchedDecomposition, composite[-1].kernel, debug, owner
                )
            )
    squeeze_dims_ = getattr(ops, "squeeze__dims", None)
    if squeeze_dims_ is not None:
        for full_name, handle_name in (("aten::squeeze_", "squeeze_"), ("aten::squeeze_.dim", "squeeze__dim"),
                                       ("aten::squeeze_.dims", "squeeze__dims")):
            register(full_name, BATCHED_KEY, _make_squeeze__kernel(getattr(ops, handle_name), squeeze_dims_), LEGACY)
    if getattr(ops, "randn", None) is not None:
        register("aten::randn", DispatchKey.FuncTorchVmapMode, _make_randn_kernel(ops.randn), RANDOMNESS)
    if getattr(ops, "normal_", None) is not None:
        register("aten::normal_", DispatchKey.FuncTorchVmapMode, _make_normal_kernel(ops.normal_), RANDOMNESS)
    return undo
