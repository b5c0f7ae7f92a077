"""The base of every structured kernel class (stands for ``at::impl::MetaBase`` in ATen/TensorMeta.h).

A structured operator is split in two halves:

* ``meta()`` (at::meta::structured_<op>) checks the arguments and computes the output's sizes and
  dtype, then *announces* the output by calling ``set_output_raw_strided``;
* ``impl()`` (at::native::structured_<op>_out) computes the values into an already allocated output.

Code generation then writes one small subclass per variant (functional / inplace / out). Those
subclasses decide what "announcing an output" means: allocate a new tensor, check ``self`` for the
in-place variant, or resize the ``out=`` tensor. They provide the two methods below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase, TensorOptions

__all__ = ["MetaBase"]


class MetaBase:
    """Interface between a hand-written ``meta()`` and the generated per-variant subclasses."""

    __slots__ = ()

    def set_output_raw_strided(
        self,
        output_idx: int,
        sizes: tuple[int, ...],
        strides: tuple[int, ...] | None,
        options: TensorOptions,
        names: object = None,
    ) -> None:
        """Called by ``meta()`` once it knows output ``output_idx``'s sizes and options (generated)."""
        raise NotImplementedError(
            f"{type(self).__name__} must define set_output_raw_strided (generated code)"
        )

    def maybe_get_output(self, output_idx: int = 0) -> TensorBase | None:
        """The output tensor if the variant already has one (in-place/out), else None (generated)."""
        raise NotImplementedError(f"{type(self).__name__} must define maybe_get_output (generated code)")
