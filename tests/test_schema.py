"""Tests for labsupport.c10.schema (the lab's c10::FunctionSchema / torchgen FunctionSchema)."""

from __future__ import annotations

import os
import re

import pytest

from labsupport.c10.schema import AliasInfo, Argument, FunctionSchema, Return, SchemaParseError, Type

# ----------------------------------------------------------------------------------------
# Unit tests (no torch needed)
# ----------------------------------------------------------------------------------------

ADD_TENSOR = "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
ADD_OUT = "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"
ADD_INPLACE = "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"


def test_add_tensor() -> None:
    s = FunctionSchema.parse(ADD_TENSOR)
    assert str(s) == ADD_TENSOR
    assert (s.namespace, s.name, s.overload_name) == (None, "add", "Tensor")
    assert s.qualified_name == "add"
    assert s.full_name == "add.Tensor"
    assert [a.name for a in s.arguments] == ["self", "other", "alpha"]
    assert [a.kwarg_only for a in s.arguments] == [False, False, True]
    self_arg = s.arguments[0]
    assert self_arg == Argument("self", Type("Tensor"), None, False, None, False)
    assert self_arg.type.is_tensor and self_arg.type.is_tensor_like
    alpha = s.arguments[2]
    assert alpha.default == "1" and alpha.type.name == "Scalar" and not alpha.type.is_tensor_like
    assert [a.name for a in s.positional] == ["self", "other"]
    assert [a.name for a in s.kwarg_only] == ["alpha"]
    assert s.out == ()
    assert s.returns == (Return(None, Type("Tensor"), None),)
    assert s.kind() == "functional"
    assert not s.is_mutable and not s.is_out_fn() and not s.is_inplace
    assert s.dispatch_arg_indices == (0, 1)
    assert s.unambiguous_name() == "add_Tensor"


def test_add_out() -> None:
    s = FunctionSchema.parse(ADD_OUT)
    assert str(s) == ADD_OUT
    out = s.arguments[-1]
    assert out.name == "out" and out.kwarg_only and out.is_out and out.is_write
    assert out.annotation == AliasInfo(("a",), True)
    assert str(out.annotation) == "a!"
    assert [a.name for a in s.out] == ["out"]
    assert [a.name for a in s.kwarg_only] == ["alpha"]
    assert not s.arguments[2].is_out  # alpha: kwarg-only but not written
    assert s.returns[0].annotation == out.annotation
    assert s.kind() == "out"
    assert s.is_out_fn() and s.is_mutable and not s.is_inplace
    assert s.dispatch_arg_indices == (0, 1, 3)
    assert s.unambiguous_name() == "add_out"


def test_add_inplace() -> None:
    s = FunctionSchema.parse(ADD_INPLACE)
    assert str(s) == ADD_INPLACE
    assert s.name == "add_"
    assert s.kind() == "inplace" and s.is_inplace and s.is_mutable and not s.is_out_fn()
    assert s.arguments[0].is_write and not s.arguments[0].is_out  # positional, so not an out arg
    assert s.unambiguous_name() == "add__Tensor"


def test_add_variants_share_signature() -> None:
    sigs = {FunctionSchema.parse(t).signature_str() for t in (ADD_TENSOR, ADD_OUT, ADD_INPLACE)}
    assert sigs == {"add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"}


def test_view_schema() -> None:
    text = "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"
    s = FunctionSchema.parse(text)
    assert str(s) == text
    self_arg, size = s.arguments
    assert self_arg.annotation == AliasInfo(("a",), False)
    assert not self_arg.is_write
    assert size.type.is_list and size.type.name == "SymInt" and size.type.size is None
    assert size.type.elem == Type("SymInt")
    assert s.returns[0].annotation == self_arg.annotation
    assert s.kind() == "functional" and not s.is_mutable
    assert s.unambiguous_name() == "view"


def test_randn_factory() -> None:
    text = (
        "randn(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
        "Device? device=None, bool? pin_memory=None) -> Tensor"
    )
    s = FunctionSchema.parse(text)
    assert str(s) == text
    assert [a.name for a in s.kwarg_only] == ["dtype", "layout", "device", "pin_memory"]
    assert all(a.default == "None" and a.type.is_optional for a in s.kwarg_only)
    assert [a.type.elem.name for a in s.kwarg_only if a.type.elem] == [
        "ScalarType",
        "Layout",
        "Device",
        "bool",
    ]
    assert s.dispatch_arg_indices == ()
    assert s.kind() == "functional"
    # TensorOptions kwargs are dropped from the grouping signature, as in torchgen
    assert s.signature_str() == "randn(SymInt[] size) -> Tensor"


