"""mm and matmul (stands for aten/src/ATen/native/LinearAlgebra.cpp: ``TORCH_META_FUNC(mm)``,
``TORCH_IMPL_FUNC(mm_out_cpu)`` with its ``addmm_impl_cpu_`` checks, and the
CompositeImplicitAutograd ``at::native::matmul``).

``mm`` is structured: ``structured_mm.meta()`` (labsupport/aten/meta/linear_algebra.py) checks ranks
and inner sizes and announces an output of ``self``'s dtype; ``impl()`` checks the dtypes (on CPU, as
PyTorch does, so a meta tensor pair of different dtypes passes) and multiplies with numpy.
Reduced-precision floats (float16, bfloat16) are multiplied in float32 and rounded once, as
PyTorch's CPU gemm accumulates them in float.

``bmm`` is structured the same way: ``structured_bmm.meta()`` checks two 3-D tensors and announces an
output with ``mat2``'s options; ``impl()`` multiplies each batch entry.

``matmul`` is a composite (``_matmul_impl``): it has no kernel of its own below Autograd, and every rank
combination ends in operators autograd knows: 1-D x 1-D ``at::dot`` (``DotBackward0``), 2-D x 1-D
``at::mv``, 1-D x 2-D ``unsqueeze(0) + mm + squeeze_(0)`` (``SqueezeBackward4``), 2-D x 2-D ``at::mm``;
larger ranks fold the big operand into a matrix for one ``mm`` / ``mv`` when ``should_fold`` says so,
and otherwise broadcast the batch dims and call ``at::bmm`` on ``expand`` + ``reshape``d operands, the
result ``_unsafe_view``ed to the broadcast shape (``UnsafeViewBackward0``). The aten calls, in order,
are PyTorch 2.13's (tests/test_linear_algebra.py logs both with a TorchDispatchMode). One difference:
PyTorch's ``Tensor::mT()`` is an operator of its own (CompositeImplicitAutograd, so a dispatch mode
sees only its ``transpose``); the lab calls ``transpose(-2, -1)`` directly, so the profiler has no
``aten::mT`` row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from labsupport.aten import _numpy_errors  # noqa: F401  (installs the warnings filter)
from labsupport.aten import dtype as dtypes
from labsupport.aten.dtype import round_to_bfloat16
from labsupport.aten.meta.linear_algebra import structured_bmm, structured_mm
from labsupport.aten.storage import tensor_strides
from labsupport.aten.tensor_iterator import infer_size

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = [
    "structured_mm_out_cpu", "structured_mm_out_cuda", "structured_bmm_out_cpu", "structured_bmm_out_cuda",
    "dot", "dot_cuda", "mv", "matmul", "should_fold",
]

_float32 = np.dtype(np.float32)


def _matmul_into(out: TensorBase, a: TensorBase, b: TensorBase) -> None:
    """``out = a @ b`` (batched or not) after the checks: half types accumulate in float32, as the
    CPU kernels do, and a bfloat16 result is rounded to bfloat16's precision."""
    if a._dtype is dtypes.float16 or a._dtype is dtypes.bfloat16:
        result = np.matmul(a._data.astype(_float32), b._data.astype(_float32))
    else:
        result = np.matmul(a._data, b._data)
    np.copyto(out._data, result, casting="unsafe")
    if out._dtype is dtypes.bfloat16:
        round_to_bfloat16(out._data)


class structured_mm_out_cpu(structured_mm):
    """at::native::structured_mm_out_cpu: ``out = self @ mat2`` (addmm_impl_cpu_ with beta 0)."""

    __slots__ = ()

    def impl(self, self_: TensorBase, mat2: TensorBase, out: TensorBase) -> None:
        if self_._dtype is not mat2._dtype:
            raise RuntimeError(
                "expected m1 and m2 to have the same dtype, but got: "
                f"{self_._dtype.typemeta_name} != {mat2._dtype.typemeta_name}"
            )
        if out._data.size == 0:
            return  # nothing to compute (checked before the dtype dispatch, as in addmm_impl_cpu_)
        if self_._sizes[1] == 0:
            out._data.fill(0)  # [n, 0] x [0, m]: a sum of nothing
            return
        if self_._dtype is dtypes.bool:
            raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
        _matmul_into(out, self_, mat2)


