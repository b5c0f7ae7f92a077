"""The tensor data structure (stands for c10/core/TensorImpl.h, c10/core/Device.h,
c10/core/TensorOptions.h and ATen/core/TensorBase.h).

``TensorBase`` holds exactly what the dispatcher and the kernels need: a numpy buffer, sizes,
dtype, device, the raw dispatch key set and the autograd fields. Everything here is plain
Python (like the inline accessors of TensorImpl); operators are dispatched elsewhere.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from labsupport.aten import dtype as dtypes
from labsupport.aten import storage as _storage
from labsupport.aten.cast import cast_to
from labsupport.aten.dtype import dtype as DType
from labsupport.c10 import autograd_state as _autograd_state

__all__ = [
    "Device", "TensorOptions", "TensorBase", "Size", "VersionCounter", "make_tensor",
    "compute_key_set", "tensor_device", "tensor_data_to_numpy",
    "set_inference_mode_enabled", "is_inference_mode_enabled",
    "CPU_BIT", "CUDA_BIT", "META_BIT", "DENSE_BIT", "AD_INPLACE_OR_VIEW_BIT",
    "AUTOGRAD_FUNCTIONALITY_BIT", "AUTOCAST_CPU_BIT", "AUTOCAST_CUDA_BIT",
    "CPU_KEY_SET", "CUDA_KEY_SET", "META_KEY_SET",
    "CPU_INFERENCE_KEY_SET", "CUDA_INFERENCE_KEY_SET", "META_INFERENCE_KEY_SET",
]


# --- raw DispatchKeySet bits (c10/core/DispatchKeySet.h, PyTorch 2.13 layout) -----------------------
#
# A key set is a 64-bit integer. The low 16 bits say *which backend* (bit = BackendComponent - 1),
# the bits from 16 up say *which functionality* (bit = 16 + functionality key value - 1).
# "AutogradCPU" is not a bit of its own: it is the Autograd functionality bit + the CPU backend bit.

def _backend_bit(backend_component: int) -> int:
    return 1 << (backend_component - 1)


def _functionality_bit(functionality_value: int) -> int:
    return 1 << (16 + functionality_value - 1)


CPU_BIT = _backend_bit(1)                         # BackendComponent::CPUBit   -> bit 0
CUDA_BIT = _backend_bit(2)                        # BackendComponent::CUDABit  -> bit 1
META_BIT = _backend_bit(16)                       # BackendComponent::MetaBit  -> bit 15
DENSE_BIT = _functionality_bit(1)                 # DispatchKey::Dense          -> bit 16
AD_INPLACE_OR_VIEW_BIT = _functionality_bit(19)   # DispatchKey::ADInplaceOrView -> bit 34
AUTOGRAD_FUNCTIONALITY_BIT = _functionality_bit(21)  # DispatchKey::AutogradFunctionality -> bit 36
AUTOCAST_CPU_BIT = _functionality_bit(24)         # DispatchKey::AutocastCPU    -> bit 39
AUTOCAST_CUDA_BIT = _functionality_bit(32)        # DispatchKey::AutocastCUDA   -> bit 47

_AUTOGRAD_BITS = AD_INPLACE_OR_VIEW_BIT | AUTOGRAD_FUNCTIONALITY_BIT

# What a freshly created tensor carries (TensorImpl constructor). Meta has no Autocast key.
CPU_KEY_SET = CPU_BIT | DENSE_BIT | _AUTOGRAD_BITS | AUTOCAST_CPU_BIT        # 0x9400010001
CUDA_KEY_SET = CUDA_BIT | DENSE_BIT | _AUTOGRAD_BITS | AUTOCAST_CUDA_BIT     # 0x801400010002
META_KEY_SET = META_BIT | DENSE_BIT | _AUTOGRAD_BITS                         # 0x1400018000
# Inference tensors drop the autograd keys (ADInplaceOrView + Autograd<Backend>).
CPU_INFERENCE_KEY_SET = CPU_KEY_SET & ~_AUTOGRAD_BITS                        # 0x8000010001
CUDA_INFERENCE_KEY_SET = CUDA_KEY_SET & ~_AUTOGRAD_BITS                      # 0x800000010002
META_INFERENCE_KEY_SET = META_KEY_SET & ~_AUTOGRAD_BITS                      # 0x18000

_KEY_SETS = {
    "cpu": (CPU_KEY_SET, CPU_INFERENCE_KEY_SET),
    "cuda": (CUDA_KEY_SET, CUDA_INFERENCE_KEY_SET),
    "meta": (META_KEY_SET, META_INFERENCE_KEY_SET),
}


def compute_key_set(device: Device | str, inference: bool = False) -> int:
    """The raw key set a new tensor on ``device`` gets (TensorImpl's constructor).

    ``requires_grad`` plays no part: every normal tensor carries the autograd keys, exactly as in torch.
    """
    normal, inference_ks = _KEY_SETS[Device(device).type]
    return inference_ks if inference else normal


# --- inference mode hook -------------------------------------------------------------------------
# The flag lives in c10 (c10/autograd_state.py; c10::InferenceMode flips it). TensorBase._make reads
# this module-level copy, kept current by a subscription, to give tensors created inside the guard
# the inference key set. PyTorch keeps it thread-local; the lab keeps one process-wide flag for speed.

_inference_mode_enabled = False


def _follow_inference_mode(enabled: bool) -> None:
    global _inference_mode_enabled
    _inference_mode_enabled = enabled


_autograd_state.on_inference_mode_change(_follow_inference_mode)


def set_inference_mode_enabled(enabled: bool) -> None:
    """Set c10's inference flag (what the InferenceMode guard does on enter/exit)."""
    _autograd_state.set_inference_mode_enabled(enabled)


def is_inference_mode_enabled() -> bool:
    return _inference_mode_enabled


# --- Device (c10/core/Device.h) -----------------------------------------------------------------

_TORCH_DEVICE_TYPES = (
    "cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, vulkan, mps, "
    "meta, hpu, mtia, privateuseone"
)
_DEVICE_RE = re.compile(r"([a-z_]+)(?::(.*))?\Z")


_device_codes = itertools.count(1)


class Device:
    """A device: ``cpu``, ``meta`` or (simulated) ``cuda``.

    "cuda" is SIMULATED: such a tensor keeps its data in numpy host memory like a CPU tensor, but it
    carries the CUDA dispatch keys, so the dispatcher routes it to the CUDA kernels.
    Devices are interned (one object per (type, index)), so ``==`` and hashing are identity-based and fast.
    """

    __slots__ = ("type", "index", "_ks", "_ks_inference", "_code", "__weakref__")
    _interned: dict[tuple[str, int | None], Device] = {}

    def __new__(cls, type: Device | str, index: int | None = None) -> Device:
        if isinstance(type, Device):
            if index is None:
                return type
            type = type.type
        if not isinstance(type, str):
            raise TypeError(f"device(): argument 'type' must be str, not {_type_name(type)}")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise TypeError(f"device(): argument 'index' (position 2) must be int, not {_type_name(index)}")
        key = (type, index)
        found = cls._interned.get(key)
        if found is not None:
            return found
        dev_type, dev_index = _parse_device(type, index)
        canonical = cls._interned.get((dev_type, dev_index))
        if canonical is None:
            canonical = object.__new__(cls)
            canonical.type = dev_type
            canonical.index = dev_index
            canonical._ks, canonical._ks_inference = _KEY_SETS[dev_type]
            # A multiple of 64 unique to this device: part of a tensor's meta-cache key (_tkey).
            canonical._code = 64 * next(_device_codes)
            cls._interned[(dev_type, dev_index)] = canonical
        cls._interned[key] = canonical
        return canonical

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __reduce__(self) -> tuple[type, tuple[str, int | None]]:
        return (Device, (self.type, self.index))


def _type_name(obj: object) -> str:
    return type(obj).__name__


def _parse_device(text: str, index: int | None) -> tuple[str, int | None]:
    """Split 'cuda:0' into ('cuda', 0), with torch's error messages."""
    match = _DEVICE_RE.match(text)
    if match is None:
        raise RuntimeError(f"Invalid device string: '{text}'")
    dev_type, index_text = match.group(1), match.group(2)
    if dev_type not in _KEY_SETS:
        if f" {dev_type}," in f" {_TORCH_DEVICE_TYPES},":
            raise RuntimeError(
                f"Dispatcher Lab only has cpu, cuda (simulated) and meta devices, got {dev_type}"
            )
        raise RuntimeError(
            f"Expected one of {_TORCH_DEVICE_TYPES} device type at start of device string: {text}"
        )
    if index_text is not None:
        if index is not None:
            raise RuntimeError(
                f"type (string) must not include an index because index was passed explicitly: {text}"
            )
        if not index_text.isdigit() or (len(index_text) > 1 and index_text[0] == "0"):
            raise RuntimeError(f"Invalid device string: '{text}'")
        index = int(index_text)
    if index is not None and index < 0:
        raise RuntimeError("Device index must not be negative")
    return dev_type, index


def tensor_device(device: Device | str | None) -> Device:
    """The device a tensor created "on ``device``" reports: cpu/meta drop the index, cuda gets index 0.

    (In torch a CUDA tensor always knows its index; 'cuda' means the current device, here always 0.)
    """
    if device is None:
        return _CPU
    device = Device(device)
    if device.type == "cuda":
        return device if device.index is not None else _CUDA0
    return _CPU if device.type == "cpu" else _META


_CPU = Device("cpu")
_META = Device("meta")
_CUDA0 = Device("cuda", 0)


# --- TensorOptions (c10/core/TensorOptions.h) -----------------------------------------------------

class TensorOptions:
    """The (dtype, device) pair used to describe an output to be allocated. Layout is always strided.

    Interned like Device, so options objects can be cached and compared cheaply.
    """

    __slots__ = ("dtype", "device", "__weakref__")
    layout = "strided"
    _interned: dict[tuple[DType | None, Device | None], TensorOptions] = {}

    def __new__(cls, dtype: DType | None = None, device: Device | str | None = None) -> TensorOptions:
        if device is not None and not isinstance(device, Device):
            device = Device(device)
        key = (dtype, device)
        found = cls._interned.get(key)
        if found is None:
            found = object.__new__(cls)
            found.dtype = dtype
            found.device = device
            cls._interned[key] = found
        return found

    def with_dtype(self, dtype: DType | None) -> TensorOptions:
        return TensorOptions(dtype, self.device)

    def with_device(self, device: Device | str | None) -> TensorOptions:
        return TensorOptions(self.dtype, device)

    def __repr__(self) -> str:
        return f"TensorOptions(dtype={self.dtype}, device={self.device}, layout=strided)"

    def __reduce__(self) -> tuple[type, tuple[DType | None, Device | None]]:
        return (TensorOptions, (self.dtype, self.device))


# --- Size and the version counter ----------------------------------------------------------------

class Size(tuple):
    """``torch.Size``: a tuple of ints that prints as ``torch.Size([2, 3])``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"torch.Size([{', '.join(str(s) for s in self)}])"

    __str__ = __repr__

    def numel(self) -> int:
        return math.prod(self)


class VersionCounter:
    """How many times a tensor's data was modified in place (c10::VariableVersion).

    A tensor's ``_version_counter`` slot holds one; views and detached aliases share the same object.
    The ADInplaceOrView kernels bump ``value``; autograd saves ``value`` and checks it later.
    """

    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        self.value = value

    def bump(self) -> None:
        self.value += 1

    def __repr__(self) -> str:
        return f"VersionCounter({self.value})"


# --- TensorBase (c10::TensorImpl + at::TensorBase) ------------------------------------------------

def make_tensor(
    cls: type[TensorBase],
    data: np.ndarray | None,
    sizes: tuple[int, ...],
    dtype: DType,
    device: Device,
    requires_grad: bool = False,
) -> TensorBase:
    """A new ``cls`` tensor around ``data``: the unchecked constructor every op output goes through
    (``make_intrusive<TensorImpl>`` in C++). Also reachable as ``cls._make(data, sizes, dtype, device)``.

    ``device`` must be a tensor device (see ``tensor_device``) and ``data`` must already have the
    right shape and dtype. Tensor classes define no ``__init__``, so ``cls()`` only allocates (and
    is cheaper than ``object.__new__(cls)``).
    """
    t = cls()
    t._data = data
    t._sizes = sizes
    t._dtype = dtype
    t._device = device
    t._ks = device._ks_inference if _inference_mode_enabled else device._ks
    t._tkey = dtype._code + device._code
    t.requires_grad = requires_grad
    t.grad = None
    t.grad_fn = None
    t._vc = None
    t._output_nr = 0
    return t


class TensorBase:
    """A strided dense tensor whose data lives in a contiguous numpy array.

    Fields (plain slots, read directly by the dispatcher and kernels):

    ``_data``            np.ndarray with shape ``_sizes`` and dtype ``_dtype.np`` (None for meta tensors)
    ``_sizes``           tuple of ints
    ``_dtype``           labsupport.aten.dtype.dtype
    ``_device``          Device (cpu, meta or simulated cuda)
    ``_ks``              the raw 64-bit DispatchKeySet as an int
    ``requires_grad``    bool; ``grad``, ``grad_fn``, ``_output_nr``: autograd metadata
    ``_version_counter`` VersionCounter shared with views (``_version`` gives its value, as in torch);
                         a property over the ``_vc`` slot, created on first access
    ``_tkey``            dtype, device and the wrapped-number bit packed in one int: with ``_sizes``, all
                         that the cached TensorIterator set-up (tensor_iterator.py) depends on
    ``_wrapped_number``  a Python number the binding wrapped into a 0-dim tensor (lowest promotion tier);
                         a property over bit 0 of ``_tkey``
    ``_geometry``        (strides, storage offset, storage elements) of a view made by a view kernel
                         (labsupport/aten/storage.py); unset for an ordinary tensor

    Strides, storage offset and the storage are read off ``_data`` (a numpy array, for a view a
    strided numpy view of the same buffer) when asked: see labsupport/aten/storage.py.
    """

    __slots__ = (
        "_data", "_sizes", "_dtype", "_device", "_ks", "requires_grad", "grad", "grad_fn",
        "_vc", "_output_nr", "_tkey", "_geometry", "__weakref__",
    )

    _make = classmethod(make_tensor)  # Tensor._make(data, sizes, dtype, device[, requires_grad])

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if "__init__" in own or "__new__" in own or "__torch_dispatch__" in own:
            # A user's tensor subclass (``class MyT(torch.Tensor)`` whose __new__ calls _make_subclass or
            # _make_wrapper_subclass). Kernels make outputs with type(t)._make, which calls cls(): here it
            # makes a tensor of the nearest lab class instead, as PyTorch's kernels return torch.Tensor.
            plain = next(c for c in cls.__mro__[1:] if issubclass(c, TensorBase) and "_user_subclass" not in vars(c))
            cls._user_subclass = True

            def make_plain(_cls: type, data: Any, sizes: Any, dtype: DType, device: Device, *rest: Any) -> Any:
                if data is None and device.type != "meta":
                    raise NotImplementedError(
                        f"{cls.__name__}: a lab kernel tried to compute with numpy on a wrapper subclass "
                        "(_make_wrapper_subclass), which has no data of its own. The lab's engine and backward "
                        "formulas dispatch their steps (ones_like, add, detach, new_empty_strided, copy_, sum_to), "
                        "so they reach __torch_dispatch__ as in PyTorch; the steps that still use numpy are "
                        "AsStridedBackward0 (a view read after its base was modified in place), as_strided's and "
                        "mv's backward."
                    )
                return make_tensor(plain, data, sizes, dtype, device, *rest)

            cls._make = classmethod(make_plain)  # type: ignore[assignment]
        if "__torch_dispatch__" in own:
            from labsupport.aten import python_fallback_kernel  # noqa: F401 -- installs the Python key's fallbacks

    @property
    def _wrapped_number(self) -> bool:
        """``TensorImpl::is_wrapped_number``: bit 0 of ``_tkey`` (set by ``wrapped_scalar_tensor``)."""
        return bool(self._tkey & 1)

    @property
    def _version_counter(self) -> VersionCounter:
        """The shared VersionCounter, created on first use: most tensors are never modified in place,
        and ``_make`` (run for every op output) stays cheaper without allocating one."""
        counter = self._vc
        if counter is None:
            counter = self._vc = VersionCounter()
        return counter

    @_version_counter.setter
    def _version_counter(self, counter: VersionCounter) -> None:
        self._vc = counter

    # -- metadata accessors (TensorImpl inline methods) --

    @property
    def shape(self) -> Size:
        return Size(self._sizes)

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return Size(self._sizes)
        return self._sizes[self._wrap_dim_for_query(dim)]

    def _wrap_dim_for_query(self, dim: int) -> int:
        ndim = len(self._sizes)
        if ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        if not -ndim <= dim < ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})"
            )
        return dim + ndim if dim < 0 else dim

    def dim(self) -> int:
        return len(self._sizes)

    @property
    def ndim(self) -> int:
        return len(self._sizes)

    def numel(self) -> int:
        return math.prod(self._sizes)

    def element_size(self) -> int:
        return self._dtype.itemsize

    # -- strides and storage (TensorImpl::strides / storage_offset / is_contiguous; storage.py) --

    def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
        strides = _storage.tensor_strides(self)
        if dim is None:
            return strides
        return strides[self._wrap_dim_for_query(dim)]

    def storage_offset(self) -> int:
        return _storage.tensor_storage_offset(self)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return _storage.tensor_is_contiguous(self._sizes, _storage.tensor_strides(self))

    def contiguous(self, memory_format: Any = None) -> TensorBase:
        """``TensorBase::contiguous`` (a manual C++ binding): ``self`` when already contiguous, without
        dispatching; otherwise a contiguous clone. (PyTorch dispatches ``aten::contiguous`` first,
        which calls ``clone``; the lab calls ``clone`` directly.)"""
        if _storage.tensor_is_contiguous(self._sizes, _storage.tensor_strides(self)):
            return self
        cpp = next(c for c in type(self).__mro__ if c.__name__ == "TensorBody")  # the build's at::Tensor
        return cpp.clone(self, "contiguous_format")

    def untyped_storage(self) -> _storage.UntypedStorage:
        return _storage.untyped_storage_of(self)

    def data_ptr(self) -> int:
        """Address of element 0: the storage's address plus the offset (0 for a meta tensor)."""
        if self._data is None:
            return 0
        return self.untyped_storage().data_ptr() + self.storage_offset() * self._dtype.itemsize

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_meta(self) -> bool:
        return self._device.type == "meta"

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_inference(self) -> bool:
        """Created under InferenceMode: as in ``TensorImpl::is_inference``, read off the key set (an
        inference tensor has neither the ADInplaceOrView nor the Autograd functionality key)."""
        return not self._ks & _AUTOGRAD_BITS

    def key_set(self) -> int:
        """The raw DispatchKeySet bits (torch._C._dispatch_keys(t).raw_repr())."""
        return self._ks

    # -- autograd metadata --

    @property
    def is_leaf(self) -> bool:
        """A tensor is a leaf unless an autograd node produced it (grad_fn is set)."""
        return self.grad_fn is None

    def requires_grad_(self, requires_grad: bool = True) -> TensorBase:
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if requires_grad and not self._dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = bool(requires_grad)
        return self

    @property
    def _version(self) -> int:
        """How often the data was modified in place (shared with views), like ``torch.Tensor._version``."""
        return self._version_counter.value

    def _bump_version(self) -> None:
        """Record an in-place modification (what the ADInplaceOrView kernel does)."""
        self._version_counter.value += 1

    def detach(self) -> TensorBase:
        """A new tensor sharing data and version counter, cut off from autograd."""
        t = type(self)._make(self._data, self._sizes, self._dtype, self._device)
        t._ks = self._ks
        t._version_counter = self._version_counter
        geometry = getattr(self, "_geometry", None)
        if geometry is not None:  # the same window onto the same storage (labsupport/aten/storage.py)
            t._geometry = geometry
        return t

    # -- getting data out --

    def numpy(self) -> np.ndarray:
        """The underlying numpy array (shares memory, as torch's numpy() does)."""
        if self.requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        if self._device.type != "cpu":
            raise TypeError(
                f"can't convert {self._device} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        if self._dtype is dtypes.bfloat16:
            # numpy has no bfloat16 (the lab's float32 storage is an implementation detail)
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self._data

    def item(self) -> bool | int | float:
        numel = math.prod(self._sizes)
        if numel != 1:
            raise RuntimeError(f"a Tensor with {numel} elements cannot be converted to Scalar")
        if self._data is None:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        return self._data.item()

    def tolist(self) -> Any:
        if self._data is None:
            raise NotImplementedError("Cannot copy out of meta tensor; no data!")
        return self._data.tolist()

    def __len__(self) -> int:
        if not self._sizes:
            raise TypeError("len() of a 0-d tensor")
        return self._sizes[0]

    def __bool__(self) -> bool:
        numel = math.prod(self._sizes)
        if numel > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        if numel == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        if math.prod(self._sizes) != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self.item())

    def __int__(self) -> int:
        if math.prod(self._sizes) != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self) -> int:
        if self._dtype.is_floating_point or math.prod(self._sizes) != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __repr__(self) -> str:
        from labsupport.aten.tensor_str import tensor_repr

        return tensor_repr(self)

    # -- tensor subclasses and the Python key (torch/csrc/autograd/python_variable.cpp) --

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """``torch._C._disabled_torch_dispatch_impl``: a class that does not override this has no
        ``__torch_dispatch__``; called directly, it runs ``func`` with the Python keys excluded."""
        from labsupport.c10.dispatch_key_set import DispatchKeySet
        from labsupport.c10.tls import ExcludeDispatchKeyGuard
        from labsupport.c10.torch_dispatch_mode_tls import PYTHON_KEYS

        with ExcludeDispatchKeyGuard(DispatchKeySet.from_raw(PYTHON_KEYS)):
            return func(*args, **(kwargs or {}))

    @staticmethod
    def _make_subclass(cls: type, data: TensorBase, require_grad: bool = False,
                       dispatch_sizes_strides_policy: Any = None, dispatch_device: bool = False,
                       dispatch_layout: bool = False) -> Any:  # fmt: skip
        """``Tensor._make_subclass``: a ``cls`` tensor sharing ``data``'s storage and version counter
        (a detached alias). With its own ``__torch_dispatch__`` it carries ``Python`` and
        ``PythonTLSSnapshot`` on top of ``data``'s keys."""
        from labsupport.aten.python_fallback_kernel import has_torch_dispatch
        from labsupport.c10.torch_dispatch_mode_tls import PYTHON_KEYS

        t = object.__new__(cls)
        t._data, t._sizes, t._dtype, t._device = data._data, data._sizes, data._dtype, data._device
        t._tkey = data._tkey & ~1
        t._ks = (data._ks & ~PYTHON_KEYS) | (PYTHON_KEYS if has_torch_dispatch(cls) else 0)
        t._vc = data._version_counter
        t.requires_grad = False
        t.grad = t.grad_fn = None
        t._output_nr = 0
        if require_grad:
            t.requires_grad_(True)
        return t

    @staticmethod
    def _make_wrapper_subclass(cls: type, size: Any, strides: Any = None, storage_offset: Any = None,
                               memory_format: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
                               pin_memory: bool = False, requires_grad: bool = False,
                               dispatch_sizes_strides_policy: Any = None, dispatch_device: bool = False,
                               dispatch_layout: bool = False, _extra_dispatch_keys: Any = None,
                               storage_size: Any = None) -> Any:  # fmt: skip
        """``Tensor._make_wrapper_subclass``: a ``cls`` tensor with sizes, dtype and device but no data
        of its own (its ``__torch_dispatch__`` holds the real tensors). Its key set is the device's
        plus ``Python`` and ``PythonTLSSnapshot``. The lab keeps no strides (tensors are contiguous)."""
        from labsupport.aten.python_fallback_kernel import has_torch_dispatch
        from labsupport.c10.torch_dispatch_mode_tls import PYTHON_KEYS

        if not has_torch_dispatch(cls):
            raise TypeError(f"{cls.__name__} must define __torch_dispatch__")
        dt = dtype if dtype is not None else dtypes.get_default_dtype()
        dev = tensor_device(device)
        t = object.__new__(cls)
        t._data, t._sizes, t._dtype, t._device = None, tuple(int(n) for n in size), dt, dev
        t._tkey = dt._code + dev._code
        t._ks = (dev._ks_inference if _inference_mode_enabled else dev._ks) | PYTHON_KEYS
        t._vc = None
        t.requires_grad = False
        t.grad = t.grad_fn = None
        t._output_nr = 0
        if requires_grad:
            t.requires_grad_(True)
        return t


