"""Tests for ``labsupport.utils.python_arg_parser`` (torch/csrc/utils/python_arg_parser.cpp).

``CASES`` lists calls of real PyTorch bindings with the exact outcome torch 2.13 gives: ``OK`` or the
TypeError text. Every case runs against the lab parser without torch; when torch is installed the
same call is also made on torch, which must still give the recorded text, and the lab parser is fed
the very same objects (torch tensors wrapped in a stand-in class) and must agree with torch.

The signature strings are torch's own, as embedded in ``libtorch_python.so`` (torch 2.13).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from typing import Any

import numpy as np
import pytest

from labsupport.aten import dtype as lab_dtype
from labsupport.aten.generator import Generator
from labsupport.aten.tensor import Device
from labsupport.utils import python_arg_parser as pap
from labsupport.utils.python_arg_parser import NO_DEFAULT, FunctionSignature, ParsedArgs, PythonArgParser

# --- torch's signatures --------------------------------------------------------------------------------

ADD = [
    "add(Tensor input, Tensor other, *, Scalar alpha=1, Tensor out=None)",
    "add(Tensor input, Scalar alpha, Tensor other, *, Tensor out=None)|deprecated",
]
ADD_METHOD = ["add(Tensor other, *, Scalar alpha=1)", "add(Scalar alpha, Tensor other)|deprecated"]
SUB = [
    "sub(Tensor input, Tensor other, *, Scalar alpha=1, Tensor out=None)",
    "sub(Tensor input, Scalar alpha, Tensor other, *, Tensor out=None)|deprecated",
]
MUL = ["mul(Tensor input, Tensor other, *, Tensor out=None)"]
MUL_METHOD = ["mul(Tensor other)"]
NEG = ["neg(Tensor input, *, Tensor out=None)"]
SIN = ["sin(Tensor input, *, Tensor out=None)"]
SUM = [
    "sum(Tensor input, *, ScalarType? dtype=None)",
    "sum(Tensor input, IntArrayRef[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor out=None)",
]
SUM_METHOD = ["sum(*, ScalarType? dtype=None)", "sum(IntArrayRef[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)"]
_FACTORY_OPTIONS = (
    "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=False, "
    "bool? requires_grad=False)"
)
RANDN = [
    "randn(SymIntArrayRef size, *, Generator? generator, Tensor out=None, " + _FACTORY_OPTIONS,
    "randn(SymIntArrayRef size, *, Tensor out=None, " + _FACTORY_OPTIONS,
]
ZEROS = ["zeros(SymIntArrayRef size, *, Tensor out=None, " + _FACTORY_OPTIONS]
ONES = ["ones(SymIntArrayRef size, *, Tensor out=None, " + _FACTORY_OPTIONS]
EMPTY = ["empty(SymIntArrayRef size, *, MemoryFormat? memory_format=None, Tensor out=None, " + _FACTORY_OPTIONS]
FULL = ["full(SymIntArrayRef size, Scalar fill_value, *, Tensor out=None, " + _FACTORY_OPTIONS]
CAT = ["cat(TensorList tensors, int64_t dim=0, *, Tensor out=None)"]
PERMUTE = ["permute(Tensor input, IntArrayRef dims)"]
TRANSPOSE = ["transpose(Tensor input, int64_t dim0, int64_t dim1)"]
EXPAND_METHOD = ["expand(SymIntArrayRef size, *, bool implicit=False)"]
VIEW_METHOD = ["view(ScalarType dtype)", "view(SymIntArrayRef size)"]
RESHAPE_METHOD = ["reshape(SymIntArrayRef shape)"]
SQUEEZE_METHOD = ["squeeze()", "squeeze(int64_t dim)", "squeeze(IntArrayRef dim)"]
TRANSPOSE_METHOD = ["transpose(int64_t dim0, int64_t dim1)"]


def _wrap(number: Any) -> tuple[str, Any]:
    return ("wrapped", number)


_NUMBERS = {"allow_numbers_as_tensors": True, "wrap_number": _wrap}
BINDINGS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "torch.add": (ADD, _NUMBERS),
    "Tensor.add": (ADD_METHOD, {**_NUMBERS, "method": True}),
    "torch.sub": (SUB, _NUMBERS),
    "torch.mul": (MUL, _NUMBERS),
    "Tensor.mul": (MUL_METHOD, {**_NUMBERS, "method": True}),
    "torch.neg": (NEG, {}),
    "torch.sin": (SIN, {}),
    "torch.sum": (SUM, {}),
    "Tensor.sum": (SUM_METHOD, {"method": True}),
    "torch.randn": (RANDN, {}),
    "torch.zeros": (ZEROS, {}),
    "torch.ones": (ONES, {}),
    "torch.empty": (EMPTY, {}),
    "torch.full": (FULL, {}),
    "torch.cat": (CAT, {}),
    "torch.permute": (PERMUTE, {}),
    "torch.transpose": (TRANSPOSE, {}),
    "Tensor.expand": (EXPAND_METHOD, {"method": True}),
    "Tensor.view": (VIEW_METHOD, {"method": True}),
    "Tensor.reshape": (RESHAPE_METHOD, {"method": True}),
    "Tensor.squeeze": (SQUEEZE_METHOD, {"method": True}),
    "Tensor.transpose": (TRANSPOSE_METHOD, {"method": True}),
}


# --- stand-ins ------------------------------------------------------------------------------------------

class Tensor:
    """A stand-in for the lab tensor with just what the parser looks at."""

    def __init__(self, shape: tuple[int, ...] = (2,), dtype: Any = lab_dtype.float32, value: Any = 1.0,
                 requires_grad: bool = False) -> None:
        self.shape = shape
        self.dtype = dtype
        self.value = value
        self.requires_grad = requires_grad

    def dim(self) -> int:
        return len(self.shape)

    def item(self) -> Any:
        if math.prod(self.shape) != 1:
            raise RuntimeError("a Tensor with more than one element cannot be converted to Scalar")
        return self.value

    def __index__(self) -> int:
        if self.dtype.is_floating_point or math.prod(self.shape) != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.value)

    def __float__(self) -> float:
        return float(self.item())


class TorchTensor:
    """Wraps a real torch tensor so the lab parser can be fed the objects torch was given."""

    def __init__(self, t: Any) -> None:
        self.t = t
        self.dtype = t.dtype
        self.requires_grad = t.requires_grad

    def dim(self) -> int:
        return self.t.dim()

    def item(self) -> Any:
        return self.t.item()

    def __index__(self) -> int:
        return self.t.__index__()

    def __float__(self) -> float:
        return float(self.t)


class Ref:
    """A placeholder in CASES, resolved to a lab-side or a torch-side object."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


A, Z, ZF, ZG, G = Ref("A"), Ref("Z"), Ref("ZF"), Ref("ZG"), Ref("G")
F32, F64, CPU = Ref("F32"), Ref("F64"), Ref("CPU")
NP_I, NP_F, NP_B = Ref("NP_I"), Ref("NP_F"), Ref("NP_B")
OK = None

LAB_OBJECTS: dict[str, Any] = {
    "A": Tensor(),                                             # a 1-d float tensor
    "Z": Tensor((), lab_dtype.int64, 0),                       # a 0-dim integer tensor
    "ZF": Tensor((), lab_dtype.float32, 2.0),                  # a 0-dim float tensor
    "ZG": Tensor((), lab_dtype.float32, 2.0, requires_grad=True),
    "G": Generator(),
    "F32": lab_dtype.float32,
    "F64": lab_dtype.float64,
    "CPU": Device("cpu"),
    "NP_I": np.int64(0),
    "NP_F": np.float64(2.0),
    "NP_B": np.bool_(True),
}


def lab(x: Any) -> Any:
    if isinstance(x, Ref):
        return LAB_OBJECTS[x.name]
    if isinstance(x, tuple):
        return tuple(lab(i) for i in x)
    if isinstance(x, list):
        return [lab(i) for i in x]
    if isinstance(x, dict):
        return {k: lab(v) for k, v in x.items()}
    return x


def make_parser(binding: str, **extra: Any) -> PythonArgParser:
    signatures, options = BINDINGS[binding]
    return PythonArgParser(signatures, **{"tensor_type": Tensor, **options, **extra})


def lab_outcome(parser: PythonArgParser, args: tuple, kwargs: dict) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parser.parse(args, kwargs)
        except TypeError as e:
            return str(e)
    return None


