"""Matching a Python call's ``(args, kwargs)`` against binding signatures, with PyTorch's TypeErrors.

Stands for ``torch/csrc/utils/python_arg_parser.cpp`` (``PythonArgParser``, ``FunctionSignature``,
``FunctionParameter``), the value accessors of ``python_arg_parser.h`` (``intlist``, ``scalar``,
``tensor_slow``...) and the message builder of ``torch/csrc/utils/invalid_arguments.cpp``.

A generated binding such as the lab's ``torch.add`` builds one parser at import time::

    _add_parser = PythonArgParser([
        "add(Tensor input, Tensor other, *, Scalar alpha=1, Tensor out=None)",
        "add(Tensor input, Scalar alpha, Tensor other, *, Tensor out=None)|deprecated",
    ], allow_numbers_as_tensors=True, wrap_number=scalar_to_tensor)

and on its slow path calls ``_add_parser.parse(args, kwargs)``, which either returns a ``ParsedArgs``
(which signature matched and the converted values) or raises the TypeError torch would raise.

How a call is matched (as in torch):

* signatures are tried in the given order, ``|deprecated`` ones last; with a single signature (hidden
  ones count) errors are raised directly ("add(): argument 'other' (position 2) must be Tensor, not
  str");
* with several signatures, when none matches, the call is re-parsed *with* errors against the one
  signature whose argument count fits, if there is exactly one; otherwise the "received an invalid
  combination of arguments" message lists every visible signature;
* a lone positional int-list parameter (``randn(SymInt[] size, *, ...)``) also takes varargs:
  ``randn(2, 3)`` is ``randn((2, 3))``;
* an int list accepts a single int when it has a size (``int[1] dim``: ``sum(a, 0)``); only its
  *first* element is checked while matching, the others when the value is unpacked ("failed to unpack
  the object at pos 2 ...");
* NumPy spellings of some keywords are accepted: ``axis`` for ``dim``, ``keepdims``, ``x``/``a``/``x1``
  for ``input``, ``x2`` for ``other``.

Deliberately reproduced quirks of torch 2.13 (so messages compare equal): "missing 1 required
positional arguments" (the plural is inverted), the "got (dtype=int, )" trailing comma when there
are only keywords, keyword order in messages that follows C++ ``std::unordered_map`` iteration
(emulated, see ``_unordered_map_order``), and invalid_arguments.cpp re-parsing the *printed*
signature by splitting at spaces (so "bool keepdim = False" never "matches" and an argument after
``*`` is reported as a mismatch). Like torch, argument marks are ``!int!`` unless both stdout and
stderr are terminals, when ANSI colours are used.

Deliberate differences:

* a missing optional argument gets its default as a Python value (``bool? pin_memory=False`` gives
  ``False``; torch's accessor would give ``nullopt``), an explicit ``None`` stays ``None``;
* enum-like defaults (``contiguous_format``, ``torch.strided``, ``long``) stay strings, as in
  ``labsupport.c10.schema.parse_default``;
* Device/ScalarType/Generator arguments are the lab's objects (``labsupport.aten``); torch's own
  ``torch.dtype``/``torch.device`` objects are rejected like any foreign object. Python types
  ``float``/``int``/``bool`` are accepted as dtypes (torch does too) and become lab dtypes; ``complex``
  is rejected since the lab has no complex dtypes. Layout and MemoryFormat objects are accepted only
  for classes registered with ``register_argument_class`` (the lab has none by default);
* any instance of ``tensor_type`` is named ``Tensor`` in messages (torch names a subclass by its
  class name);
* ``__torch_function__``: ``parse`` collects the overloaded arguments (``ParsedArgs.overloaded_args``,
  filled by ``labsupport.overrides.collect_overloaded``) and accepts any object whose type has a
  ``__torch_function__`` where a Tensor is expected (``is_tensor_and_append_overloaded``); the
  generated binding then calls ``labsupport.overrides.handle_binding_torch_function``;
* no tracing, no SymInt/SymFloat nodes, no Dimname, Storage,
  Stream, QScheme or complex parameters;
* the deprecation warning is a plain ``UserWarning`` (once per process, like ``TORCH_WARN_ONCE``)
  without torch's "(Triggered internally at ...)" suffix.
"""

from __future__ import annotations

import operator
import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from labsupport.overrides import collect_overloaded, plain_tensor_types

__all__ = [
    "NO_DEFAULT", "Param", "FunctionSignature", "PythonArgParser", "ParsedArgs",
    "format_invalid_args", "register_argument_class", "should_allow_numbers_as_tensors",
]