# --- torch.tensor(data) inference (torch/csrc/utils/tensor_new.cpp) ------------------------------

_MAX_DIMS = 64


def _is_sequence(obj: object) -> bool:
    if isinstance(obj, np.ndarray):
        return obj.ndim > 0
    return isinstance(obj, (list, tuple, range)) or (isinstance(obj, TensorBase) and obj.dim() > 0)


def _as_sequence(obj: Any) -> Any:
    """Tensors inside the data are read through their numpy buffer."""
    return obj._data if isinstance(obj, TensorBase) else obj


def _infer_scalar_type(obj: object) -> DType:
    """The dtype torch.tensor() infers for ``obj`` (``infer_scalar_type`` in tensor_new.cpp)."""
    if isinstance(obj, (np.ndarray, np.generic)):  # before float: np.float64 subclasses float
        return dtypes.from_numpy_dtype(obj.dtype)
    if isinstance(obj, float):
        return dtypes.get_default_dtype()
    if isinstance(obj, bool):
        return dtypes.bool
    if isinstance(obj, int):
        return dtypes.int64
    if isinstance(obj, TensorBase):
        return obj._dtype
    if isinstance(obj, str):
        raise ValueError("too many dimensions 'str'")
    if _is_sequence(obj):
        from labsupport.aten.type_promotion import promote_types

        if len(obj) == 0:
            return dtypes.get_default_dtype()
        result: DType | None = None
        for item in obj:
            item_type = _infer_scalar_type(item)
            result = item_type if result is None else promote_types(result, item_type)
        return result
    raise RuntimeError(f"Could not infer dtype of {_type_name(obj)}")


