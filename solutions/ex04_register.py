"""Exercise 04 -- register myadd (CPU + Autograd kernels) and myadd_ (CPU, Autograd and
ADInplaceOrView kernels) (reference solution).

Mirrors seed 003 (PyTorch's "Registering a Dispatched Operator in C++" tutorial): TORCH_LIBRARY
defines the schema, TORCH_LIBRARY_IMPL(myops, CPU, m) and TORCH_LIBRARY_IMPL(myops, Autograd, m)
register the kernels. Notebook 04 walks through the same steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import labsupport as lab
from labsupport.autograd.node import Node, collect_next_edges, compute_requires_grad, set_history

SCHEMA = "myadd(Tensor self, Tensor other) -> Tensor"
INPLACE_SCHEMA = "myadd_(Tensor(a!) self, Tensor other) -> Tensor(a!)"


def myadd_cpu(self: Any, other: Any) -> Any:
    """The CPU kernel: elementwise ``self + other`` on the numpy data (no broadcasting)."""
    if self._sizes != other._sizes:
        raise RuntimeError(
            f"myadd: self and other must have the same shape, got {list(self._sizes)} and {list(other._sizes)}"
        )
    data = (self._data + other._data).astype(self._dtype.np, copy=False)
    return type(self)._make(data, self._sizes, self._dtype, self._device)


def myadd__cpu(self: Any, other: Any) -> Any:
    """The CPU kernel of the in-place myadd_: add other into self's own storage and return self."""
    if self._sizes != other._sizes:
        raise RuntimeError(
            f"myadd_: self and other must have the same shape, got {list(self._sizes)} and {list(other._sizes)}"
        )
    np.add(self._data, other._data, out=self._data, casting="unsafe")  # the storage self already has
    return self


class MyAddBackward(Node):
    """The grad_fn of myadd: d(self + other) / d(self) = d(...) / d(other) = 1."""

    def apply(self, grads: list[Any]) -> list[Any]:
        grad = grads[0]
        return [grad, grad]


def register_myadd(dispatcher: lab.Dispatcher) -> list[lab.Library]:
    """Define ``myops::myadd`` and ``myops::myadd_`` on ``dispatcher`` and register their kernels."""
    defs = lab.Library("myops", "DEF", dispatcher=dispatcher)
    defs.define(SCHEMA)
    defs.define(INPLACE_SCHEMA)
    op = dispatcher.find_schema_or_throw("myops::myadd")
    op_ = dispatcher.find_schema_or_throw("myops::myadd_")

    def myadd_autograd(self: Any, other: Any) -> Any:
        """The Autograd kernel: step below autograd, call myadd again, then record the grad_fn."""
        with lab.AutoDispatchBelowADInplaceOrView():
            result = op.call(self, other)
        if compute_requires_grad(self, other):
            grad_fn = MyAddBackward()
            grad_fn.next_functions = collect_next_edges(self, other)
            set_history(result, grad_fn)
        return result

    def myadd__ad_inplace_or_view(ks: lab.DispatchKeySet, self: Any, other: Any) -> Any:
        """The ADInplaceOrView kernel of myadd_: step below the key, redispatch, bump self's version once."""
        with lab.AutoDispatchBelowADInplaceOrView():
            out = op_.redispatch(ks & lab.after_ADInplaceOrView_keyset, self, other)
        self._bump_version()  # VariableVersion::bump()
        return out

    cpu = lab.Library("myops", "IMPL", "CPU", dispatcher=dispatcher)
    cpu.impl("myadd", myadd_cpu)
    cpu.impl("myadd_", myadd__cpu)
    autograd = lab.Library("myops", "IMPL", "Autograd", dispatcher=dispatcher)
    autograd.impl("myadd", myadd_autograd)
    autograd.impl("myadd_", lab.autograd_not_implemented_fallback())  # no derivative for myadd_
    inplace_or_view = lab.Library("myops", "IMPL", "ADInplaceOrView", dispatcher=dispatcher)
    inplace_or_view.impl("myadd_", myadd__ad_inplace_or_view, with_keyset=True)
    return [defs, cpu, autograd, inplace_or_view]
