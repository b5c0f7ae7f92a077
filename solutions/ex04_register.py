"""Exercise 04 -- register a new operator, myadd, with a CPU kernel and an autograd kernel
(reference solution).

Mirrors seed 003 (PyTorch's "Registering a Dispatched Operator in C++" tutorial): TORCH_LIBRARY
defines the schema, TORCH_LIBRARY_IMPL(myops, CPU, m) and TORCH_LIBRARY_IMPL(myops, Autograd, m)
register the kernels. Notebook 04 walks through the same steps.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab
from labsupport.autograd.node import Node, collect_next_edges, compute_requires_grad, set_history

SCHEMA = "myadd(Tensor self, Tensor other) -> Tensor"


def myadd_cpu(self: Any, other: Any) -> Any:
    """The CPU kernel: elementwise ``self + other`` on the numpy data (no broadcasting)."""
    if self._sizes != other._sizes:
        raise RuntimeError(
            f"myadd: self and other must have the same shape, got {list(self._sizes)} and {list(other._sizes)}"
        )
    data = (self._data + other._data).astype(self._dtype.np, copy=False)
    return type(self)._make(data, self._sizes, self._dtype, self._device)


class MyAddBackward(Node):
    """The grad_fn of myadd: d(self + other) / d(self) = d(...) / d(other) = 1."""

    def apply(self, grads: list[Any]) -> list[Any]:
        grad = grads[0]
        return [grad, grad]


def register_myadd(dispatcher: lab.Dispatcher) -> list[lab.Library]:
    """Define ``myops::myadd`` on ``dispatcher`` and register its CPU and Autograd kernels."""
    defs = lab.Library("myops", "DEF", dispatcher=dispatcher)
    defs.define(SCHEMA)
    op = dispatcher.find_schema_or_throw("myops::myadd")

    def myadd_autograd(self: Any, other: Any) -> Any:
        """The Autograd kernel: step below autograd, call myadd again, then record the grad_fn."""
        with lab.AutoDispatchBelowADInplaceOrView():
            result = op.call(self, other)
        if compute_requires_grad(self, other):
            grad_fn = MyAddBackward()
            grad_fn.next_functions = collect_next_edges(self, other)
            set_history(result, grad_fn)
        return result

    cpu = lab.Library("myops", "IMPL", "CPU", dispatcher=dispatcher)
    cpu.impl("myadd", myadd_cpu)
    autograd = lab.Library("myops", "IMPL", "Autograd", dispatcher=dispatcher)
    autograd.impl("myadd", myadd_autograd)
    return [defs, cpu, autograd]