def _compute_sizes(obj: object) -> list[int]:
    """Follow the first element down to find the shape (``compute_sizes`` in tensor_new.cpp)."""
    sizes: list[int] = []
    while _is_sequence(obj):
        obj = _as_sequence(obj)
        length = len(obj)
        sizes.append(length)
        if len(sizes) > _MAX_DIMS:
            raise ValueError(f"too many dimensions '{_type_name(obj)}'")
        if length == 0:
            break
        obj = obj[0]
    return sizes


def _flatten_checked(obj: object, sizes: list[int], dim: int, out: list[object]) -> None:
    """Collect the leaves of a nested sequence, checking it is not ragged (``recursive_store``)."""
    if dim == len(sizes):
        out.append(obj)
        return
    if not _is_sequence(obj):
        raise TypeError("not a sequence")
    obj = _as_sequence(obj)
    expected = sizes[dim]
    if len(obj) != expected:
        raise ValueError(f"expected sequence of length {expected} at dim {dim} (got {len(obj)})")
    for item in obj:
        _flatten_checked(item, sizes, dim + 1, out)


def _int_limits(target: DType) -> tuple[int, int]:
    info = np.iinfo(target.np)
    return int(info.min), int(info.max)


def _convert_leaf(value: object, target: DType) -> bool | int | float:
    """One Python scalar converted the way torch's ``store_scalar`` converts it (with overflow checks)."""
    if isinstance(value, TensorBase):
        value = value.item()
    elif isinstance(value, (np.ndarray, np.generic)):
        value = value.item()
    if _is_sequence(value) or isinstance(value, str):
        if target.is_floating_point:
            raise TypeError(f"must be real number, not {_type_name(value)}")
        raise TypeError(f"'{_type_name(value)}' object cannot be interpreted as an integer")
    if target is dtypes.bool:
        return bool(value)
    if target.is_floating_point:
        return float(value)
    overflow = RuntimeError(f"value cannot be converted to type {target.name} without overflow")
    low, high = _int_limits(target)
    if isinstance(value, float):
        if not math.isfinite(value) or value > high or (value < low if target.is_signed else value <= -1):
            raise overflow
        return int(value)  # truncation towards zero, like a C++ cast
    value = int(value)
    if not -(2**63) <= value < 2**63:
        raise ValueError("Overflow when unpacking long long")
    if target.is_signed:
        if not low <= value <= high:
            raise overflow
        return value
    # c10::overflows lets negative numbers down to -max through for unsigned types; they wrap around.
    if value > high or value < -high:
        raise overflow
    return value % (high + 1)


