"""The Python binding generators: ``torch.add`` and ``Tensor.add``.

Stands for ``tools/autograd/gen_python_functions.py`` (``python_torch_functions_*.cpp`` and
``python_variable_methods.cpp``). Each binding gathers every overload of one name (and the out=
sibling that ``out=`` selects) into one parser; a fast path handles the most common call shape
without parsing at all.
"""

from __future__ import annotations

import re

from labsupport.codegen.api import (
    api_name,
    default_literal,
    functional_name_counts,
    py_name,
    python_signature,
)
from labsupport.codegen.gen import handle_name, header
from labsupport.codegen.model import NativeFunction, OpsRegistry

# Pointwise ops whose bindings accept Python numbers where a Tensor is expected (torch.add(1, 2)).
NUMBERS_AS_TENSORS = ("add", "sub", "mul", "add_", "sub_", "mul_")

DUNDERS = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_",
    "__sub__": "sub", "__isub__": "sub_",
    "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_",
    "__neg__": "neg",
}  # fmt: skip


# Dunders bound to the method itself; the others go through TypeError_to_NotImplemented_.
UNWRAPPED_DUNDERS = ("__neg__",)


def _dunder_binding(dunder: str, target: str, f: NativeFunction, counts: dict[str, int]) -> str:
    """``Tensor.__add__``: PyTorch binds ``TypeError_to_NotImplemented_<THPVariable_add>``, so a
    TypeError (an operand it cannot take, or every ``__torch_function__`` refusing) becomes
    NotImplemented and Python tries the other operand, then says "unsupported operand type(s)". The
    common call keeps the method's fast path; everything else goes through the method binding."""
    fast = _fast_path(f, method=True, counts=counts)
    params = fast_path_params(f, method=True) if fast else []
    head = ", ".join(["self"] + [f"{p}=_NO_ARG" for p in params])
    head = f"{head}, /, *args, **kwargs" if params else "self, *args, **kwargs"
    given = f"*_given({', '.join(params)}), " if params else ""
    return (
        f"\n\ndef {dunder}({head}):\n"
        f'    """Tensor.{dunder}: TypeError_to_NotImplemented_<THPVariable_{target}> (python_variable_methods.cpp)."""\n'
        + "".join(fast)
        + "    try:\n"
        + f"        return {target}(self, {given}*args, **kwargs)\n"
        + "    except TypeError:\n"
        + "        return NotImplemented\n"
    )


def _out_sibling(reg: OpsRegistry, f: NativeFunction) -> NativeFunction | None:
    """The out= op that ``out=`` selects for a functional op (never for an in-place one)."""
    if f.func.is_inplace:
        return None
    target = f.func.signature_str()
    for g in reg.functions:
        if g.func.is_out_fn() and g.func.signature_str() == target:
            return g
    return None


# Operators of the lab that ``_SKIP_PYTHON_BINDINGS`` (tools/autograd/gen_python_functions.py) names:
# PyTorch generates no ``torch.<op>`` function for them (Python reaches them as ``torch.ops.aten.<op>``).
# PyTorch has no ``Tensor.<op>`` method either; the lab keeps the method bindings of ``slice`` and
# ``alias``, because its Python Tensor inherits the C++ API (TensorBody) and would expose
# ``at::Tensor::slice`` there anyway.
# The patterns are matched against the C++ name without the overload, anchored at both ends, as there.
SKIP_PYTHON_BINDINGS = tuple(
    re.compile(rf"^{pattern}$")
    for pattern in ("alias", r".*_backward", r".*_forward", "_unsafe_view", "slice", "to", "_to_copy", "copy_")
)


def skips_python_binding(name: str) -> bool:
    """``should_generate_py_binding``'s name test (for the ``torch.<op>`` functions)."""
    return any(pattern.match(name) for pattern in SKIP_PYTHON_BINDINGS)


