"""Exercise 07b -- BackendSelect: factory operators pick their backend from their arguments.

Notebook: 07 (boxing, fallbacks, BackendSelect), section 6 "Factory functions and BackendSelect".
Grade it: ``make grade EX=ex07b`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex07b``),
or ``lab.grade("ex07b")`` in a notebook cell.

A factory such as ``empty(size, *, dtype, layout, device, pin_memory)`` has no tensor argument, so
its key set holds only BackendSelect (from the TLS include set). Its BackendSelect kernel works out
the backend from the options and redispatches. PyTorch generates these kernels
(``RegisterBackendSelect.cpp``), around ``c10::computeDispatchKey(dtype, layout, device)``.

Options arrive as plain strings, or ``None`` when the caller left them out:

* ``dtype``: ``"float32"``, ``"float16"``, ``"float64"``, ``"int64"``, ``"qint8"``, ``"quint8"``, ``"qint32"``;
* ``layout``: ``"strided"``, ``"sparse_coo"``, ``"sparse_csr"``, ``"sparse_csc"``, ``"sparse_bsr"``,
  ``"sparse_bsc"``, ``"_mkldnn"``, ``"jagged"`` (the names of ``torch.strided``, ``torch.sparse_coo``, ...);
* ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"meta"``, ``"xla"``.

Write:

1. ``compute_dispatch_key(dtype, layout, device)``: the name of the backend key PyTorch's
   ``computeDispatchKey`` returns (e.g. ``"CPU"``, ``"SparseCUDA"``).
2. ``factory_backend_select(op, ks, size, dtype, layout, device, pin_memory)``: the BackendSelect
   kernel of ``ex07b::make(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device?
   device=None, bool? pin_memory=None)``. ``op`` is the operator handle, ``ks`` the key set the
   kernel received; redispatch with ``op.redispatch(key_set, size, dtype, layout, device, pin_memory)``.
3. ``convert_backend_select(op, ks, self, dtype, layout, device, pin_memory)``: the same for
   ``ex07b::convert(Tensor self, *, <the same options>)``, an operator that also takes a tensor
   (like ``aten::_to_copy``). What the generated kernel does differently when there are tensor
   arguments is part of the exercise (notebook 07 and torchgen's ``ComputeBackendSelect``).

The grader registers a recording kernel on every backend key the options can select and checks
which one your redispatch reaches, and with which key set.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab


def compute_dispatch_key(dtype: str | None, layout: str | None, device: str | None) -> str:
    """The name of the key ``c10::computeDispatchKey(dtype, layout, device)`` returns."""
    raise NotImplementedError(
        "ex07b: implement compute_dispatch_key in exercises/ex07b_backend_select.py: the backend key the "
        "options select (notebook 07, section 6)"
    )


def factory_backend_select(
    op: Any, ks: lab.DispatchKeySet, size: list[int], dtype: Any, layout: Any, device: Any, pin_memory: Any
) -> Any:
    """BackendSelect kernel of ``ex07b::make``: compute the key set, then ``op.redispatch(...)``."""
    raise NotImplementedError(
        "ex07b: implement factory_backend_select in exercises/ex07b_backend_select.py: redispatch to the "
        "backend the options select (notebook 07, section 6)"
    )


def convert_backend_select(
    op: Any, ks: lab.DispatchKeySet, self: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any
) -> Any:
    """BackendSelect kernel of ``ex07b::convert`` (a tensor plus options): compute the key set, redispatch."""
    raise NotImplementedError(
        "ex07b: implement convert_backend_select in exercises/ex07b_backend_select.py: the key set of an "
        "operator with options and a tensor argument (notebook 07, section 6)"
    )
