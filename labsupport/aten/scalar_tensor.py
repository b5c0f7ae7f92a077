"""Python numbers as tensors: ``scalar_to_tensor`` plus the "wrapped number" flag.

Stands for ``ATen/ScalarOps.h`` (``scalar_to_tensor``) and ``TensorImpl::set_wrapped_number``. When a
Python number meets a Tensor parameter of an operator whose binding allows it (``torch.add(x, 2)``;
in PyTorch only add, sub, mul, div and a few relatives: ``torch._C._should_allow_numbers_as_tensors``),
the binding wraps it as a 0-dim CPU tensor of dtype int64, float64 or bool; the wrapped-number flag
puts it in the lowest type-promotion tier, so ``float32_tensor + 2.5`` stays float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labsupport.aten import dtype as dtypes
from labsupport.aten.tensor import tensor_device

_CPU = tensor_device("cpu")


def wrapped_scalar_tensor(value: Any, tensor_cls: type) -> Any:
    """A 0-dim wrapped-number tensor holding ``value``."""
    if isinstance(value, bool):
        dtype = dtypes.bool
    elif isinstance(value, int):
        dtype = dtypes.int64
    elif isinstance(value, float):
        dtype = dtypes.float64
    else:
        raise TypeError(f"expected a Python number, got {type(value).__name__}")
    t = tensor_cls._make(np.array(value, dtype=dtype.np), (), dtype, _CPU)
    t._tkey |= 1  # TensorImpl::set_wrapped_number(true): the wrapped-number bit of _tkey
    return t