class _NoDefault:
    """Sentinel type: the parameter has no default (it must be given)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
_MISSING: Any = object()  # "not given" while matching (torch: a null PyObject*)

# --- parameter kinds (torch's ParameterType) -------------------------------------------------------

TENSOR = "TENSOR"
SCALAR = "SCALAR"
INT64 = "INT64"
SYM_INT = "SYM_INT"
DOUBLE = "DOUBLE"
BOOL = "BOOL"
STRING = "STRING"
TENSOR_LIST = "TENSOR_LIST"
INT_LIST = "INT_LIST"
SYM_INT_LIST = "SYM_INT_LIST"
FLOAT_LIST = "FLOAT_LIST"
SCALAR_LIST = "SCALAR_LIST"
GENERATOR = "GENERATOR"
SCALARTYPE = "SCALARTYPE"
LAYOUT = "LAYOUT"
MEMORY_FORMAT = "MEMORY_FORMAT"
DEVICE = "DEVICE"
PYOBJECT = "PYOBJECT"

# Base type spellings: torch's C++ names (as in its generated signatures) and schema names.
_SCALAR_KINDS = {
    "Tensor": TENSOR, "Scalar": SCALAR,
    "int": INT64, "int64_t": INT64, "SymInt": SYM_INT, "c10::SymInt": SYM_INT,
    "float": DOUBLE, "double": DOUBLE, "bool": BOOL,
    "str": STRING, "std::string": STRING, "c10::string_view": STRING, "std::string_view": STRING,
    "TensorList": TENSOR_LIST, "IntArrayRef": INT_LIST, "SymIntArrayRef": SYM_INT_LIST,
    "ArrayRef<double>": FLOAT_LIST, "ScalarList": SCALAR_LIST,
    "c10::List<::std::optional<Tensor>>": TENSOR_LIST, "c10::List<std::optional<Tensor>>": TENSOR_LIST,
    "Generator": GENERATOR, "ScalarType": SCALARTYPE, "Layout": LAYOUT, "MemoryFormat": MEMORY_FORMAT,
    "Device": DEVICE, "PyObject*": PYOBJECT,
}
# Schema spellings with brackets: ``int[]``, ``SymInt[1]``, ``Tensor[]``, ``float[]``, ``Scalar[]``.
_LIST_OF = {TENSOR: TENSOR_LIST, INT64: INT_LIST, SYM_INT: SYM_INT_LIST, DOUBLE: FLOAT_LIST, SCALAR: SCALAR_LIST}
_TENSORISH = (TENSOR, TENSOR_LIST)
_LIST_KINDS = frozenset((TENSOR_LIST, INT_LIST, SYM_INT_LIST, FLOAT_LIST, SCALAR_LIST))
_INT_LIST_KINDS = (INT_LIST, SYM_INT_LIST)

# FunctionParameter::type_name(): how a kind is spelled in messages.
_TYPE_NAMES = {
    TENSOR: "Tensor", SCALAR: "Number", INT64: "int", SYM_INT: "int", DOUBLE: "float",
    TENSOR_LIST: "tuple of Tensors", INT_LIST: "tuple of ints", SYM_INT_LIST: "tuple of ints",
    FLOAT_LIST: "tuple of floats", SCALAR_LIST: "tuple of Scalars", GENERATOR: "torch.Generator",
    BOOL: "bool", PYOBJECT: "object", SCALARTYPE: "torch.dtype", LAYOUT: "torch.layout",
    MEMORY_FORMAT: "torch.memory_format", DEVICE: "torch.device", STRING: "str",
}

# Keyword spellings NumPy users reach for (numpy_compatibility_arg_names).
_NUMPY_NAMES = {"dim": ("axis",), "keepdim": ("keepdims",), "input": ("x", "a", "x1"), "other": ("x2",)}

# torch's should_allow_numbers_as_tensors list: these accept Python numbers for Tensor parameters.
_NUMBERS_AS_TENSORS = frozenset(
    f"{base}{suffix}"
    for base in ("add", "div", "divide", "mul", "multiply", "sub", "subtract", "true_divide", "floor_divide")
    for suffix in ("", "_", "_out")
) | {"to", "_to_copy", "copy_"}

_TYPE_RE = re.compile(r"(?P<base>[^\s?\[]+)(?P<q1>\?)?(?:\[(?P<size>\d*)\])?(?P<q2>\?)?")
_ALIAS_RE = re.compile(r"\([a-z0-9!|* ]*\)")  # schema alias annotations: Tensor(a!)


def should_allow_numbers_as_tensors(name: str) -> bool:
    """Whether torch lets Python numbers bind to ``Tensor`` parameters of ``name`` (add, mul, ...)."""
    return name in _NUMBERS_AS_TENSORS


# Extra classes accepted for Layout / MemoryFormat parameters, and their names in messages.
_EXTRA_CLASSES: dict[str, tuple[type, ...]] = {LAYOUT: (), MEMORY_FORMAT: ()}
_EXTRA_TP_NAMES: dict[type, str] = {}


def register_argument_class(type_str: str, cls: type, tp_name: str | None = None) -> None:
    """Accept instances of ``cls`` for ``Layout`` or ``MemoryFormat`` parameters.

    ``tp_name`` is how messages name the class (torch: ``torch.layout``, ``torch.memory_format``).
    """
    kind = _SCALAR_KINDS.get(type_str)
    if kind not in _EXTRA_CLASSES:
        raise ValueError(f"register_argument_class(): unsupported type {type_str!r}")
    _EXTRA_CLASSES[kind] = (*_EXTRA_CLASSES[kind], cls)
    if tp_name is not None:
        _EXTRA_TP_NAMES[cls] = tp_name


# --- parameters and signatures ----------------------------------------------------------------------

class Param:
    """One formal parameter such as ``Scalar alpha=1`` (torch's FunctionParameter)."""

    __slots__ = (
        "name", "type_str", "kind", "size", "default", "default_text", "kwarg_only", "allow_none",
        "optional", "elem_allow_none", "numpy_names", "type_name",
    )

    def __init__(self, text: str, kwarg_only: bool) -> None:
        text = _ALIAS_RE.sub("", text.strip())
        space = text.find(" ")
        if space < 0:
            raise ValueError(f"FunctionParameter(): missing type: {text}")
        type_str, name_str = text[:space], text[space + 1:].strip()
        match = _TYPE_RE.fullmatch(type_str)
        base = match.group("base") if match else type_str
        kind = _SCALAR_KINDS.get(base)
        if match is None or kind is None:
            raise ValueError(f"FunctionParameter(): invalid type string: {type_str}")
        q1, size_text, q2 = match.group("q1"), match.group("size"), match.group("q2")
        self.elem_allow_none = False
        if size_text is not None:
            if kind in _LIST_OF:  # int[2], Tensor?[] ...
                kind = _LIST_OF[kind]
                self.elem_allow_none = q1 is not None
                q1 = None
            elif kind not in _LIST_KINDS:  # IntArrayRef[2], TensorList[2] are fine
                raise ValueError(f"FunctionParameter(): invalid type string: {type_str}")
        self.type_str = type_str
        self.kind = kind
        self.size = int(size_text) if size_text else 0
        self.allow_none = q1 is not None or q2 is not None
        self.kwarg_only = kwarg_only
        self.type_name = _TYPE_NAMES[kind]
        eq = name_str.find("=")
        if eq >= 0:
            self.name = name_str[:eq].strip()
            self.default_text = name_str[eq + 1:].strip()
            self.optional = True
            if self.default_text == "None":
                self.allow_none = True
            self.default = _parse_default(self.default_text, self)
        else:
            self.name = name_str
            self.default_text = None
            self.optional = False
            self.default = NO_DEFAULT
        self.numpy_names = _NUMPY_NAMES.get(self.name, ())

    def __str__(self) -> str:
        if self.optional:
            return f"{self.type_name} {self.name} = {self.default_text}"
        return f"{self.type_name} {self.name}"

    def __repr__(self) -> str:
        return (
            f"Param(name={self.name!r}, type_str={self.type_str!r}, default={self.default!r}, "
            f"kwarg_only={self.kwarg_only}, allow_none={self.allow_none})"
        )


def _parse_default(text: str, param: Param) -> object:
    """A default as written (``1``, ``None``, ``False``, ``0.5``, ``[]``, ``{0,1}``) as a Python value."""
    kind = param.kind
    if text == "None":
        return None
    if kind == TENSOR:
        raise ValueError(f"default value for Tensor must be none, got: {text}")
    if kind == BOOL:
        return text in ("True", "true")
    if kind in (INT64, SYM_INT):
        try:
            return int(text, 0)
        except ValueError:
            return text  # an enum constant such as Mean
    if kind == DOUBLE:
        return float(text)
    if kind == SCALAR:
        try:
            return int(text, 0)
        except ValueError:
            return float(text)
    if kind in _INT_LIST_KINDS:
        if text[:1] in "[{":
            inner = text[1:-1].strip()
            return tuple(int(part, 0) for part in inner.split(",")) if inner else ()
        if param.size <= 0:
            raise ValueError(f"Incorrect size of IntArrayRef: {param.size}")
        return (int(text, 0),) * param.size
    if kind in _LIST_KINDS:
        if text in ("[]", "{}"):
            return ()
        raise ValueError(f"Defaults not supported for {param.type_str}: {text}")
    if kind == STRING and len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].encode().decode("unicode_escape")
    return text  # enum-like: contiguous_format, torch.strided, long ...


