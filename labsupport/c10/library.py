"""The registration API: ``Library(ns, kind)`` with ``define``, ``impl`` and ``fallback``.

Stands for ``torch/library.h`` (``TORCH_LIBRARY``, ``TORCH_LIBRARY_IMPL``, ``TORCH_LIBRARY_FRAGMENT``)
and ``torch.library.Library``:

* ``Library("myops", "DEF")``       -- TORCH_LIBRARY(myops, m): the one place that defines a namespace
* ``Library("myops", "FRAGMENT")``  -- TORCH_LIBRARY_FRAGMENT: more definitions for the namespace
* ``Library("myops", "IMPL", "CPU")`` -- TORCH_LIBRARY_IMPL(myops, CPU, m): kernels for one key
* ``Library("_", "IMPL")``          -- TORCH_LIBRARY_IMPL(_, Key, m): backend fallbacks for all ops

Everything a library registered is undone when it is closed (``close()``, ``del``, or the end of a
``with`` block), so a notebook cell that registers kernels can be run again.

The signature is ``torch.library.Library``'s, so a registration script ports by changing one import:
``Library(ns, kind, dispatch_key="")``, ``define(schema, alias_analysis="")``,
``impl(op_name, fn, dispatch_key="", *, with_keyset=False)``, ``fallback(fn, dispatch_key="", *, with_keyset=False)``.
Registration order is free, as in PyTorch (where ``TORCH_LIBRARY_IMPL`` blocks in other files run at
static-initialisation time, in any order): an ``impl`` may come before its ``define``; the operator then
exists with ``schema: (none)`` until the ``define`` arrives. Bad registrations raise PyTorch's exception
with PyTorch's words first; a sentence starting "(lab)" follows where a hint helps. Differences from
PyTorch are listed in labsupport/c10/README.md.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from labsupport.c10.dispatch_key import DispatchKey, parse_dispatch_key
from labsupport.c10.dispatcher import Dispatcher, caller_site
from labsupport.c10.dispatcher import dispatcher as default_dispatcher
from labsupport.c10.kernel_function import KernelFunction
from labsupport.c10.operator_entry import dump_style
from labsupport.c10.schema import FunctionSchema, check_known_types

KINDS = ("DEF", "IMPL", "FRAGMENT")
MACROS = {"DEF": "TORCH_LIBRARY", "IMPL": "TORCH_LIBRARY_IMPL", "FRAGMENT": "TORCH_LIBRARY_FRAGMENT"}
ALIAS_ANALYSIS_KINDS = ("FROM_SCHEMA", "CONSERVATIVE", "PURE_FUNCTION")


class _Owner:
    """Identifies one library's registrations without keeping the library alive."""

    __slots__ = ("closed", "description", "site")

    def __init__(self, description: str, site: str = "") -> None:
        self.description = description
        self.closed = False
        self.site = site


