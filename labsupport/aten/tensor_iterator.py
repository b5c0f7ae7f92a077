"""The shape/dtype/device half of TensorIterator (stands for ATen/TensorIterator.h and
aten/src/ATen/TensorIterator.cpp, ``TensorIteratorBase::build`` with the binary/unary configs).

In PyTorch, ``TensorIteratorBase`` is the base class of the meta classes of elementwise structured
kernels (``at::meta::structured_add_Tensor : TensorIteratorBase``). Its ``build_*`` methods run the
steps below and then announce the output through ``set_output_raw_strided``:

1. compute_shape  - broadcast the *inputs* (outputs are resized, so they do not take part);
2. mark_resize_outputs - an in-place output cannot be resized, so it must already have that shape;
3. compute_types  - the common device, the common dtype (type promotion) and checks on ``out=``.

The lab keeps no strides and never iterates (numpy does the loops in ``impl``), but records
``common_dtype``, ``shape`` and ``device`` for the kernels. The whole result of the steps above only
depends on the operands' sizes/dtypes/devices, so it is cached: a repeated call is one dict lookup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labsupport.aten import dtype as dtypes
from labsupport.aten.memory_overlap import check_mem_overlaps
from labsupport.aten.tensor import Device, TensorOptions, tensor_device
from labsupport.aten.tensor_meta import MetaBase
from labsupport.aten.type_promotion import can_cast, result_type
from labsupport.aten.wrap_dim import format_sizes

if TYPE_CHECKING:
    from labsupport.aten.dtype import dtype as DType
    from labsupport.aten.tensor import TensorBase

__all__ = ["TensorIteratorBase", "infer_size", "clear_caches"]

_CPU = tensor_device("cpu")
_CACHE_LIMIT = 4096

# key -> (shape, common_dtype, device, output TensorOptions[, direct])
_binary_cache: dict[tuple, tuple[tuple[int, ...], DType, Device, TensorOptions, bool]] = {}
_unary_cache: dict[tuple, tuple[tuple[int, ...], DType, Device, TensorOptions]] = {}
_unary_float_cache: dict[tuple, tuple[tuple[int, ...], DType, Device, TensorOptions]] = {}


def clear_caches() -> None:
    """Forget cached setups (done automatically when the default dtype changes)."""
    _binary_cache.clear()
    _unary_cache.clear()
    _unary_float_cache.clear()


dtypes.default_dtype_listeners.append(clear_caches)


def infer_size(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``a`` and ``b`` (``infer_size`` in ATen/ExpandUtils.cpp).

    Dimensions are matched from the right; a size of 1 stretches to the other size.
    """
    ndim = max(len(a), len(b))
    result = [0] * ndim
    for i in range(ndim - 1, -1, -1):
        offset = ndim - 1 - i
        size_a = a[len(a) - 1 - offset] if offset < len(a) else 1
        size_b = b[len(b) - 1 - offset] if offset < len(b) else 1
        if size_a != size_b and size_a != 1 and size_b != 1:
            raise RuntimeError(
                f"The size of tensor a ({size_a}) must match the size of tensor b ({size_b}) "
                f"at non-singleton dimension {i}"
            )
        result[i] = size_b if size_a == 1 else size_a
    return tuple(result)


def _compute_device_and_check(
    out: TensorBase | None,
    inputs: tuple[TensorBase, ...],
    common_dtype: DType,
    allow_cpu_scalars: bool,
    enforce_safe_casting: bool,
) -> Device:
    """The per-operand checks of compute_types; returns the common device.

    The common device is the first non-CPU device among the operands (the output first). Every
    operand must be on it, except that a 0-dim CPU *input* (e.g. a wrapped Python number) may join
    tensors of another device, once. The output must be able to hold the common dtype.
    """
    operands = inputs if out is None else (out, *inputs)
    common = _CPU
    for op in operands:
        if op._device is not _CPU:
            common = op._device
            break
    cpu_scalars = 0
    for index, op in enumerate(operands):
        is_output = out is not None and index == 0
        if common is not _CPU:
            if allow_cpu_scalars and not is_output and not op._sizes and op._device is _CPU:
                cpu_scalars += 1
                if cpu_scalars > 1:
                    raise RuntimeError("Trying to pass too many CPU scalars to non-CPU kernel!")
            elif op._device is not common:
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but found at least two devices, "
                    f"{common} and {op._device}!"
                )
        if is_output and enforce_safe_casting and op._dtype is not common_dtype \
                and not can_cast(common_dtype, op._dtype):
            raise RuntimeError(
                f"result type {common_dtype.scalar_type_name} can't be cast to the desired output type "
                f"{op._dtype.scalar_type_name}"
            )
    return common