def test_multi_return_named() -> None:
    text = (
        "max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values)"
        " -> (Tensor(a!) values, Tensor(b!) indices)"
    )
    s = FunctionSchema.parse(text)
    assert str(s) == text
    assert [r.name for r in s.returns] == ["values", "indices"]
    assert [str(r.annotation) for r in s.returns] == ["a!", "b!"]
    assert [a.name for a in s.out] == ["max", "max_values"]
    assert s.kind() == "out"
    plain = FunctionSchema.parse("sort(Tensor self, int dim=-1) -> (Tensor values, Tensor indices)")
    assert [str(r) for r in plain.returns] == ["Tensor values", "Tensor indices"]
    assert plain.arguments[1].default == "-1"
    empty = FunctionSchema.parse("_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()")
    assert empty.returns == () and str(empty).endswith("-> ()")
    assert empty.arguments[0].type.is_list and empty.arguments[0].is_write
    assert str(empty.arguments[0]) == "Tensor(a!)[] self"
    assert empty.kind() == "inplace"


def test_namespaced_custom_op() -> None:
    text = "myops::myadd(Tensor self, Tensor other) -> Tensor"
    s = FunctionSchema.parse(text)
    assert str(s) == text
    assert (s.namespace, s.name, s.overload_name) == ("myops", "myadd", "")
    assert s.qualified_name == "myops::myadd"
    assert s.full_name == "myops::myadd"
    assert s.unambiguous_name() == "myadd"
    bare = FunctionSchema.parse("myadd(Tensor self, Tensor other) -> Tensor")
    assert bare.namespace is None and bare.qualified_name == "myadd"
    assert bare.with_namespace("myops") == s
    assert str(s.with_namespace(None)) == "myadd(Tensor self, Tensor other) -> Tensor"
    ov = FunctionSchema.parse("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    assert ov.full_name == "aten::add.Tensor" and ov.qualified_name == "aten::add"


def test_dispatch_arg_indices() -> None:
    cat = FunctionSchema.parse("cat(Tensor[] tensors, int dim=0) -> Tensor")
    assert cat.dispatch_arg_indices == (0,)
    assert cat.arguments[0].type.is_tensor_like and not cat.arguments[0].type.is_tensor
    index = FunctionSchema.parse("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor")
    assert index.dispatch_arg_indices == (0, 1)
    ty = index.arguments[1].type
    assert ty.is_list and ty.elem == Type.optional(Type("Tensor")) and ty.name == "Tensor"
    bn = FunctionSchema.parse(
        "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
        "bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor"
    )
    assert bn.dispatch_arg_indices == (0, 1, 2, 3, 4)
    assert bn.arguments[1].type.is_optional and not bn.arguments[1].type.is_tensor


def test_unambiguous_name() -> None:
    cases = {
        "neg(Tensor self) -> Tensor": "neg",
        "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor": "add_Tensor",
        "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)": "add__Tensor",
        "__and__.Tensor(Tensor self, Tensor other) -> Tensor": "__and___Tensor",
        "myops::foo.bar(Tensor x) -> Tensor": "foo_bar",
    }
    for text, expected in cases.items():
        assert FunctionSchema.parse(text).unambiguous_name() == expected


def test_dunder_names_and_kinds() -> None:
    iand = FunctionSchema.parse("__iand__.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)")
    assert iand.name == "__iand__" and iand.kind() == "inplace"  # torchgen: augmented dunder = inplace
    assert FunctionSchema.parse("__and__.Tensor(Tensor self, Tensor other) -> Tensor").kind() == "functional"
    mutable = FunctionSchema.parse(
        "_fused_moving_avg_obs_fq_helper(Tensor self, Tensor(a!) running_min, float c) -> (Tensor output)"
    )
    assert mutable.kind() == "mutable"
    scratch = FunctionSchema.parse(
        "f.out(Tensor self, *, Tensor(a!) out, Tensor(b!) _scratch_x) -> Tensor(a!)"
    )
    assert scratch.kind() == "scratch"


def test_types_and_defaults_round_trip() -> None:
    texts = [
        "f(int[2] a, SymInt[1]? b, float[]? c, bool[3] d, Tensor?[] e, int? f=None) -> ()",
        "f(Dimname dim, Layout? layout=None, Generator? generator=None, Storage s, Stream st) -> Tensor",
        "f(Any a, str s=\"mean\", str t='linear', float eps=1e-05, float p=0.5, int[] dims=[0,1]) -> Tensor",
        "f(MemoryFormat? m=contiguous_format, ScalarType? dtype=long, DeviceIndex i=-1, int[1] p=[]) -> bool",
        "f(Tensor(a -> *) self, Tensor(a! -> a|b) other, Tensor(b|c -> d) x) -> Tensor(a)",
        "f(Tensor dummy, str a=\"\\\"'\\\\\", str b='\"\\'\\\\') -> Tensor",
        "f(__torch__.torch.classes.quantized.LinearPackedParamsBase w, Tensor(a!)? x) -> Tensor",
        "f(Tensor x, ...) -> ...",
    ]
    for text in texts:
        assert str(FunctionSchema.parse(text)) == text
    s = FunctionSchema.parse(texts[0])
    a, b, c, d = s.arguments[:4]
    assert (a.type.name, a.type.size, str(a.type)) == ("int", 2, "int[2]")
    assert b.type.is_optional and b.type.elem == Type.list_of(Type("SymInt"), 1)
    assert c.type.is_list_like and not c.type.is_list
    assert d.type.size == 3
    ann = FunctionSchema.parse(texts[4]).arguments
    assert ann[0].annotation == AliasInfo(("a",), False, ("*",))
    assert ann[1].annotation == AliasInfo(("a",), True, ("a", "b"))
    assert str(ann[2].annotation) == "b|c -> d"
    assert Type.parse("SymInt[1]?") == Type.optional(Type.list_of(Type("SymInt"), 1))
    assert str(Type.parse("Tensor?[]")) == "Tensor?[]"


def test_non_canonical_whitespace_is_normalised() -> None:
    s = FunctionSchema.parse("aten::f( Tensor(a!->*)  x , int[] y = [0, 1] ) ->( Tensor )")
    assert str(s) == "aten::f(Tensor(a! -> *) x, int[] y=[0, 1]) -> Tensor"


def _error(text: str) -> SchemaParseError:
    with pytest.raises(SchemaParseError) as info:
        FunctionSchema.parse(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert repr(text) in str(err)
    # caret line sits under the reported column
    lines = str(err).splitlines()
    assert lines[-1].index("^") - 4 == err.column - 1
    assert lines[-2] == "    " + text
    return err


ERROR_CASES = [
    # (text, column, fragment of the expectation)
    ("myadd(Tensor self, Tensor other -> Tensor", 33, "expected ',' or ')'"),
    ("f(Tensor x) Tensor", 13, "expected '->'"),
    ("f(Tensor x)", 12, "expected '->'"),
    ("f(Tensor x)) -> Tensor", 12, "expected '->'"),
    ("f(Tensor x) -> (Tensor, Tensor", 31, "expected ',' or ')'"),
    ("f(Tensor, int y) -> Tensor", 9, "expected an argument name"),
    ("f(Tensor(a?) x) -> Tensor", 11, "to finish the alias annotation"),
    ("f(Tensor(A) x) -> Tensor", 10, "expected an alias set name"),
    ("f(Tensor(a! x) -> Tensor", 13, "expected '->' or ')'"),
    ("f(Tensor x, int x) -> Tensor", 17, "duplicate argument name 'x'"),
    ("f(Tensor x, *, Tensor(a!) out=None) -> Tensor(a!)", 30, "cannot have a default value"),
    ("f(Tensor x) -> Tensor foo bar", 27, "expected end of schema"),
    ("f(Tensor x) -> Tensor)", 22, "expected end of schema"),
    ("f(Tensor x) -> Tensor $", 23, "expected a name, number, string or punctuation"),
    ("f(int(a) x) -> ()", 6, "only allowed on Tensor"),
    ("f(Tensor x, *, *, int y) -> ()", 16, "'*' can only appear once"),
    ("f(Tensor x, *, Tensor(a!) out, int y) -> ()", 36, "cannot follow out arguments"),
    ('f(str s="abc) -> ()', 9, 'expected a closing "'),
    ("f(int x=) -> ()", 9, "expected a default value"),
    ("f(Tensor(a|b!) x) -> ()", 10, "exactly one alias set"),
    ("add_.out(Tensor(a!) self, *, Tensor(b!) out) -> Tensor(b!)", 41, "inplace operator"),
    ("(Tensor x) -> ()", 1, "expected an operator name"),
]


@pytest.mark.parametrize(("text", "column", "expected"), ERROR_CASES)
def test_errors(text: str, column: int, expected: str) -> None:
    err = _error(text)
    assert err.column == column
    assert expected in err.expected
    assert f"at column {column} in {text!r}" in str(err)


def test_error_message_shape() -> None:
    err = _error("myadd(Tensor self, Tensor other -> Tensor")
    assert str(err).splitlines() == [
        "expected ',' or ')' at column 33 in 'myadd(Tensor self, Tensor other -> Tensor': found '->'",
        "    myadd(Tensor self, Tensor other -> Tensor",
        "                                    ^",
    ]
    assert err.found == "'->'"


# ----------------------------------------------------------------------------------------
# Comparison against torchgen / torch (skipped when torch is not installed)
# ----------------------------------------------------------------------------------------


def _native_funcs() -> list[str]:
    torchgen = pytest.importorskip("torchgen")
    path = os.path.join(
        os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "native_functions.yaml"
    )
    try:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        with open(path) as f:
            entries = yaml.load(f, Loader=loader)
        return [e["func"] for e in entries if "func" in e]
    except ImportError:  # pragma: no cover - torchgen depends on pyyaml, but be safe
        with open(path) as f:
            return [m.group(1) for m in re.finditer(r"^- func: (.*)$", f.read(), re.MULTILINE)]


@pytest.fixture(scope="module")
def native_funcs() -> list[str]:
    pytest.importorskip("torch")
    funcs = _native_funcs()
    assert len(funcs) > 2000
    return funcs


def test_native_functions_round_trip(native_funcs: list[str]) -> None:
    bad = [f for f in native_funcs if str(FunctionSchema.parse(f)) != f]
    assert bad == []


def test_agrees_with_torchgen(native_funcs: list[str]) -> None:
    model = pytest.importorskip("torchgen.model")
    for text in native_funcs:
        ours = FunctionSchema.parse(text)
        theirs = model.FunctionSchema.parse(text)
        assert ours.name == str(theirs.name.name), text
        assert ours.overload_name == theirs.name.overload_name, text
        assert ours.unambiguous_name() == theirs.name.unambiguous_name(), text
        assert ours.kind() == theirs.kind().name, text
        assert ours.is_mutable == theirs.is_mutable, text
        assert ours.is_out_fn() == theirs.is_out_fn(), text

        kwarg_ids = {id(a) for a in theirs.arguments.flat_kwarg_only}
        out_ids = {id(a) for a in theirs.arguments.out}
        expected = [
            (
                a.name,
                id(a) in kwarg_ids or id(a) in out_ids,
                id(a) in out_ids,
                str(a.type),
                a.default,
                None if a.annotation is None else str(a.annotation),
            )
            for a in theirs.arguments.flat_all
        ]
        got = [
            (
                a.name,
                a.kwarg_only,
                a.is_out,
                str(a.type),
                a.default,
                None if a.annotation is None else str(a.annotation),
            )
            for a in ours.arguments
        ]
        assert got == expected, text
        got_returns = [
            (r.name, str(r.type), None if r.annotation is None else str(r.annotation)) for r in ours.returns
        ]
        expected_returns = [
            (r.name, str(r.type), None if r.annotation is None else str(r.annotation)) for r in theirs.returns
        ]
        assert got_returns == expected_returns, text
        assert ours.dispatch_arg_indices == tuple(
            i for i, a in enumerate(theirs.arguments.flat_all) if a.type.is_tensor_like()
        ), text
        if str(theirs.name) != "bernoulli.p":  # torchgen special-cases this one in signature()
            assert ours.signature_str() == str(theirs.signature()), text


def test_agrees_with_torch_parse_schema(native_funcs: list[str]) -> None:
    torch = pytest.importorskip("torch")
    for text in native_funcs[::7]:
        theirs = torch._C.parse_schema("aten::" + text)
        ours = FunctionSchema.parse(text).with_namespace("aten")
        assert [a.name for a in ours.arguments] == [a.name for a in theirs.arguments], text
        assert [a.kwarg_only for a in ours.arguments] == [a.kwarg_only for a in theirs.arguments], text
        assert ours.is_mutable == theirs.is_mutable, text
        assert ours.full_name == theirs.name + (f".{theirs.overload_name}" if theirs.overload_name else "")
        # torch's own printing (which normalises some defaults, e.g. Mean -> 1) parses too
        reparsed = FunctionSchema.parse(str(theirs))
        assert [a.name for a in reparsed.arguments] == [a.name for a in ours.arguments], text
