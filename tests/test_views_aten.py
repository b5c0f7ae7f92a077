"""Views in ATen: storage, strides, storage offset, the view operators, writes through views and basic
indexing. The lab alone first (what a learner relies on), then twins against PyTorch 2.13
(``torch_ref``: skipped without it), including randomized chains of view operators."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import labsupport as lab
import labsupport.torch as torch
from labsupport.aten.storage import compute_stride, contiguous_strides, infer_size

sys.path.insert(0, str(Path(__file__).parent))


def arange(*shape: int, dtype=np.float64):
    return torch.tensor(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape))


def shares(a, b) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# ------------------------------------------------------------------ 1. storage and strides


def test_fresh_tensor_is_contiguous_with_row_major_strides():
    x = torch.zeros(2, 3, 4)
    assert x.stride() == (12, 4, 1)
    assert x.stride(-1) == 1 and x.stride(0) == 12
    assert x.storage_offset() == 0 and x.is_contiguous()
    assert x.untyped_storage().nbytes() == 24 * 4
    assert x.data_ptr() == x.untyped_storage().data_ptr()


@pytest.mark.parametrize("shape, strides", [((2, 0), (1, 1)), ((0, 3), (3, 1)), ((3, 1), (1, 1)), ((), ())])
def test_strides_of_empty_size_one_and_scalar_tensors_are_pytorchs(shape, strides):
    assert torch.zeros(shape).stride() == strides
    assert contiguous_strides(shape) == strides


def test_meta_tensors_have_geometry_too():
    m = torch.zeros(3, 4, device="meta")
    assert m.stride() == (4, 1) and m.storage_offset() == 0 and m.data_ptr() == 0
    v = m.t()
    assert v.stride() == (1, 4) and not v.is_contiguous()
    s = m[1, 1:]
    assert s.shape == (3,) and s.stride() == (1,) and s.storage_offset() == 5
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 48"):
        m.as_strided((4, 4), (4, 1))


def test_bfloat16_storage_counts_two_bytes_per_element():
    x = torch.zeros(3, dtype=torch.bfloat16)
    assert x.untyped_storage().nbytes() == 6 and x.element_size() == 2
    assert x[1].data_ptr() - x.data_ptr() == 2


def test_compute_stride_merges_only_contiguous_chunks():
    assert compute_stride((3, 4), (4, 1), (12,)) == (1,)
    assert compute_stride((4, 3), (1, 4), (12,)) is None  # a transpose spans two subspaces
    assert compute_stride((4, 3), (1, 4), (2, 2, 3)) == (2, 1, 4)
    assert compute_stride((2, 3), (3, 1), (3, 2, 1)) == (2, 1, 1)
    assert infer_size((-1, 4), 12) == (3, 4)
    with pytest.raises(RuntimeError, match=r"^only one dimension can be inferred$"):
        infer_size((-1, -1), 12)


# ------------------------------------------------------------------ 2. view operators


VIEW_TABLE = [  # expr on h (3, 4) contiguous -> shape, stride, offset (facts 2.1 of the keys-beyond sheet)
    ("h.view(4, 3)", (4, 3), (3, 1), 0),
    ("r.expand(3, 4)", (3, 4), (0, 1), 0),
    ("h.t()", (4, 3), (1, 4), 0),
    ("h.transpose(0, 1)", (4, 3), (1, 4), 0),
    ("h[1]", (4,), (1,), 4),
    ("h[1:3]", (2, 4), (4, 1), 4),
    ("h[:, 1:3]", (3, 2), (4, 1), 1),
    ("h.as_strided((2, 2), (1, 4), 1)", (2, 2), (1, 4), 1),
    ("h[::2]", (2, 4), (8, 1), 0),
    ("h.unsqueeze(1)", (3, 1, 4), (4, 4, 1), 0),
    ("h[1:3][0]", (4,), (1,), 4),
    ("h.reshape(4, 3)", (4, 3), (3, 1), 0),
]


@pytest.mark.parametrize("expr, shape, stride, offset", VIEW_TABLE, ids=[row[0] for row in VIEW_TABLE])
def test_view_ops_share_storage_with_new_geometry(expr, shape, stride, offset):
    h = arange(3, 4)
    r = arange(1, 4)
    v = eval(expr)
    assert (tuple(v.shape), v.stride(), v.storage_offset()) == (shape, stride, offset)
    assert shares(v, r if expr.startswith("r") else h)
    flat = (r if expr.startswith("r") else h).numpy().ravel()
    expected = np.lib.stride_tricks.as_strided(flat[offset:], shape, [s * 8 for s in stride])
    assert v.tolist() == expected.tolist()


def test_copies_do_not_share_storage():
    h = arange(3, 4)
    assert not shares(h.t().reshape(12), h)
    assert not shares(h.clone(), h)
    assert h.t().clone().stride() == (1, 4)  # preserve_format keeps a dense layout
    assert h.expand(2, 3, 4).clone().stride() == (12, 4, 1)
    assert h.t().contiguous().stride() == (3, 1)
    assert h.contiguous() is h


ERRORS = [
    ("h.t().view(12)", RuntimeError, "view size is not compatible with input tensor's size and stride (at least one "
     "dimension spans across two contiguous subspaces). Use .reshape(...) instead."),
    ("h.view(5)", RuntimeError, "shape '[5]' is invalid for input of size 12"),
    ("h.view(-1, -1)", RuntimeError, "only one dimension can be inferred"),
    ("h.view(-2, 6)", RuntimeError, "invalid shape dimension -2 at index 0 of shape [-2, 6]"),
    ("h.select(0, 5)", IndexError, "select(): index 5 out of range for tensor of size [3, 4] at dimension 0"),
    ("h.select(2, 0)", IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    ("h.expand(2, 3)", RuntimeError, "The expanded size of the tensor (3) must match the existing size (4) at "
     "non-singleton dimension 1.  Target sizes: [2, 3].  Tensor sizes: [3, 4]"),
    ("h.expand(-1, -1, 4)", RuntimeError, "The expanded size of the tensor (-1) isn't allowed in a leading, "
     "non-existing dimension 0"),
    ("h.expand(4)", RuntimeError, "expand(torch.DoubleTensor{[3, 4]}, size=[4]): the number of sizes provided (1) "
     "must be greater or equal to the number of dimensions in the tensor (2)"),
    ("h.transpose(0, 2)", IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    ("arange(2, 3, 4).t()", RuntimeError, "t() expects a tensor with <= 2 dimensions, but self is 3D"),
    ("h.as_strided((4, 4), (4, 1))", RuntimeError, "setStorage: sizes [4, 4], strides [4, 1], storage offset 0, "
     "and itemsize 8 requiring a storage size of 128 are out of bounds for storage of size 96"),
    ("h.as_strided((2, 2), (1, 4), -1)", RuntimeError, "Tensor: invalid storage offset -1"),
    ("h.as_strided((2, 2), (1, -4))", RuntimeError, "as_strided: Negative strides are not supported at the moment, "
     "got strides: [1, -4]"),
    ("h.slice(0, 0, 2, 0)", RuntimeError, "slice step must be positive"),
    ("h.unsqueeze(3)", IndexError, "Dimension out of range (expected to be in range of [-3, 2], but got 3)"),
    ("h.squeeze((1, 1))", RuntimeError, "dim 1 appears multiple times in the list of dims"),
    ("torch.zeros(()).select(0, 0)", IndexError, "select() cannot be applied to a 0-dim tensor."),
    ("h[3]", IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    ("h[0, -5]", IndexError, "index -5 is out of bounds for dimension 1 with size 4"),
    ("h[1, 2, 3]", IndexError, "too many indices for tensor of dimension 2"),
    ("h[1.0]", IndexError, "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
     "valid indices (got float)"),
    ("h[::-1]", ValueError, "step must be greater than zero"),
    ("h[::0]", ValueError, "slice step cannot be zero"),
    ("torch.zeros(())[0]", IndexError, "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
     "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number"),
]


@pytest.mark.parametrize("expr, exc, words", ERRORS, ids=[e[0] for e in ERRORS])
def test_view_errors_use_pytorchs_type_and_words(expr, exc, words):
    h = arange(3, 4)  # noqa: F841 - used by eval
    with pytest.raises(exc) as info:
        eval(expr)
    assert str(info.value) == words


def test_composite_views_call_as_strided_through_the_dispatcher():
    h = arange(3, 4)
    with lab.profiler.profile() as prof:
        h.t()
        h[1]
        h.view(12)
        h.reshape(4, 3)
        h.t().reshape(12)
    assert prof.tree().split() == [
        "aten::t", "aten::transpose", "aten::as_strided",
        "aten::select", "aten::as_strided",
        "aten::view",
        "aten::reshape", "aten::view",
        "aten::t", "aten::transpose", "aten::as_strided",
        "aten::reshape", "aten::clone", "aten::empty", "aten::copy_", "aten::_unsafe_view",
    ]  # fmt: skip


# ------------------------------------------------------------------ 3. writes through views


def test_in_place_ops_on_views_change_the_base_and_every_other_view():
    x = torch.zeros(3, 4)
    row, col, tr = x[1], x[:, 2], x.t()
    row.add_(1)
    col.mul_(5)
    tr[0].fill_(7)
    x[2, 1:3].zero_()
    x.select(1, 3).copy_(torch.ones(3) * 2)
    assert x.tolist() == [[7.0, 0.0, 0.0, 2.0], [7.0, 1.0, 5.0, 2.0], [7.0, 0.0, 0.0, 2.0]]
    assert row.tolist() == [7.0, 1.0, 5.0, 2.0] and tr[2].tolist() == [0.0, 5.0, 0.0]


def test_out_into_a_non_contiguous_view_writes_through_its_strides():
    x = torch.zeros(3, 4)
    torch.add(torch.ones(4, 3), torch.ones(4, 3), out=x.t())
    torch.mul(arange(3), 1.0, out=x[:, 0])
    assert x.tolist() == [[0.0, 2.0, 2.0, 2.0], [1.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]


def test_a_resized_out_view_keeps_its_storage_and_offset():
    x = torch.zeros(10)
    v = x[2:4]
    with pytest.warns(UserWarning, match="was resized"):
        torch.add(torch.ones(3), torch.ones(3), out=v)
    assert v.shape == (3,) and v.storage_offset() == 2 and shares(v, x)
    assert x.tolist() == [0.0, 0.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]


OVERLAP_INTERNAL = "unsupported operation: more than one element of the written-to tensor refers to a single memory"
OVERLAP_PARTIAL = "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single"


@pytest.mark.parametrize("expr", ["e.add_(1)", "e.mul_(2)", "e.copy_(torch.ones(2, 3))", "e.normal_()",
                                  "torch.add(torch.ones(2, 3), 1, out=e)", "e.neg_()", "torch.sin(e, out=e)"])
def test_writing_to_an_expanded_tensor_is_refused(expr):
    y = torch.zeros(3)
    e = y.expand(2, 3)  # noqa: F841
    with pytest.raises(RuntimeError, match=re.escape(OVERLAP_INTERNAL)):
        eval(expr)
    assert y.tolist() == [0.0, 0.0, 0.0]


def test_fill_and_zero_may_write_to_an_expanded_tensor():
    y = torch.zeros(3)
    y.expand(2, 3).fill_(4)
    assert y.tolist() == [4.0, 4.0, 4.0]


def test_partial_overlap_between_input_and_output_is_refused_full_overlap_is_not():
    q = arange(2, 2)
    with pytest.raises(RuntimeError, match=re.escape(OVERLAP_PARTIAL)):
        q.add_(q.t())
    with pytest.raises(RuntimeError, match=re.escape(OVERLAP_PARTIAL)):
        q.view(4)[0:2].copy_(q.view(4)[1:3])
    q.add_(q)
    q[0].add_(q[1])
    assert q.tolist() == [[4.0, 8.0], [4.0, 6.0]]


# ------------------------------------------------------------------ 4. basic indexing


def test_indexing_calls_the_view_ops_pytorch_calls():
    x = arange(2, 3, 4)

    def ops(fn):
        with lab.profiler.profile() as prof:
            fn()
        return [e.name.split("::")[1] for e in prof.events() if e.depth == 0]

    assert ops(lambda: x[1, None, ::2]) == ["select", "unsqueeze", "slice"]
    assert ops(lambda: x[...]) == ["alias"]
    assert ops(lambda: x[:]) == ["slice"]  # a lone slice is never skipped
    assert ops(lambda: x[:, 0:3]) == ["alias"]  # in a tuple, a slice keeping the whole dim is
    assert ops(lambda: x[1, 2, 3]) == ["select", "select", "select"]
    assert ops(lambda: x[None, ..., None]) == ["unsqueeze", "unsqueeze"]


def test_setitem_writes_into_the_base():
    y = torch.zeros(2, 3, 4)
    y[1] = 5
    y[0, 1] = torch.ones(4)
    y[:, 2, ::2] = arange(2)
    y[0, 0, 0] = 9
    assert y[1].tolist() == [[5.0] * 4, [5.0] * 4, [0.0, 5.0, 1.0, 5.0]]  # arange(2) expanded over dim 0
    assert y[0].tolist() == [[9.0, 0.0, 0.0, 0.0], [1.0] * 4, [0.0, 0.0, 1.0, 0.0]]
    with pytest.raises(TypeError, match=r"^can't assign a NoneType to a torch.FloatTensor$"):
        y[0] = None
    with pytest.raises(RuntimeError, match=re.escape("The expanded size of the tensor (4) must match")):
        y[1] = torch.ones(3)


def test_advanced_indexing_is_named_as_not_implemented():
    with pytest.raises(NotImplementedError, match="aten::index.Tensor"):
        arange(3)[[0, 1]]


# ------------------------------------------------------------------ 5. gradients through views


def _needs_formula(name: str):
    functions = lab.torch._build.autograd_functions
    return pytest.mark.skipif(
        name not in vars(functions),
        reason=f"the generated autograd_functions does not import formulas.{name} yet (gen_autograd, h21)",
    )


@pytest.mark.parametrize("expr, grad", [
    ("x.t() * w.t()", "w"),
    ("x.transpose(0, 1) * w.t()", "w"),
    ("x.view(6) * w.reshape(6)", "w"),
    ("x.expand(2, 2, 3)", "2"),
    ("x.unsqueeze(1)", "1"),
    ("x.t().reshape(6)", "1"),
    ("x.clone() * w", "w"),
    ("x.alias()", "1"),
])  # fmt: skip
def test_gradients_through_composite_views(expr, grad):
    x = torch.ones(2, 3, requires_grad=True)
    w = arange(2, 3, dtype=np.float32)
    eval(expr).sum().backward()
    expected = {"w": w.tolist(), "1": [[1.0] * 3] * 2, "2": [[2.0] * 3] * 2}[grad]
    assert x.grad.tolist() == expected


@_needs_formula("select_backward_symint")
def test_gradients_through_select_slice_squeeze_and_as_strided():
    x = torch.ones(2, 3, requires_grad=True)
    (x[1] * 2).sum().backward()
    assert x.grad.tolist() == [[0.0] * 3, [2.0] * 3]
    x.grad = None
    x[:, 1:].sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 1.0]] * 2
    x.grad = None
    x.as_strided((2, 2), (0, 1), 1).sum().backward()  # overlapping windows add up
    assert x.grad.tolist() == [[0.0, 2.0, 2.0], [0.0, 0.0, 0.0]]
    x.grad = None
    x.unsqueeze(0).squeeze().sum().backward()
    assert x.grad.tolist() == [[1.0] * 3] * 2
