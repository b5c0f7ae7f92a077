"""Exercise 04b -- fill the dispatch table.

Notebook: 04 (registering operators), section 10 "Alias keys and table precedence".
Grade it: ``make grade EX=ex04b`` in a terminal (or ``.venv/bin/python -m labsupport.grade ex04b``),
or ``lab.grade("ex04b")`` in a notebook cell.

An operator has kernels registered to some keys, runtime keys (``CPU``, ``AutogradCPU``, ...) and
alias keys (``CompositeImplicitAutograd``, ``CompositeExplicitAutograd``,
``CompositeExplicitAutogradNonFunctional``, ``Autograd``). The dispatcher turns them into one table
entry per runtime key. Work out what it computes, as ``lab.dispatcher.dump_table`` (PyTorch:
``torch._C._dispatch_dump_table``) would print it.

``fill_table(registrations, fallbacks, keys)`` gets:

* ``registrations``: the keys that have a kernel. The kernel registered to key ``K`` is named
  ``"fn_K"`` (as ``lab.PythonDispatcher`` names them), e.g. ``"fn_CompositeImplicitAutograd"``;
* ``fallbacks``: the keys for which this dispatcher has a global backend fallback, each
  ``"fallback"`` or ``"fallthrough"`` (a key not in the dict has none);
* ``keys``: the runtime keys to fill, possibly including ``"Undefined"`` (the slot of a call whose
  key set is empty).

Return ``{key: (kernel, label)}`` for every key in ``keys``. ``kernel`` is ``"fn_<Key>"``,
``"ambiguous_autogradother"``, ``"fallback"`` / ``"fallthrough"`` (a backend fallback, as named in
``fallbacks``) or ``""`` when nothing fills the slot. ``label`` is one of the labels the dump prints:
``"kernel"``, ``"default backend kernel"``, ``"math kernel"``, ``"autograd kernel"``,
``"ambiguous autogradother"``, ``"backend fallback"``, or ``"missing"``.

The grader draws random registration sets each run, and switches the lab's table builder off while
your function runs: reason it out. ``lab.PythonDispatcher`` in the notebook is the place to test
your understanding first.
"""

from __future__ import annotations

# The backend keys this exercise uses, and which of them each autograd key serves
# (PyTorch: getBackendKeySetFromAutograd in c10/core/DispatchKeySet.cpp).
BACKEND_KEYS = ["CPU", "CUDA", "XLA", "Lazy", "Meta", "FPGA", "QuantizedCPU", "SparseCPU"]
AUTOGRAD_SERVES = {
    "AutogradCPU": ["CPU"],
    "AutogradCUDA": ["CUDA"],
    "AutogradXLA": ["XLA"],
    "AutogradLazy": ["Lazy"],
    "AutogradMeta": ["Meta"],
    "AutogradOther": ["FPGA", "QuantizedCPU", "SparseCPU"],
}


def fill_table(registrations: list[str], fallbacks: dict[str, str], keys: list[str]) -> dict[str, tuple[str, str]]:
    """``{key: (kernel, label)}`` for every key in ``keys`` (see the module docstring)."""
    raise NotImplementedError(
        "ex04b: implement fill_table in exercises/ex04b_fill_table.py: the kernel and label the dispatcher "
        "computes for each asked key (notebook 04, section 10)"
    )
