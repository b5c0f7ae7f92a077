"""Exercise 04 -- register two new operators: myadd (functional) and myadd_ (in-place).

Notebook: 04 (registering operators), sections 2-3 (define, a CPU kernel), 6 (an autograd kernel that
redispatches), 8 (in-place operators and ADInplaceOrView), 10 (alias keys) and 11 (closing libraries).
Grade it: ``make grade EX=ex04`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex04``),
or ``lab.grade("ex04")`` in a notebook cell.

What PyTorch does (seed 003, the "Registering a Dispatched Operator in C++" tutorial): one
``TORCH_LIBRARY`` block defines the schemas, one ``TORCH_LIBRARY_IMPL`` block per dispatch key registers
kernels. You build ``register_myadd(dispatcher)`` so that, on the dispatcher it is given:

* ``myops::myadd`` (schema ``SCHEMA``) adds two tensors of the same shape on the CPU, refuses tensors
  of different shapes with an error naming both shapes, and supports autograd: when an input
  requires grad, the result has a ``MyAddBackward`` grad_fn and ``backward()`` reaches both inputs;
* ``myops::myadd_`` (schema ``INPLACE_SCHEMA``) adds ``other`` into ``self`` in place, returns
  ``self``, and bumps ``self``'s version counter once per call. It has no derivative of its own:
  its autograd kernel may be the lab's ready-made not-implemented fallback.

It returns every ``lab.Library`` it created: the caller closes them, which undoes the registrations
(that is what makes a notebook cell safe to run twice). Register on the ``dispatcher`` you are given
(``lab.Library(..., dispatcher=dispatcher)``): the grader passes a fresh one each time.

What the lab gives you (names you could not guess):

* a tensor's numpy data is ``t._data``, its shape ``t._sizes``, dtype ``t._dtype`` (numpy dtype:
  ``t._dtype.np``), device ``t._device``; ``type(t)._make(array, sizes, dtype, device)`` makes a
  tensor of the same class around a numpy array; ``t._bump_version()`` bumps the version counter;
* ``dispatcher.find_schema_or_throw("myops::myadd")`` is the operator's handle (``op(...)``,
  ``op.call(...)``, ``op.redispatch(ks, ...)``);
* autograd pieces in ``labsupport.autograd.node`` (imported below): ``Node`` (subclass it and write
  ``apply(grads) -> list of grads``, one per input), ``compute_requires_grad(*tensors)``,
  ``collect_next_edges(*tensors)`` (a node's ``next_functions``) and ``set_history(tensor, node)``;
* the guards, key sets and fallbacks of notebook 04 are on ``lab`` (``import labsupport as lab``).

Try it in a notebook cell::

    ex04 = lab.load_exercise("ex04")           # your exercises/ex04_register.py, freshly imported
    libraries = ex04.register_myadd(lab.dispatcher)
    print(lab.dispatcher.dump_table("myops::myadd"))
    for library in reversed(libraries):
        library.close()
"""

from __future__ import annotations

from typing import Any

import labsupport as lab
from labsupport.autograd.node import Node, collect_next_edges, compute_requires_grad, set_history  # noqa: F401

SCHEMA = "myadd(Tensor self, Tensor other) -> Tensor"
INPLACE_SCHEMA = "myadd_(Tensor(a!) self, Tensor other) -> Tensor(a!)"


def myadd_cpu(self: Any, other: Any) -> Any:
    """The CPU kernel of myadd: a new tensor holding ``self + other`` (same shapes only) (notebook 04, §3)."""
    raise NotImplementedError("ex04: write myadd_cpu in exercises/ex04_register.py (notebook 04, section 3)")


def myadd__cpu(self: Any, other: Any) -> Any:
    """The CPU kernel of myadd_: ``other`` added into ``self``; returns ``self`` (notebook 04, §8)."""
    raise NotImplementedError("ex04: write myadd__cpu in exercises/ex04_register.py (notebook 04, section 8)")


class MyAddBackward(Node):
    """The grad_fn of myadd: one gradient per input of myadd (notebook 04, §6)."""

    def apply(self, grads: list[Any]) -> list[Any]:
        raise NotImplementedError(
            "ex04: write MyAddBackward.apply in exercises/ex04_register.py (notebook 04, section 6)"
        )


def register_myadd(dispatcher: lab.Dispatcher) -> list[lab.Library]:
    """Define myops::myadd and myops::myadd_ on ``dispatcher``, register their kernels, return the Libraries."""
    raise NotImplementedError(
        "ex04: write register_myadd in exercises/ex04_register.py (notebook 04, sections 2, 3, 6, 8 and 11)"
    )