def _setup_binary(out: TensorBase | None, a: TensorBase, b: TensorBase) -> tuple:
    """The uncached work of build_borrowing_binary_op (TensorIteratorConfig for binary ops:
    promote inputs to the common dtype, cast it to the outputs, enforce safe casting, allow CPU scalars)."""
    shape = a._sizes if a._sizes == b._sizes else infer_size(a._sizes, b._sizes)
    if out is not None and (out is a or out is b) and out._sizes != shape:
        raise RuntimeError(
            f"output with shape {format_sizes(out._sizes)} doesn't match the broadcast shape "
            f"{format_sizes(shape)}"
        )
    common_dtype = result_type(a, b)
    device = _compute_device_and_check(
        out, (a, b), common_dtype, allow_cpu_scalars=True, enforce_safe_casting=True
    )
    options = TensorOptions(common_dtype, device) if out is None else TensorOptions(out._dtype, out._device)
    # Lab-only: whether the kernel may hand the operands' arrays straight to a numpy ufunc (no operand
    # to convert, and a dtype numpy holds natively: bfloat16 results need rounding).
    direct = (
        a._dtype is common_dtype and b._dtype is common_dtype and options.dtype is common_dtype
        and common_dtype is not dtypes.bfloat16
    )
    return shape, common_dtype, device, options, direct


def _setup_unary(out: TensorBase | None, a: TensorBase, promote_to_float: bool) -> tuple:
    """The uncached work of the unary builders.

    ``build_unary_op`` requires the output dtype to equal the input's ("Found dtype ... but expected ...");
    ``build_unary_float_op`` computes int/bool inputs in the default float dtype and lets the output
    be any dtype the result can be safely cast to.
    """
    common_dtype = a._dtype
    if promote_to_float:
        if not common_dtype.is_floating_point:
            common_dtype = dtypes.get_default_dtype()
    elif out is not None and out._dtype is not common_dtype:
        raise RuntimeError(
            f"Found dtype {out._dtype.scalar_type_name} but expected {common_dtype.scalar_type_name}"
        )
    device = _compute_device_and_check(
        out, (a,), common_dtype, allow_cpu_scalars=False, enforce_safe_casting=promote_to_float
    )
    options = TensorOptions(common_dtype, device) if out is None else TensorOptions(out._dtype, out._device)
    return a._sizes, common_dtype, device, options


def _remember(cache: dict, key: tuple, entry: tuple) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = entry


class TensorIteratorBase(MetaBase):
    """Base of the meta classes of elementwise structured kernels (at::TensorIteratorBase).

    After a ``build_*`` call: ``shape`` (the output sizes), ``common_dtype`` (the dtype the kernel
    computes in) and ``device`` are set, and ``set_output_raw_strided(0, ...)`` has been called.
    A binary build also sets ``direct`` (lab-only, decided once per cached set-up): every operand
    already has the common dtype and that dtype is native to numpy, so the kernel can apply its
    ufunc to the arrays as they are.
    """

    __slots__ = ("shape", "common_dtype", "device", "direct")

    def build_borrowing_binary_op(self, out: TensorBase | None, a: TensorBase, b: TensorBase) -> None:
        """Set up ``out = op(a, b)`` with broadcasting and type promotion; ``out`` is None for functional."""
        # _tkey packs dtype, device and the wrapped-number flag (see TensorBase): with the sizes, it is
        # everything the set-up below depends on, so the key stays short and cheap to hash.
        if out is None:
            key = (a._sizes, b._sizes, a._tkey, b._tkey)
        else:  # in-place / out=: refuse overlapping memory first (compute_mem_overlaps)
            check_mem_overlaps(out, a, b)
            key = (a._sizes, b._sizes, a._tkey, b._tkey, out._tkey, out is a, out is b)
        entry = _binary_cache.get(key)
        if entry is None:
            entry = _setup_binary(out, a, b)
            _remember(_binary_cache, key, entry)
        self.shape, self.common_dtype, self.device, options, self.direct = entry
        self.set_output_raw_strided(0, self.shape, None, options, None)

    def build_borrowing_unary_op(self, out: TensorBase | None, a: TensorBase) -> None:
        """Set up ``out = op(a)`` where the result keeps ``a``'s dtype (neg, abs, ...)."""
        if out is None:
            key = (a._sizes, a._dtype, a._device)
        else:
            check_mem_overlaps(out, a)
            key = (a._sizes, a._dtype, a._device, out._dtype, out._device, out is a)
        entry = _unary_cache.get(key)
        if entry is None:
            entry = _setup_unary(out, a, promote_to_float=False)
            _remember(_unary_cache, key, entry)
        self.shape, self.common_dtype, self.device, options = entry
        self.set_output_raw_strided(0, self.shape, None, options, None)

    def build_borrowing_unary_float_op(self, out: TensorBase | None, a: TensorBase) -> None:
        """Set up ``out = op(a)`` computed in floating point (sin, cos): int/bool inputs give the
        default dtype."""
        if out is None:
            key = (a._sizes, a._dtype, a._device)
        else:
            check_mem_overlaps(out, a)
            key = (a._sizes, a._dtype, a._device, out._dtype, out._device, out is a)
        entry = _unary_float_cache.get(key)
        if entry is None:
            entry = _setup_unary(out, a, promote_to_float=True)
            _remember(_unary_float_cache, key, entry)
        self.shape, self.common_dtype, self.device, options = entry
        self.set_output_raw_strided(0, self.shape, None, options, None)

    # The non-borrowing spellings PyTorch also has; the lab never owns copies, so they are the same.
    build_binary_op = build_borrowing_binary_op
    build_unary_op = build_borrowing_unary_op
    build_unary_float_op = build_borrowing_unary_float_op
