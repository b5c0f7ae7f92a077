"""Meta kernels of the non-structured in-place ops: nothing to compute, the shapes do not change.

Stands for ``fill_meta_``, ``zero_meta_`` and ``normal_meta_`` (aten/src/ATen/native/*.cpp) and
``empty_meta_symint`` (aten/src/ATen/native/MetaTensor.cpp).
"""

from __future__ import annotations

from typing import Any

from labsupport.aten.native.tensor_factories import empty_meta


def fill_meta_(self: Any, value: Any) -> Any:
    return self


def zero_meta_(self: Any) -> Any:
    return self


def normal_meta_(self: Any, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return self


def empty_meta_symint(*args: Any, **kwargs: Any) -> Any:
    return empty_meta(*args, **kwargs)
