"""The registration API: ``Library(ns, kind)`` with ``define``, ``impl`` and ``fallback``.

Stands for ``torch/library.h`` (``TORCH_LIBRARY``, ``TORCH_LIBRARY_IMPL``, ``TORCH_LIBRARY_FRAGMENT``)
and ``torch.library.Library``:

* ``Library("myops", "DEF")``       -- TORCH_LIBRARY(myops, m): the one place that defines a namespace
* ``Library("myops", "FRAGMENT")``  -- TORCH_LIBRARY_FRAGMENT: more definitions for the namespace
* ``Library("myops", "IMPL", "CPU")`` -- TORCH_LIBRARY_IMPL(myops, CPU, m): kernels for one key
* ``Library("_", "IMPL")``          -- TORCH_LIBRARY_IMPL(_, Key, m): backend fallbacks for all ops

Everything a library registered is undone when it is closed (``close()``, ``del``, or the end of a
``with`` block), so a notebook cell that registers kernels can be run again.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from labsupport.c10.dispatch_key import DispatchKey, parse_dispatch_key
from labsupport.c10.dispatcher import Dispatcher, caller_site
from labsupport.c10.dispatcher import dispatcher as default_dispatcher
from labsupport.c10.kernel_function import KernelFunction
from labsupport.c10.schema import FunctionSchema

KINDS = ("DEF", "IMPL", "FRAGMENT")


class _Owner:
    """Identifies one library's registrations without keeping the library alive."""

    __slots__ = ("closed", "description")

    def __init__(self, description: str) -> None:
        self.description = description
        self.closed = False


