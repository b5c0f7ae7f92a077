"""Operator schema strings: parse them, inspect them, print them back.

Stands for ``aten/src/ATen/core/function_schema.h`` (``c10::FunctionSchema``,
``c10::Argument``, ``c10::AliasInfo``), ``torch/csrc/jit/frontend/function_schema_parser.cpp``
(the parser) and ``torchgen/model.py`` (``FunctionSchema``, ``Arguments``, ``Annotation``,
``SchemaKind``), whose behaviour this module follows.

A schema looks like this::

    aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
    ^^^^  ^^^ ^^^ ^^^^^^^^^^^^^^^^^^^^^^^^^^^  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^    ^^^^^^^^^^^^^
    ns    name overload  positional arguments    keyword-only arguments (incl. out)   returns

The parser is a small hand-written tokenizer plus a recursive-descent parser, so every
error can point at the exact 1-based column where the text stopped making sense.

Grammar (whitespace between tokens is ignored)::

    schema     := opname '(' [arg (',' arg)*] ')' '->' returns END
    opname     := [IDENT '::'] IDENT ['.' IDENT]
    arg        := '*' | '...' | type IDENT ['=' default]
    type       := dotted_name ['(' alias ')'] ('?' | '[' [INT] ']')*
    alias      := LETTER ('|' LETTER)* ['!'] ['->' ('*' | LETTER ('|' LETTER)*)]
    returns    := '(' [ret (',' ret)*] ')' | ret | '...'
    ret        := type [IDENT]
    default    := STRING | ['-' | '+'] NUMBER | dotted_name | '[' [default (',' default)*] ']'

Note for learners: torchgen only knows a fixed set of base types (``Tensor``, ``int``,
``SymInt``, ``Scalar``, ``ScalarType`` ...) and rejects anything else.  This parser accepts
*any* identifier (or dotted name such as ``__torch__.torch.classes.ns.Foo``) as a type name,
because custom operators in the lab may invent their own; a typo such as ``Tesnor`` is
therefore not caught here.  Alias annotations follow torchgen: they are only allowed on
``Tensor`` and alias sets are single lowercase letters.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AliasInfo",
    "Argument",
    "FunctionSchema",
    "Return",
    "SchemaKind",
    "SchemaParseError",
    "Type",
]

SchemaKind = Literal["functional", "inplace", "out", "mutable", "scratch"]

# Names that validly appear as __iXXX__ (augmented assignment, PEP 203); torchgen treats
# e.g. ``__iand__`` as the inplace form of ``__and__``.
_AUGMENTED_ASSIGNMENT_NAMES = frozenset(
    ["add", "sub", "mul", "div", "mod", "pow", "lshift", "rshift", "and", "xor", "or"]
)
_DUNDER_RE = re.compile(r"^__([^_]+)__$")


class SchemaParseError(RuntimeError, ValueError):
    """Malformed schema text.  The message shows the text with a caret under the bad column.

    A RuntimeError, as PyTorch's schema parser raises (and a ValueError, as the lab always did).

    Attributes: ``text`` (the whole schema), ``column`` (1-based), ``expected`` (what the
    parser wanted, e.g. ``"expected ',' or ')'"``, or the complaint for semantic errors such as
    duplicate names), ``found`` (what it saw instead, or ``None`` for semantic errors).
    """

    def __init__(self, text: str, column: int, expected: str, found: str | None = None) -> None:
        self.text = text
        self.column = column
        self.expected = expected
        self.found = found
        head = f"{expected} at column {column} in {text!r}"
        if found is not None:
            head += f": found {found}"
        caret = " " * (column - 1) + "^"
        super().__init__(f"{head}\n    {text}\n    {caret}")


# ----------------------------------------------------------------------------------------
# Data model
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AliasInfo:
    """An alias annotation such as ``a!`` in ``Tensor(a!)``.

    Stands for ``c10::AliasInfo`` (``aten/src/ATen/core/alias_info.h``) and torchgen's
    ``Annotation``.  ``alias_set`` is the set before the arrow, ``is_write`` is the ``!``,
    ``alias_set_after`` is the set after ``->`` (``('*',)`` for the wildcard).
    """

    alias_set: tuple[str, ...]
    is_write: bool
    alias_set_after: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = "|".join(self.alias_set)
        if self.is_write:
            text += "!"
        if self.alias_set_after:
            text += " -> " + "|".join(self.alias_set_after)
        return text


@dataclass(frozen=True)
class Type:
    """A schema type: a base name wrapped in any number of ``?`` / ``[]`` / ``[N]`` suffixes.

    Stands for ``c10::Type`` (``aten/src/ATen/core/jit_type.h``) and torchgen's
    ``BaseType`` / ``OptionalType`` / ``ListType`` / ``CustomClassType``, folded into one class.

    * ``name``: the innermost base name (``'Tensor'`` for ``Tensor?[]``, ``'int'`` for ``int[2]``).
    * ``elem``: the wrapped type for optionals and lists, ``None`` for a base type.
    * ``is_optional`` / ``is_list``: which wrapper is *outermost* (``int[]?`` is optional,
      its ``elem`` ``int[]`` is a list).
    * ``size``: fixed list length (``int[2]`` -> 2), else ``None``.

    ``str(t)`` gives the original spelling back.
    """

    name: str
    elem: Type | None = None
    is_optional: bool = False
    is_list: bool = False
    size: int | None = None

    @staticmethod
    def base(name: str) -> Type:
        return Type(name)

    @staticmethod
    def optional(elem: Type) -> Type:
        return Type(elem.name, elem=elem, is_optional=True)

    @staticmethod
    def list_of(elem: Type, size: int | None = None) -> Type:
        return Type(elem.name, elem=elem, is_list=True, size=size)

    @classmethod
    def parse(cls, text: str) -> Type:
        """Parse a bare type such as ``SymInt[1]?`` (no alias annotation allowed)."""
        parser = _Parser(text)
        start = parser.peek()
        typ, annotation = parser.parse_type()
        if annotation is not None:
            raise SchemaParseError(text, start.start + 1, "expected a type without alias annotation")
        parser.expect_end()
        return typ

    @property
    def is_tensor(self) -> bool:
        """Exactly ``Tensor``."""
        return self.elem is None and self.name == "Tensor"

    @property
    def is_tensor_like(self) -> bool:
        """``Tensor``, ``Tensor?``, ``Tensor[]``, ``Tensor?[]`` ...: the arguments dispatch looks at."""
        return self.name == "Tensor"

    @property
    def is_base(self) -> bool:
        return self.elem is None

    @property
    def is_list_like(self) -> bool:
        """A list, or an optional list (torchgen's ``is_list_like``)."""
        if self.is_list:
            return True
        return self.is_optional and self.elem is not None and self.elem.is_list_like

    @property
    def is_nullable(self) -> bool:
        """Accepts ``None`` at the top level (torchgen's ``is_nullable`` is subtly different for lists)."""
        return self.is_optional

    def render(self, annotation: AliasInfo | None = None) -> str:
        """The spelling, with an alias annotation placed right after the base name."""
        if self.elem is None:
            return self.name if annotation is None else f"{self.name}({annotation})"
        inner = self.elem.render(annotation)
        if self.is_optional:
            return inner + "?"
        return f"{inner}[{self.size if self.size is not None else ''}]"

    def __str__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class Argument:
    """One formal argument.  Stands for ``c10::Argument`` (function_schema.h) / torchgen ``Argument``.

    ``default`` is kept exactly as written (``'1'``, ``'None'``, ``'[0,1]'``, ``'"mean"'``).
    ``is_out`` marks torchgen's ``out`` group: a keyword-only argument with a write alias.
    """

    name: str
    type: Type
    default: str | None
    kwarg_only: bool
    annotation: AliasInfo | None
    is_out: bool

    @property
    def is_write(self) -> bool:
        return self.annotation is not None and self.annotation.is_write

    @property
    def alias_info(self) -> AliasInfo | None:
        return self.annotation

    def __str__(self) -> str:
        text = f"{self.type.render(self.annotation)} {self.name}"
        if self.default is not None:
            text += f"={self.default}"
        return text


@dataclass(frozen=True)
class Return:
    """One return value (optionally named).  Stands for torchgen's ``Return``."""

    name: str | None
    type: Type
    annotation: AliasInfo | None

    @property
    def is_write(self) -> bool:
        return self.annotation is not None and self.annotation.is_write

    @property
    def alias_info(self) -> AliasInfo | None:
        return self.annotation

    def __str__(self) -> str:
        typ = self.type.render(self.annotation)
        return typ if self.name is None else f"{typ} {self.name}"


def _render_returns(returns: tuple[Return, ...], is_varret: bool) -> str:
    if is_varret:
        return "..."
    if len(returns) == 1:
        return str(returns[0])
    return "(" + ", ".join(map(str, returns)) + ")"


def _is_tensor_options_run(args: tuple[Argument, ...]) -> bool:
    """Do these four kwargs look like torchgen's TensorOptionsArguments (dtype, layout, device, pin_memory)?"""
    wanted = (("dtype", "ScalarType"), ("layout", "Layout"), ("device", "Device"), ("pin_memory", "bool"))
    if len(args) != len(wanted):
        return False
    for arg, (name, base) in zip(args, wanted):
        plain = Type.base(base)
        if arg.name != name or arg.type not in (plain, Type.optional(plain)):
            return False
    return True


@dataclass(frozen=True)
class FunctionSchema:
    """A parsed operator schema.  Stands for ``c10::FunctionSchema``
    (``aten/src/ATen/core/function_schema.h``) and ``torchgen/model.py::FunctionSchema``.

    Unlike torchgen, the arguments are kept as one flat tuple in schema order; the groups
    (positional / kwarg-only / out) are views over it.  ``is_vararg`` / ``is_varret`` record
    a trailing ``...`` in the arguments / as the returns (JIT builtins only).
    """

    namespace: str | None
    name: str
    overload_name: str
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    is_vararg: bool = False
    is_varret: bool = False

    # -- construction -----------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> FunctionSchema:
        """Parse schema text; raises :class:`SchemaParseError` if it is malformed."""
        return _Parser(text).parse_schema()

    def with_namespace(self, namespace: str | None) -> FunctionSchema:
        return dataclasses.replace(self, namespace=namespace)

    # -- printing ---------------------------------------------------------------------
    def _render_arguments(self, args: tuple[Argument, ...], is_vararg: bool) -> str:
        parts = [str(a) for a in args if not a.kwarg_only]
        kwargs = [str(a) for a in args if a.kwarg_only]
        if kwargs:
            parts.append("*")
            parts.extend(kwargs)
        if is_vararg:
            parts.append("...")
        return ", ".join(parts)

    def __str__(self) -> str:
        args = self._render_arguments(self.arguments, self.is_vararg)
        return f"{self.full_name}({args}) -> {_render_returns(self.returns, self.is_varret)}"

    # -- names ------------------------------------------------------------------------
    @property
    def qualified_name(self) -> str:
        """``'aten::add'`` (just ``'add'`` when the schema had no namespace)."""
        return f"{self.namespace}::{self.name}" if self.namespace else self.name

    @property
    def full_name(self) -> str:
        """``'aten::add.Tensor'``: qualified name plus ``.overload`` when there is one."""
        if self.overload_name:
            return f"{self.qualified_name}.{self.overload_name}"
        return self.qualified_name

    def unambiguous_name(self) -> str:
        """torchgen ``OperatorName.unambiguous_name()``: ``'add_Tensor'``, ``'add_out'``, ``'neg'``.

        The namespace is never included (that is the C++ identifier used in Operators.h).
        """
        return f"{self.name}_{self.overload_name}" if self.overload_name else self.name

    def _base_name_info(self) -> tuple[str, bool, bool]:
        """(base, inplace, dunder) exactly as torchgen's ``BaseOperatorName.parse`` decides them."""
        m = _DUNDER_RE.match(self.name)
        if m is not None:
            base = m.group(1)
            if base.startswith("i") and base[1:] in _AUGMENTED_ASSIGNMENT_NAMES:
                return base[1:], True, True
            return base, False, True
        if self.name.endswith("_"):
            return self.name[:-1], True, False
        return self.name, False, False

    # -- argument groups ----------------------------------------------------------------
    @property
    def positional(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if not a.kwarg_only)

    @property
    def kwarg_only(self) -> tuple[Argument, ...]:
        """Keyword-only arguments that are not out arguments."""
        return tuple(a for a in self.arguments if a.kwarg_only and not a.is_out)

    @property
    def out(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.is_out)

    @property
    def self_arg(self) -> Argument | None:
        """The first positional argument named ``self`` (torchgen's ``SelfArgument``)."""
        return next((a for a in self.positional if a.name == "self"), None)

    @property
    def post_self_positional(self) -> tuple[Argument, ...]:
        """Positional arguments after ``self`` (all of them when there is no ``self``)."""
        pos = self.positional
        for i, a in enumerate(pos):
            if a.name == "self":
                return pos[i + 1 :]
        return pos

    @property
    def dispatch_arg_indices(self) -> tuple[int, ...]:
        """Indices into ``arguments`` of Tensor-like arguments, whose dispatch keys are combined.

        Stands for ``c10::DispatchKeyExtractor`` (``aten/src/ATen/core/dispatch/DispatchKeyExtractor.h``),
        which marks every Tensor / Tensor? / Tensor[] / Tensor?[] argument.
        """
        return tuple(i for i, a in enumerate(self.arguments) if a.type.is_tensor_like)

    # -- classification ---------------------------------------------------------------
    @property
    def is_mutable(self) -> bool:
        """Any argument carries a write annotation (``c10::FunctionSchema::is_mutable``)."""
        return any(a.is_write for a in self.arguments)

    def is_out_fn(self) -> bool:
        return bool(self.out)

    @property
    def is_inplace(self) -> bool:
        return self.kind() == "inplace"

    def kind(self) -> SchemaKind:
        """torchgen ``FunctionSchema.kind()`` (``SchemaKind``), checked in this order:

        * ``inplace``: the name ends in ``_`` (``add_``) or is an augmented dunder (``__iand__``);
        * ``scratch``: an out argument is named ``_scratch_*``;
        * ``out``: there are out arguments;
        * ``mutable``: a positional argument *after* ``self`` (or any positional one when
          there is no ``self``) is written -- a written ``self`` alone does not count;
        * ``functional``: everything else.
        """
        if self._base_name_info()[1]:
            return "inplace"
        outs = self.out
        if any(a.name.startswith("_scratch_") for a in outs):
            return "scratch"
        if outs:
            return "out"
        if any(a.is_write for a in self.post_self_positional):
            return "mutable"
        return "functional"

    # -- grouping ---------------------------------------------------------------------
    def signature_str(self) -> str:
        """The "core" signature shared by the functional / inplace / out variants of one op.

        Mirrors torchgen ``FunctionSchema.signature()``: the overload name, the inplace ``_``
        (and a ``_functional`` suffix) are dropped, out arguments and the TensorOptions
        kwargs (dtype, layout, device, pin_memory) are dropped, alias annotations and return
        names are stripped, and written inputs that are not returned become extra returns.
        Namespace is kept (``myops::add`` must not group with ``aten::add``).
        """
        base, _inplace, dunder = self._base_name_info()
        if dunder:
            name = f"__{base}__"
        else:
            name = base.removesuffix("_functional")
        if self.namespace:
            name = f"{self.namespace}::{name}"

        def strip(a: Argument) -> Argument:
            return dataclasses.replace(a, annotation=None, is_out=False)

        kwargs = self.kwarg_only
        for i in range(len(kwargs) - 3):
            if _is_tensor_options_run(kwargs[i : i + 4]):
                kwargs = kwargs[:i] + kwargs[i + 4 :]
                break
        args = tuple(map(strip, self.positional + kwargs))

        extra_sources = ([self.self_arg] if self.self_arg is not None else []) + list(self.out)
        extra_sources += list(self.post_self_positional)
        extra = tuple(
            Return(None, a.type, None)
            for a in extra_sources
            if a.is_write and not any(a.annotation == r.annotation for r in self.returns)
        )
        returns = tuple(Return(None, r.type, None) for r in self.returns) + extra
        rendered_args = self._render_arguments(args, self.is_vararg)
        return f"{name}({rendered_args}) -> {_render_returns(returns, self.is_varret)}"


# ----------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str  # 'ident' | 'number' | 'string' | 'op' | 'end'
    text: str
    start: int  # 0-based offset into the schema text
    end: int

    def describe(self) -> str:
        return "end of text" if self.kind == "end" else repr(self.text)


_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")
_OPERATORS = ("::", "->", "...", "(", ")", "[", "]", ",", "*", "?", "!", "|", "=", ".", "-", "+")


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    n = len(text)
    while pos < n:
        ch = text[pos]
        if ch.isspace():
            pos += 1
            continue
        kind = "ident"
        m = _IDENT_RE.match(text, pos)
        if m is None:
            kind, m = "number", _NUMBER_RE.match(text, pos)
        if m is not None:
            tokens.append(_Token(kind, m.group(), pos, m.end()))
            pos = m.end()
            continue
        if ch in "'\"":
            end = pos + 1
            while end < n and text[end] != ch:
                end += 2 if text[end] == "\\" else 1
            if end >= n:
                raise SchemaParseError(
                    text, pos + 1, f"expected a closing {ch} for this string", "end of text"
                )
            tokens.append(_Token("string", text[pos : end + 1], pos, end + 1))
            pos = end + 1
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, pos)), None)
        if op is None:
            raise SchemaParseError(text, pos + 1, "expected a name, number, string or punctuation", repr(ch))
        tokens.append(_Token("op", op, pos, pos + len(op)))
        pos += len(op)
    tokens.append(_Token("end", "", n, n))
    return tokens