class structured_mm_out_cuda(structured_mm_out_cpu):
    """at::native::structured_mm_out_cuda - simulated: numpy memory, so the CPU math is reused."""

    __slots__ = ()


class structured_bmm_out_cpu(structured_bmm):
    """at::native::structured_bmm_out_cpu (``bmm_out_or_baddbmm_`` with beta 0): ``out[i] = self[i] @
    mat2[i]`` for each batch entry i. The empty cases return before any dtype check."""

    __slots__ = ()

    def impl(self, self_: TensorBase, mat2: TensorBase, out: TensorBase) -> None:
        if out._data.size == 0:
            return  # nothing to compute: no dtype check either (as in bmm_out_or_baddbmm_)
        if self_._sizes[2] == 0:
            out._data.fill(0)  # a sum of nothing
            return
        if self_._dtype is dtypes.bool:  # the type dispatch is on self's dtype ...
            raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
        if self_._dtype is not mat2._dtype:  # ... then mat2's data is read as that type
            raise RuntimeError(
                f"expected scalar type {self_._dtype.scalar_type_name} but found {mat2._dtype.scalar_type_name}"
            )
        _matmul_into(out, self_, mat2)


class structured_bmm_out_cuda(structured_bmm_out_cpu):
    """at::native::structured_bmm_out_cuda - simulated: numpy memory, so the CPU math is reused."""

    __slots__ = ()


def _vector_kernel_checks(name: str, self: TensorBase, other: TensorBase) -> None:
    """``dot_check`` (Blas.cpp): ranks, then dtypes, then lengths."""
    if len(self._sizes) != 1 or len(other._sizes) != 1:
        raise RuntimeError(
            f"1D tensors expected, but got {len(self._sizes)}D and {len(other._sizes)}D tensors"
        )
    if self._dtype is not other._dtype:
        raise RuntimeError(
            f"{name} : expected both vectors to have same dtype, but found "
            f"{self._dtype.scalar_type_name} and {other._dtype.scalar_type_name}"
        )
    if self._sizes[0] != other._sizes[0]:
        n, m = self._sizes[0], other._sizes[0]
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same number of "
            f"elements, but got {n} and {m} elements respectively"
        )


def dot(self: TensorBase, tensor: TensorBase) -> TensorBase:
    """``at::native::dot`` (CPU, aten/src/ATen/native/Blas.cpp): the sum of the elementwise products,
    a 0-dim tensor of the inputs' dtype."""
    _vector_kernel_checks("dot", self, tensor)
    dtype = self._dtype
    if dtype is dtypes.bool:
        raise NotImplementedError("\"dot\" not implemented for 'Bool'")
    if dtype is dtypes.float16 or dtype is dtypes.bfloat16:
        value = np.asarray(np.dot(self._data.astype(_float32), tensor._data.astype(_float32)))
    else:
        value = np.asarray(np.dot(self._data, tensor._data))
    data = value.astype(dtype.np)
    if dtype is dtypes.bfloat16:
        round_to_bfloat16(data)
    return type(self)._make(data, (), dtype, self._device)


def dot_cuda(self: TensorBase, tensor: TensorBase) -> TensorBase:
    """``at::native::dot_cuda`` - simulated: the CPU math on numpy memory."""
    return dot(self, tensor)


