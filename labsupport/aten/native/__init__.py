"""at::native: the hand-written kernels. Structured kernels are classes with ``impl()`` deriving from
their at::meta class; the other kernels are plain functions.

Names are re-exported lazily (``from labsupport.aten.native import structured_ufunc_add_CPU``) so that
importing this package stays cheap and free of import cycles with ``labsupport.aten.meta``.
"""

from __future__ import annotations

from labsupport.aten._lazy_exports import lazy_getattr

_EXPORTS = {
    "structured_ufunc_add_CPU": "binary_ops",
    "structured_ufunc_add_CUDA": "binary_ops",
    "structured_sub_out": "binary_ops",
    "structured_mul_out": "binary_ops",
    "structured_neg_out": "unary_ops",
    "structured_sin_out": "unary_ops",
    "structured_cos_out": "unary_ops",
    "structured_sum_out": "reduce_ops",
    "alpha_check": "binary_op_checks",
    "sub_check": "binary_op_checks",
    "empty_cpu": "tensor_factories",
    "empty_cuda": "tensor_factories",
    "empty_meta": "tensor_factories",
    "fill_": "fill",
    "zero_": "fill",
    "copy_": "composite",
    "normal_": "distributions",
    # CompositeExplicitAutograd kernels (they take the build's functions API first)
    "sum": "composite",
    "randn": "composite",
    "zeros_symint": "composite",
    "ones": "composite",
    # views (TensorShape.cpp): per-backend view / as_strided, CompositeExplicitAutograd for the rest
    "view": "tensor_shape",
    "as_strided_tensorimpl": "tensor_shape",
    "as_strided_tensorimpl_meta_symint": "tensor_shape",
    "expand": "tensor_shape",
    "transpose": "tensor_shape",
    "t": "tensor_shape",
    "select_symint": "tensor_shape",
    "slice": "tensor_shape",
    "unsqueeze": "tensor_shape",
    "squeeze": "tensor_shape",
    "alias": "tensor_shape",
    "_unsafe_view": "tensor_shape",
    "clone": "tensor_shape",
    "reshape_symint": "tensor_shape",
    "squeeze_": "inplace_views",
    "_to_copy": "tensor_conversions",
    # CompositeImplicitAutograd kernels (same calling convention)
    "matmul": "linear_algebra",
    "mv": "linear_algebra",
    "dot": "linear_algebra",
    "dot_cuda": "linear_algebra",
    "to": "tensor_conversions",
    # structured linear algebra
    "structured_mm_out_cpu": "linear_algebra",
    "structured_mm_out_cuda": "linear_algebra",
    "structured_bmm_out_cpu": "linear_algebra",
    "structured_bmm_out_cuda": "linear_algebra",
    # what autograd dispatches (TensorFactories.cpp): allocation, *_like, new_empty_strided, detach
    "empty_strided_cpu": "tensor_like",
    "empty_strided_cuda": "tensor_like",
    "empty_strided_meta_symint": "tensor_like",
    "empty_like": "tensor_like",
    "ones_like": "tensor_like",
    "zeros_like": "tensor_like",
    "new_empty_strided_symint": "tensor_like",
    "detach": "tensor_like",
    "select_backward_symint": "tensor_like",
    "slice_backward": "tensor_like",
    # Meta kernels of non-structured ops
    "fill_meta_": "meta_kernels",
    "zero_meta_": "meta_kernels",
    "normal_meta_": "meta_kernels",
    "empty_meta_symint": "meta_kernels",
}

__all__ = list(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
