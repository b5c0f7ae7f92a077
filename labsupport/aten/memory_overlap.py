"""Refusing writes that would read their own output (stands for aten/src/ATen/MemoryOverlap.cpp).

Views make it possible to write into memory an input is still being read from, or to write one
memory location through several elements (an expanded tensor has stride 0). TensorIterator checks
every in-place and out= call before computing:

* internal overlap: the written-to tensor has a dim of size > 1 and stride 0 (``x.expand(2, 3).add_(1)``);
* partial overlap: an input covers some, but not exactly the same, memory as the output
  (``q.add_(q.t())``). Full overlap (``x.add_(x)``) is fine: each element reads itself.

Functional calls never get here (their output is fresh), so the common path pays nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten.storage import storage_root, tensor_storage_offset, tensor_strides

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = [
    "assert_no_internal_overlap", "assert_no_partial_overlap", "check_mem_overlaps", "is_non_overlapping_and_dense",
]

_INTERNAL = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory "
    "location. Please clone() the tensor before performing the operation."
)
_PARTIAL = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def is_non_overlapping_and_dense(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """``TensorImpl::is_non_overlapping_and_dense``: some ordering of the dims is contiguous."""
    if 0 in sizes:
        return True
    expected = 1
    for d in sorted(range(len(sizes)), key=lambda d: (strides[d], sizes[d])):
        if sizes[d] == 1:
            continue
        if strides[d] != expected:
            return False
        expected *= sizes[d]
    return True


def assert_no_internal_overlap(t: TensorBase) -> None:
    """``assert_no_internal_overlap``: only the certain case (a stride-0 dim of size > 1) is refused."""
    data = t._data
    if data is None or data.flags.c_contiguous or data.flags.f_contiguous:
        return
    strides = tensor_strides(t)
    if is_non_overlapping_and_dense(t._sizes, strides):
        return
    if any(n > 1 and s == 0 for n, s in zip(t._sizes, strides)):
        raise RuntimeError(_INTERNAL)


def assert_no_partial_overlap(a: TensorBase, b: TensorBase) -> None:
    """``assert_no_partial_overlap`` via ``get_overlap_status``: same storage, both dense, and their
    byte ranges intersect without being identical windows."""
    if a is b or a._data is None or b._data is None or a._data.size == 0 or b._data.size == 0:
        return
    if not np.may_share_memory(a._data, b._data):
        return
    if storage_root(a._data) is not storage_root(b._data):
        return
    a_strides, b_strides = tensor_strides(a), tensor_strides(b)
    if not (is_non_overlapping_and_dense(a._sizes, a_strides) and is_non_overlapping_and_dense(b._sizes, b_strides)):
        return  # TOO_HARD: PyTorch lets it through
    a_begin = tensor_storage_offset(a)
    b_begin = tensor_storage_offset(b)
    a_end = a_begin + a._data.size
    b_end = b_begin + b._data.size
    if a_begin == b_begin and a_end == b_end:
        if a_strides != b_strides:
            raise RuntimeError(_PARTIAL)
        return
    if a_begin < b_end and b_begin < a_end:
        raise RuntimeError(_PARTIAL)


def check_mem_overlaps(out: TensorBase, *inputs: TensorBase) -> None:
    """``TensorIteratorBase::compute_mem_overlaps``: the output first, then each input against it."""
    assert_no_internal_overlap(out)
    for t in inputs:
        if t is not out:
            assert_no_partial_overlap(out, t)
