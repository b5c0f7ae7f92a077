"""Kernels as the dispatcher stores them: unboxed, boxed, fallthrough; and boxing adapters.

Stands for ``aten/src/ATen/core/boxing/KernelFunction.h`` and ``boxing/impl/make_boxed_from_unboxed_functor.h``.

* An *unboxed* kernel is an ordinary function with the operator's own signature,
  ``fn(self, other, alpha)`` (or ``fn(ks, self, other, alpha)`` when registered ``with_keyset``).
* A *boxed* kernel works for any operator: ``fn(op, stack)`` (or ``fn(op, ks, stack)``), where the
  stack is a list holding the arguments; the kernel pops them and pushes the results.
* The dispatcher converts between the two in both directions, so a boxed fallback can serve an
  unboxed call and an unboxed kernel can serve a boxed call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from labsupport.c10.dispatch_key_set import DispatchKeySet

if TYPE_CHECKING:
    from labsupport.c10.operator_entry import OperatorEntry

Stack = list[Any]


def fallthrough_kernel(*args: Any, **kwargs: Any) -> Any:
    """``torch.library.fallthrough_kernel``: register it to make the dispatcher skip a key.

    It is never run: the dispatcher removes fallthrough keys from the call's key set up front
    (the fallthrough mask), so reaching this function means something bypassed the mask.
    """
    raise AssertionError(
        "fallthrough_kernel was executed, but the dispatcher should have skipped it by masking its key "
        "out of the key set; a kernel probably redispatched with a key set it built by hand"
    )


class KernelFunction:
    """``c10::KernelFunction``: one registered kernel, unboxed and/or boxed."""

    __slots__ = (
        "boxed", "debug", "inferred_schema", "is_ambiguous", "is_fallthrough", "python", "source", "unboxed",
        "with_keyset",
    )  # fmt: skip

    def __init__(
        self,
        unboxed: Callable[..., Any] | None = None,
        boxed: Callable[..., None] | None = None,
        *,
        with_keyset: bool | str = False,
        debug: str = "",
        source: str = "",
        inferred_schema: str | None = None,
    ) -> None:
        self.unboxed = unboxed
        self.boxed = boxed
        self.with_keyset = with_keyset
        self.debug = debug
        self.source = source
        self.is_fallthrough = unboxed is fallthrough_kernel
        self.is_ambiguous = False
        # What C++ infers from an unboxed kernel's type (``(Tensor _0) -> Tensor _0``); None: take it
        # from the operator's schema.
        self.inferred_schema = inferred_schema
        # True for a plain Python callable given to Library.impl: what torch.library registers (a
        # PythonKernelHolder). PyTorch prints such kernels as ``registered at <site> :: (none) [ boxed ]``.
        self.python = False

    @classmethod
    def from_unboxed(
        cls,
        fn: Callable[..., Any],
        *,
        with_keyset: bool | str = False,
        debug: str = "",
        inferred_schema: str | None = None,
    ) -> KernelFunction:
        """``makeFromUnboxedFunction``: an ordinary function with the operator's signature.

        ``debug`` is what dumps print for it (C++: ``CppFunction::debug()``; default: the function's
        name); ``inferred_schema`` is the signature C++ would infer from the function's type, checked
        against the operator's schema (``"(Tensor _0) -> Tensor _0"``).
        """
        return cls(unboxed=fn, with_keyset=with_keyset, debug=debug or _name_of(fn), inferred_schema=inferred_schema)

    @classmethod
    def from_boxed(cls, fn: Callable[..., None], *, with_keyset: bool = False, debug: str = "") -> KernelFunction:
        """``makeFromBoxedFunction``: a function ``fn(op, stack)`` (``fn(op, ks, stack)`` with keyset)."""
        return cls(boxed=fn, with_keyset=with_keyset, debug=debug or _name_of(fn))

    @property
    def is_boxed_only(self) -> bool:
        return self.unboxed is None

    def tags(self) -> str:
        """The bracket shown by ``_dispatch_dump``: ``[ boxed unboxed ]``, ``[ boxed ]``, ..."""
        if self.is_fallthrough:
            return "[ fallthrough boxed ]"
        return "[ boxed ]" if self.unboxed is None else "[ boxed unboxed ]"

    def call_boxed(self, op: OperatorEntry, ks: int, stack: Stack) -> None:
        """Run the kernel on a stack (``KernelFunction::callBoxed``), unboxing for unboxed kernels."""
        if self.boxed is not None:
            if self.with_keyset:
                self.boxed(op, DispatchKeySet.from_raw(ks), stack)
            else:
                self.boxed(op, stack)
            return
        n = len(op.schema.arguments) if op.schema is not None else len(stack)
        args = stack[len(stack) - n :]
        del stack[len(stack) - n :]
        if self.with_keyset == "raw":
            result = self.unboxed(ks, *args)  # type: ignore[misc]
        elif self.with_keyset:
            result = self.unboxed(DispatchKeySet.from_raw(ks), *args)  # type: ignore[misc]
        else:
            result = self.unboxed(*args)  # type: ignore[misc]
        push_outputs(op, stack, result)

    def __repr__(self) -> str:
        return f"<KernelFunction {self.debug} {self.tags()}>"


def _name_of(fn: Callable[..., Any]) -> str:
    """A kernel's name for dumps: ``Class.method`` or ``function`` (local scopes left out)."""
    qualname = getattr(fn, "__qualname__", None)
    if qualname and "<locals>" not in qualname:
        return qualname
    return getattr(fn, "__name__", None) or repr(fn)


def push_outputs(op: OperatorEntry, stack: Stack, result: Any) -> None:
    """Push a kernel's return value(s) onto the stack, one entry per schema return."""
    returns = len(op.schema.returns) if op.schema is not None else 1
    if returns == 1:
        stack.append(result)
    elif returns > 1:
        stack.extend(result)


def pop_outputs(op: OperatorEntry, stack: Stack) -> Any:
    """Turn the stack left by a boxed kernel into an unboxed return value."""
    returns = len(op.schema.returns) if op.schema is not None else len(stack)
    if returns == 0:
        return None
    if returns == 1:
        return stack[-1]
    return tuple(stack[-returns:])


def make_boxed_adapter(kernel: KernelFunction, op: OperatorEntry) -> Callable[..., Any]:
    """An unboxed-callable view of a boxed kernel (``BoxedKernelWrapper``): box, call, unbox.

    The dispatcher calls it as ``adapter(raw_keyset, *args)``.
    """
    boxed = kernel.boxed
    assert boxed is not None
    if kernel.with_keyset:

        def boxed_kernel_wrapper(ks: int, *args: Any) -> Any:
            stack = list(args)
            boxed(op, DispatchKeySet.from_raw(ks), stack)
            return pop_outputs(op, stack)

    else:

        def boxed_kernel_wrapper(ks: int, *args: Any) -> Any:
            stack = list(args)
            boxed(op, stack)
            return pop_outputs(op, stack)

    boxed_kernel_wrapper.__qualname__ = f"boxed_kernel_wrapper[{kernel.debug}]"
    return boxed_kernel_wrapper
