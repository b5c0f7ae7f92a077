"""Scalar types (stands for c10/core/ScalarType.h and torch/csrc/Dtype.cpp).

A ``dtype`` is an immutable singleton: compare with ``is`` or ``==`` (identity), which keeps
dictionary keys that contain dtypes cheap on the dispatcher's hot path.

``bfloat16`` (c10/util/BFloat16.h) has no numpy counterpart. The lab stores it honestly but not
compactly: a bfloat16 tensor's data is a **float32** numpy array whose every value is a bfloat16 value
(the upper 16 bits of a float32; the lower 16 are zero). Every kernel that writes a bfloat16 output
rounds what it computed to bfloat16 with round-to-nearest-even, as ``c10::round_to_nearest_even`` does
(``round_to_bfloat16`` below), so values, printing and type promotion are PyTorch's; only the memory
use (4 bytes an element instead of 2) differs, and ``element_size()`` still says 2.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

__all__ = [
    "dtype", "bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64",
    "half", "float", "double", "long", "all_dtypes", "round_to_bfloat16",
    "get_default_dtype", "set_default_dtype", "from_numpy_dtype",
    "BOOL_CATEGORY", "INTEGRAL_CATEGORY", "FLOATING_CATEGORY",
]

_builtin_bool = bool

BOOL_CATEGORY = 0
INTEGRAL_CATEGORY = 1
FLOATING_CATEGORY = 2


_dtype_codes = itertools.count()


class dtype:
    """One scalar type, e.g. ``torch.float32`` (c10::ScalarType + the Python ``torch.dtype`` object)."""

    __slots__ = (
        "name", "is_floating_point", "is_signed", "itemsize", "np", "category", "_rank",
        "scalar_type_name", "typemeta_name", "_code",
    )

    def __init__(
        self, name: str, np_dtype: str, category: int, is_signed: _builtin_bool, rank: int,
        scalar_type_name: str, typemeta_name: str, itemsize: int | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        # How C++ error messages spell the type: c10::toString(ScalarType) ("Float", "Long") and the
        # caffe2::TypeMeta name ("float", "long int") used by e.g. the generated resize_out check.
        object.__setattr__(self, "scalar_type_name", scalar_type_name)
        object.__setattr__(self, "typemeta_name", typemeta_name)
        object.__setattr__(self, "np", np.dtype(np_dtype))
        # The element size PyTorch reports (bfloat16: 2, although the lab stores it in float32).
        object.__setattr__(self, "itemsize", itemsize if itemsize is not None else np.dtype(np_dtype).itemsize)
        object.__setattr__(self, "category", category)
        object.__setattr__(self, "is_floating_point", category == FLOATING_CATEGORY)
        object.__setattr__(self, "is_signed", is_signed)
        # Position inside its category, used by type promotion (bigger rank wins).
        object.__setattr__(self, "_rank", rank)
        # A small even number unique to this dtype: part of a tensor's meta-cache key (TensorBase._tkey).
        object.__setattr__(self, "_code", 2 * next(_dtype_codes))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"'torch.dtype' object attribute '{key}' is read-only")

    @property
    def is_complex(self) -> _builtin_bool:
        return False

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Callable[[str], dtype], tuple[str]]:
        # Unpickling must give back the singleton, not a copy.
        return (_lookup, (self.name,))


bool = dtype("bool", "bool", BOOL_CATEGORY, False, 0, "Bool", "bool")
uint8 = dtype("uint8", "uint8", INTEGRAL_CATEGORY, False, 0, "Byte", "unsigned char")
int32 = dtype("int32", "int32", INTEGRAL_CATEGORY, True, 1, "Int", "int")
int64 = dtype("int64", "int64", INTEGRAL_CATEGORY, True, 2, "Long", "long int")
float16 = dtype("float16", "float16", FLOATING_CATEGORY, True, 0, "Half", "c10::Half")
# Stored as float32 rounded to bfloat16 (see the module docstring); rank 0 like float16: the two are
# not ordered, so type promotion handles the pair (float16, bfloat16) -> float32 on its own.
bfloat16 = dtype("bfloat16", "float32", FLOATING_CATEGORY, True, 0, "BFloat16", "c10::BFloat16", itemsize=2)
float32 = dtype("float32", "float32", FLOATING_CATEGORY, True, 1, "Float", "float")
float64 = dtype("float64", "float64", FLOATING_CATEGORY, True, 2, "Double", "double")

# The aliases torch offers (torch.half is torch.float16, and so on).
half = float16
float = float32
double = float64
long = int64

# The dtypes numpy holds natively. bfloat16 is kept apart: its numpy storage type is float32's, so
# it cannot round-trip through numpy (``tensor.numpy()`` of a bfloat16 tensor raises, as in torch).
all_dtypes: tuple[dtype, ...] = (bool, uint8, int32, int64, float16, float32, float64)

_by_name = {d.name: d for d in (*all_dtypes, bfloat16)}
_by_numpy = {d.np: d for d in all_dtypes}


def round_to_bfloat16(data: np.ndarray) -> np.ndarray:
    """Round float32 ``data`` in place to the nearest bfloat16 value, ties to even
    (``c10::round_to_nearest_even`` in c10/util/BFloat16.h); returns ``data``.

    A bfloat16 is the upper half of a float32: add 0x7FFF plus the lowest kept bit, then clear the
    lower 16 bits. NaN stays NaN (c10 makes it the quiet NaN 0x7FC0); overflow rounds to inf.
    """
    bits = data.view(np.uint32)
    nan = np.isnan(data)
    bits += ((bits >> 16) & 1) + np.uint32(0x7FFF)
    bits &= np.uint32(0xFFFF0000)
    if nan.any():
        data[nan] = np.nan
    return data


def _lookup(name: str) -> dtype:
    return _by_name[name]


def from_numpy_dtype(np_dtype: np.dtype | type) -> dtype:
    """The lab dtype for a numpy dtype (torch/csrc/utils/tensor_numpy.cpp ``numpy_dtype_to_aten``)."""
    try:
        return _by_numpy[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(np_dtype).name}. "
            "The only supported types are: "
            + ", ".join(f"{d.np.name}" for d in all_dtypes) + "."
        ) from None


# --- the default dtype (torch.get_default_dtype / torch.set_default_dtype) -------------------------

_default_dtype: dtype = float32

# Callables run after the default dtype changes; caches keyed on dtypes register here
# (a Python float becomes a tensor of the *default* dtype, so such caches go stale).
default_dtype_listeners: list[Callable[[], None]] = []


def get_default_dtype() -> dtype:
    """The dtype Python floats turn into (c10::get_default_dtype)."""
    return _default_dtype


def set_default_dtype(d: dtype) -> None:
    """Change the default floating dtype; only floating types are allowed, as in torch."""
    global _default_dtype
    if not isinstance(d, dtype):
        raise TypeError("invalid dtype object: only floating-point types are supported as the default type")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default_dtype = d
    for listener in default_dtype_listeners:
        listener()
