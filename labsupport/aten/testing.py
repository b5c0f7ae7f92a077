"""Drive a structured kernel by hand, the way the generated wrappers do (a small stand-in for the
``structured_<kernel>_functional`` / ``_inplace`` / ``_out`` classes of RegisterCPU.cpp).

Used by the ATen tests and handy in a notebook to run ``meta()`` + ``impl()`` without the dispatcher::

    run_functional(structured_ufunc_add_CPU, a, b, 1)
    run_inplace(structured_ufunc_add_CPU, a, b, 1)       # a += b
    run_out(structured_ufunc_add_CPU, a, b, 1, out=c)
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from labsupport.aten.tensor import TensorBase, TensorOptions

__all__ = ["run_functional", "run_inplace", "run_out", "variant_classes", "from_numpy"]


def _allocate(sizes: tuple[int, ...], options: TensorOptions, tensor_cls: type[TensorBase]) -> TensorBase:
    data = None if options.device.type == "meta" else np.empty(sizes, options.dtype.np)
    return tensor_cls._make(data, tuple(sizes), options.dtype, options.device)


def _resize_out(out: TensorBase, sizes: tuple[int, ...], options: TensorOptions) -> None:
    """``resize_out`` of the generated code: check dtype/device, resize (with torch's warning)."""
    if options.dtype is not out._dtype:
        raise RuntimeError(
            f"Expected out tensor to have dtype {options.dtype.typemeta_name}, "
            f"but got {out._dtype.typemeta_name} instead"
        )
    if options.device is not out._device:
        raise RuntimeError(
            f"Expected out tensor to have device {options.device}, but got {out._device} instead"
        )
    sizes = tuple(sizes)
    if out._sizes != sizes:
        if out.numel() != 0:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape {list(out._sizes)}, "
                f"which does not match the required output shape {list(sizes)}. This behavior is deprecated, "
                "and in a future PyTorch release outputs will not be resized unless they have zero elements. "
                "You can explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
                "t.resize_(0).",
                UserWarning,
                stacklevel=4,
            )
        out._sizes = sizes
        if out._data is not None:
            out._data = np.zeros(sizes, out._dtype.np)
            if getattr(out, "_geometry", None) is not None:  # a fresh storage: numpy tells its geometry
                del out._geometry


def variant_classes(kernel_cls: type) -> tuple[type, type, type]:
    """Make the functional, in-place and out subclasses of a structured kernel class."""

    class Functional(kernel_cls):
        def __init__(self, tensor_cls: type[TensorBase]) -> None:
            self.outputs: list[Any] = [None]
            self.tensor_cls = tensor_cls

        def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):
            self.outputs[output_idx] = _allocate(sizes, options, self.tensor_cls)

        def maybe_get_output(self, output_idx=0):
            return self.outputs[output_idx]

    class Inplace(kernel_cls):
        def __init__(self, self_: TensorBase) -> None:
            self.outputs = [self_]

        def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):
            out = self.outputs[output_idx]
            if options.dtype is not out._dtype:
                raise RuntimeError(
                    f"Bad in-place call: input tensor dtype {out._dtype.typemeta_name} and output tensor "
                    f"dtype {options.dtype.typemeta_name} should match"
                )
            if tuple(sizes) != out._sizes:
                raise RuntimeError(
                    f"Bad in-place call: input tensor size {list(out._sizes)} and output tensor size "
                    f"{list(sizes)} should match"
                )

        def maybe_get_output(self, output_idx=0):
            return self.outputs[output_idx]

    class Out(kernel_cls):
        def __init__(self, out: TensorBase) -> None:
            self.outputs = [out]

        def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):
            _resize_out(self.outputs[output_idx], sizes, options)

        def maybe_get_output(self, output_idx=0):
            return self.outputs[output_idx]

    for cls, suffix in ((Functional, "functional"), (Inplace, "inplace"), (Out, "out")):
        cls.__name__ = cls.__qualname__ = f"{kernel_cls.__name__}_{suffix}"
    return Functional, Inplace, Out


_variants: dict[type, tuple[type, type, type]] = {}


def _get_variants(kernel_cls: type) -> tuple[type, type, type]:
    found = _variants.get(kernel_cls)
    if found is None:
        found = _variants[kernel_cls] = variant_classes(kernel_cls)
    return found


def run_functional(kernel_cls: type, *args: Any, tensor_cls: type[TensorBase] = TensorBase) -> TensorBase:
    """``op(*args)``: meta() announces a new output, impl() fills it (skipped for meta tensors)."""
    op = _get_variants(kernel_cls)[0](tensor_cls)
    op.meta(*args)
    out = op.outputs[0]
    if out._data is not None:
        op.impl(*args, out)
    return out


def run_inplace(kernel_cls: type, self_: TensorBase, *args: Any) -> TensorBase:
    """``self_.op_(*args)``: the output is ``self_`` itself."""
    op = _get_variants(kernel_cls)[1](self_)
    op.meta(self_, *args)
    if self_._data is not None:
        op.impl(self_, *args, self_)
    return self_


def run_out(kernel_cls: type, *args: Any, out: TensorBase) -> TensorBase:
    """``op(*args, out=out)``: ``out`` is checked and resized by set_output_raw_strided."""
    op = _get_variants(kernel_cls)[2](out)
    op.meta(*args)
    if out._data is not None:
        op.impl(*args, out)
    return out


def from_numpy(
    array: np.ndarray, device: str = "cpu", tensor_cls: type[TensorBase] = TensorBase
) -> TensorBase:
    """A lab tensor owning a copy of ``array`` (meta: no data)."""
    from labsupport.aten.dtype import from_numpy_dtype
    from labsupport.aten.tensor import tensor_device

    array = np.array(array, copy=True)
    dev = tensor_device(device)
    data = None if dev.type == "meta" else array
    return tensor_cls._make(data, tuple(array.shape), from_numpy_dtype(array.dtype), dev)