def _overloads(reg: OpsRegistry, variant: str) -> dict[str, list[NativeFunction]]:
    names: dict[str, list[NativeFunction]] = {}
    for f in reg.functions:
        if variant in f.variants and not f.func.is_out_fn():
            if variant == "function" and skips_python_binding(f.func.name):
                continue
            names.setdefault(f.func.name, []).append(f)
    return names


def _binding(
    reg: OpsRegistry, name: str, overloads: list[NativeFunction], *, method: bool, counts: dict[str, int]
) -> str:
    """One binding function: parse, then call the C++ API of the matching overload."""
    var = f"_{name}_parser"
    sigs = []
    for f in overloads:
        sigs.append(python_signature(f, method=method, out=None if method else _out_sibling(reg, f)))
    deprecated = _deprecated_alpha_overload(reg, overloads[0], method=method)
    if deprecated is not None:
        sigs.append(deprecated[0])
    numbers = name in NUMBERS_AS_TENSORS
    parser = (
        f"{var} = PythonArgParser(\n"
        + "    [\n"
        + "".join(f'        "{s}",\n' for s in sigs)
        + "    ],\n"
        + f"    method={method},\n"
        + f"    allow_numbers_as_tensors={numbers},\n"
        + "    tensor_type=TensorBase,\n"
        + "    wrap_number=scalar_to_tensor,\n"
        + ")\n"
    )
    torch_file = "python_variable_methods.cpp" if method else "python_torch_functions_*.cpp"
    fast = _fast_path(overloads[0], method=method, counts=counts)
    params = fast_path_params(overloads[0], method=method) if fast else []
    head = ", ".join((["self"] if method else []) + [f"{p}=_NO_ARG" for p in params])
    head = f"{head}, /, *args, **kwargs" if params else ("self, *args, **kwargs" if method else "*args, **kwargs")
    lines = [
        f"\n\n{parser}\n\ndef {name}({head}):\n",
        f'    """torch::autograd::THPVariable_{name} ({torch_file})."""\n',
        *fast,
    ]
    if params:
        lines.append(f"    args = _given({', '.join(params)}) + args  # the call as it was made, for the parser\n")
    if method:
        lines.append(f"    r = {var}.parse(args, kwargs, self)\n")
    else:
        lines.append(f"    r = {var}.parse(args, kwargs)\n")
    lines += _torch_function_check(name, method=method)
    for index, f in enumerate(overloads):
        lines += _overload_call(reg, f, index, method=method, counts=counts)
    if deprecated is not None:
        lines += deprecated[1](len(overloads))
    return "".join(lines)


def _torch_function_check(name: str, *, method: bool) -> list[str]:
    """``if(_r.has_torch_function()) return handle_torch_function(...)``: an overloaded argument (a
    Tensor subclass or other object with ``__torch_function__``) or an active TorchFunctionMode hands
    the call, as it was made, to Python (labsupport/overrides.py)."""
    call_args = "(self,) + args" if method else "args"
    module = "torch.Tensor" if method else "torch"
    return [
        "    if r.overloaded_args or _torch_function_mode_enabled():  # __torch_function__\n",
        f'        return _handle_torch_function(r.overloaded_args, {name}, {call_args}, kwargs, "{module}")\n',
    ]


def _deprecated_alpha_overload(reg: OpsRegistry, f: NativeFunction, *, method: bool):
    """PyTorch still binds the old ``add(input, alpha, other)`` spelling of ops with an ``alpha``
    (``|deprecated`` signatures in gen_python_functions.py); it warns when used, and its presence is
    why a bad call prints "received an invalid combination of arguments"."""
    names = [a.name for a in f.func.arguments]
    if names[:2] != ["self", "other"] or "alpha" not in names or (f.func.is_inplace and not method):
        return None
    out = None if method else _out_sibling(reg, f)
    if method:
        sig = f"{f.func.name}(Scalar alpha, Tensor other)|deprecated"
    else:
        sig = f"{f.func.name}(Tensor input, Scalar alpha, Tensor other, *, Tensor out=None)|deprecated"

    def lines(index: int) -> list[str]:
        target = "self" if method else "input"
        body = [f"    if r.index == {index}:  # the deprecated (alpha, other) order\n"]
        if method:
            body.append("        alpha, other = r.values\n")
        else:
            body.append("        input, alpha, other, out = r.values\n")
            if out is not None:
                body.append("        if out is not None:\n")
                body.append(f"            return functions.{f.func.name}_outf(input, other, alpha, out)\n")
        body.append(f"        return _ops.{handle_name(f)}.call({target}, other, alpha)\n")
        return body

    return sig, lines


