"""Naming and signature helpers shared by the generators.

Stands for ``torchgen/api/`` (``cpp.py``, ``python.py``, ``dispatcher.py``): how an operator's
schema becomes a Python parameter list, a C++-API function name, a Python binding signature.
"""

from __future__ import annotations

from labsupport.c10.schema import Argument, FunctionSchema, parse_default
from labsupport.codegen.model import NativeFunction

PY_KEYWORDS = {"from", "in", "is", "lambda", "def", "class", "global", "pass", "yield", "import", "as"}


def py_name(name: str) -> str:
    """A schema argument name as a Python identifier (``from`` -> ``from_``)."""
    return name + "_" if name in PY_KEYWORDS else name


def arg_names(func: FunctionSchema) -> list[str]:
    """Every argument in schema order (the dispatcher's calling convention)."""
    return [py_name(a.name) for a in func.arguments]


def default_literal(arg: Argument) -> str | None:
    """The Python spelling of a schema default, or None when the argument has none."""
    if arg.default is None:
        return None
    value = parse_default(arg.default, arg.type)
    return repr(tuple(value)) if isinstance(value, list) else repr(value)


def params_with_defaults(args: list[Argument]) -> str:
    """``self, other, alpha=1``: C++-API style parameters, defaults only on the trailing run."""
    names = [py_name(a.name) for a in args]
    defaults = [default_literal(a) for a in args]
    first = len(args)
    while first > 0 and defaults[first - 1] is not None:
        first -= 1
    return ", ".join(n if i < first else f"{n}={defaults[i]}" for i, n in enumerate(names))


def tensor_keyset_expr(func: FunctionSchema) -> str:
    """The OR of the dispatch arguments' key sets (``DispatchKeyExtractor``, specialised per schema)."""
    parts = []
    for i in func.dispatch_arg_indices:
        arg = func.arguments[i]
        name = py_name(arg.name)
        t = arg.type
        if t.is_tensor:
            parts.append(f"{name}._ks")
        elif t.is_list or (t.is_optional and t.elem is not None and t.elem.is_list):
            parts.append(f"_keys_of_list({name})")
        else:  # Tensor?
            parts.append(f"({name}._ks if {name} is not None else 0)")
    return " | ".join(parts) if parts else "0"


def functional_name_counts(functions: tuple[NativeFunction, ...], variant: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in functions:
        if variant in f.variants and not f.func.is_out_fn():
            counts[f.func.name] = counts.get(f.func.name, 0) + 1
    return counts


def api_name(f: NativeFunction, counts: dict[str, int]) -> str:
    """The C++-API name in Python: ``add``, ``add_``, ``add_out``; Python has no overloading, so when
    several functional overloads share a name, the ones with an overload name are called by their
    unambiguous name (``sum`` and ``sum_dim_IntList``)."""
    if f.func.is_out_fn():
        return f"{f.func.name}_out"
    if counts.get(f.func.name, 0) > 1 and f.func.overload_name:
        return f.func.unambiguous_name()
    return f.func.name


# ---------------------------------------------------------------- Python binding signatures

def python_signature(f: NativeFunction, *, method: bool, out: NativeFunction | None = None) -> str:
    """PyTorch's binding signature, e.g. ``add(Tensor input, Tensor other, *, Scalar alpha=1, Tensor out=None)``.

    ``self`` is called ``input`` in function bindings and left out of method bindings; an out=
    sibling adds ``Tensor out=None``; factories add ``bool requires_grad=False``.
    """
    params: list[str] = []
    star = False
    for a in f.func.arguments:
        if a.is_out:
            continue
        if a.name == "self" and method:
            continue
        name = "input" if a.name == "self" else a.name
        if a.kwarg_only and not star:
            params.append("*")
            star = True
        default = f"={a.default}" if a.default is not None else ""
        if a.name == "pin_memory":
            default = "=False"
        params.append(f"{a.type} {name}{default}")
    extra = []
    if out is not None:
        extra.append("Tensor out=None")
    if f.is_factory:
        extra.append("bool requires_grad=False")
    if extra and not star:
        params.append("*")
    params.extend(extra)
    return f"{f.func.name}({', '.join(params)})"