class Library:
    """A group of registrations that live and die together."""

    def __init__(
        self, ns: str, kind: str, dispatch_key: str | DispatchKey = "", *, dispatcher: Dispatcher | None = None
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"Library kind must be one of {KINDS}, got {kind!r}")
        self.ns = ns
        self.kind = kind
        self.dispatch_key = parse_dispatch_key(dispatch_key) if dispatch_key else None
        self.dispatcher = dispatcher if dispatcher is not None else default_dispatcher
        self.site = caller_site()
        self._undo: list[Callable[[], None]] = []
        self._owns_namespace = False
        self.closed = False
        # Registrations remember this token, not the library, so that dropping the last reference to
        # a Library frees it at once (and its finalizer undoes the registrations).
        self._token = _Owner(repr(self))

    def __repr__(self) -> str:
        key = f", {self.dispatch_key.name}" if self.dispatch_key else ""
        return f"Library({self.kind}, {self.ns}{key}, {self.site})"

    # ---- registration ----
    def define(self, schema: str, *, alias_analysis: str = "") -> str:
        """``m.def(schema)``: declare an operator. Returns its qualified name."""
        self._check_open()
        if self.kind == "IMPL":
            raise RuntimeError(f"{self}: define() is not allowed in an IMPL library; use DEF or FRAGMENT")
        site = caller_site()
        parsed = FunctionSchema.parse(schema)
        if parsed.namespace is None:
            parsed = parsed.with_namespace(self.ns)
        elif parsed.namespace != self.ns:
            raise RuntimeError(
                f"{site}: define() of {parsed.full_name} in Library({self.ns!r}): the schema's namespace "
                f"{parsed.namespace!r} does not match the library's"
            )
        if self.kind == "DEF":
            self._claim_namespace(site)
        self._undo.append(self.dispatcher.register_def(parsed, site, owner=self._token))
        return parsed.full_name

    def impl(
        self,
        op_name: str,
        fn: Callable[..., Any] | KernelFunction,
        dispatch_key: str | DispatchKey = "",
        *,
        with_keyset: bool | str = False,
    ) -> None:
        """``m.impl(name, fn)``: register ``fn`` as the kernel of ``op_name`` for ``dispatch_key``.

        With no key (and no key on the library) the kernel goes to CompositeImplicitAutograd, as in
        PyTorch. ``with_keyset=True`` passes the call's DispatchKeySet as the first argument, so the
        kernel can redispatch; ``with_keyset="raw"`` passes it as a plain 64-bit int (what the
        generated kernels use: cheaper, like C++ passing the set by value). ``fn`` may also be a boxed kernel such as
        ``autograd_not_implemented_fallback()``.
        """
        self._check_open()
        site = caller_site()
        key = self._resolve_key(dispatch_key, site)
        full_name = self._qualify(op_name, site)
        op = self.dispatcher.find_op(full_name)
        if op is None or op.schema is None:
            import difflib

            known = self.dispatcher.all_operator_names()
            close = difflib.get_close_matches(full_name, known, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else " Define it first with Library.define()."
            raise RuntimeError(f"{site}: impl() for {full_name}, but no operator with that name is defined.{hint}")
        kernel = fn if isinstance(fn, KernelFunction) else KernelFunction.from_unboxed(fn, with_keyset=with_keyset)
        debug = kernel.debug if not kernel.is_fallthrough else site
        self._undo.append(self.dispatcher.register_impl(full_name, key, kernel, debug, owner=self._token))

    def fallback(
        self,
        fn: Callable[..., Any] | KernelFunction,
        dispatch_key: str | DispatchKey = "",
        *,
        with_keyset: bool = False,
    ) -> None:
        """``m.fallback(fn)``: a boxed kernel for *every* operator at one key.

        ``fn(op, stack)`` (or ``fn(op, ks, stack)`` with ``with_keyset=True``) pops the arguments
        from ``stack`` and pushes the results; ``lab.fallthrough_kernel`` makes the key a fallthrough.
        """
        self._check_open()
        site = caller_site()
        if self.ns != "_":
            raise RuntimeError(
                f"{site}: fallback() needs Library('_', 'IMPL') (the wildcard namespace), not {self.ns!r}"
            )
        key = self._resolve_key(dispatch_key, site)
        from labsupport.c10.kernel_function import fallthrough_kernel

        if isinstance(fn, KernelFunction):
            kernel = fn
        elif fn is fallthrough_kernel:
            kernel = KernelFunction.from_unboxed(fallthrough_kernel)
        else:
            kernel = KernelFunction.from_boxed(fn, with_keyset=with_keyset)
        debug = site if kernel.is_fallthrough else kernel.debug
        self._undo.append(self.dispatcher.register_fallback(key, kernel, debug, owner=self._token))

    # ---- lifetime ----
    def close(self) -> None:
        """Undo every registration of this library, newest first."""
        if self.closed:
            return
        self.closed = True
        while self._undo:
            self._undo.pop()()
        if self._owns_namespace and self.dispatcher.namespace_owners.get(self.ns) is self._token:
            del self.dispatcher.namespace_owners[self.ns]
        self._token.closed = True

    def __enter__(self) -> Library:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # ---- helpers ----
    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"{self} is closed; create a new Library to register more")

    def _claim_namespace(self, site: str) -> None:
        if self._owns_namespace:
            return
        owner = self.dispatcher.namespace_owners.get(self.ns)
        if owner is not None and owner is not self._token and not owner.closed:
            raise RuntimeError(
                f"{site}: only a single Library({self.ns!r}, 'DEF') can define a namespace, and "
                f"{owner.description} already does. Use kind 'FRAGMENT' for more definitions, or close the "
                "other library first (lib.close() or del lib)."
            )
        self.dispatcher.namespace_owners[self.ns] = self._token
        self._owns_namespace = True

    def _resolve_key(self, dispatch_key: str | DispatchKey, site: str) -> DispatchKey:
        try:
            if dispatch_key:
                key = parse_dispatch_key(dispatch_key)
            elif self.dispatch_key is not None:
                key = self.dispatch_key
            else:
                key = DispatchKey.CompositeImplicitAutograd
        except ValueError as error:
            raise ValueError(f"{site}: {error}") from None
        if self.dispatch_key is not None and key is not self.dispatch_key:
            raise RuntimeError(f"{site}: {self} registers kernels for {self.dispatch_key.name} only, not {key.name}")
        return key

    def _qualify(self, op_name: str, site: str) -> str:
        if "::" in op_name:
            ns = op_name.split("::", 1)[0]
            if ns != self.ns and self.ns != "_":
                raise RuntimeError(f"{site}: {op_name} is not in this library's namespace {self.ns!r}")
            return op_name
        return f"{self.ns}::{op_name}"