def _target(f: NativeFunction, counts: dict[str, int], *, method: bool) -> str:
    """What a binding calls. In C++ the binding calls at::add / at::Tensor::add, inline functions
    that compile down to at::_ops::add_Tensor::call (a release build's backtrace goes straight from
    THPVariable_add to the handle); the lab's bindings call the handle too. A manual_cpp_binding op
    goes through its hand-written API function instead."""
    if f.manual_cpp_binding:
        return f"TensorBody.{api_name(f, counts)}" if method else f"functions.{api_name(f, counts)}"
    return f"_ops.{handle_name(f)}.call"


def fast_path_params(f: NativeFunction, *, method: bool) -> list[str]:
    """The positional-only parameters a binding's fast path takes: one per required tensor."""
    args = [a for a in f.func.arguments if not (method and a.name == "self")]
    return [f"_{a.name}" for a in args if a.default is None and not a.kwarg_only]


def _fast_path(f: NativeFunction, *, method: bool, counts: dict[str, int]) -> list[str]:
    """``if the call is (Tensor, Tensor) with no keywords: skip the parser``.

    The binding names the required tensors as positional-only parameters defaulting to ``_NO_ARG``,
    so Python itself unpacks the common call (no tuple to build and unpack); every other call is
    put back together as it was made and parsed.
    """
    args = [a for a in f.func.arguments if not (method and a.name == "self")]
    required = [a for a in args if a.default is None and not a.kwarg_only]
    if not required or any(not a.type.is_tensor for a in required) or f.is_factory:
        return []
    names = fast_path_params(f, method=method)
    # _FastTensor is the Tensor class, or None while a TorchFunctionMode is on (labsupport/overrides.py):
    # a subclass, or any call under a mode, takes the slow path, which checks for __torch_function__.
    checks = " and ".join(f"type({n}) is _FastTensor" for n in (["self"] if method else []) + names)
    values = []
    position = 0
    for a in f.func.arguments:
        if method and a.name == "self":
            values.append("self")
        elif a in required:
            values.append(names[position])
            position += 1
        else:
            values.append(default_literal(a) or "None")
    target = _target(f, counts, method=method)
    return [
        f"    if {checks} and not args and not kwargs:  # fast path: the common call needs no parsing\n",
        f"        return {target}({', '.join(values)})\n",
    ]


def _overload_call(reg: OpsRegistry, f: NativeFunction, index: int, *, method: bool, counts: dict[str, int]) -> list[str]:
    params = [a for a in f.func.arguments if not a.is_out and not (method and a.name == "self")]
    names = [("input" if a.name == "self" else py_name(a.name)) for a in params]
    out = None if method else _out_sibling(reg, f)
    unpack = list(names)
    if out is not None:
        unpack.append("out")
    if f.is_factory:
        unpack.append("requires_grad")
    call_values = []
    for a in f.func.arguments:
        if a.is_out:
            continue
        if method and a.name == "self":
            call_values.append("self")
        else:
            call_values.append("input" if a.name == "self" else py_name(a.name))
    target = _target(f, counts, method=method)
    lines = [f"    if r.index == {index}:\n"]
    if unpack:
        lines.append(f"        {', '.join(unpack)}{',' if len(unpack) == 1 else ''} = r.values\n")
    if out is not None:
        outf = f"functions.{api_name(out, counts)}f"
        lines.append("        if out is not None:\n")
        lines.append(f"            return {outf}({', '.join(call_values)}, out)\n")
    if f.is_factory:
        lines.append(f"        with AutoDispatchBelowADInplaceOrView():  # torch::{f.func.name} in variable_factories.h\n")
        lines.append(f"            result = {target}({', '.join(call_values)})\n")
        lines.append("        if requires_grad:\n")
        lines.append("            result.requires_grad_(True)\n")
        lines.append("        return result\n")
    else:
        lines.append(f"        return {target}({', '.join(call_values)})\n")
    return lines


