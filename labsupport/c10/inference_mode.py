"""``c10::InferenceMode``: run code that will never need autograd, and make tensors that say so.

Stands for ``c10/core/InferenceMode.h`` (``torch.inference_mode()`` in Python). Inside the block:

* the TLS include set loses ADInplaceOrView (only BackendSelect stays),
* the TLS exclude set gains the autograd keys (AutogradOther, AutogradFunctionality,
  AutogradNestedTensor), so no autograd kernel runs,
* grad mode is off,
* new tensors are *inference tensors*: their key set has no ADInplaceOrView or Autograd key at all
  (``DispatchKeySet(CPU, AutocastCPU)`` for a CPU tensor).

PyTorch keeps the "create inference tensors" switch thread-local; the lab keeps it process-wide
(``c10/autograd_state.py``; aten's ``TensorBase._make`` reads a copy it subscribes to), while the key
sets and grad mode are per thread as usual. Like ``c10/core/InferenceMode.h``, this module imports
nothing above c10: grad mode and the inference flag live in ``c10/autograd_state.py``.
"""

from __future__ import annotations

from types import TracebackType

from labsupport.c10 import autograd_state
from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import FULL, FUNCTIONALITY_BITS, DispatchKeySet, autograd_dispatch_keyset
from labsupport.c10.tls import tls

_AD_INPLACE_OR_VIEW = int(DispatchKeySet(DispatchKey.ADInplaceOrView))
_AUTOGRAD = int(autograd_dispatch_keyset)


class InferenceMode:
    """``with lab.InferenceMode():`` (``torch.inference_mode()``); ``InferenceMode(False)`` does nothing."""

    __slots__ = ("_enabled", "_saved")

    def __init__(self, enabled: bool = True) -> None:
        self._enabled = enabled

    def __enter__(self) -> InferenceMode:
        self._saved = (tls.snapshot(), autograd_state._state.enabled, autograd_state.is_inference_mode_enabled())
        if self._enabled:
            included, _, excluded = tls.sets
            excluded |= _AUTOGRAD
            tls.restore((included & ~_AD_INPLACE_OR_VIEW, FULL & ~(excluded & FUNCTIONALITY_BITS), excluded))
            autograd_state._state.enabled = False
            autograd_state.set_inference_mode_enabled(True)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        sets, grad_enabled, inference = self._saved
        tls.restore(sets)
        autograd_state._state.enabled = grad_enabled
        autograd_state.set_inference_mode_enabled(inference)


def is_inference_mode_enabled() -> bool:
    """``torch.is_inference_mode_enabled()``."""
    return autograd_state.is_inference_mode_enabled()