class Library:
    """A group of registrations that live and die together (``torch.library.Library``)."""

    def __init__(
        self, ns: str, kind: str, dispatch_key: str | DispatchKey = "", *, dispatcher: Dispatcher | None = None
    ) -> None:
        self.closed = True  # until construction succeeds (close() and __del__ then do nothing)
        self._undo: list[Callable[[], None]] = []
        self._owns_namespace = False
        if kind not in KINDS:
            raise ValueError(f"Unsupported kind: {kind} (lab) Use one of {', '.join(KINDS)}.")
        self.ns = ns
        self.kind = kind
        self.dispatch_key = parse_dispatch_key(dispatch_key) if dispatch_key else None
        self.dispatcher = dispatcher if dispatcher is not None else default_dispatcher
        self.site = caller_site()
        # Registrations remember this token, not the library, so that dropping the last reference to
        # a Library frees it at once (and its finalizer undoes the registrations).
        self._token = _Owner(repr(self), self.site)
        if ns == "_" and kind != "IMPL":
            macro = MACROS[kind]
            raise RuntimeError(
                f"{macro}: cannot define {macro} with the wildcard namespace _ (every {macro} defines operators "
                f"for a distinct namespace!) Did you mean to use TORCH_LIBRARY_IMPL instead?  {self._block()} "
                "(lab) Library('_', 'IMPL') registers fallbacks and kernels for operators of any namespace."
            )
        self.closed = False

    def __repr__(self) -> str:
        key = self.dispatch_key.name if self.dispatch_key else ""
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={key})>"

    # ---- registration ----
    def define(self, schema: str, alias_analysis: str = "", *, tags: tuple[Any, ...] = ()) -> str:
        """``m.def(schema)``: declare an operator. Returns its name as written, without the overload
        (``"foo"`` for ``"foo.bar(...)"``), as ``torch.library.Library.define`` does.

        ``alias_analysis`` is ``""`` / ``"FROM_SCHEMA"`` (the default), ``"CONSERVATIVE"`` or
        ``"PURE_FUNCTION"`` (C++ ``torch::schema(..., AliasAnalysisKind::PURE_FUNCTION)``; PyTorch's
        Python ``Library.define`` refuses that one, the lab accepts it). ``tags`` is accepted and
        ignored (the lab has no ``torch.Tag``).
        """
        self._check_open()
        if alias_analysis not in ("", *ALIAS_ANALYSIS_KINDS):
            raise RuntimeError(
                f"Invalid alias_analysis type {alias_analysis} (lab) Use one of {', '.join(ALIAS_ANALYSIS_KINDS)}, "
                "or leave it empty for FROM_SCHEMA."
            )
        site = caller_site()
        name = schema.split("(")[0].strip()
        if self.kind == "IMPL":
            raise RuntimeError(
                f'def("{name}"): Cannot define an operator inside of a TORCH_LIBRARY_IMPL block.  All def()s '
                f"should be placed in the (unique) TORCH_LIBRARY block for their namespace.  {self._block()} "
                f"(lab) Use Library({self.ns!r}, 'DEF') or Library({self.ns!r}, 'FRAGMENT')."
            )
        parsed = FunctionSchema.parse(schema)
        check_known_types(parsed, schema)
        if parsed.namespace is None:
            parsed = parsed.with_namespace(self.ns)
        elif parsed.namespace != self.ns:
            raise RuntimeError(
                f"Explicitly provided namespace ({parsed.namespace}) in schema string does not match namespace of "
                f"enclosing {MACROS[self.kind]} block ({self.ns}).  Move this definition to the (unique) "
                "TORCH_LIBRARY block corresponding to this namespace (and consider deleting the namespace from "
                f"your schema string.)  {self._block()}"
            )
        kind = alias_analysis or "FROM_SCHEMA"
        if self.kind == "DEF":
            self._claim_namespace()
        self._undo.append(self.dispatcher.register_def(parsed, site, owner=self._token, alias_analysis=kind))
        prefix, sep, last = name.rpartition("::")
        return prefix + sep + last.split(".")[0]  # as torch.library: the name as written, without overload

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
        PyTorch. The operator need not be defined yet (its ``define`` may come later, from anywhere).
        ``with_keyset=True`` passes the call's DispatchKeySet as the first argument, so the
        kernel can redispatch; ``with_keyset="raw"`` passes it as a plain 64-bit int (what the
        generated kernels use: cheaper, like C++ passing the set by value). ``fn`` may also be a
        ``KernelFunction``: a C++-style kernel that names itself (``KernelFunction.from_unboxed(fn,
        debug=..., inferred_schema=...)``) or a boxed one such as ``autograd_not_implemented_fallback()``.
        """
        self._check_open()
        if not callable(fn) and not isinstance(fn, KernelFunction):
            raise TypeError(f"Input function is required to be a callable but found type {type(fn)}")
        site = caller_site()
        key = self._resolve_key(dispatch_key, op_name)
        full_name = self._qualify(op_name)
        if isinstance(fn, KernelFunction):
            kernel = fn
        else:
            kernel = KernelFunction.from_unboxed(fn, with_keyset=with_keyset)
            kernel.python = not kernel.is_fallthrough
        debug = kernel.debug if not kernel.is_fallthrough else site
        self._undo.append(
            self.dispatcher.register_impl(full_name, key, kernel, debug, owner=self._token, site=self.site)
        )

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
        (PyTorch's Python fallbacks are called ``fn(op, *args, **kwargs)``; the lab's are boxed, as
        C++ fallbacks are.)
        """
        self._check_open()
        site = caller_site()
        if self.ns != "_":
            raise RuntimeError(
                f'Fallback can only be registered using library fragment on the global namespace "_" but it is '
                f"{self.ns} (lab) Register fallbacks in Library('_', 'IMPL'): a fallback serves every operator."
            )
        if not dispatch_key and self.dispatch_key is None:
            raise AssertionError(
                "dispatch_key must not be empty for fallback (lab) A fallback fills one key's slot for every "
                "operator: name the key, e.g. lib.fallback(fn, 'AutogradCPU')."
            )
        key = self._resolve_key(dispatch_key, None)
        from labsupport.c10.kernel_function import fallthrough_kernel

        if isinstance(fn, KernelFunction):
            kernel = fn
        elif fn is fallthrough_kernel:
            kernel = KernelFunction.from_unboxed(fallthrough_kernel)
        else:
            kernel = KernelFunction.from_boxed(fn, with_keyset=with_keyset)
            kernel.python = True
        debug = site if kernel.is_fallthrough else kernel.debug
        self._undo.append(self.dispatcher.register_fallback(key, kernel, debug, owner=self._token, site=self.site))

    # ---- lifetime ----
    def close(self) -> None:
        """Undo every registration of this library, newest first (``torch.library.Library._destroy``)."""
        if self.closed:
            return
        self.closed = True
        while self._undo:
            self._undo.pop()()
        if self._owns_namespace and self.dispatcher.namespace_owners.get(self.ns) is self._token:
            del self.dispatcher.namespace_owners[self.ns]
        self._token.closed = True

    _destroy = close

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
    def _block(self) -> str:
        """PyTorch's error suffix naming the library block (its construction site)."""
        where = self.site.removeprefix("registered at ")
        return f"(Error occurred while processing {MACROS[self.kind]} block at {where})"

    def _check_open(self) -> None:
        if self.closed:
            raise AssertionError(
                "Library object has been destroyed (lab) It was closed (close(), del or the end of its with block); "
                "create a new Library to register more."
            )

    def _claim_namespace(self) -> None:
        """``Dispatcher::registerLibrary``. PyTorch claims the namespace when the Library is made; the lab
        waits for its first ``define``, so that re-running a notebook cell ``lib = Library("myops", "DEF")``
        works (rebinding ``lib`` drops the old library after the new one is made, before its define)."""
        if self._owns_namespace:
            return
        owner = self.dispatcher.namespace_owners.get(self.ns)
        if owner is not None and not owner.closed:
            raise RuntimeError(
                f"Only a single TORCH_LIBRARY can be used to register the namespace {self.ns}; please put all of "
                "your definitions in a single TORCH_LIBRARY block.  If you were trying to specify implementations, "
                "consider using TORCH_LIBRARY_IMPL (which can be duplicated).  If you really intended to define "
                "operators for a single namespace in a distributed way, you can use TORCH_LIBRARY_FRAGMENT to "
                "explicitly indicate this.  Previous registration of TORCH_LIBRARY was "
                f"{owner.site}; latest registration was {self.site} "
                "(lab) Use kind 'FRAGMENT' for more definitions, or close the other library first "
                "(lib.close() or del lib)."
            )
        self.dispatcher.namespace_owners[self.ns] = self._token
        self._owns_namespace = True

    def _resolve_key(self, dispatch_key: str | DispatchKey, op_name: str | None) -> DispatchKey:
        if dispatch_key:
            key = parse_dispatch_key(dispatch_key)
        elif self.dispatch_key is not None:
            key = self.dispatch_key
        else:
            key = DispatchKey.CompositeImplicitAutograd
        if self.dispatch_key is not None and key is not self.dispatch_key:
            what = f'impl("{op_name}", ...)' if op_name is not None else "fallback(...)"
            raise RuntimeError(
                f"{what}: Explicitly provided dispatch key ({key.name}) is inconsistent with the dispatch key of "
                f"the enclosing TORCH_LIBRARY_IMPL block ({self.dispatch_key.name}).  Please declare a separate "
                f"TORCH_LIBRARY_IMPL block for this dispatch key and move your impl() there.  {self._block()}"
            )
        return key

    def _qualify(self, op_name: str) -> str:
        if "::" in op_name:
            ns = op_name.split("::", 1)[0]
            if ns != self.ns and self.ns != "_":
                raise RuntimeError(
                    f'impl("{op_name}", ...): Explicitly provided namespace ({ns}) in operator name does not match '
                    f"namespace of enclosing {MACROS[self.kind]} block ({self.ns}).  Move this definition to the "
                    f"{MACROS[self.kind]} block corresponding to this namespace (and consider deleting the namespace "
                    f"from your schema string.)  {self._block()}"
                )
            return op_name
        return f"{self.ns}::{op_name}"


class pytorch_dump_style:
    """``with lab.pytorch_dump_style():`` dumps name plain Python kernels as PyTorch names a
    ``torch.library`` kernel: ``registered at <Library's file>:<line> :: (none) [ boxed ]``.

    The lab's default names them by function (``myadd_cpu :: (Tensor _0, Tensor _1) -> Tensor _0
    [ boxed unboxed ]``), so that tables say which function runs; see labsupport/c10/README.md.
    ``pytorch_dump_style.set(True)`` switches it for the rest of the session.
    """

    def __init__(self, enabled: bool = True) -> None:
        self._enabled = enabled

    def __enter__(self) -> pytorch_dump_style:
        self._saved = dump_style.pytorch
        dump_style.pytorch = self._enabled
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        dump_style.pytorch = self._saved

    @staticmethod
    def set(enabled: bool) -> None:
        dump_style.pytorch = enabled