def _split_params(inner: str) -> list[str]:
    """Split a parameter list at ``, `` outside brackets and quotes."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(inner):
        if quote:
            if ch == quote and inner[i - 1] != "\\":
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[({<":
            depth += 1
        elif ch in "])}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [p.strip() for p in parts]


class FunctionSignature:
    """One signature such as ``add(Tensor input, Tensor other, *, Scalar alpha=1, Tensor out=None)``."""

    __slots__ = (
        "name", "params", "text", "min_args", "max_args", "max_pos_args", "hidden", "deprecated",
        "varargs_intlist", "_display",
    )

    def __init__(self, name: str, params: list[Param], *, text: str = "", hidden: bool = False,
                 deprecated: bool = False) -> None:
        self.name = name
        self.params = params
        self.text = text
        self.hidden = hidden or deprecated
        self.deprecated = deprecated
        self.max_args = len(params)
        self.min_args = sum(1 for p in params if not p.optional)
        self.max_pos_args = sum(1 for p in params if not p.kwarg_only)
        # A lone positional int list takes varargs: expand(5, 3) is expand((5, 3)).
        self.varargs_intlist = self.max_pos_args == 1 and params[0].kind in _INT_LIST_KINDS
        self._display = self._format()

    @classmethod
    def parse(cls, text: str) -> FunctionSignature:
        """Parse torch's signature mini-language (C++ or schema type spellings, ``|deprecated``/``|hidden``)."""
        open_paren = text.find("(")
        close_paren = text.rfind(")")
        if open_paren < 0:
            raise ValueError(f"missing opening parenthesis: {text}")
        if close_paren < open_paren:
            raise ValueError(f"missing closing parenthesis: {text}")
        name = text[:open_paren].strip()
        suffix = text[close_paren + 1:].strip()
        if suffix not in ("", "|deprecated", "|hidden"):
            raise ValueError(f"malformed signature: {text}")
        inner = text[open_paren + 1:close_paren].strip()
        params: list[Param] = []
        kwarg_only = False
        if inner:
            for part in _split_params(inner):
                if not part:
                    raise ValueError(f"malformed signature: {text}")
                if part == "*":
                    kwarg_only = True
                else:
                    params.append(Param(part, kwarg_only))
        return cls(name, params, text=text, hidden=suffix == "|hidden", deprecated=suffix == "|deprecated")

    def without_self(self) -> FunctionSignature:
        """The signature with a leading ``self`` parameter dropped (for Tensor-method bindings)."""
        return FunctionSignature(
            self.name, self.params[1:], text=self.text, hidden=self.hidden and not self.deprecated,
            deprecated=self.deprecated,
        )

    def _format(self) -> str:
        parts: list[str] = []
        star = False
        for param in self.params:
            if param.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(param))
        return "(" + ", ".join(parts) + ")"

    def __str__(self) -> str:
        """The form torch prints: ``(Tensor input, Tensor other, *, Number alpha = 1, Tensor out = None)``."""
        return self._display

    def __repr__(self) -> str:
        return f"FunctionSignature({self.name}{self._display})"


