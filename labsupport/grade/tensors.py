"""Small helpers the exercise checks share: random shapes and arrays, tensors of a given build,
comparisons, and a scratch folder for builds."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")


def scratch_dir(name: str) -> Path:
    """A fresh folder under the worker's temporary folder (removed by the parent when grading ends)."""
    root = os.environ.get("LAB_GRADE_TMP")
    base = Path(root) if root else Path(tempfile.mkdtemp(prefix="lab-grade-"))
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def random_shape(rng: Any, *, min_dims: int = 0, max_dims: int = 3, max_size: int = 4) -> tuple[int, ...]:
    ndim = int(rng.integers(min_dims, max_dims + 1))
    return tuple(int(s) for s in rng.integers(1, max_size + 1, size=ndim))


def broadcast_partner(rng: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape``: some sizes set to 1, maybe fewer leading dims."""
    dims = [1 if rng.random() < 0.3 else s for s in shape]
    drop = int(rng.integers(0, len(dims) + 1)) if dims and rng.random() < 0.3 else 0
    return tuple(dims[drop:])


def random_array(rng: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random values of a numpy dtype: normals for floats, small integers (no overflow) for ints."""
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(-20, 21, size=shape).astype(dtype)


def make(
    tensor_type: type,
    array: np.ndarray | None,
    *,
    shape: tuple[int, ...] | None = None,
    dtype: str | None = None,
    device: str = "cpu",
) -> Any:
    """A tensor of ``tensor_type`` holding a copy of ``array`` (no data on the meta device)."""
    from labsupport.aten import dtype as dtypes
    from labsupport.aten.tensor import tensor_device

    if array is not None:
        shape, dtype = tuple(array.shape), str(array.dtype)
    assert shape is not None and dtype is not None
    dev = tensor_device(device)
    data = None if dev.type == "meta" or array is None else np.array(array, copy=True)
    return tensor_type._make(data, tuple(shape), dtypes.from_numpy_dtype(np.dtype(dtype)), dev)


def describe(t: Any) -> str:
    """``float32[2, 3] on cpu``."""
    try:
        return f"{t._dtype.name}{list(t._sizes)} on {t._device}"
    except AttributeError:
        return f"{type(t).__name__} (not a tensor)"


def same_values(got: np.ndarray, expected: np.ndarray, *, exact: bool = False) -> bool:
    """Equal shapes and values (floats: within a few ulps, NaNs equal)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return False
    if exact or got.dtype.kind in "biu":
        return bool(np.array_equal(got, expected))
    tol = 1e-5 if got.dtype == np.float32 else 1e-12
    return bool(np.allclose(got, expected, rtol=tol, atol=tol, equal_nan=True))


def short(array: Any, limit: int = 80) -> str:
    """A numpy array as one short line."""
    text = np.array2string(np.asarray(array), precision=4, separator=", ", threshold=8).replace("\n", "")
    return text if len(text) <= limit else text[: limit - 3] + "..."
