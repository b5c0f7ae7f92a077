"""The lab's ``torch``: ``import labsupport.torch as torch``.

The operators (``torch.add``, ``Tensor.add``, ...) are generated from ops.yaml into build/torch/ on
first import and registered with the default dispatcher (``labsupport.dispatcher``). The rest is
hand-written, as in PyTorch: dtypes (``bfloat16`` included, stored as float32 rounded to bfloat16: see
labsupport/aten/dtype.py), ``torch.tensor``, grad mode, ``torch.autocast``, the random seed.
"""

from __future__ import annotations

import builtins
from typing import Any

from labsupport import overrides as overrides  # torch.overrides: TorchFunctionMode, handle_torch_function
from labsupport import utils as utils  # torch.utils: _python_dispatch (TorchDispatchMode), _pytree (tree_map)
from labsupport._ops import ops as ops  # torch.ops: ops.aten.add.Tensor is the OpOverload __torch_dispatch__ gets
from labsupport.amp import autocast
from labsupport.aten.autocast_mode import clear_cache as clear_autocast_cache
from labsupport.aten.autocast_mode import decrement_nesting as autocast_decrement_nesting
from labsupport.aten.autocast_mode import (
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from labsupport.aten.autocast_mode import increment_nesting as autocast_increment_nesting
from labsupport.aten.dtype import (
    bfloat16,
    bool,
    double,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int64,
    long,
    set_default_dtype,
)
from labsupport.aten.dtype import dtype as dtype
from labsupport.aten.generator import manual_seed
from labsupport.aten.tensor import Device as device  # noqa: N813 -- torch.device
from labsupport.aten.tensor import Size, tensor_data_to_numpy, tensor_device
from labsupport.aten.type_promotion import promote_types
from labsupport.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from labsupport.c10.dispatcher import dispatcher as _dispatcher
from labsupport.c10.inference_mode import InferenceMode as inference_mode  # noqa: N813 -- torch.inference_mode
from labsupport.c10.inference_mode import is_inference_mode_enabled
from labsupport.codegen.build import load_build
from labsupport.functorch import install as _install_functorch
from labsupport.functorch import vmap

_build = load_build(name="torch", dispatcher=_dispatcher)
_install_functorch(_build)  # the batching rules of aten/src/ATen/functorch on the default build
_functions = _build.python_torch_functions
Tensor = _build.python_variable_methods.Tensor
globals().update({name: getattr(_functions, name) for name in _functions.__all__})


def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: builtins.bool = False) -> Any:
    """``torch.tensor(data)``: a new tensor holding a copy of ``data`` (torch/csrc/utils/tensor_new.cpp).

    Like PyTorch, Python floats become the default dtype, ints int64, bools bool. The lab builds the
    tensor directly rather than through ``aten::empty`` + ``copy_``.
    """
    array, dt = tensor_data_to_numpy(data, dtype=dtype)
    dev = tensor_device(device)
    t = Tensor._make(None if dev.type == "meta" else array, tuple(array.shape), dt, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


__all__ = [
    "Size", "Tensor", "autocast", "autocast_decrement_nesting", "autocast_increment_nesting", "bfloat16", "bool",
    "clear_autocast_cache", "device", "double", "dtype", "enable_grad", "float", "float16", "float32", "float64",
    "get_autocast_dtype", "get_default_dtype", "half", "inference_mode", "int64", "is_autocast_cache_enabled",
    "is_autocast_enabled", "is_grad_enabled", "is_inference_mode_enabled", "long", "manual_seed", "no_grad",
    "promote_types", "set_autocast_cache_enabled", "set_autocast_dtype", "set_autocast_enabled",
    "set_default_dtype", "set_grad_enabled", "tensor", "vmap", *_functions.__all__,
]  # fmt: skip