GIVEN_HELPERS = (
    "\n\n_NO_ARG = object()  # a fast-path parameter the caller did not pass\n\n\n"
    "def _given(*values):\n"
    '    """The fast-path parameters the caller passed (a prefix: they are positional-only)."""\n'
    "    return tuple(v for v in values if v is not _NO_ARG)\n"
)


def gen_python_torch_functions(reg: OpsRegistry, source: str) -> str:
    counts = functional_name_counts(reg.functions, "function")
    parts = [header("Python bindings of the torch.* functions: torch.add(...)", "torch/csrc/autograd/generated/python_torch_functions_*.cpp", source)]
    parts.append(
        "from . import _ops, functions\n"
        "from .python_variable_methods import _NO_ARG, Tensor, _given, _handle_torch_function, _torch_function_mode_enabled, register_fast_path_module, scalar_to_tensor  # noqa: E501\n"
        "from labsupport.aten.tensor import TensorBase\n"
        "from labsupport.c10.tls import AutoDispatchBelowADInplaceOrView\n"
        "from labsupport.utils.python_arg_parser import PythonArgParser\n"
    )
    names = []
    for name, overloads in _overloads(reg, "function").items():
        parts.append(_binding(reg, name, overloads, method=False, counts=counts))
        names.append(name)
    parts.append("\n\n__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n")
    parts.append(
        "\n_FastTensor = Tensor  # the fast path's type test; None while a TorchFunctionMode is on\n"
        "register_fast_path_module(globals())  # labsupport/overrides.py rebinds _FastTensor\n"
    )
    return "".join(parts)