class ParsedArgs:
    """The outcome of a successful parse: which signature matched and its converted values."""

    __slots__ = ("index", "values", "signature", "overloaded_args")

    def __init__(self, index: int, values: list[Any], signature: FunctionSignature,
                 overloaded_args: list[Any] | None = None) -> None:
        self.index = index          # position of the matched signature in the list given to the parser
        self.values = values        # one value per signature parameter, defaults filled in
        self.signature = signature
        # arguments whose type has a __torch_function__ (PythonArgs::overloaded_args), in PyTorch's order
        self.overloaded_args = overloaded_args if overloaded_args is not None else []

    def __repr__(self) -> str:
        return f"ParsedArgs(index={self.index}, values={self.values!r})"


# --- the lab's argument classes (imported lazily: this module must not import labsupport.aten) -----

_lab_cache: dict[str, Any] = {}


def _lab() -> dict[str, Any]:
    if not _lab_cache:
        from labsupport.aten import dtype as dtype_mod
        from labsupport.aten.generator import Generator
        from labsupport.aten.tensor import Device, Size, TensorBase

        _lab_cache.update(
            dtype=dtype_mod.dtype, Device=Device, Generator=Generator, TensorBase=TensorBase,
            python_dtypes={float: dtype_mod.float64, int: dtype_mod.int64, bool: dtype_mod.bool},
            tp_names={dtype_mod.dtype: "torch.dtype", Device: "torch.device",
                      Generator: "torch._C.Generator", Size: "torch.Size"},
        )
    return _lab_cache


_HEAPTYPE = 1 << 9


def _tp_name(obj: object, tensor_type: type) -> str:
    """``Py_TYPE(obj)->tp_name`` as torch prints it: ``int``, ``numpy.float64``, ``torch.dtype``, ``Tensor``."""
    if isinstance(obj, tensor_type):
        return "Tensor"
    t = type(obj)
    name = _lab()["tp_names"].get(t) or _EXTRA_TP_NAMES.get(t)
    if name is not None:
        return name
    if t.__flags__ & _HEAPTYPE or t.__module__ == "builtins":
        return t.__name__
    return f"{t.__module__}.{t.__name__}"  # a C type: tp_name carries its module


# --- type checks (FunctionParameter::check) ---------------------------------------------------------

_NUMPY_SCALARS = (np.number, np.bool_)


def _is_scalar(obj: object) -> bool:
    """THPUtils_checkScalar: a Python or NumPy bool/int/float/complex."""
    return isinstance(obj, (int, float, complex)) or isinstance(obj, _NUMPY_SCALARS)


def _is_long(obj: object) -> bool:
    """THPUtils_checkLong: an int that is not a bool (NumPy ints too)."""
    return (isinstance(obj, int) and not isinstance(obj, bool)) or isinstance(obj, np.integer)


def _is_index(obj: object) -> bool:
    """THPUtils_checkIndex: anything with ``__index__`` except bools (an integer tensor qualifies)."""
    if type(obj) is int:
        return True
    if isinstance(obj, (bool, np.bool_)):
        return False
    try:
        operator.index(obj)
    except TypeError:
        return False
    return True


def _is_zero_dim_constant(obj: Any) -> bool:
    return obj.dim() == 0 and not getattr(obj, "requires_grad", False)


def _is_integral_dtype(dtype: Any) -> bool:
    """Integral but not bool (at::isIntegralType(t, /*includeBool=*/false))."""
    return not dtype.is_floating_point and not getattr(dtype, "is_complex", False) and str(dtype) != "torch.bool"


