"""The meta functions of mm and bmm (stand for ``TORCH_META_FUNC(mm)`` and ``TORCH_META_FUNC(bmm)``
with ``common_checks_baddbmm_bmm`` in aten/src/ATen/native/LinearAlgebra.cpp)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labsupport.aten.tensor import TensorOptions
from labsupport.aten.tensor_meta import MetaBase

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = ["structured_mm", "structured_bmm"]


class structured_mm(MetaBase):
    """at::meta::structured_mm: two matrices whose inner sizes agree; the result has self's options."""

    __slots__ = ()

    def meta(self, self_: TensorBase, mat2: TensorBase) -> None:
        if len(self_._sizes) != 2:
            raise RuntimeError("self must be a matrix")
        if len(mat2._sizes) != 2:
            raise RuntimeError("mat2 must be a matrix")
        (n, k), (k2, m) = self_._sizes, mat2._sizes
        if k != k2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{m})")
        if self_._device is not mat2._device:
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{self_._device} and {mat2._device}!"
            )
        self.set_output_raw_strided(0, (n, m), None, TensorOptions(self_._dtype, self_._device), None)


class structured_bmm(MetaBase):
    """at::meta::structured_bmm (``common_checks_baddbmm_bmm``): two 3-D tensors [b, n, k] and
    [b, k, m]; the result [b, n, m] takes ``mat2``'s options (PyTorch 2.13 builds the output from
    batch2's options, so ``bmm(float16, int64)`` of empty tensors is int64). No device check here."""

    __slots__ = ()

    def meta(self, self_: TensorBase, mat2: TensorBase) -> None:
        if len(self_._sizes) != 3:
            raise RuntimeError("batch1 must be a 3D tensor")
        if len(mat2._sizes) != 3:
            raise RuntimeError("batch2 must be a 3D tensor")
        (batch, n, k), (batch2, k2, m) = self_._sizes, mat2._sizes
        if (batch2, k2) != (batch, k):
            raise RuntimeError(
                f"Expected size for first two dimensions of batch2 tensor to be: [{batch}, {k}] but got: "
                f"[{batch2}, {k2}]."
            )
        self.set_output_raw_strided(0, (batch, n, m), None, TensorOptions(mat2._dtype, mat2._device), None)