def mv(at: Any, self: TensorBase, vec: TensorBase) -> TensorBase:
    """``at::native::mv`` (CompositeExplicitAutograd): ``result = at::empty({n}, vec.options())``, then
    ``at::addmv_(result, self, vec, 0, 1)``. The lab has no addmv, so the matrix-vector product is
    computed here into the new tensor (the profiler shows ``aten::mv -> aten::empty`` where PyTorch
    also shows ``aten::addmv_``)."""
    if len(self._sizes) != 2 or len(vec._sizes) != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {len(self._sizes)}, {len(vec._sizes)}")
    n, k = self._sizes
    if vec._sizes[0] != k:
        raise RuntimeError(f"size mismatch, got input ({n}), mat ({n}x{k}), vec ({vec._sizes[0]})")
    result = at.empty((n,), vec._dtype, None, vec._device, None, None)
    if self._dtype is not vec._dtype:
        name = vec._dtype.scalar_type_name
        raise RuntimeError(
            f"addmv input tensors must have the same dtype, but got {name}, {self._dtype.scalar_type_name}, and {name}"
        )
    if result._data is None or n == 0:
        return result  # nothing to compute: addmv returns before its dtype dispatch
    if k == 0:
        result._data.fill(0)
        return result
    if vec._dtype is dtypes.bool:
        raise NotImplementedError("\"addmv_impl_cpu\" not implemented for 'Bool'")
    if vec._dtype is dtypes.float16 or vec._dtype is dtypes.bfloat16:
        product = np.matmul(self._data.astype(_float32), vec._data.astype(_float32))
    else:
        product = np.matmul(self._data, vec._data)
    np.copyto(result._data, product, casting="unsafe")
    if vec._dtype is dtypes.bfloat16:
        round_to_bfloat16(result._data)
    return result


def _requires_grad(t: TensorBase) -> bool:
    """``Tensor::requires_grad()``: a leaf's flag, or true for any tensor with a grad_fn."""
    return bool(t.requires_grad) or t.grad_fn is not None


def _matrix_transpose(at: Any, t: TensorBase) -> TensorBase:
    """``Tensor::mT()`` (CompositeImplicitAutograd ``at::native::mT``): ``transpose(-2, -1)``. The
    lab has no ``aten::mT`` operator, so the profiler shows the transpose without its mT parent."""
    return at.Tensor.transpose(t, -2, -1)


def should_fold(at: Any, tensor1: TensorBase, tensor2: TensorBase) -> bool:
    """``should_fold`` (LinearAlgebra.cpp): can the larger operand (>= 3-D, the other 1-D or 2-D) be
    folded into a matrix so that one ``mm`` / ``mv`` replaces ``bmm``? Yes when the smaller operand
    requires grad (the backward then avoids a large expanded gradient, even if folding copies); no for
    a 2-D self (the result would need a transpose and a copy); else only if the fold is a free view."""
    tensor1_larger = len(tensor1._sizes) >= len(tensor2._sizes)
    t1 = tensor1 if tensor1_larger else _matrix_transpose(at, tensor2)
    dim_t1 = len(t1._sizes)
    dim_t2 = len(tensor2._sizes) if tensor1_larger else len(tensor1._sizes)
    if not (dim_t1 >= 3 and dim_t2 <= 2):
        return False
    if _requires_grad(tensor2 if tensor1_larger else tensor1):
        return True
    if len(tensor1._sizes) == 2:
        return False
    if 0 in t1._sizes:
        return True
    shape, strides = t1._sizes, tensor_strides(t1)
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(dim_t1 - 2))


