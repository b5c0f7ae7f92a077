"""normal_ (stands for ``normal_`` in aten/src/ATen/native/Distributions.cpp and the CPU
normal kernel). Samples come from the lab's numpy generator, not torch's, so values differ from torch.
"""

from __future__ import annotations

from labsupport.aten import generator as lab_generator
from labsupport.aten.cast import copy_cast
from labsupport.aten.memory_overlap import assert_no_internal_overlap
from labsupport.aten.tensor import TensorBase

__all__ = ["normal_"]


def _cpp_double(value: float) -> str:
    """A double printed the way C++ streams print it by default (``-1``, ``0.5``, ``1e-07``)."""
    return f"{value:g}"


def normal_(
    self: TensorBase, mean: float = 0.0, std: float = 1.0, generator: lab_generator.Generator | None = None
) -> TensorBase:
    """Fill ``self`` in place with samples from N(mean, std**2)."""
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_cpp_double(std)}")
    assert_no_internal_overlap(self)  # TensorIterator::borrowing_nullary_op(self)
    if not self._dtype.is_floating_point:
        name = self._dtype.scalar_type_name
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{name}'")
    if self._data is None:
        return self
    gen = generator if generator is not None else lab_generator.default_generator
    samples = gen.rng.normal(mean, std, size=self._data.shape)
    copy_cast(self._data, samples, self._dtype)
    return self