def tensor_data_to_numpy(
    data: object, dtype: DType | None = None, device: Device | str | None = None
) -> tuple[np.ndarray, DType]:
    """Turn ``torch.tensor(data, dtype=...)`` input into a fresh numpy array and its dtype.

    Inference follows torch: Python floats -> the default dtype, ints -> int64, bools -> bool, mixed
    nested lists promote (``[1, 2.5]`` -> default float), numpy arrays/scalars keep their dtype.
    ``device`` is only validated here; the caller drops the data for meta tensors.
    """
    if device is not None:
        Device(device)
    if isinstance(data, str):
        raise TypeError(f"new(): invalid data type '{_type_name(data)}'")
    if isinstance(data, TensorBase):
        if data._data is None:
            raise NotImplementedError("Cannot copy out of meta tensor; no data!")
        data = data._data
    if isinstance(data, (np.ndarray, np.generic)):
        source_dtype = dtypes.from_numpy_dtype(data.dtype)
        target = dtype if dtype is not None else source_dtype
        array = cast_to(np.asarray(data), target)
        return (array.copy() if array is data or not isinstance(data, np.ndarray) else array), target

    target = dtype if dtype is not None else _infer_scalar_type(data)
    sizes = _compute_sizes(data)
    leaves: list[object] = []
    _flatten_checked(data, sizes, 0, leaves)
    if target is dtypes.get_default_dtype() and dtype is None and all(type(v) is float for v in leaves):
        converted: Iterable[object] = leaves  # the common all-floats case needs no per-element checks
    else:
        converted = [_convert_leaf(v, target) for v in leaves]
    # Floats are converted from double the way c10 does it (double -> float16 goes through float).
    staging = np.float64 if target.is_floating_point else target.np
    array = cast_to(np.array(converted, dtype=staging), target).reshape(sizes)
    return array, target
