"""Exercise 04 -- register a new operator, myadd, with a CPU kernel and an autograd kernel.

Notebook: 04 (registering operators), the myadd cells: define / impl per key, the autograd kernel
and its redispatch. Grade it: ``python -m labsupport.grade ex04``, or ``lab.grade("ex04")``.

What PyTorch does (seed 003, the "Registering a Dispatched Operator in C++" tutorial)::

    TORCH_LIBRARY(myops, m) { m.def("myadd(Tensor self, Tensor other) -> Tensor"); }
    TORCH_LIBRARY_IMPL(myops, CPU, m) { m.impl("myadd", myadd_cpu); }
    TORCH_LIBRARY_IMPL(myops, Autograd, m) { m.impl("myadd", myadd_autograd); }

The lab spells these ``lab.Library("myops", "DEF", dispatcher=d)``, ``.define(schema)``,
``lab.Library("myops", "IMPL", "CPU", dispatcher=d)`` and ``.impl("myadd", fn)``.

Build ``register_myadd(dispatcher)``:

* define ``myops::myadd(Tensor self, Tensor other) -> Tensor`` (the schema text is ``SCHEMA``);
* a CPU kernel, ``myadd_cpu``: elementwise ``self + other`` on the numpy data (``t._data``), for two
  tensors of the *same shape* (raise a RuntimeError that names both shapes otherwise); build the
  result with ``type(self)._make(data, sizes, dtype, device)``;
* an Autograd kernel that (1) steps *below autograd* and calls myadd again -- either inside
  ``with lab.AutoDispatchBelowADInplaceOrView():`` with ``op.call(self, other)``, or registered
  ``with_keyset=True`` and calling ``op.redispatch(ks & lab.after_autograd_keyset, self, other)`` --
  and (2) when an input requires grad, records a grad_fn (``MyAddBackward``) on the result;
* return every Library you created, so the caller can ``close()`` them (closing undoes the
  registrations, which makes a notebook cell safe to run twice).

Forget step (1) and the autograd kernel calls itself forever: the lab stops that with a
``lab.DispatchRecursionError`` that explains what happened. Try it once!

Use the ``dispatcher`` you are given (``dispatcher=dispatcher`` on every Library): the grader passes
a fresh one, so your registrations do not clash with anything else.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab
from labsupport.autograd.node import Node, collect_next_edges, compute_requires_grad, set_history  # noqa: F401

SCHEMA = "myadd(Tensor self, Tensor other) -> Tensor"


def myadd_cpu(self: Any, other: Any) -> Any:
    """The CPU kernel: elementwise ``self + other`` on the numpy data (no broadcasting)."""
    # TODO 1: if self._sizes != other._sizes, raise RuntimeError naming both shapes.
    # TODO 2: add the numpy arrays self._data and other._data, keep self's dtype
    #         (.astype(self._dtype.np, copy=False)) and wrap the result:
    #         type(self)._make(data, self._sizes, self._dtype, self._device)
    raise NotImplementedError(
        "ex04: implement myadd_cpu in exercises/ex04_register.py: check the shapes match, add the numpy "
        "data and wrap it with type(self)._make(...) (notebook 04)"
    )


class MyAddBackward(Node):
    """The grad_fn of myadd: the gradient flows unchanged to both inputs."""

    def apply(self, grads: list[Any]) -> list[Any]:
        # TODO 3: return one gradient per input: [grads[0], grads[0]].
        raise NotImplementedError(
            "ex04: implement MyAddBackward.apply in exercises/ex04_register.py: return [grad, grad] (notebook 04)"
        )


def register_myadd(dispatcher: lab.Dispatcher) -> list[lab.Library]:
    """Define ``myops::myadd`` on ``dispatcher``, register its CPU and Autograd kernels, return the Libraries."""
    # TODO 4: defs = lab.Library("myops", "DEF", dispatcher=dispatcher); defs.define(SCHEMA)
    #         op = dispatcher.find_schema_or_throw("myops::myadd")
    # TODO 5: write the autograd kernel (a nested function can use `op`):
    #             with lab.AutoDispatchBelowADInplaceOrView():
    #                 result = op.call(self, other)
    #         then, if compute_requires_grad(self, other): make a MyAddBackward, set its
    #         next_functions = collect_next_edges(self, other), and set_history(result, grad_fn).
    # TODO 6: register myadd_cpu for "CPU" and your autograd kernel for "Autograd", each with a
    #         Library("myops", "IMPL", <key>, dispatcher=dispatcher); return all the libraries.
    raise NotImplementedError(
        "ex04: implement register_myadd in exercises/ex04_register.py: define myops::myadd, register a CPU "
        "kernel and an Autograd kernel that steps below autograd (notebook 04)"
    )
