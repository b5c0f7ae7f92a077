"""at::meta: the hand-written ``meta()`` halves of structured kernels (shape/dtype/device + checks).

Names are re-exported lazily (``from labsupport.aten.meta import structured_add_Tensor``) so that
importing this package stays cheap and free of import cycles with ``labsupport.aten.native``.
"""

from __future__ import annotations

from labsupport.aten._lazy_exports import lazy_getattr

_EXPORTS = {
    "structured_add_Tensor": "binary_ops",
    "structured_sub_Tensor": "binary_ops",
    "structured_mul_Tensor": "binary_ops",
    "structured_neg": "unary_ops",
    "structured_sin": "unary_ops",
    "structured_cos": "unary_ops",
    "structured_sum_dim_IntList": "reduce_ops",
    "structured_mm": "linear_algebra",
    "structured_bmm": "linear_algebra",
}

__all__ = list(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