@pytest.fixture
def no_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages mark mismatches with ``!`` unless stdout and stderr are terminals (then ANSI colours)."""
    monkeypatch.setattr(os, "isatty", lambda fd: False)


# --- the calls and what torch 2.13 says ------------------------------------------------------------------

CASES: list[tuple[str, str, tuple, dict, str | None]] = [
    ('add-ok', 'torch.add', (A, A), {}, OK),
    ('add-kw-ok', 'torch.add', (), {'input': A, 'other': A}, OK),
    ('add-numbers', 'torch.add', (1, 2), {}, OK),
    ('add-number-bool', 'torch.add', (1.5, True), {}, OK),
    ('add-np-number', 'torch.add', (A, NP_F), {}, OK),
    ('add-alpha-0dim', 'torch.add', (A, A), {'alpha': ZF}, OK),
    ('add-alpha-np', 'torch.add', (A, A), {'alpha': NP_I}, OK),
    ('add-out-none', 'torch.add', (A, A), {'alpha': 1, 'out': None}, OK),
    ('add-numpy-names', 'torch.add', (), {'x1': A, 'x2': A}, OK),
    (
        'add-none', 'torch.add', (), {},
        'add() received an invalid combination of arguments - got (), but expected (Tensor input, '
        'Tensor other, *, Number alpha = 1, Tensor out = None)',
    ),
    (
        'add-one', 'torch.add', (A,), {},
        'add() received an invalid combination of arguments - got (Tensor), but expected (Tensor '
        'input, Tensor other, *, Number alpha = 1, Tensor out = None)',
    ),
    ('add-str', 'torch.add', (A, 'x'), {}, "add(): argument 'other' (position 2) must be Tensor, not str"),
    ('add-kw-str', 'torch.add', (A,), {'other': 'x'}, "add(): argument 'other' must be Tensor, not str"),
    ('add-unexpected', 'torch.add', (A, A), {'foo': 1}, "add() got an unexpected keyword argument 'foo'"),
    ('add-3-pos', 'torch.add', (A, A, 1), {}, 'add() takes 2 positional arguments but 3 were given'),
    ('add-4-pos', 'torch.add', (A, A, 1, 2), {}, 'add() takes 2 positional arguments but 4 were given'),
    (
        'add-5-pos', 'torch.add', (A, A, A, A, A), {},
        'add() received an invalid combination of arguments - got (Tensor, Tensor, !Tensor!, '
        '!Tensor!, !Tensor!), but expected (Tensor input, Tensor other, *, Number alpha = 1, Tensor '
        'out = None)',
    ),
    (
        'add-6-pos', 'torch.add', (A, A, A, A, A, A), {},
        'add() received an invalid combination of arguments - got (Tensor, Tensor, Tensor, Tensor, '
        'Tensor, Tensor), but expected (Tensor input, Tensor other, *, Number alpha = 1, Tensor out = '
        'None)',
    ),
    ('add-alpha-str', 'torch.add', (A, A), {'alpha': 'x'}, "add(): argument 'alpha' must be Number, not str"),
    ('add-alpha-none', 'torch.add', (A, A), {'alpha': None}, "add(): argument 'alpha' must be Number, not NoneType"),
    ('add-alpha-1d', 'torch.add', (A, A), {'alpha': A}, "add(): argument 'alpha' must be Number, not Tensor"),
    ('add-alpha-grad', 'torch.add', (A, A), {'alpha': ZG}, "add(): argument 'alpha' must be Number, not Tensor"),
    (
        'add-other-none', 'torch.add', (A, None), {},
        "add(): argument 'other' (position 2) must be Tensor, not NoneType",
    ),
    (
        'add-input-none', 'torch.add', (None, A), {},
        "add(): argument 'input' (position 1) must be Tensor, not NoneType",
    ),
    ('add-other-list', 'torch.add', (A, [1, 2]), {}, "add(): argument 'other' (position 2) must be Tensor, not list"),
    (
        'add-other-dtype', 'torch.add', (A, F32), {},
        "add(): argument 'other' (position 2) must be Tensor, not torch.dtype",
    ),
    (
        'add-other-device', 'torch.add', (A, CPU), {},
        "add(): argument 'other' (position 2) must be Tensor, not torch.device",
    ),
    (
        'add-other-generator', 'torch.add', (A, G), {},
        "add(): argument 'other' (position 2) must be Tensor, not torch._C.Generator",
    ),
    (
        'add-multiple-values', 'torch.add', (A,), {'other': A, 'input': A},
        "add() got multiple values for argument 'input'",
    ),
    ('add-missing-other', 'torch.add', (A,), {'alpha': 2}, 'add() missing 1 required positional arguments: "other"'),
    (
        'add-unrecognized', 'torch.add', (A, A, 2, 3), {'foo': 1},
        'add() received an invalid combination of arguments - got unrecognized keyword arguments: foo',
    ),
    (
        'add-unrecognized-3', 'torch.add', (A, A), {'out': A, 'alpha': 2, 'foo': 3},
        'add() received an invalid combination of arguments - got unrecognized keyword arguments: '
        'foo, alpha, out',
    ),
    ('add-x2-and-other', 'torch.add', (A,), {'x2': A, 'other': A}, "add() got an unexpected keyword argument 'x2'"),
    ('add-deprecated-ok', 'torch.add', (A, 2, A), {}, OK),
    ('add-deprecated-kw', 'torch.add', (A, 2), {'other': A}, OK),
    ('add-deprecated-str', 'torch.add', (A, 'x', A), {}, 'add() takes 2 positional arguments but 3 were given'),
    ('add-deprecated-4', 'torch.add', (A, 2, A, A), {}, 'add() takes 2 positional arguments but 4 were given'),
    ('sub-str', 'torch.sub', (A, 'x'), {}, "sub(): argument 'other' (position 2) must be Tensor, not str"),
    (
        'sub-none', 'torch.sub', (), {},
        'sub() received an invalid combination of arguments - got (), but expected (Tensor input, '
        'Tensor other, *, Number alpha = 1, Tensor out = None)',
    ),
    ('mul-str', 'torch.mul', (A, 'x'), {}, "mul(): argument 'other' (position 2) must be Tensor, not str"),
    ('mul-numbers', 'torch.mul', (1, 2), {}, OK),
    ('mul-alpha', 'torch.mul', (A, A), {'alpha': 2}, "mul() got an unexpected keyword argument 'alpha'"),
    ('mul-missing', 'torch.mul', (), {}, 'mul() missing 2 required positional argument: "input", "other"'),
    ('m-add-ok', 'Tensor.add', (A,), {'alpha': 2}, OK),
    ('m-add-number', 'Tensor.add', (1,), {}, OK),
    ('m-add-str', 'Tensor.add', ('x',), {}, "add(): argument 'other' (position 1) must be Tensor, not str"),
    ('m-add-kw-str', 'Tensor.add', (), {'other': 'x'}, "add(): argument 'other' must be Tensor, not str"),
    (
        'm-add-none', 'Tensor.add', (), {},
        'add() received an invalid combination of arguments - got (), but expected (Tensor other, *, '
        'Number alpha = 1)',
    ),
    ('m-add-2', 'Tensor.add', (A, A), {}, 'add() takes 1 positional argument but 2 were given'),
    (
        'm-add-3', 'Tensor.add', (A, 2, 3), {},
        'add() received an invalid combination of arguments - got (Tensor, !int!, !int!), but '
        'expected (Tensor other, *, Number alpha = 1)',
    ),
    (
        'm-add-4', 'Tensor.add', (A, A, A, A), {},
        'add() received an invalid combination of arguments - got (Tensor, Tensor, Tensor, Tensor), '
        'but expected (Tensor other, *, Number alpha = 1)',
    ),
    ('m-add-foo', 'Tensor.add', (A,), {'foo': 1}, "add() got an unexpected keyword argument 'foo'"),
    ('m-add-alpha-str', 'Tensor.add', (A,), {'alpha': 'x'}, "add(): argument 'alpha' must be Number, not str"),
    ('m-add-multiple', 'Tensor.add', (A,), {'other': A}, "add() got multiple values for argument 'other'"),
    ('m-mul-missing', 'Tensor.mul', (), {}, 'mul() missing 1 required positional arguments: "other"'),
    ('neg-2', 'torch.neg', (A, A), {}, 'neg() takes 1 positional argument but 2 were given'),
    ('neg-none', 'torch.neg', (), {}, 'neg() missing 1 required positional arguments: "input"'),
    ('neg-int', 'torch.neg', (1,), {}, "neg(): argument 'input' (position 1) must be Tensor, not int"),
    ('neg-out-int', 'torch.neg', (A,), {'out': 1}, "neg(): argument 'out' must be Tensor, not int"),
    ('neg-out-none', 'torch.neg', (A,), {'out': None}, OK),
    ('neg-x', 'torch.neg', (), {'x': A}, OK),
    ('neg-input-twice', 'torch.neg', (A,), {'input': A}, "neg() got multiple values for argument 'input'"),
    ('neg-x-twice', 'torch.neg', (A,), {'x': A}, "neg() got an unexpected keyword argument 'x'"),
    ('neg-2-kw', 'torch.neg', (A, A), {'out': A, 'foo': 1}, 'neg() takes 1 positional argument but 2 were given'),
    ('neg-foo', 'torch.neg', (A,), {'out': A, 'foo': 1}, "neg() got an unexpected keyword argument 'foo'"),
    ('sin-str', 'torch.sin', ('x',), {}, "sin(): argument 'input' (position 1) must be Tensor, not str"),
    ('sin-missing-foo', 'torch.sin', (), {'foo': 1}, 'sin() missing 1 required positional arguments: "input"'),
    ('sum-ok', 'torch.sum', (A,), {}, OK),
    ('sum-dim-int', 'torch.sum', (A, 0), {}, OK),
    ('sum-dim-tuple', 'torch.sum', (A,), {'dim': (0,)}, OK),
    ('sum-dim-none', 'torch.sum', (A, None), {}, OK),
    ('sum-dim-kw-none', 'torch.sum', (A,), {'dim': None}, OK),
    ('sum-dim-empty', 'torch.sum', (A, (), True), {}, OK),
    ('sum-dim-np', 'torch.sum', (A, NP_I), {}, OK),
    ('sum-dim-0dim', 'torch.sum', (A, Z), {}, OK),
    ('sum-dim-tuple-0dim', 'torch.sum', (A, (Z,)), {}, OK),
    ('sum-numpy-names', 'torch.sum', (), {'a': A, 'axis': 0, 'keepdims': True}, OK),
    ('sum-all-kw', 'torch.sum', (A, 0), {'keepdim': True, 'dtype': F32}, OK),
    (
        'sum-dtype-int', 'torch.sum', (A,), {'dtype': 3},
        'sum() received an invalid combination of arguments - got (Tensor, dtype=int), but expected '
        'one of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints '
        'dim, bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-float', 'torch.sum', (A, 0.5), {},
        'sum() received an invalid combination of arguments - got (Tensor, float), but expected one '
        'of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, '
        'bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-str', 'torch.sum', (A, 'x'), {},
        'sum() received an invalid combination of arguments - got (Tensor, str), but expected one '
        'of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, '
        'bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-bool', 'torch.sum', (A, True), {},
        'sum() received an invalid combination of arguments - got (Tensor, bool), but expected one '
        'of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, '
        'bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-kw-str', 'torch.sum', (A,), {'dim': 'x'},
        'sum() received an invalid combination of arguments - got (Tensor, dim=str), but expected one '
        'of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, '
        'bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-kw-bool', 'torch.sum', (A,), {'dim': True},
        'sum() received an invalid combination of arguments - got (Tensor, dim=bool), but expected '
        'one of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints '
        'dim, bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-tuple-float', 'torch.sum', (A, (0.5,)), {},
        'sum() received an invalid combination of arguments - got (Tensor, tuple), but expected one '
        'of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, '
        'bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-tuple-bool', 'torch.sum', (A, (True,)), {},
        'sum() received an invalid combination of arguments - got (Tensor, tuple), but expected one '
        'of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, '
        'bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-dim-unpack-float', 'torch.sum', (A, (0, 0.5)), {},
        'sum(): argument \'dim\' failed to unpack the object at pos 2 with error "type must be tuple '
        'of ints,but got float"',
    ),
    (
        'sum-dim-unpack-str', 'torch.sum', (A, [0, 'x']), {},
        'sum(): argument \'dim\' failed to unpack the object at pos 2 with error "type must be tuple '
        'of ints,but got str"',
    ),
    (
        'sum-dim-unpack-list', 'torch.sum', (A, [0, [1]]), {},
        'sum(): argument \'dim\' failed to unpack the object at pos 2 with error "type must be tuple '
        'of ints,but got list"',
    ),
    (
        'sum-dim-unpack-0dimf', 'torch.sum', (A, (0, ZF)), {},
        'sum(): argument \'dim\' failed to unpack the object at pos 2 with error "type must be tuple '
        'of ints,but got Tensor"',
    ),
    (
        'sum-dim-kw-unpack', 'torch.sum', (A,), {'dim': [0, 'x']},
        'sum(): argument \'dim\' failed to unpack the object at pos 2 with error "type must be tuple '
        'of ints,but got str"',
    ),
    ('sum-keepdim-int-kw', 'torch.sum', (A, 0), {'keepdim': 1}, "sum(): argument 'keepdim' must be bool, not int"),
    (
        'sum-keepdim-np-bool', 'torch.sum', (A, 0), {'keepdim': NP_B},
        "sum(): argument 'keepdim' must be bool, not numpy.bool",
    ),
    ('sum-keepdim-int', 'torch.sum', (A, 0, 1), {}, "sum(): argument 'keepdim' (position 3) must be bool, not int"),
    (
        'sum-4-pos', 'torch.sum', (A, 0, True, F32), {},
        'sum() takes from 2 to 3 positional arguments but 4 were given',
    ),
    (
        'sum-5-pos', 'torch.sum', (A, [0, 'x'], 3, 4, 5), {},
        'sum() takes from 2 to 3 positional arguments but 5 were given',
    ),
    (
        'sum-6-pos', 'torch.sum', (A, 0, True, 3, 4, 5), {},
        'sum() received an invalid combination of arguments - got (Tensor, int, bool, int, int, int), '
        'but expected one of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, '
        'tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n   '
        "   didn't match because some of the arguments have invalid types: (Tensor, !int!, !bool!, "
        '!int!, !int!, !int!)\n',
    ),
    (
        'sum-6-pos-lists', 'torch.sum', (A, (0, 1.0, 'x'), [], 4, [True], ()), {},
        'sum() received an invalid combination of arguments - got (Tensor, tuple, list, int, list, '
        'tuple), but expected one of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor '
        'input, tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = None, Tensor out = '
        "None)\n      didn't match because some of the arguments have invalid types: (Tensor, !tuple "
        'of (int, float, str)!, !list of []!, !int!, !list of [bool]!, !tuple of ()!)\n',
    ),
    (
        'sum-none', 'torch.sum', (), {},
        'sum() received an invalid combination of arguments - got (), but expected one of:\n * '
        '(Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, bool '
        'keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    (
        'sum-foo', 'torch.sum', (A,), {'foo': 1},
        'sum() received an invalid combination of arguments - got (Tensor, foo=int), but expected one '
        'of:\n * (Tensor input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, '
        'bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    ('sum-dim-foo', 'torch.sum', (A,), {'dim': 0, 'foo': 1}, "sum() got an unexpected keyword argument 'foo'"),
    ('sum-axis-and-dim', 'torch.sum', (A,), {'axis': 0, 'dim': 0}, "sum() got an unexpected keyword argument 'axis'"),
    (
        'sum-dtype-before-foo', 'torch.sum', (A, [0, 'x'], True), {'dtype': 3, 'foo': 2},
        "sum(): argument 'dtype' must be torch.dtype, not int",
    ),
    (
        'sum-bad-keywords', 'torch.sum', (A, 0, False), {'dtype': F32, 'out': A, 'foo': 1},
        'sum() received an invalid combination of arguments - got (Tensor, int, bool, foo=int, '
        'out=Tensor, dtype=torch.dtype), but expected one of:\n * (Tensor input, *, torch.dtype dtype '
        '= None)\n * (Tensor input, tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = '
        "None, Tensor out = None)\n      didn't match because some of the keywords were incorrect: "
        'foo, out, dtype\n',
    ),
    (
        'sum-many-keywords', 'torch.sum', (A,),
        {'dim': (0,), 'keepdim': True, 'dtype': F32, 'out': A, 'foo': 1, 'bar': 2},
        'sum() received an invalid combination of arguments - got (Tensor, foo=int, out=Tensor, '
        'dtype=torch.dtype, keepdim=bool, bar=int, dim=tuple), but expected one of:\n * (Tensor '
        'input, *, torch.dtype dtype = None)\n * (Tensor input, tuple of ints dim, bool keepdim = '
        'False, *, torch.dtype dtype = None, Tensor out = None)\n',
    ),
    ('m-sum-kw', 'Tensor.sum', (), {'dim': 0, 'keepdim': True}, OK),
    ('m-sum-pos', 'Tensor.sum', (0, True), {}, OK),
    ('m-sum-keepdim-int', 'Tensor.sum', (0, 1), {}, "sum(): argument 'keepdim' (position 2) must be bool, not int"),
    ('m-sum-3', 'Tensor.sum', (0, True, 3), {}, 'sum() takes from 1 to 2 positional arguments but 3 were given'),
    (
        'm-sum-4', 'Tensor.sum', (0, True, 3, 4), {},
        'sum() received an invalid combination of arguments - got (int, bool, int, int), but expected '
        'one of:\n * (*, torch.dtype dtype = None)\n * (tuple of ints dim, bool keepdim = False, *, '
        "torch.dtype dtype = None)\n      didn't match because some of the arguments have invalid "
        'types: (!int!, !bool!, !int!, !int!)\n',
    ),
    (
        'm-sum-5', 'Tensor.sum', (1, 2, 3, 4, 5), {},
        'sum() received an invalid combination of arguments - got (int, int, int, int, int), but '
        'expected one of:\n * (*, torch.dtype dtype = None)\n * (tuple of ints dim, bool keepdim = '
        'False, *, torch.dtype dtype = None)\n',
    ),
    (
        'm-sum-str', 'Tensor.sum', ('x',), {},
        'sum() received an invalid combination of arguments - got (str), but expected one of:\n * (*, '
        'torch.dtype dtype = None)\n * (tuple of ints dim, bool keepdim = False, *, torch.dtype dtype '
        '= None)\n',
    ),
    (
        'm-sum-dtype-int', 'Tensor.sum', (), {'dtype': 3},
        'sum() received an invalid combination of arguments - got (dtype=int, ), but expected one '
        'of:\n * (*, torch.dtype dtype = None)\n * (tuple of ints dim, bool keepdim = False, *, '
        'torch.dtype dtype = None)\n',
    ),
    (
        'm-sum-unpack', 'Tensor.sum', ((0, 'x'),), {},
        'sum(): argument \'dim\' failed to unpack the object at pos 2 with error "type must be tuple '
        'of ints,but got str"',
    ),
    ('m-sum-keepdim-str', 'Tensor.sum', (0, 'x'), {}, "sum(): argument 'keepdim' (position 2) must be bool, not str"),
    (
        'm-sum-foo', 'Tensor.sum', (), {'foo': 1},
        'sum() received an invalid combination of arguments - got (foo=int, ), but expected one of:\n '
        '* (*, torch.dtype dtype = None)\n * (tuple of ints dim, bool keepdim = False, *, torch.dtype '
        'dtype = None)\n',
    ),
    ('m-sum-dim-foo', 'Tensor.sum', (), {'dim': 0, 'foo': 1}, "sum() got an unexpected keyword argument 'foo'"),
    ('m-sum-keepdim-kw-int', 'Tensor.sum', (0,), {'keepdim': 1}, "sum(): argument 'keepdim' must be bool, not int"),
    ('randn-varargs', 'torch.randn', (2, 3), {}, OK),
    ('randn-tuple', 'torch.randn', ((2, 3),), {}, OK),
    ('randn-list', 'torch.randn', ([2, 3],), {}, OK),
    ('randn-kw', 'torch.randn', (), {'size': (2, 3)}, OK),
    ('randn-one', 'torch.randn', (2,), {}, OK),
    ('randn-empty', 'torch.randn', ((),), {}, OK),
    ('randn-0dim', 'torch.randn', (Z, 3), {}, OK),
    ('randn-bool-later', 'torch.randn', ((2, True),), {}, OK),
    ('randn-generator', 'torch.randn', (2, 3), {'generator': G}, OK),
    ('randn-generator-none', 'torch.randn', (2, 3), {'generator': None}, OK),
    (
        'randn-options', 'torch.randn', (2, 3),
        {'dtype': F64, 'device': 'meta', 'requires_grad': None, 'pin_memory': None},
        OK,
    ),
    ('randn-dtype-python', 'torch.randn', (2, 3), {'dtype': float}, OK),
    ('randn-device-none', 'torch.randn', (2, 3), {'device': None, 'dtype': None}, OK),
    (
        'randn-none', 'torch.randn', (), {},
        'randn() received an invalid combination of arguments - got (), but expected one of:\n * '
        '(tuple of ints size, *, torch.Generator generator, Tensor out = None, torch.dtype dtype = '
        'None, torch.layout layout = None, torch.device device = None, bool pin_memory = False, bool '
        'requires_grad = False)\n * (tuple of ints size, *, Tensor out = None, torch.dtype dtype = '
        'None, torch.layout layout = None, torch.device device = None, bool pin_memory = False, bool '
        'requires_grad = False)\n',
    ),
    ('randn-kw-int', 'torch.randn', (), {'size': 2}, "randn(): argument 'size' must be tuple of ints, not int"),
    (
        'randn-unpack-str', 'torch.randn', (2, 'x'), {},
        'randn(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got str"',
    ),
    ('randn-str', 'torch.randn', ('x',), {}, "randn(): argument 'size' (position 1) must be tuple of ints, not str"),
    (
        'randn-float', 'torch.randn', (2.0,), {},
        "randn(): argument 'size' (position 1) must be tuple of ints, not float",
    ),
    (
        'randn-bool', 'torch.randn', (True,), {},
        "randn(): argument 'size' (position 1) must be tuple of ints, not bool",
    ),
    (
        'randn-none-size', 'torch.randn', (None,), {},
        "randn(): argument 'size' (position 1) must be tuple of ints, not NoneType",
    ),
    (
        'randn-first-float', 'torch.randn', ((2.0, 3),), {},
        "randn(): argument 'size' (position 1) must be tuple of ints, but found element of type float "
        'at pos 0',
    ),
    (
        'randn-first-bool', 'torch.randn', ((True, 2),), {},
        "randn(): argument 'size' (position 1) must be tuple of ints, but found element of type bool "
        'at pos 0',
    ),
    (
        'randn-unpack-float', 'torch.randn', ((2, 3.0),), {},
        'randn(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got float"',
    ),
    (
        'randn-unpack-float-varargs', 'torch.randn', (2, 3.0), {},
        'randn(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got float"',
    ),
    (
        'randn-unpack-none', 'torch.randn', ((2, None),), {},
        'randn(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got NoneType"',
    ),
    (
        'randn-varargs-float-first', 'torch.randn', (2.0, 3), {},
        'randn() received an invalid combination of arguments - got (float, int), but expected one '
        'of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, torch.dtype '
        'dtype = None, torch.layout layout = None, torch.device device = None, bool pin_memory = '
        'False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-dtype-int', 'torch.randn', (2, 3), {'dtype': 3},
        'randn() received an invalid combination of arguments - got (int, int, dtype=int), but '
        'expected one of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-device-float', 'torch.randn', (2, 3), {'device': 1.5},
        'randn() received an invalid combination of arguments - got (int, int, device=float), but '
        'expected one of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-requires-grad-int', 'torch.randn', (2, 3), {'requires_grad': 1},
        'randn() received an invalid combination of arguments - got (int, int, requires_grad=int), '
        'but expected one of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-generator-int', 'torch.randn', (2, 3), {'generator': 3},
        'randn() received an invalid combination of arguments - got (int, int, generator=int), but '
        'expected one of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-foo', 'torch.randn', (2, 3), {'foo': 3},
        'randn() received an invalid combination of arguments - got (int, int, foo=int), but expected '
        'one of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-tuple-and-int', 'torch.randn', ((2, 3), 4), {},
        'randn() received an invalid combination of arguments - got (tuple, int), but expected one '
        'of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, torch.dtype '
        'dtype = None, torch.layout layout = None, torch.device device = None, bool pin_memory = '
        'False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-kw-only-bad', 'torch.randn', (), {'size': (2, 3), 'dtype': 3},
        'randn() received an invalid combination of arguments - got (dtype=int, size=tuple, ), but '
        'expected one of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-size-twice', 'torch.randn', (2, 3), {'size': (2, 3)},
        'randn() received an invalid combination of arguments - got (int, int, size=tuple), but '
        'expected one of:\n * (tuple of ints size, *, torch.Generator generator, Tensor out = None, '
        'torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n * (tuple of ints size, *, Tensor out = '
        'None, torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool '
        'pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'randn-kw-first-float', 'torch.randn', (), {'size': (2.0, 3)},
        "randn(): argument 'size' must be tuple of ints, not tuple",
    ),
    (
        'randn-kw-unpack', 'torch.randn', (), {'size': [2, 'x']},
        'randn(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got str"',
    ),
    (
        'randn-generator-dtype', 'torch.randn', (2, 3), {'generator': G, 'dtype': 3},
        'randn() received an invalid combination of arguments - got (int, int, dtype=int, '
        'generator=torch._C.Generator), but expected one of:\n * (tuple of ints size, *, '
        'torch.Generator generator, Tensor out = None, torch.dtype dtype = None, torch.layout layout '
        '= None, torch.device device = None, bool pin_memory = False, bool requires_grad = False)\n * '
        '(tuple of ints size, *, Tensor out = None, torch.dtype dtype = None, torch.layout layout = '
        'None, torch.device device = None, bool pin_memory = False, bool requires_grad = False)\n',
    ),
    (
        'zeros-dtype-str', 'torch.zeros', (2, 3), {'dtype': 'x'},
        "zeros(): argument 'dtype' must be torch.dtype, not str",
    ),
    (
        'zeros-dtype-int', 'torch.zeros', (2, 3), {'dtype': 3},
        "zeros(): argument 'dtype' must be torch.dtype, not int",
    ),
    (
        'zeros-unpack', 'torch.zeros', (2, 'x'), {},
        'zeros(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got str"',
    ),
    (
        'zeros-device-float', 'torch.zeros', (2, 3), {'device': 1.5},
        "zeros(): argument 'device' must be torch.device, not float",
    ),
    ('zeros-device-str', 'torch.zeros', (2, 3), {'device': 'meta'}, OK),
    ('zeros-device-obj', 'torch.zeros', (2, 3), {'device': CPU}, OK),
    ('zeros-missing', 'torch.zeros', (), {}, 'zeros() missing 1 required positional arguments: "size"'),
    (
        'zeros-layout-int', 'torch.zeros', (2,), {'layout': 1},
        "zeros(): argument 'layout' must be torch.layout, not int",
    ),
    ('zeros-names', 'torch.zeros', (2,), {'names': None}, "zeros() got an unexpected keyword argument 'names'"),
    ('ones-str-first', 'torch.ones', ('x', 2), {}, 'ones() takes 1 positional argument but 2 were given'),
    ('ones-float-first', 'torch.ones', (2.0, 3), {}, 'ones() takes 1 positional argument but 2 were given'),
    ('ones-tuple-int', 'torch.ones', ((2,), 3), {}, 'ones() takes 1 positional argument but 2 were given'),
    ('ones-tuple-first-float', 'torch.ones', ((2.0,), 3), {}, 'ones() takes 1 positional argument but 2 were given'),
    (
        'ones-unpack-6', 'torch.ones', (2, 3, 4, 5, 6, 'x'), {},
        'ones(): argument \'size\' failed to unpack the object at pos 6 with error "type must be '
        'tuple of ints,but got str"',
    ),
    ('ones-size-twice', 'torch.ones', (2, 3), {'size': (2,)}, "ones() got multiple values for argument 'size'"),
    (
        'ones-foo', 'torch.ones', (), {'size': (2,), 'dtype': F32, 'foo': 1},
        "ones() got an unexpected keyword argument 'foo'",
    ),
    ('ones-out-int', 'torch.ones', ((2,),), {'out': 3}, "ones(): argument 'out' must be Tensor, not int"),
    ('ones-requires-grad-none', 'torch.ones', (2,), {'requires_grad': None}, OK),
    (
        'empty-memory-format-int', 'torch.empty', (2, 3), {'memory_format': 1},
        "empty(): argument 'memory_format' must be torch.memory_format, not int",
    ),
    ('empty-memory-format-none', 'torch.empty', (2, 3), {'memory_format': None}, OK),
    ('cat-element', 'torch.cat', ([A, 1],), {}, 'expected Tensor as element 1 in argument 0, but got int'),
    ('cat-element-str', 'torch.cat', ((A, 'x'), 0), {}, 'expected Tensor as element 1 in argument 0, but got str'),
    (
        'cat-tensor', 'torch.cat', (A,), {},
        "cat(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor",
    ),
    ('cat-dim-float', 'torch.cat', ([A, A],), {'dim': 1.5}, "cat(): argument 'dim' must be int, not float"),
    ('cat-dim-bool', 'torch.cat', ([A, A],), {'dim': True}, "cat(): argument 'dim' must be int, not bool"),
    ('cat-dim-0dim', 'torch.cat', ([A, A],), {'dim': Z}, OK),
    ('cat-dim-0dim-float', 'torch.cat', ([A, A],), {'dim': ZF}, "cat(): argument 'dim' must be int, not Tensor"),
    ('cat-3-pos', 'torch.cat', ([A, A], 0, 1), {}, 'cat() takes from 1 to 2 positional arguments but 3 were given'),
    ('cat-missing', 'torch.cat', (), {}, 'cat() missing 1 required positional arguments: "tensors"'),
    (
        'permute-tuple-float', 'torch.permute', (A, (0.5,)), {},
        "permute(): argument 'dims' (position 2) must be tuple of ints, but found element of type "
        'float at pos 0',
    ),
    (
        'permute-tuple-bool', 'torch.permute', (A, (True,)), {},
        "permute(): argument 'dims' (position 2) must be tuple of ints, but found element of type "
        'bool at pos 0',
    ),
    (
        'permute-float', 'torch.permute', (A, 0.5), {},
        "permute(): argument 'dims' (position 2) must be tuple of ints, not float",
    ),
    (
        'permute-int', 'torch.permute', (A, 0), {},
        "permute(): argument 'dims' (position 2) must be tuple of ints, not int",
    ),
    (
        'permute-kw-tuple-float', 'torch.permute', (A,), {'dims': (0.5,)},
        "permute(): argument 'dims' must be tuple of ints, not tuple",
    ),
    (
        'permute-unpack', 'torch.permute', (A, [0, 'x']), {},
        'permute(): argument \'dims\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got str"',
    ),
    (
        'transpose-missing-1', 'torch.transpose', (A, 0), {},
        'transpose() missing 1 required positional arguments: "dim1"',
    ),
    (
        'transpose-missing-2', 'torch.transpose', (A,), {},
        'transpose() missing 2 required positional argument: "dim0", "dim1"',
    ),
    (
        'transpose-missing-3', 'torch.transpose', (), {},
        'transpose() missing 3 required positional argument: "input", "dim0", "dim1"',
    ),
    (
        'transpose-float', 'torch.transpose', (A, 0, 1.5), {},
        "transpose(): argument 'dim1' (position 3) must be int, not float",
    ),
    (
        'transpose-bool', 'torch.transpose', (A, 0, True), {},
        "transpose(): argument 'dim1' (position 3) must be int, not bool",
    ),
    ('transpose-np', 'torch.transpose', (A, 0, NP_I), {}, OK),
    ('full-str', 'torch.full', ((2,), 'x'), {}, "full(): argument 'fill_value' (position 2) must be Number, not str"),
    (
        'full-none', 'torch.full', ((2,), None), {},
        "full(): argument 'fill_value' (position 2) must be Number, not NoneType",
    ),
    (
        'm-expand-unpack', 'Tensor.expand', (2, 'x'), {},
        'expand(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got str"',
    ),
    (
        'm-expand-str', 'Tensor.expand', ('x',), {},
        "expand(): argument 'size' (position 1) must be tuple of ints, not str",
    ),
    (
        'm-expand-float', 'Tensor.expand', (2.0,), {},
        "expand(): argument 'size' (position 1) must be tuple of ints, not float",
    ),
    (
        'm-expand-first-float', 'Tensor.expand', ((2.0,),), {},
        "expand(): argument 'size' (position 1) must be tuple of ints, but found element of type "
        'float at pos 0',
    ),
    ('m-expand-str-first', 'Tensor.expand', ('x', 2), {}, 'expand() takes 1 positional argument but 2 were given'),
    ('m-view-int', 'Tensor.view', (2,), {}, OK),
    ('m-view-dtype', 'Tensor.view', (F32,), {}, OK),
    (
        'm-view-str', 'Tensor.view', ('x',), {},
        'view() received an invalid combination of arguments - got (str), but expected one of:\n * '
        "(torch.dtype dtype)\n      didn't match because some of the arguments have invalid types: "
        "(!str!)\n * (tuple of ints size)\n      didn't match because some of the arguments have "
        'invalid types: (!str!)\n',
    ),
    (
        'm-view-float', 'Tensor.view', (2.0,), {},
        'view() received an invalid combination of arguments - got (float), but expected one of:\n * '
        "(torch.dtype dtype)\n      didn't match because some of the arguments have invalid types: "
        "(!float!)\n * (tuple of ints size)\n      didn't match because some of the arguments have "
        'invalid types: (!float!)\n',
    ),
    (
        'm-view-unpack-dtype', 'Tensor.view', (2, F32), {},
        'view(): argument \'size\' failed to unpack the object at pos 2 with error "type must be '
        'tuple of ints,but got torch.dtype"',
    ),
    ('m-reshape-missing', 'Tensor.reshape', (), {}, 'reshape() missing 1 required positional arguments: "shape"'),
    (
        'm-reshape-float', 'Tensor.reshape', (2.0,), {},
        "reshape(): argument 'shape' (position 1) must be tuple of ints, not float",
    ),
    (
        'm-squeeze-str', 'Tensor.squeeze', ('x',), {},
        'squeeze() received an invalid combination of arguments - got (str), but expected one of:\n * '
        "()\n      didn't match because some of the arguments have invalid types: (!str!)\n * (int "
        "dim)\n      didn't match because some of the arguments have invalid types: (!str!)\n * "
        "(tuple of ints dim)\n      didn't match because some of the arguments have invalid types: "
        '(!str!)\n',
    ),
    (
        'm-transpose-missing', 'Tensor.transpose', (), {},
        'transpose() missing 2 required positional argument: "dim0", "dim1"',
    ),
    (
        'm-transpose-missing-1', 'Tensor.transpose', (0,), {},
        'transpose() missing 1 required positional arguments: "dim1"',
    ),
]


@pytest.mark.parametrize(("binding", "args", "kwargs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_messages(no_tty: None, binding: str, args: tuple, kwargs: dict, expected: str | None) -> None:
    assert lab_outcome(make_parser(binding), lab(args), lab(kwargs)) == expected


def _torch_side(torch: Any, x: Any) -> Any:
    objects = {
        "A": lambda: torch.ones(2), "Z": lambda: torch.tensor(0), "ZF": lambda: torch.tensor(2.0),
        "ZG": lambda: torch.ones((), requires_grad=True), "G": torch.Generator,
        "F32": lambda: torch.float32, "F64": lambda: torch.float64, "CPU": lambda: torch.device("cpu"),
        "NP_I": lambda: np.int64(0), "NP_F": lambda: np.float64(2.0), "NP_B": lambda: np.bool_(True),
    }
    if isinstance(x, Ref):
        return objects[x.name]()
    if isinstance(x, tuple):
        return tuple(_torch_side(torch, i) for i in x)
    if isinstance(x, list):
        return [_torch_side(torch, i) for i in x]
    if isinstance(x, dict):
        return {k: _torch_side(torch, v) for k, v in x.items()}
    return x


def _torch_to_lab(torch: Any, x: Any) -> Any:
    """The lab-side twin of an object given to torch (tensors wrapped, dtypes/devices translated)."""
    if isinstance(x, torch.Tensor):
        return TorchTensor(x)
    if isinstance(x, torch.dtype):
        return getattr(lab_dtype, str(x).removeprefix("torch."))
    if isinstance(x, torch.device):
        return Device(str(x))
    if isinstance(x, torch.Generator):
        return LAB_OBJECTS["G"]
    if isinstance(x, tuple):
        return tuple(_torch_to_lab(torch, i) for i in x)
    if isinstance(x, list):
        return [_torch_to_lab(torch, i) for i in x]
    return x


@pytest.mark.torch
@pytest.mark.parametrize(("binding", "args", "kwargs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_as_torch(binding: str, args: tuple, kwargs: dict, expected: str | None) -> None:
    torch = pytest.importorskip("torch")
    owner, name = binding.split(".")
    fn = getattr(torch, name) if owner == "torch" else getattr(torch.ones(2), name)
    t_args, t_kwargs = _torch_side(torch, args), _torch_side(torch, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(*t_args, **t_kwargs)
            torch_says = None
        except TypeError as e:
            torch_says = str(e)
        except (RuntimeError, IndexError, AssertionError, NotImplementedError):
            torch_says = None  # the arguments were accepted; a later stage failed
    parser = PythonArgParser(BINDINGS[binding][0], **{**BINDINGS[binding][1], "tensor_type": TorchTensor})
    lab_args = _torch_to_lab(torch, t_args)
    lab_kwargs = {k: _torch_to_lab(torch, v) for k, v in t_kwargs.items()}
    assert lab_outcome(parser, lab_args, lab_kwargs) == torch_says
    if not (os.isatty(1) and os.isatty(2)):  # else torch colours the marks
        assert torch_says == expected


# --- parsed values --------------------------------------------------------------------------------------

VALUES: list[tuple[str, tuple, dict, int, list]] = [
    ("torch.add", (A, A), {}, 0, [A, A, 1, None]),
    ("torch.add", (1, 2.5), {}, 0, [("wrapped", 1), ("wrapped", 2.5), 1, None]),
    ("torch.add", (True, A), {}, 0, [("wrapped", True), A, 1, None]),
    ("torch.add", (A, NP_F), {}, 0, [A, ("wrapped", 2.0), 1, None]),
    ("torch.add", (A, A), {"alpha": ZF}, 0, [A, A, 2.0, None]),
    ("torch.add", (A, A), {"alpha": NP_I, "out": A}, 0, [A, A, 0, A]),
    ("torch.add", (A, A), {"alpha": NP_B}, 0, [A, A, 1.0, None]),
    ("torch.add", (), {"x1": A, "x2": A}, 0, [A, A, 1, None]),
    ("torch.add", (A, 2, A), {}, 1, [A, 2, A, None]),
    ("Tensor.add", (A,), {"alpha": 2}, 0, [A, 2]),
    ("Tensor.add", (2.5,), {}, 0, [("wrapped", 2.5), 1]),
    ("Tensor.add", (2, A), {}, 1, [2, A]),
    ("torch.sum", (A,), {}, 0, [A, None]),
    ("torch.sum", (A,), {"dtype": F64}, 0, [A, F64]),
    ("torch.sum", (A,), {"dtype": float}, 0, [A, lab_dtype.float64]),
    ("torch.sum", (A,), {"dtype": int}, 0, [A, lab_dtype.int64]),
    ("torch.sum", (A,), {"dtype": bool}, 0, [A, lab_dtype.bool]),
    ("torch.sum", (A, 0), {}, 1, [A, (0,), False, None, None]),
    ("torch.sum", (A, [0, 1]), {"keepdim": True}, 1, [A, (0, 1), True, None, None]),
    ("torch.sum", (A, None, True), {}, 1, [A, None, True, None, None]),
    ("torch.sum", (A, Z), {}, 1, [A, (0,), False, None, None]),
    ("torch.sum", (A, (NP_I, True, Z)), {}, 1, [A, (0, 1, 0), False, None, None]),
    ("torch.sum", (), {"a": A, "axis": (0,), "keepdims": True}, 1, [A, (0,), True, None, None]),
    ("torch.sum", (A, 0), {"out": A, "dtype": F32}, 1, [A, (0,), False, F32, A]),
    ("Tensor.sum", (), {}, 0, [None]),
    ("Tensor.sum", (), {"dim": 0, "keepdim": True}, 1, [(0,), True, None]),
    ("torch.randn", (2, 3), {}, 1, [(2, 3), None, None, None, None, False, False]),
    ("torch.randn", ((2, 3),), {}, 1, [(2, 3), None, None, None, None, False, False]),
    ("torch.randn", ([2, 3],), {}, 1, [(2, 3), None, None, None, None, False, False]),
    ("torch.randn", (), {"size": (2, 3)}, 1, [(2, 3), None, None, None, None, False, False]),
    ("torch.randn", (2,), {}, 1, [(2,), None, None, None, None, False, False]),
    ("torch.randn", ((),), {}, 1, [(), None, None, None, None, False, False]),
    ("torch.randn", (Z, NP_I), {}, 1, [(0, 0), None, None, None, None, False, False]),
    ("torch.randn", (2, 3), {"generator": G}, 0, [(2, 3), G, None, None, None, None, False, False]),
    ("torch.randn", (2,), {"generator": None}, 0, [(2,), None, None, None, None, None, False, False]),
    (
        "torch.randn", (2,), {"dtype": F64, "device": "meta", "requires_grad": True, "pin_memory": None}, 1,
        [(2,), None, F64, None, "meta", None, True],
    ),
    ("torch.zeros", (2,), {"device": CPU}, 0, [(2,), None, None, None, CPU, False, False]),
    ("torch.zeros", (2,), {"device": "cuda:0"}, 0, [(2,), None, None, None, "cuda:0", False, False]),
    ("torch.zeros", (2,), {"device": 0}, 0, [(2,), None, None, None, 0, False, False]),
    ("torch.empty", ((2, 3),), {}, 0, [(2, 3), None, None, None, None, None, False, False]),
    ("torch.full", ((2,), True), {}, 0, [(2,), True, None, None, None, None, False, False]),
    ("torch.full", ((2,), ZF), {}, 0, [(2,), 2.0, None, None, None, None, False, False]),
    ("torch.cat", ([A, A],), {"dim": Z}, 0, [(A, A), 0, None]),
    ("torch.cat", ((A,), -1), {}, 0, [(A,), -1, None]),
    ("torch.transpose", (A, 0, NP_I), {}, 0, [A, 0, 0]),
    ("Tensor.view", (F32,), {}, 0, [F32]),
    ("Tensor.view", (2, -1), {}, 1, [(2, -1)]),
    ("Tensor.squeeze", (), {}, 0, []),
    ("Tensor.squeeze", (0,), {}, 1, [0]),
    ("Tensor.squeeze", ((0, 1),), {}, 2, [(0, 1)]),
    ("Tensor.expand", (2, 3), {"implicit": True}, 0, [(2, 3), True]),
]


@pytest.mark.parametrize(("binding", "args", "kwargs", "index", "values"), VALUES)
def test_values(binding: str, args: tuple, kwargs: dict, index: int, values: list) -> None:
    parser = make_parser(binding)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = parser.parse(lab(args), lab(kwargs))
    assert isinstance(parsed, ParsedArgs)
    assert parsed.index == index
    assert parsed.signature is parser.signatures[index]
    # repr() also compares the types: 2 is not 2.0, True is not 1
    assert repr(parsed.values) == repr(lab(values))


# --- signatures -----------------------------------------------------------------------------------------

PRINTED = [
    (ADD[0], "(Tensor input, Tensor other, *, Number alpha = 1, Tensor out = None)"),
    (ADD[1], "(Tensor input, Number alpha, Tensor other, *, Tensor out = None)"),
    (ADD_METHOD[0], "(Tensor other, *, Number alpha = 1)"),
    (SUM[0], "(Tensor input, *, torch.dtype dtype = None)"),
    (SUM[1], "(Tensor input, tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = None, Tensor out = None)"),
    (SUM_METHOD[1], "(tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = None)"),
    (
        RANDN[0],
        "(tuple of ints size, *, torch.Generator generator, Tensor out = None, torch.dtype dtype = None, "
        "torch.layout layout = None, torch.device device = None, bool pin_memory = False, bool requires_grad = False)",
    ),
    (EMPTY[0].split(", Tensor out")[0] + ")", "(tuple of ints size, *, torch.memory_format memory_format = None)"),
    (CAT[0], "(tuple of Tensors tensors, int dim = 0, *, Tensor out = None)"),
    (FULL[0].split(", *")[0] + ")", "(tuple of ints size, Number fill_value)"),
    (TRANSPOSE[0], "(Tensor input, int dim0, int dim1)"),
    (SQUEEZE_METHOD[0], "()"),
    ("f(float eps=1e-05, str mode, PyObject* data)", "(float eps = 1e-05, str mode, object data)"),
]


@pytest.mark.parametrize(("text", "printed"), PRINTED)
def test_signature_display(text: str, printed: str) -> None:
    assert str(FunctionSignature.parse(text)) == printed


# The same signatures in native_functions.yaml (schema) spelling print the same.
SCHEMA_SPELLINGS = [
    ("add(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!)? out=None)", ADD[0]),
    ("sum(Tensor input, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor? out=None)", SUM[1]),
    (
        "randn(SymInt[] size, *, Generator? generator, Tensor? out=None, ScalarType? dtype=None, "
        "Layout? layout=None, Device? device=None, bool? pin_memory=False, bool? requires_grad=False)",
        RANDN[0],
    ),
    ("cat(Tensor[] tensors, int dim=0, *, Tensor? out=None)", CAT[0]),
    ("transpose(Tensor input, int dim0, int dim1)", TRANSPOSE[0]),
    ("view(SymInt[] size)", VIEW_METHOD[1]),
]


@pytest.mark.parametrize(("schema", "torch_text"), SCHEMA_SPELLINGS)
def test_schema_spelling(schema: str, torch_text: str) -> None:
    a, b = FunctionSignature.parse(schema), FunctionSignature.parse(torch_text)
    assert str(a).replace("Tensor self", "Tensor input") == str(b)
    assert [(p.kind, p.size, p.default, p.kwarg_only) for p in a.params] == [
        (p.kind, p.size, p.default, p.kwarg_only) for p in b.params
    ]


def test_params() -> None:
    sig = FunctionSignature.parse(ADD[0])
    assert sig.name == "add"
    assert [(p.name, p.type_str, p.default, p.kwarg_only, p.allow_none) for p in sig.params] == [
        ("input", "Tensor", NO_DEFAULT, False, False),
        ("other", "Tensor", NO_DEFAULT, False, False),
        ("alpha", "Scalar", 1, True, False),
        ("out", "Tensor", None, True, True),
    ]
    assert (sig.min_args, sig.max_args, sig.max_pos_args) == (2, 4, 2)
    assert not sig.deprecated and FunctionSignature.parse(ADD[1]).deprecated
    generator = FunctionSignature.parse(RANDN[0]).params[1]
    assert (generator.name, generator.default, generator.allow_none, generator.kwarg_only) == (
        "generator", NO_DEFAULT, True, True,
    )


@pytest.mark.parametrize(
    ("param", "default"),
    [
        ("int64_t dim=0", 0),
        ("int dim=-1", -1),
        ("SymInt n=0x10", 16),
        ("double eps=1e-05", 1e-05),
        ("float p=0.5", 0.5),
        ("Scalar alpha=1", 1),
        ("Scalar alpha=0.5", 0.5),
        ("bool keepdim=False", False),
        ("bool keepdim=True", True),
        ("bool? pin_memory=False", False),
        ("int[] dims=[]", ()),
        ("int[] dims=[0, 1]", (0, 1)),
        ("IntArrayRef dims={0,1}", (0, 1)),
        ("IntArrayRef[2] stride=1", (1, 1)),
        ("SymInt[1]? dim=None", None),
        ("Tensor[] tensors=[]", ()),
        ("str rounding_mode='trunc'", "trunc"),
        ('c10::string_view reduce="mean"', "mean"),
        ("MemoryFormat? memory_format=contiguous_format", "contiguous_format"),
        ("Layout layout=torch.strided", "torch.strided"),
        ("int reduction=Mean", "Mean"),
        ("Generator? generator=None", None),
    ],
)
def test_defaults(param: str, default: Any) -> None:
    p = FunctionSignature.parse(f"f({param})").params[0]
    assert repr(p.default) == repr(default)
    assert p.allow_none == ("?" in param or "None" in param)


@pytest.mark.parametrize(
    "text",
    ["add(Tensor input", "add", "add(Tensor)", "add(Foo x)", "add(Tensor x=1)", "add(int[] x=1)", "add(Tensor a, , Tensor b)"],
)
def test_bad_signatures(text: str) -> None:
    with pytest.raises(ValueError):
        FunctionSignature.parse(text)


# --- behaviour not covered by the table -----------------------------------------------------------------

def test_method_drops_self_param(no_tty: None) -> None:
    parser = PythonArgParser(["add(Tensor self, Tensor other, *, Scalar alpha=1)"], method=True, tensor_type=Tensor)
    assert str(parser.signatures[0]) == "(Tensor other, *, Number alpha = 1)"
    a = LAB_OBJECTS["A"]
    assert parser.parse((a,), {}).values == [a, 1]
    with pytest.raises(TypeError, match=r"^add\(\): argument 'other' \(position 1\) must be Tensor, not str$"):
        parser.parse(("x",), {})


def test_deprecated_tried_last_and_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pap, "_deprecation_warned", False)
    parser = make_parser("torch.add")
    a = LAB_OBJECTS["A"]
    with pytest.warns(UserWarning) as record:
        assert parser.parse((a, 2, a), {}).index == 1
        parser.parse((a, 2, a), {})
    assert len(record) == 1
    assert str(record[0].message) == (
        "This overload of add is deprecated:\n"
        "\tadd(Tensor input, Number alpha, Tensor other, *, Tensor out = None)\n"
        "Consider using one of the following signatures instead:\n"
        "\tadd(Tensor input, Tensor other, *, Number alpha = 1, Tensor out = None)"
    )
    reordered = PythonArgParser([ADD[1], ADD[0]], allow_numbers_as_tensors=True, tensor_type=Tensor)
    assert reordered.parse((a, a), {}).index == 1  # the non-deprecated one is tried first


def test_numbers_as_tensors_off_and_without_wrap() -> None:
    with pytest.raises(TypeError, match=r"^add\(\): argument 'input' \(position 1\) must be Tensor, not int$"):
        PythonArgParser(ADD, tensor_type=Tensor).parse((1, 2), {})
    parsed = PythonArgParser(ADD, allow_numbers_as_tensors=True, tensor_type=Tensor).parse((1, np.float32(2)), {})
    assert repr(parsed.values[:2]) == "[1, 2.0]"
    assert pap.should_allow_numbers_as_tensors("mul_") and not pap.should_allow_numbers_as_tensors("neg")


def test_lab_objects(no_tty: None) -> None:
    parser = make_parser("torch.zeros")
    with pytest.raises(TypeError, match=r"^zeros\(\): argument 'dtype' must be torch.dtype, not int$"):
        parser.parse((2,), {"dtype": 3})
    with pytest.raises(TypeError, match=r"^zeros\(\): argument 'dtype' must be torch.dtype, not type$"):
        parser.parse((2,), {"dtype": complex})  # the lab has no complex dtypes
    rand = PythonArgParser(["rand(SymInt[] size, *, Generator? generator=None)"], tensor_type=Tensor)
    assert rand.parse((2,), {"generator": LAB_OBJECTS["G"]}).values == [(2,), LAB_OBJECTS["G"]]
    with pytest.raises(TypeError, match=r"^rand\(\): argument 'generator' must be torch.Generator, not numpy\."):
        rand.parse((2,), {"generator": np.random.default_rng()})
    with pytest.raises(TypeError, match=r"^add\(\): argument 'other' \(position 2\) must be Tensor, not torch.device$"):
        make_parser("torch.add").parse((LAB_OBJECTS["A"], Device("meta")), {})
    with pytest.raises(TypeError, match=r"must be Tensor, not torch._C.Generator$"):
        make_parser("torch.neg").parse((LAB_OBJECTS["G"],), {})
    with pytest.raises(TypeError, match=r"must be Tensor, not torch.dtype$"):
        make_parser("torch.neg").parse((lab_dtype.int32,), {})
    with pytest.raises(TypeError, match=r"must be Tensor, not numpy.float64$"):
        make_parser("torch.neg").parse((np.float64(1),), {})


def test_layout_and_memory_format_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pap, "_EXTRA_CLASSES", {pap.LAYOUT: (), pap.MEMORY_FORMAT: ()})
    monkeypatch.setattr(pap, "_EXTRA_TP_NAMES", {})

    class layout:  # torch's spelling
        pass

    strided = layout()
    parser = make_parser("torch.zeros")
    with pytest.raises(TypeError, match=r"^zeros\(\): argument 'layout' must be torch.layout, not layout$"):
        parser.parse((2,), {"layout": strided})
    pap.register_argument_class("Layout", layout, "torch.layout")
    assert parser.parse((2,), {"layout": strided}).values[3] is strided
    with pytest.raises(TypeError, match=r"must be torch.memory_format, not torch.layout$"):
        make_parser("torch.empty").parse((2,), {"memory_format": strided})
    with pytest.raises(ValueError):
        pap.register_argument_class("Tensor", layout)


def test_tensor_list_element_error_while_trying_signatures() -> None:
    parser = PythonArgParser(["f(Tensor a)", "f(Tensor[] tensors, int dim=0)"], tensor_type=Tensor)
    with pytest.raises(TypeError, match=r"^expected Tensor as element 1 in argument 0, but got str$"):
        parser.parse(([LAB_OBJECTS["A"], "x"],), {})
    optional = PythonArgParser(["f(Tensor?[] indices)"], tensor_type=Tensor)
    assert optional.parse(([None, LAB_OBJECTS["A"]],), {}).values == [(None, LAB_OBJECTS["A"])]


def test_terminal_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "isatty", lambda fd: True)
    with pytest.raises(TypeError) as info:
        make_parser("Tensor.add").parse((LAB_OBJECTS["A"], 2, 3), {})
    assert "got (\33[32;1mTensor\33[0m, \33[31;1mint\33[0m, \33[31;1mint\33[0m)" in str(info.value)


@pytest.mark.parametrize(
    ("keys", "order"),
    [
        # recorded from torch 2.13 messages (the keywords go through a std::unordered_map)
        (["out", "alpha", "foo"], ["foo", "alpha", "out"]),
        (["size", "dtype"], ["dtype", "size"]),
        (["dtype", "out", "foo"], ["foo", "out", "dtype"]),
        (["dim", "keepdim", "dtype", "out", "foo", "bar"], ["foo", "out", "dtype", "keepdim", "bar", "dim"]),
        (["generator", "dtype"], ["dtype", "generator"]),
    ],
)
def test_keyword_order(keys: list[str], order: list[str]) -> None:
    assert pap._unordered_map_order(keys) == order


@pytest.mark.torch
def test_keyword_order_matches_torch() -> None:
    """Many keywords (rehashing included) come out of torch's message in the emulated order."""
    torch = pytest.importorskip("torch")
    a = torch.ones(2)
    names = [f"k{i}_{'x' * (i % 11)}" for i in range(40)]
    for n in (2, 7, 13, 14, 29, 30, 40):
        kwargs = dict.fromkeys(names[:n], 1)
        with pytest.raises(TypeError) as info:
            torch.sum(a, a, a, a, a, a, **kwargs)
        got = str(info.value).split(" - got (")[1].split("), but")[0].split(", ")[6:]
        assert [part.split("=")[0] for part in got] == pap._unordered_map_order(list(kwargs))


@pytest.mark.torch
def test_torch_objects_are_foreign(no_tty: None) -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"^zeros\(\): argument 'dtype' must be torch.dtype, not torch.dtype$"):
        make_parser("torch.zeros").parse((2,), {"dtype": torch.float32})
    with pytest.raises(TypeError, match=r"^zeros\(\): argument 'device' must be torch.device, not torch.device$"):
        make_parser("torch.zeros").parse((2,), {"device": torch.device("cpu")})


def test_default_tensor_type_is_the_lab_tensor() -> None:
    from labsupport.aten.tensor import TensorBase

    assert PythonArgParser(NEG).tensor_type is TensorBase


def test_parse_is_fast() -> None:
    parser = make_parser("torch.add")
    a = LAB_OBJECTS["A"]
    parser.parse((a, a), {})
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(1000):
            parser.parse((a, a), {"alpha": 2})
        best = min(best, (time.perf_counter() - start) / 1000)
    assert best < 50e-6  # about 2 µs on a laptop; the bound only catches pathological slowdowns