def _make_check(param: Param, index: int, tensor_type: type, numbers_as_tensors: bool) -> Callable[[Any], bool]:
    """The acceptance test for one parameter (``index`` is its position, used by the Tensor[] error)."""
    kind = param.kind
    if kind == TENSOR:
        if numbers_as_tensors:
            return lambda obj: isinstance(obj, tensor_type) or _is_scalar(obj) or _has_torch_function(obj)
        return lambda obj: isinstance(obj, tensor_type) or _has_torch_function(obj)
    if kind == SCALAR:
        return lambda obj: _is_scalar(obj) or (isinstance(obj, tensor_type) and _is_zero_dim_constant(obj))
    if kind == DOUBLE:
        return lambda obj: (
            isinstance(obj, (int, float)) or isinstance(obj, _NUMPY_SCALARS)
            or (isinstance(obj, tensor_type) and _is_zero_dim_constant(obj))
        )
    if kind == INT64:
        return lambda obj: type(obj) is int or _is_long(obj) or (
            isinstance(obj, tensor_type) and _is_zero_dim_constant(obj) and _is_integral_dtype(obj.dtype)
        )
    if kind == SYM_INT:
        return _is_index
    if kind == BOOL:
        return lambda obj: obj is True or obj is False
    if kind == STRING:
        return lambda obj: isinstance(obj, str)
    if kind in _INT_LIST_KINDS:
        size = param.size

        def check_int_list(obj: Any) -> bool:
            if isinstance(obj, (tuple, list)):
                return len(obj) == 0 or _is_index(obj[0])  # only the first element is looked at
            return size > 0 and _is_index(obj)

        return check_int_list
    if kind == FLOAT_LIST:
        return lambda obj: isinstance(obj, (tuple, list)) and (
            len(obj) == 0 or isinstance(obj[0], (int, float, complex)) or isinstance(obj[0], _NUMPY_SCALARS)
        )
    if kind == SCALAR_LIST:
        return lambda obj: isinstance(obj, (tuple, list)) and all(_is_scalar(item) for item in obj)
    if kind == TENSOR_LIST:
        return lambda obj: _check_tensor_list(obj, param, index, tensor_type)
    if kind == SCALARTYPE:
        lab_dtype = _lab()["dtype"]
        return lambda obj: isinstance(obj, lab_dtype) or obj is float or obj is int or obj is bool
    if kind == DEVICE:
        lab_device = _lab()["Device"]
        return lambda obj: isinstance(obj, (str, lab_device)) or _is_long(obj)
    if kind == GENERATOR:
        lab_generator = _lab()["Generator"]
        return lambda obj: isinstance(obj, lab_generator)
    if kind in _EXTRA_CLASSES:
        return lambda obj: isinstance(obj, _EXTRA_CLASSES[kind])
    return lambda obj: True  # PyObject*


def _has_torch_function(obj: Any) -> bool:
    """Not a Tensor, but its type has ``__torch_function__``: accepted where a Tensor is expected, so
    that the binding can hand the call to it (``is_tensor_and_append_overloaded``)."""
    return hasattr(type(obj), "__torch_function__")


def _check_tensor_list(obj: Any, param: Param, index: int, tensor_type: type) -> bool:
    """is_tensor_list_and_append_overloaded: a bad element raises even while only trying signatures."""
    if not isinstance(obj, (tuple, list)):
        return False
    for idx, item in enumerate(obj):
        if not isinstance(item, tensor_type) and not (item is None and param.elem_allow_none) \
                and not _has_torch_function(item):
            raise TypeError(
                f"expected Tensor as element {idx} in argument {index}, but got {_tp_name(item, tensor_type)}"
            )
    return True


# --- value conversion (PythonArgs accessors) --------------------------------------------------------

def _scalar_value(obj: Any) -> Any:
    """A Python number as torch's ``scalar_slow``/``tensor_slow`` reads it (NumPy bools read as floats)."""
    t = type(obj)
    if t is int or t is float or t is bool or t is complex:
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (complex, np.complexfloating)):
        return complex(obj)
    return float(obj)  # float subclasses, np.floating, np.bool_


class _Unpacker:
    """Converts one matched argument object into the value the binding receives."""

    def __init__(self, sig: FunctionSignature, tensor_type: type, wrap_number: Callable[[Any], Any] | None):
        self.sig = sig
        self.tensor_type = tensor_type
        self.wrap_number = wrap_number

    def convert(self, param: Param, obj: Any) -> Any:
        kind = param.kind
        if kind == TENSOR:
            if isinstance(obj, self.tensor_type) or _has_torch_function(obj):
                return obj
            value = _scalar_value(obj)
            return self.wrap_number(value) if self.wrap_number is not None else value
        if kind == SCALAR:
            if isinstance(obj, self.tensor_type):
                return obj.item()
            return _scalar_value(obj)
        if kind in (INT64, SYM_INT):
            return obj if type(obj) is int else operator.index(obj)
        if kind == DOUBLE:
            return obj if type(obj) is float else float(obj)
        if kind in _INT_LIST_KINDS:
            return self.int_list(param, obj)
        if kind == SCALARTYPE:
            return _lab()["python_dtypes"].get(obj, obj) if isinstance(obj, type) else obj
        if kind == TENSOR_LIST:
            return tuple(obj)
        if kind == FLOAT_LIST:
            return tuple(float(item) for item in obj)
        if kind == SCALAR_LIST:
            return tuple(_scalar_value(item) for item in obj)
        return obj

    def int_list(self, param: Param, obj: Any) -> tuple[int, ...]:
        """PythonArgs::intlist / symintlist: every element must be an index."""
        if not isinstance(obj, (tuple, list)):
            return (operator.index(obj),) * param.size  # int[2] given a single int
        out = []
        for idx, item in enumerate(obj):
            if type(item) is int:
                out.append(item)
                continue
            try:
                out.append(operator.index(item))
            except TypeError:
                raise TypeError(
                    f"{self.sig.name}(): argument '{param.name}' failed to unpack the object at pos {idx + 1} "
                    f"with error \"type must be {param.type_name},but got {_tp_name(item, self.tensor_type)}\""
                ) from None
        return tuple(out)


# --- the parser ---------------------------------------------------------------------------------------

_deprecation_warned = False


