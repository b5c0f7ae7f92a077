"""Lazy re-exports for the ``at::meta`` and ``at::native`` packages.

``from labsupport.aten.native import structured_ufunc_add_CPU`` imports only the module that defines
it, so importing either package stays cheap and free of import cycles between the two.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that finds ``name`` in ``<package>.<exports[name]>`` on first use."""

    def lazy_attribute(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        # Remember it on the package, so the next lookup is a plain attribute read: composite kernels
        # are looked up on at::native at every call.
        setattr(sys.modules[package], name, value)
        return value

    return lazy_attribute