def matmul(at: Any, self: TensorBase, other: TensorBase) -> TensorBase:
    """``at::native::matmul`` -> ``_matmul_impl`` (CompositeImplicitAutograd): by the ranks, 1-D x 1-D
    is ``dot``, 2-D x 1-D ``mv``, 1-D x 2-D ``unsqueeze(0) + mm + squeeze_(0)``, 2-D x 2-D ``mm``;
    larger ranks either fold the big operand into a matrix for one ``mm`` / ``mv``
    (``should_fold``), or broadcast the batch dims, ``expand`` + ``reshape`` both operands to 3-D and
    call ``bmm``, then ``_unsafe_view`` the result to the broadcast shape."""
    tensor1, tensor2 = self, other
    dim1, dim2 = len(tensor1._sizes), len(tensor2._sizes)
    if dim1 == 0 or dim2 == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {dim1}D and {dim2}D"
        )
    tb = at.Tensor  # the C++ API: at::Tensor methods
    if dim1 == 1 and dim2 == 1:
        return at.dot(tensor1, tensor2)
    if dim1 == 2 and dim2 == 1:
        return at.mv(tensor1, tensor2)
    if dim1 == 1 and dim2 == 2:
        return tb.squeeze__dim(at.mm(tb.unsqueeze(tensor1, 0), tensor2), 0)
    if dim1 == 2 and dim2 == 2:
        return at.mm(tensor1, tensor2)
    if dim1 == 3 and dim2 == 3 and (tensor1._sizes[0] == 1) != (tensor2._sizes[0] == 1):
        # one 3-D operand has a batch of 1: squeeze it and start again ([b, n, k] @ [1, k, m] is a
        # fold into one mm); PyTorch 2.13 calls _matmul_impl again, not at::matmul
        if tensor1._sizes[0] == 1:
            return matmul(at, tb.squeeze_dim(tensor1, 0), tensor2)
        return matmul(at, tensor1, tb.squeeze_dim(tensor2, 0))
    if should_fold(at, tensor1, tensor2):
        transpose = dim2 > dim1
        t1 = _matrix_transpose(at, tensor2) if transpose else tensor1
        t2 = tensor2 if not transpose else (tb.t(tensor1) if dim1 == 2 else tensor1)
        sizes_1 = t1._sizes
        output_shape = list(sizes_1[:-1])
        folded_dim1 = int(np.prod(output_shape, dtype=np.int64))
        t2_is_matrix = len(t2._sizes) == 2
        if t2_is_matrix:
            output_shape.append(t2._sizes[1])
        t1_folded = tb.reshape(t1, [folded_dim1, sizes_1[-1]])
        if t2_is_matrix:
            output = at._unsafe_view(at.mm(t1_folded, t2), output_shape)
            return tb.contiguous(_matrix_transpose(at, output)) if transpose else output
        return at._unsafe_view(at.mv(t1_folded, t2), output_shape)
    # dim1 >= 3 or dim2 >= 3, no fold: broadcast the batch dims and call bmm
    sizes1, sizes2 = tensor1._sizes, tensor2._sizes
    n = sizes1[-2] if dim1 > 1 else 1
    m1 = sizes1[-1]
    batch_tensor1 = tuple(sizes1[: max(dim1 - 2, 0)])
    m2 = sizes2[-2] if dim2 > 1 else sizes2[0]
    p = sizes2[-1] if dim2 > 1 else 1
    batch_tensor2 = tuple(sizes2[: max(dim2 - 2, 0)])
    output_shape = list(infer_size(batch_tensor1, batch_tensor2))
    expand_batch_product = int(np.prod(output_shape, dtype=np.int64))
    tensor1_expanded = tb.reshape(tb.expand(tensor1, [*output_shape, n, m1]), [expand_batch_product, n, m1])
    vector_rhs = dim2 == 1
    tensor2_expanded = tb.expand(tensor2, [*output_shape, m2] if vector_rhs else [*output_shape, m2, p])
    if vector_rhs:
        tensor2_expanded = tb.unsqueeze(tb.reshape(tensor2_expanded, [expand_batch_product, m2]), 2)
    else:
        tensor2_expanded = tb.reshape(tensor2_expanded, [expand_batch_product, m2, p])
    if dim1 > 1:
        output_shape.append(n)
    if dim2 > 1:
        output_shape.append(p)
    product = at.bmm(tensor1_expanded, tensor2_expanded)
    if vector_rhs:
        product = tb.squeeze_dim(product, -1)
    return at._unsafe_view(product, output_shape)