class PythonArgParser:
    """Matches ``(args, kwargs)`` against a list of signatures (torch's PythonArgParser)."""

    def __init__(
        self,
        signatures: Sequence[str],
        *,
        traceable: bool = True,
        allow_numbers_as_tensors: bool = False,
        method: bool = False,
        tensor_type: type | None = None,
        wrap_number: Callable[[Any], Any] | None = None,
    ) -> None:
        if not signatures:
            raise ValueError("PythonArgParser needs at least one signature")
        parsed = [FunctionSignature.parse(text) for text in signatures]
        if method:
            parsed = [
                sig.without_self() if sig.params and sig.params[0].name == "self" else sig for sig in parsed
            ]
        self.signatures: list[FunctionSignature] = parsed
        self.function_name = parsed[0].name
        self.traceable = traceable
        self.allow_numbers_as_tensors = allow_numbers_as_tensors
        self.method = method
        self.wrap_number = wrap_number
        self._tensor_type = tensor_type
        # Deprecated signatures are tried last (a stable partition, as in torch).
        self._order = [i for i, s in enumerate(parsed) if not s.deprecated] + [
            i for i, s in enumerate(parsed) if s.deprecated
        ]
        self._compiled: list[tuple[int, FunctionSignature, list[Callable[[Any], bool]], _Unpacker]] | None = None

    @property
    def tensor_type(self) -> type:
        if self._tensor_type is None:
            self._tensor_type = _lab()["TensorBase"]
        return self._tensor_type

    def _compile(self) -> list[tuple[int, FunctionSignature, list[Callable[[Any], bool]], _Unpacker]]:
        tensor_type = self.tensor_type
        compiled = []
        for index in self._order:
            sig = self.signatures[index]
            checks = [
                _make_check(p, i, tensor_type, self.allow_numbers_as_tensors) for i, p in enumerate(sig.params)
            ]
            compiled.append((index, sig, checks, _Unpacker(sig, tensor_type, self.wrap_number)))
        self._compiled = compiled
        return compiled

    def get_signatures(self) -> list[str]:
        """The printed forms of the visible (not hidden/deprecated) signatures, in trial order."""
        return [str(self.signatures[i]) for i in self._order if not self.signatures[i].hidden]

    def parse(self, args: tuple, kwargs: dict | None, self_: Any = None) -> ParsedArgs:
        """Match a call; raise torch's TypeError when no signature accepts it. A method binding passes
        its ``self`` as ``self_``, checked first for ``__torch_function__``."""
        compiled = self._compiled or self._compile()
        if len(compiled) == 1:
            index, sig, checks, unpacker = compiled[0]
            raw = self._match(sig, checks, args, kwargs, True)
        else:
            for index, sig, checks, unpacker in compiled:  # noqa: B007 - the loop variables are the result
                raw = self._match(sig, checks, args, kwargs, False)
                if raw is not None:
                    break
            else:
                self._print_error(args, kwargs)
        if sig.deprecated:
            self._warn_deprecated(sig)
        values = []
        convert = unpacker.convert
        for param, obj in zip(sig.params, raw):
            if obj is _MISSING:
                values.append(param.default)
            elif obj is None and param.allow_none:
                values.append(None)
            elif param.kind == TENSOR and type(obj) is self._tensor_type:
                values.append(obj)
            else:
                values.append(convert(param, obj))
        # FunctionSignature::parse appends overloaded arguments as it goes; the lab looks only when an
        # argument is not a plain tensor (a set lookup per tensor argument, on the slow path only).
        plain = plain_tensor_types
        candidates = [self_] if self_ is not None and type(self_) not in plain else []
        for param, obj in zip(sig.params, raw):
            if param.kind in _TENSORISH and type(obj) not in plain and obj is not _MISSING and obj is not None:
                candidates.append(obj)
        return ParsedArgs(index, values, sig, collect_overloaded(candidates) if candidates else None)

    def _match(
        self, sig: FunctionSignature, checks: list[Callable[[Any], bool]], args: tuple, kwargs: dict | None,
        raise_errors: bool,
    ) -> list[Any] | None:
        """FunctionSignature::parse: the matched objects (``_MISSING`` where not given), or None."""
        nargs = len(args)
        if nargs > sig.max_pos_args and not sig.varargs_intlist:
            if raise_errors:
                _extra_args(sig, nargs)
            return None
        remaining_kwargs = len(kwargs) if kwargs else 0
        out: list[Any] = []
        arg_pos = 0
        for i, param in enumerate(sig.params):
            is_kwd = False
            if arg_pos < nargs:
                if param.kwarg_only:  # extra positional arguments after a varargs int list
                    if raise_errors:
                        _extra_args(sig, nargs)
                    return None
                obj = args[arg_pos]
            elif kwargs:
                obj = kwargs.get(param.name, _MISSING)
                if obj is _MISSING:
                    for alias in param.numpy_names:
                        obj = kwargs.get(alias, _MISSING)
                        if obj is not _MISSING:
                            break
                is_kwd = True
            else:
                obj = _MISSING

            if obj is _MISSING:
                if not param.optional:
                    if raise_errors:
                        _missing_args(sig, i)
                    return None
            elif (obj is None and param.allow_none) or checks[i](obj):
                pass
            elif sig.varargs_intlist and arg_pos == 0 and not is_kwd and _is_index(args[0]):
                out.append(args)  # randn(2, 3): all positional arguments form the list
                arg_pos = nargs
                continue
            elif raise_errors:
                self._type_error(sig, param, obj, is_kwd, arg_pos, nargs)
            else:
                return None
            out.append(obj)
            if not is_kwd:
                arg_pos += 1
            elif obj is not _MISSING:
                remaining_kwargs -= 1

        if remaining_kwargs > 0:
            if raise_errors:
                _extra_kwargs(sig, kwargs, nargs)  # type: ignore[arg-type]
            return None
        return out

    def _type_error(self, sig: FunctionSignature, param: Param, obj: Any, is_kwd: bool, arg_pos: int,
                    nargs: int) -> None:
        tp = _tp_name(obj, self.tensor_type)
        if is_kwd:
            raise TypeError(f"{sig.name}(): argument '{param.name}' must be {param.type_name}, not {tp}")
        if nargs > sig.max_pos_args:  # a failed varargs int list: too many positional arguments
            _extra_args(sig, nargs)
        where = f"{sig.name}(): argument '{param.name}' (position {arg_pos + 1}) must be {param.type_name}"
        if param.kind in _INT_LIST_KINDS and isinstance(obj, (tuple, list)) and obj:
            raise TypeError(f"{where}, but found element of type {_tp_name(obj[0], self.tensor_type)} at pos 0")
        raise TypeError(f"{where}, not {tp}")

    def _print_error(self, args: tuple, kwargs: dict | None) -> None:
        """PythonArgParser::print_error: re-parse against the one plausible signature, else list them all."""
        num_args = len(args) + (len(kwargs) if kwargs else 0)
        plausible = [
            entry for entry in self._compiled or ()
            if entry[1].min_args <= num_args <= entry[1].max_args and not entry[1].hidden
        ]
        if len(plausible) == 1:
            _, sig, checks, _ = plausible[0]
            self._match(sig, checks, args, kwargs, True)
        raise TypeError(
            format_invalid_args(args, kwargs, self.function_name + "()", self.get_signatures(), self.tensor_type)
        )

    def _warn_deprecated(self, sig: FunctionSignature) -> None:
        global _deprecation_warned
        if _deprecation_warned:
            return
        _deprecation_warned = True
        msg = f"This overload of {sig.name} is deprecated:\n\t{sig.name}{sig}"
        others = self.get_signatures()
        if others:
            msg += "\nConsider using one of the following signatures instead:"
            msg += "".join(f"\n\t{sig.name}{other}" for other in others)
        warnings.warn(msg, UserWarning, stacklevel=4)

    def __repr__(self) -> str:
        return f"PythonArgParser({[s.text for s in self.signatures]!r})"


