"""Exercise 04d -- predict the path of a call.

Notebooks: 02 (tensor key sets, the TLS include/exclude sets, guards), 04 (sections 6-10: autograd
kernels and their redispatch, ADInplaceOrView, autocast, table precedence) and 07 (section 5:
fallthrough and the mask).
Grade it: ``make grade EX=ex04d`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex04d``),
or ``lab.grade("ex04d")`` in a notebook cell.

``predict_path(scenario)`` gets one call of an operator ``ex04d::op(Tensor self, Tensor other)`` (or
the in-place ``op_``, when there is an ADInplaceOrView kernel) as plain data:

* ``scenario["kernels"]``: ``{key: kind}``, the kernels registered for the operator. The kernel
  registered to key ``K`` is named ``"fn_K"``. What each kind does when it runs:

  - ``"backend"`` / ``"math"``: computes the result (no further dispatch);
  - ``"autograd"``: a generated-style autograd kernel, ``op.redispatch(ks & lab.after_autograd_keyset, ...)``;
  - ``"inplace_or_view"``: ``op.redispatch(ks & lab.after_ADInplaceOrView_keyset, ...)``;
  - ``"autocast"`` (on AutocastCPU): ``with lab.ExcludeDispatchKeyGuard(AutocastCPU): op.call(...)``;
  - ``"fallthrough"``: ``lab.fallthrough_kernel`` registered for that key of this operator.

* ``scenario["tensors"]``: the two arguments, each ``{"device": "cpu"|"cuda"|"meta", "dtype": ...,
  "requires_grad": bool, "inference": bool}`` (``inference``: made under ``lab.InferenceMode()``).
* ``scenario["guards"]``: entered in this order around the call, each ``{"kind": ...}``:
  ``AutoDispatchBelowAutograd``, ``AutoDispatchBelowADInplaceOrView``,
  ``ExcludeDispatchKeyGuard`` / ``IncludeDispatchKeyGuard`` (with ``"keys"``), ``InferenceMode``, and
  ``autocast_cpu`` (notebook 04's switch: AutocastCPU leaves the TLS exclude set).

The dispatcher has PyTorch's start-up backend fallbacks (``lab.Dispatcher()`` installs them): the
autograd fallback (it redispatches with ``ks & lab.after_autograd_keyset``) on the Autograd keys, a
fallthrough on BackendSelect, ADInplaceOrView and the Autocast keys, a Meta fallback that raises,
and a Tracer fallback that redispatches with ``ks & lab.DispatchKeySet.full_after("Tracer")``.

Return the path: one ``(key, kernel, keys)`` per kernel that runs, in order. ``key`` is the slot
(``"AutogradCPU"``), ``kernel`` is ``"fn_<Key>"`` or ``"fallback"`` for a backend fallback, ``keys``
lists the names of the key set that kernel receives (``["CPU", "AutogradCPU"]``). A slot with no
kernel runs nothing (the call raises "Could not run ..."), so the path ends before it.

``lab.DispatchKeySet`` arithmetic is yours to use; the grader switches the lab's table builder off
while your function runs, so the answer has to come from the rules.
"""

from __future__ import annotations

from typing import Any


def predict_path(scenario: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """The kernels the call runs, in order, each with the key set it receives (see the module docstring)."""
    raise NotImplementedError(
        "ex04d: implement predict_path in exercises/ex04d_predict_path.py: the slot, kernel and key set of "
        "every step of the call (notebooks 02, 04 and 07)"
    )