def gen_python_variable_methods(reg: OpsRegistry, source: str) -> str:
    counts = functional_name_counts(reg.functions, "method")
    parts = [header("Python bindings of the Tensor methods: Tensor.add(...), a + b", "torch/csrc/autograd/generated/python_variable_methods.cpp", source)]
    parts.append(
        "from . import _ops\n"
        "from .tensor_body import TensorBody\n"
        "from labsupport.aten.scalar_tensor import wrapped_scalar_tensor\n"
        "from labsupport.aten.tensor import TensorBase\n"
        "from labsupport.autograd.engine import backward as _run_backward\n"
        "from labsupport.c10.tls import AutoDispatchBelowADInplaceOrView  # factory methods: new_empty_strided\n"
        "from labsupport.overrides import _is_torch_function_mode_enabled as _torch_function_mode_enabled\n"
        "from labsupport.overrides import handle_binding_torch_function as _handle_torch_function\n"
        "from labsupport.overrides import handle_torch_function, has_torch_function_unary\n"
        "from labsupport.overrides import register_fast_path_module, tensor_torch_function\n"

        "from labsupport.utils.python_arg_parser import PythonArgParser\n"
        "from labsupport.utils import python_variable_indexing as indexing  # x[i], x[i] = v\n"
        + GIVEN_HELPERS
    )
    methods = _overloads(reg, "method")
    bindings = [_binding(reg, name, overloads, method=True, counts=counts) for name, overloads in methods.items()]
    body = []
    for code in bindings:
        # Methods are defined at module level, then attached to the class below.
        body.append(code)
    parts.append(
        "\n\nclass Tensor(TensorBody):\n"
        '    """torch.Tensor: what Python code holds. Its methods parse Python arguments and call the\n'
        '    C++ API methods of TensorBody (at::Tensor)."""\n\n'
        "    __slots__ = ()\n\n"
        "    # torch/_tensor.py Tensor.__torch_function__: run the function, rewrap results in the subclass\n"
        "    __torch_function__ = classmethod(tensor_torch_function)\n\n"
        "    def backward(self, gradient=None):\n"
        '        """Tensor.backward: run the autograd engine from this tensor (torch/_tensor.py)."""\n'
        "        if type(self) is not Tensor and has_torch_function_unary(self) or _torch_function_mode_enabled():\n"
        "            return handle_torch_function(Tensor.backward, (self,), self, gradient=gradient)\n"
        "        _run_backward(self, gradient)\n\n"
        "    def as_subclass(self, cls):\n"
        '        """THPVariable_as_subclass (python_variable.cpp): the same tensor (data, key set, version\n'
        "        counter, autograd history) seen through another Tensor subclass. PyTorch makes a new\n"
        "        TensorImpl with ``alias()`` and records an AliasBackward0 node; the lab copies every field\n"
        "        onto a new ``cls`` object, sharing the producer's node. A class with ``__torch_dispatch__``\n"
        '        gets the Python keys, as THPVariable_NewWithVar gives them."""\n'
        "        if not (isinstance(cls, type) and issubclass(cls, Tensor)):\n"
        '            raise TypeError(f"as_subclass(): argument \'cls\' must be a subclass of torch.Tensor, not {cls!r}")\n'
        "        result = object.__new__(cls)\n"
        "        for klass in type(self).__mro__:\n"
        '            for slot in vars(klass).get("__slots__", ()):\n'
        '                if slot != "__weakref__" and hasattr(self, slot):\n'
        "                    setattr(result, slot, getattr(self, slot))\n"
        "        if \"__torch_dispatch__\" in vars(cls) or getattr(cls, \"_user_subclass\", False):\n"
        "            from labsupport.aten.python_fallback_kernel import has_torch_dispatch\n"
        "            from labsupport.c10.torch_dispatch_mode_tls import PYTHON_KEYS\n\n"
        "            if has_torch_dispatch(cls):\n"
        "                result._ks |= PYTHON_KEYS\n"
        "        return result\n"
        "\n\ndef scalar_to_tensor(value):\n"
        '    """A Python number as a 0-dim "wrapped number" tensor (lowest type-promotion priority)."""\n'
        "    return wrapped_scalar_tensor(value, Tensor)\n"
    )
    parts.append("\n\n_FastTensor = Tensor  # the fast path's type test; None while a TorchFunctionMode is on\n")
    parts.extend(body)
    attach = ["\n\n# Attach the bindings (PyTorch's method table, variable_methods[]).\n"]
    for name in methods:
        attach.append(f"Tensor.{name} = {name}\n")
    for dunder, target in DUNDERS.items():
        if target in methods:
            if dunder in UNWRAPPED_DUNDERS:
                attach.append(f"Tensor.{dunder} = {target}\n")
            else:
                parts.append(_dunder_binding(dunder, target, methods[target][0], counts))
                attach.append(f"Tensor.{dunder} = {dunder}\n")
    attach.append("Tensor.__getitem__, Tensor.__setitem__ = indexing.THPVariable_getitem, indexing.THPVariable_setitem\n")
    attach.append("Tensor.__delitem__ = indexing.THPVariable_delitem\n")
    if "sub" in _overloads(reg, "function") or "sub" in methods:
        attach.append(
            "\n\ndef __rsub__(self, other):\n"
            '    """other - self (torch.rsub; torch/_tensor.py, where it checks for __torch_function__ and\n'
            '    turns a TypeError into NotImplemented)."""\n'
            "    try:\n"
            "        if type(self) is not Tensor and has_torch_function_unary(self) or _torch_function_mode_enabled():\n"
            "            return handle_torch_function(Tensor.__rsub__, (self, other), self, other)\n"
            "        other = other if isinstance(other, TensorBase) else scalar_to_tensor(other)\n"
            "        return TensorBody.sub(other, self)\n"
            "    except TypeError:\n"
            "        return NotImplemented\n\n\n"
            "Tensor.__rsub__ = __rsub__\n"
        )
    parts.extend(attach)
    parts.append("\nregister_fast_path_module(globals())\n")
    return "".join(parts)