# --- error messages (python_arg_parser.cpp) -----------------------------------------------------------

def _extra_args(sig: FunctionSignature, nargs: int) -> None:
    if sig.min_args != sig.max_pos_args:
        raise TypeError(
            f"{sig.name}() takes from {sig.min_args} to {sig.max_pos_args} positional arguments "
            f"but {nargs} were given"
        )
    plural = "" if sig.max_pos_args == 1 else "s"
    verb = "was" if nargs == 1 else "were"
    raise TypeError(f"{sig.name}() takes {sig.max_pos_args} positional argument{plural} but {nargs} {verb} given")


def _missing_args(sig: FunctionSignature, idx: int) -> None:
    missing = [f'"{p.name}"' for p in sig.params[idx:] if not p.optional]
    plural = "s" if len(missing) == 1 else ""  # sic: torch 2.13 inverts the plural
    raise TypeError(f"{sig.name}() missing {len(missing)} required positional argument{plural}: {', '.join(missing)}")


def _extra_kwargs(sig: FunctionSignature, kwargs: dict, nargs: int) -> None:
    names = [p.name for p in sig.params]
    for key in kwargs:
        if not isinstance(key, str):
            raise TypeError("keywords must be strings")
        if key not in names:
            raise TypeError(f"{sig.name}() got an unexpected keyword argument '{key}'")
        if names.index(key) < nargs:
            raise TypeError(f"{sig.name}() got multiple values for argument '{key}'")
    raise TypeError("invalid keyword arguments")


# --- "received an invalid combination of arguments" (invalid_arguments.cpp) ---------------------------

class _Option:
    """A printed signature re-read the way invalid_arguments.cpp does: split at ", ", then at the last space."""

    __slots__ = ("names", "types")

    def __init__(self, printed: str) -> None:
        self.names: list[str] = []
        self.types: list[str] = []
        for arg in printed[1:-1].split(", "):  # "()" yields one empty argument, as in torch
            space = arg.rfind(" ")
            self.types.append(arg if space < 0 else arg[:space])
            self.names.append(arg if space < 0 else arg[space + 1:])

    def matches(self, i: int, obj: object, tensor_type: type) -> bool:
        type_name, actual = self.types[i], _tp_name(obj, tensor_type)
        if type_name == "float":
            return actual in ("float", "int", "long")
        if type_name == "int":
            return actual in ("int", "long")
        return actual == type_name


def _describe(obj: object, tensor_type: type) -> str:
    if isinstance(obj, (tuple, list)):
        inner = ", ".join(_tp_name(item, tensor_type) for item in obj)
        if isinstance(obj, tuple):
            return f"{_tp_name(obj, tensor_type)} of ({inner}{',' if len(obj) == 1 else ''})"
        return f"{_tp_name(obj, tensor_type)} of [{inner}]"
    return _tp_name(obj, tensor_type)


def _formatted_arg_desc(option: _Option, args: tuple, kwargs: dict, tensor_type: type) -> str:
    if os.isatty(1) and os.isatty(2):
        red, reset_red, green, reset_green = "\33[31;1m", "\33[0m", "\33[32;1m", "\33[0m"
    else:
        red, reset_red, green, reset_green = "!", "!", "", ""
    parts = []
    for i in range(len(args) + len(kwargs)):
        is_kwarg = i >= len(args)
        obj = kwargs[option.names[i]] if is_kwarg else args[i]
        ok = i < len(option.types) and option.matches(i, obj, tensor_type)
        text = (option.names[i] + "=" if is_kwarg else "") + _describe(obj, tensor_type)
        parts.append(f"{green}{text}{reset_green}" if ok else f"{red}{text}{reset_red}")
    return _arg_list(parts, bool(args))


