"""Exercise 04c -- an autocast kernel with a cast policy.

Notebook: 04 (registering operators), section 9 "Autocast"; seed 003 (the tutorial's Autocast
section).
Grade it: ``make grade EX=ex04c`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex04c``),
or ``lab.grade("ex04c")`` in a notebook cell.

Write the kernel that the grader registers on **AutocastCPU** and on **AutocastCUDA** of several
operators (``registered with_keyset=True``). PyTorch's autocast kernels (``aten/src/ATen/
autocast_mode.h``, ``cached_cast``) follow one pattern, parameterised by a *cast policy*:

* ``"lower_precision_fp"``: run the operator in the autocast dtype (the lab has no bfloat16, so the
  grader uses float16, the tutorial's CUDA choice);
* ``"fp32"``: run it in float32;
* ``"promote"``: run it in the widest floating type among the inputs that take part.

Which inputs take part, which key to step past before calling the operator again, and how is
what the exercise is about. ``autocast_kernel`` gets:

* ``op``: the operator handle (``op.call(*tensors)`` dispatches it afresh);
* ``ks``: the key set the kernel received (you may not need it);
* ``policy``, ``device_type`` (``"cpu"`` for the AutocastCPU kernel, ``"cuda"`` for AutocastCUDA) and
  ``autocast_dtype`` (a lab dtype, e.g. ``torch.float16``);
* ``tensors``: the operator's tensor arguments, in order.

Return what the operator returns. The grader switches autocast on per device, the way notebook 04
does (the device's Autocast key leaves the TLS exclude set), calls the operators on random inputs
(devices, dtypes, several tensors, inner operator calls made from inside a backend kernel) and
looks at what the backend kernels receive.
"""

from __future__ import annotations

from typing import Any

import labsupport as lab
import labsupport.torch as torch  # noqa: F401 -- torch.float32, torch.float16, ...


def cast(t: Any, dtype: Any) -> Any:
    """A copy of lab tensor ``t`` with dtype ``dtype`` (same device), made without the dispatcher.
    (Provided: the lab has no ``Tensor.to``.)"""
    return type(t)._make(t._data.astype(dtype.np), t._sizes, dtype, t._device)


def autocast_kernel(
    op: Any, ks: lab.DispatchKeySet, policy: str, device_type: str, autocast_dtype: Any, tensors: list[Any]
) -> Any:
    """The Autocast kernel: cast what the policy says, step past this kernel's key, call ``op`` again."""
    raise NotImplementedError(
        "ex04c: implement autocast_kernel in exercises/ex04c_autocast.py: cast the eligible inputs as the "
        "policy says and call the operator again past this Autocast key (notebook 04, section 9)"
    )
