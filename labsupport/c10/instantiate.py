"""Template instantiation of the dispatcher's call paths for a fixed number of arguments.

In C++, ``Dispatcher::call`` and ``Dispatcher::redispatch`` are templates
(``template<class Return, class... Args> Return call(const TypedOperatorHandle<Return(Args...)>&,
Args...)`` in ``aten/src/ATen/core/dispatch/Dispatcher.h``): every operator signature gets its own
copy, and the arguments travel unboxed from the caller to the kernel.

The lab writes each call path once, in ``dispatcher.py``, taking ``*args``. Packing and unpacking
``*args`` costs time on every call, so the generated operator handles use an *instantiation*: the
same source text with ``*args`` spelled out as ``a0, a1, ...``, compiled once per arity. The copy
keeps the template's file name and line numbers, so tracebacks, ``lab.trace()`` and a debugger
point at ``dispatcher.py`` as they would for the template itself.
"""

from __future__ import annotations
import __future__

import inspect
import re
import textwrap
from collections.abc import Callable
from types import FunctionType
from typing import Any

# ``, *args: Any`` in the signature, ``, *args`` or ``*args`` in a call.
_STAR_ARGS = re.compile(r"(, )?\*args(: Any)?")
_ARGS = re.compile(r"\bargs\b")


def instantiate(
    method: Callable[..., Any], arity: int | None, edit: Callable[[str], str] | None = None
) -> FunctionType:
    """``method`` (a ``Dispatcher`` method whose variadic parameter is ``*args``) compiled for
    exactly ``arity`` positional arguments (``None``: keep ``*args``). ``edit`` may rewrite the
    source text first (the hooks benchmark uses it to cut out the observer check)."""
    if arity is not None and arity < 0:
        raise ValueError(f"arity must be >= 0, got {arity}")
    if method.__code__.co_freevars:
        raise ValueError(
            f"{method.__qualname__} uses variables of an enclosing scope ({', '.join(method.__code__.co_freevars)}): "
            "an instantiation is compiled from the source alone, so write it without closures or a bare "
            "super() (call the base class explicitly, e.g. Dispatcher.call(self, op, tensor_ks, *args))"
        )
    lines, first = inspect.getsourcelines(method)
    text = "".join(lines)
    if edit is not None:
        text = edit(text)
    if "*args" not in text:
        raise ValueError(f"{method.__qualname__} has no *args to instantiate")
    if arity is not None:
        names = ", ".join(f"a{i}" for i in range(arity))

        def spell_out(match: re.Match[str]) -> str:
            return f"{match.group(1) or ''}{names}" if arity else ""

        text = _STAR_ARGS.sub(spell_out, text)
        text = _ARGS.sub(f"({names}{',' if arity == 1 else ''})", text)  # args handed on as a tuple
    owner = method.__qualname__.rpartition(".")[0].rpartition(".")[2] or "_Template"
    # Blank lines put the `def` on the template's own line, inside a class of the template's name.
    source = "\n" * max(first - 2, 0) + f"class {owner}:\n" + textwrap.indent(textwrap.dedent(text), "    ")
    flags = __future__.annotations.compiler_flag
    namespace: dict[str, Any] = {}
    exec(compile(source, method.__code__.co_filename, "exec", flags=flags, dont_inherit=True),
         method.__globals__, namespace)  # fmt: skip
    function = namespace[owner].__dict__[method.__name__]
    function.__code__ = function.__code__.replace(co_qualname=method.__qualname__)
    function.__qualname__ = method.__qualname__
    if arity is not None:
        function.__doc__ = f"{method.__doc__ or ''}\n\n(Instantiated for {arity} argument{'s' * (arity != 1)}.)"
    return function