def _arg_list(parts: list[str], has_positional: bool) -> str:
    # torch appends ", " after every entry and strips the last one only when there were positional args
    return "(" + ", ".join(parts) + ("" if has_positional or not parts else ", ") + ")"


def _arg_desc(args: tuple, kwargs: dict, tensor_type: type) -> str:
    parts = [_tp_name(obj, tensor_type) for obj in args]
    parts += [f"{key}={_tp_name(value, tensor_type)}" for key, value in kwargs.items()]
    return _arg_list(parts, bool(args))


def _unmatched_kwargs(option: _Option, kwargs: dict) -> list[str]:
    start = max(0, len(option.names) - len(kwargs))
    allowed = option.names[start:]
    return [key for key in kwargs if key not in allowed]


def format_invalid_args(
    args: tuple, kwargs: dict | None, function_name: str, options: list[str], tensor_type: type | None = None,
) -> str:
    """torch::format_invalid_args: the "received an invalid combination of arguments" message."""
    if tensor_type is None:
        tensor_type = _lab()["TensorBase"]
    # torch copies the keywords into a std::unordered_map, so they come out in its iteration order
    kwargs = {key: kwargs[key] for key in _unordered_map_order(list(kwargs))} if kwargs else {}
    msg = f"{function_name} received an invalid combination of arguments - "
    if len(options) == 1:
        option = _Option(options[0])
        unmatched = _unmatched_kwargs(option, kwargs) if kwargs else []
        if unmatched:
            return msg + "got unrecognized keyword arguments: " + ", ".join(unmatched)
        if len(option.names) == len(args) + len(kwargs):
            got = _formatted_arg_desc(option, args, kwargs, tensor_type)
        else:
            got = _arg_desc(args, kwargs, tensor_type)
        return f"{msg}got {got}, but expected {options[0]}"
    lines = [f"{msg}got {_arg_desc(args, kwargs, tensor_type)}, but expected one of:\n"]
    for printed in options:
        lines.append(f" * {printed}\n")
        option = _Option(printed)
        if len(option.names) == len(args) + len(kwargs):
            unmatched = _unmatched_kwargs(option, kwargs) if kwargs else []
            if unmatched:
                reason = "some of the keywords were incorrect: " + ", ".join(unmatched)
                lines.append(f"      didn't match because {reason}\n")
            else:
                desc = _formatted_arg_desc(option, args, kwargs, tensor_type)
                lines.append(f"      didn't match because some of the arguments have invalid types: {desc}\n")
    return "".join(lines)


# --- std::unordered_map<std::string, ...> iteration order (libstdc++) ----------------------------------
#
# The keys are hashed with std::hash<std::string> (libstdc++'s _Hash_bytes, a MurmurHash2 variant);
# a node goes to the front of its bucket's run, or to the front of the whole list if its bucket is
# empty; a rehash re-inserts the nodes in list order the same way. Buckets start at 13 and grow as in
# _Prime_rehash_policy. Verified against torch 2.13 for up to 300 keywords.

_M64 = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
_SEED = 0xC70F6907
_FAST_BUCKETS = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)
_PRIMES = (
    13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109, 113, 127, 137,
    139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409, 439, 467, 503,
    541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493, 1613, 1741, 1879, 2029,
)


def _hash_bytes(data: bytes) -> int:
    def shift_mix(v: int) -> int:
        return v ^ (v >> 47)

    n = len(data)
    h = (_SEED ^ (n * _MUL)) & _M64
    aligned = n & ~7
    for p in range(0, aligned, 8):
        word = int.from_bytes(data[p:p + 8], "little")
        h ^= (shift_mix((word * _MUL) & _M64) * _MUL) & _M64
        h = (h * _MUL) & _M64
    if n & 7:
        h ^= int.from_bytes(data[aligned:], "little")
        h = (h * _MUL) & _M64
    h = (shift_mix(h) * _MUL) & _M64
    return shift_mix(h)


def _next_bucket_count(n: int) -> int:
    if n < len(_FAST_BUCKETS):
        return _FAST_BUCKETS[n]
    for prime in _PRIMES:
        if prime >= n:
            return prime
    raise OverflowError  # beyond ~2000 keywords: not emulated


def _unordered_map_order(keys: list[str]) -> list[str]:
    """The order in which a libstdc++ ``std::unordered_map`` filled with ``keys`` iterates them."""
    if len(keys) <= 1:
        return keys
    try:
        codes = {key: _hash_bytes(key.encode("utf-8", "surrogatepass")) for key in keys}
        buckets, next_resize = 1, 0
        order: list[str] = []

        def insert(into: list[str], key: str, count: int) -> None:
            bucket = codes[key] % count
            for pos, other in enumerate(into):
                if codes[other] % count == bucket:
                    into.insert(pos, key)
                    return
            into.insert(0, key)

        for key in keys:
            size = len(order)
            if size + 1 > next_resize:
                wanted = max(size + 1, 0 if next_resize else 11)
                if wanted >= buckets:
                    buckets = _next_bucket_count(max(wanted + 1, buckets * 2))
                    next_resize = buckets
                    rehashed: list[str] = []
                    for old in order:
                        insert(rehashed, old, buckets)
                    order = rehashed
                else:
                    next_resize = buckets
            insert(order, key, buckets)
        return order
    except OverflowError:
        return keys[::-1]
