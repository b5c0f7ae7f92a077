"""``torch.autocast``: the Python context manager and decorator (stands for torch/amp/autocast_mode.py).

It only flips thread-local state; the casting happens in the Autocast kernels
(labsupport/aten/autocast_mode.py). On entry it saves the device's enabled flag, its autocast dtype and
the cache flag, then sets them and counts one more nesting level (even when ``enabled=False``). On exit
the outermost context clears the weight cache, and the saved state comes back.

Differences from PyTorch: "cuda" is the lab's simulated CUDA, so ``autocast("cuda")`` is enabled here
where a CPU-only PyTorch warns "CUDA is not available ... Disabling autocast."; TorchScript and
``torch.export``'s pre-dispatch hooks are left out.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from labsupport.aten import autocast_mode as _am
from labsupport.aten import dtype as dtypes

__all__ = ["autocast", "is_autocast_available"]

F = TypeVar("F", bound=Callable[..., Any])

is_autocast_available = _am.is_autocast_available


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``.

    ``with torch.autocast("cpu"): ...`` runs ``mm``/``matmul`` on eligible inputs in bfloat16 (the CPU
    default; float16 for "cuda"); ``@torch.autocast("cpu")`` does the same for every call of a function.
    """

    def __init__(
        self,
        device_type: str,
        dtype: dtypes.dtype | None = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.fast_dtype = _am.get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not _am.is_autocast_available(self.device):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{self.device}'")
        supported = [dtypes.bfloat16, dtypes.float16]
        self._cache_enabled = _am.is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled and self.device != "cuda" and self.fast_dtype not in supported:
            name = self.device.upper()
            warnings.warn(
                f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                f"{name} Autocast only supports dtypes of " + ", ".join(map(str, supported)) + " currently.",
                stacklevel=2,
            )
            enabled = False
        self._enabled = enabled

    def __enter__(self) -> autocast:
        self.prev_cache_enabled = _am.is_autocast_cache_enabled()
        self.prev = _am.is_autocast_enabled(self.device)
        self.prev_fastdtype = _am.get_autocast_dtype(self.device)
        _am.set_autocast_enabled(self.device, self._enabled)
        _am.set_autocast_dtype(self.device, self.fast_dtype)
        _am.increment_nesting()
        _am.set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        # Leaving the outermost autocast (enabled or not) drops the cached weight casts.
        if _am.decrement_nesting() == 0:
            _am.clear_cache()
        _am.set_autocast_enabled(self.device, self.prev)
        _am.set_autocast_dtype(self.device, self.prev_fastdtype)
        _am.set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func: F) -> F:
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                f"Did you mean to use autocast as a context manager? For example:\n"
                f"    with torch.autocast(device_type=...):\n"
                f"        output = model(input)"
            )

        @functools.wraps(func)
        def decorate_autocast(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return decorate_autocast  # type: ignore[return-value]