# ----------------------------------------------------------------------------------------
# Parser
# ----------------------------------------------------------------------------------------


class _Parser:
    """Recursive-descent parser over the token list (torch/csrc/jit/frontend/function_schema_parser.cpp)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.first_out: _Token | None = None  # name token of the first out argument

    # -- token helpers ------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def at_op(self, *ops: str) -> bool:
        tok = self.peek()
        return tok.kind == "op" and tok.text in ops

    def error(self, expected: str, tok: _Token | None = None) -> SchemaParseError:
        tok = tok or self.peek()
        return SchemaParseError(self.text, tok.start + 1, f"expected {expected}", tok.describe())

    def fail_at(self, tok: _Token, message: str) -> SchemaParseError:
        return SchemaParseError(self.text, tok.start + 1, message)

    def expect_op(self, op: str, what: str | None = None) -> _Token:
        if not self.at_op(op):
            raise self.error(what or repr(op))
        return self.advance()

    def expect_ident(self, what: str) -> _Token:
        if self.peek().kind != "ident":
            raise self.error(what)
        return self.advance()

    def expect_end(self) -> None:
        if self.peek().kind != "end":
            raise self.error("end of schema")

    # -- grammar ------------------------------------------------------------------------
    def parse_schema(self) -> FunctionSchema:
        namespace, name, overload = self.parse_operator_name()
        self.expect_op("(", "'(' to open the argument list")
        arguments, is_vararg = self.parse_arguments()
        self.expect_op("->", "'->' before the returns")
        returns, is_varret = self.parse_returns()
        self.expect_end()
        schema = FunctionSchema(namespace, name, overload, arguments, returns, is_vararg, is_varret)
        if self.first_out is not None and schema._base_name_info()[1]:
            raise self.fail_at(
                self.first_out, f"an inplace operator like {name!r} cannot also take out= arguments"
            )
        return schema

    def parse_operator_name(self) -> tuple[str | None, str, str]:
        first = self.expect_ident("an operator name")
        namespace: str | None = None
        name = first.text
        if self.at_op("::"):
            self.advance()
            namespace = first.text
            name = self.expect_ident("an operator name after '::'").text
        overload = ""
        if self.at_op("."):
            self.advance()
            overload = self.expect_ident("an overload name after '.'").text
        return namespace, name, overload

    def parse_arguments(self) -> tuple[tuple[Argument, ...], bool]:
        args: list[Argument] = []
        seen: dict[str, int] = {}
        kwarg_only = False
        in_out_group = False
        is_vararg = False
        if self.at_op(")"):
            self.advance()
            return (), False
        while True:
            tok = self.peek()
            if is_vararg:
                raise self.fail_at(tok, "'...' must be the last argument")
            if self.at_op("*"):
                if kwarg_only:
                    raise self.fail_at(tok, "the keyword-only marker '*' can only appear once")
                self.advance()
                kwarg_only = True
                if self.at_op(")"):
                    raise self.error("an argument after '*'")
            elif self.at_op("..."):
                self.advance()
                is_vararg = True
            else:
                arg, name_tok, eq_tok = self.parse_argument(kwarg_only)
                if arg.name in seen:
                    raise self.fail_at(
                        name_tok,
                        f"duplicate argument name {arg.name!r} (first used at column {seen[arg.name]})",
                    )
                seen[arg.name] = name_tok.start + 1
                if arg.is_out:
                    in_out_group = True
                    self.first_out = self.first_out or name_tok
                    if eq_tok is not None:
                        raise self.fail_at(eq_tok, f"out argument {arg.name!r} cannot have a default value")
                elif in_out_group:
                    raise self.fail_at(
                        name_tok,
                        f"non-out argument {arg.name!r} cannot follow out arguments "
                        "(keyword-only arguments with a write alias like Tensor(a!))",
                    )
                args.append(arg)
            if self.at_op(","):
                self.advance()
                continue
            self.expect_op(")", "',' or ')'")
            return tuple(args), is_vararg

    def parse_argument(self, kwarg_only: bool) -> tuple[Argument, _Token, _Token | None]:
        typ, annotation = self.parse_type()
        if self.peek().kind != "ident":
            raise self.error(f"an argument name after the type {typ.render(annotation)!r}")
        name_tok = self.advance()
        default: str | None = None
        eq_tok: _Token | None = None
        if self.at_op("="):
            eq_tok = self.advance()
            start = self.peek().start
            self.parse_default()
            default = self.text[start : self.tokens[self.i - 1].end]
        is_out = kwarg_only and annotation is not None and annotation.is_write
        return Argument(name_tok.text, typ, default, kwarg_only, annotation, is_out), name_tok, eq_tok

    def parse_type(self) -> tuple[Type, AliasInfo | None]:
        first = self.expect_ident("a type name")
        name = first.text
        while self.at_op(".") and self.peek(1).kind == "ident":
            self.advance()
            name += "." + self.advance().text
        typ = Type.base(name)
        annotation: AliasInfo | None = None
        if self.at_op("("):
            if name != "Tensor":
                raise self.fail_at(
                    self.peek(), f"alias annotations like (a!) are only allowed on Tensor, not on {name!r}"
                )
            self.advance()
            annotation = self.parse_alias_info()
            self.expect_op(")", "')' to close the alias annotation")
        while True:
            if self.at_op("?"):
                self.advance()
                typ = Type.optional(typ)
            elif self.at_op("["):
                self.advance()
                size: int | None = None
                if self.peek().kind == "number":
                    size_tok = self.advance()
                    if not size_tok.text.isdigit():
                        raise self.fail_at(size_tok, "a list size must be a whole number like [2]")
                    size = int(size_tok.text)
                self.expect_op("]", "']' to close the list type")
                typ = Type.list_of(typ, size)
            elif self.at_op("(") and annotation is None and name == "Tensor":
                raise self.fail_at(self.peek(), "the alias annotation must come right after 'Tensor'")
            else:
                return typ, annotation

    def parse_alias_set(self, what: str) -> tuple[str, ...]:
        names = [self.parse_alias_name(what)]
        while self.at_op("|"):
            self.advance()
            names.append(self.parse_alias_name(what))
        return tuple(names)

    def parse_alias_name(self, what: str) -> str:
        tok = self.peek()
        if tok.kind != "ident" or not re.fullmatch("[a-z]", tok.text):
            raise self.error(f"{what} (a single lowercase letter like 'a')")
        return self.advance().text

    def parse_alias_info(self) -> AliasInfo:
        start = self.peek()
        before = self.parse_alias_set("an alias set name")
        is_write = False
        if self.at_op("!"):
            self.advance()
            is_write = True
        after: tuple[str, ...] = ()
        if self.at_op("->"):
            self.advance()
            if self.at_op("*"):
                self.advance()
                after = ("*",)
            else:
                after = self.parse_alias_set("an alias set name or '*' after '->'")
        elif not self.at_op(")"):
            allowed = "'->' or ')'" if is_write else "'|', '!', '->' or ')'"
            raise self.error(f"{allowed} to finish the alias annotation")
        if is_write and len(before) > 1:
            raise self.fail_at(start, "a written alias (with '!') must name exactly one alias set")
        if len(before) > 1 and len(after) > 1:
            raise self.fail_at(start, "alias sets before and after '->' cannot both have several names")
        return AliasInfo(before, is_write, after)

    def parse_default(self) -> None:
        """Consume one default value; the caller slices its exact spelling out of the text."""
        tok = self.peek()
        if tok.kind in ("string", "number"):
            self.advance()
        elif self.at_op("-", "+"):
            self.advance()
            if self.peek().kind != "number":
                raise self.error("a number after the sign")
            self.advance()
        elif tok.kind == "ident":
            self.advance()
            while self.at_op(".") and self.peek(1).kind == "ident":
                self.advance()
                self.advance()
        elif self.at_op("["):
            self.advance()
            if self.at_op("]"):
                self.advance()
                return
            while True:
                self.parse_default()
                if self.at_op(","):
                    self.advance()
                    continue
                self.expect_op("]", "',' or ']' in the list default")
                return
        else:
            raise self.error("a default value (number, string, name, None/True/False or [list])")

    def parse_returns(self) -> tuple[tuple[Return, ...], bool]:
        if self.at_op("..."):
            self.advance()
            return (), True
        if not self.at_op("("):
            return (self.parse_return(),), False
        self.advance()
        returns: list[Return] = []
        if self.at_op(")"):
            self.advance()
            return (), False
        while True:
            returns.append(self.parse_return())
            if self.at_op(","):
                self.advance()
                continue
            self.expect_op(")", "',' or ')' in the returns")
            return tuple(returns), False

    def parse_return(self) -> Return:
        typ, annotation = self.parse_type()
        name: str | None = None
        if self.peek().kind == "ident":
            name = self.advance().text
        return Return(name, typ, annotation)


def parse_default(text: str, type_: Type) -> object:
    """Turn a default as written in a schema (``1``, ``None``, ``[0,1]``, ``"mean"``, ``True``) into a value.

    Stands for the default-value handling of ``torch/csrc/utils/python_arg_parser.cpp``. Enum-like
    defaults that name C++ constants (``contiguous_format``, ``long``, ``Mean``) stay strings.
    """
    text = text.strip()
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        elem = type_.elem if type_.elem is not None else type_
        if not inner:
            return []
        parsed = [parse_default(part, elem) for part in inner.split(",")]
        return parsed
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


# ----------------------------------------------------------------------------------------
# Type names the registration API accepts (SchemaTypeParser::parseBaseType)
# ----------------------------------------------------------------------------------------

# The base type names ``torch._C.parse_schema`` accepts in 2.13 (checked by running it). A name that
# starts with a lowercase letter and is not listed is a type variable (``t``, ``t1``), as in PyTorch.
KNOWN_BASE_TYPES = frozenset(
    "Tensor int float bool str complex number Scalar ScalarType Layout Device DeviceIndex MemoryFormat "
    "Generator SymInt SymBool Storage Stream QScheme ConstQuantizerPtr Any AnyClassType AnyEnumType "
    "Capsule None NoneType".split()
)


class UnknownSchemaTypeError(SchemaParseError):
    """PyTorch's "unknown type specifier" error, with the lab's guess after it."""

    def __init__(self, text: str, name: str, column: int) -> None:
        import difflib

        self.text, self.column, self.expected, self.found = text, column, "a known type", name
        close = difflib.get_close_matches(name, sorted(KNOWN_BASE_TYPES), n=2)
        hint = f"(lab) Did you mean {' or '.join(close)}?" if close else "(lab) Not a schema type."
        RuntimeError.__init__(
            self,
            "\nunknown type specifier. Common valid schema types include Tensor, SymInt, int, float, bool, "
            "Scalar; for a full list, please see "
            "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/README.md#func :\n"
            f"{text}\n{' ' * (column - 1)}{'~' * len(name)} <--- HERE\n{hint}",
        )


def check_known_types(schema: FunctionSchema, text: str) -> None:
    """Refuse a schema with a type PyTorch does not know (``Tensr``), as ``m.def`` / ``Library.define`` do."""
    open_paren = text.find("(")
    for typ in [a.type for a in schema.arguments] + [r.type for r in schema.returns]:
        name = typ.name
        if name in KNOWN_BASE_TYPES or name[:1].islower():
            continue
        match = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text[open_paren:])
        column = open_paren + (match.start() if match else 0) + 1
        raise UnknownSchemaTypeError(text, name, column)
