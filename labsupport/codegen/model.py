"""The code generator's data model: ops.yaml entries as validated, frozen dataclasses.

Stands for ``torchgen/model.py`` (``NativeFunction``, ``NativeFunctionsGroup``, ``Location``) and the
parts of ``torchgen/gen.py`` / ``tools/autograd/load_derivatives.py`` that read the yaml files.
Everything is checked before any code is written; errors name the file, the line and the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.schema import FunctionSchema, SchemaParseError


@dataclass(frozen=True)
class Location:
    """Where an entry came from (``torchgen.model.Location``)."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class OpsYamlError(ValueError):
    """A problem in ops.yaml, reported with file, line and entry."""

    def __init__(self, loc: Location, entry: str, message: str) -> None:
        self.loc, self.entry, self.message = loc, entry, message
        super().__init__(f"{loc}: in entry '{entry}': {message}")


# Dispatch keys an ops.yaml `dispatch:` map may name (a subset of torchgen's dispatch_keys).
DISPATCH_KEYS = (
    "CPU", "CUDA", "Meta",
    "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutograd",
)  # fmt: skip
STRUCTURED_DISPATCH_KEYS = ("CPU", "CUDA")

NATIVE_FIELDS = {
    "func", "variants", "dispatch", "structured", "structured_delegate", "structured_inherits",
    "manual_cpp_binding", "device_check", "device_guard", "tags", "python_module", "ufunc_inner_loop",
    "autogen", "category_override", "cpp_no_default_args",
}  # fmt: skip
KNOWN_TAGS = {
    "core", "pointwise", "reduction", "nondeterministic_seeded", "view_copy", "inplace_view",
    "dynamic_output_shape", "data_dependent_output", "generated", "needs_fixed_stride_order",
}  # fmt: skip


@dataclass(frozen=True)
class NativeFunction:
    """One ``- func:`` entry (``torchgen.model.NativeFunction``)."""

    func: FunctionSchema
    loc: Location
    variants: frozenset[str]
    dispatch: dict[str, str]  # dispatch key name -> kernel name (``at::native::<kernel>``)
    structured: bool
    structured_delegate: str | None  # "add.out"
    structured_inherits: str | None
    manual_cpp_binding: bool
    device_check: str
    device_guard: bool
    tags: frozenset[str]
    python_module: str | None
    ufunc_inner_loop: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``add.Tensor``."""
        return self.func.full_name

    @property
    def is_factory(self) -> bool:
        """Has the TensorOptions group (dtype, layout, device, pin_memory) and no tensor argument."""
        names = {a.name for a in self.func.arguments}
        return {"dtype", "layout", "device", "pin_memory"} <= names

    @property
    def needs_backend_select(self) -> bool:
        """torchgen's ``needs_backend_select``: TensorOptions, and not ``new_*`` or ``*_like``."""
        base = self.func.name
        return self.is_factory and not base.endswith("_like") and not base.startswith("new_")

    @property
    def has_composite_implicit_kernel(self) -> bool:
        """No dispatch entry and not structured: an implicit CompositeImplicitAutograd kernel."""
        return not self.dispatch and not self.structured and self.structured_delegate is None


@dataclass(frozen=True)
class StructuredGroup:
    """A structured out= op and the functional / in-place ops that delegate to it
    (``torchgen.model.NativeFunctionsGroup``)."""

    out: NativeFunction
    functional: NativeFunction | None  # the functional op that delegates to ``out`` (if any)
    inplace: NativeFunction | None
    meta_name: str  # the functional op of the same signature names the meta class, delegating or not

    @property
    def meta_class(self) -> str:
        """``structured_add_Tensor``: named after the functional op (``at::meta::``)."""
        return "structured_" + self.meta_name

    def impl_class(self, key: str) -> str:
        """``structured_ufunc_add_CPU`` / ``structured_sub_out`` (``at::native::``) for a backend key."""
        return "structured_" + self.out.dispatch[key]

    def variants(self) -> list[tuple[str, NativeFunction]]:
        found = [("functional", self.functional), ("inplace", self.inplace), ("out", self.out)]
        return [(kind, f) for kind, f in found if f is not None]


@dataclass(frozen=True)
class Derivative:
    """One ``- name:`` entry of the derivatives section (``load_derivatives.Derivative``)."""

    func: FunctionSchema
    loc: Location
    formulas: dict[str, str]  # input name -> Python expression


@dataclass(frozen=True)
class OpsRegistry:
    """Everything the generators need, validated."""

    functions: tuple[NativeFunction, ...]
    groups: tuple[StructuredGroup, ...]
    derivatives: dict[str, Derivative]  # keyed by "add.Tensor"
    source: str

    def by_name(self, name: str) -> NativeFunction:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def group_of(self, f: NativeFunction) -> StructuredGroup | None:
        for g in self.groups:
            if f in (g.out, g.functional, g.inplace):
                return g
        return None

    def derivative_for(self, f: NativeFunction) -> Derivative | None:
        """The formulas of ``f`` itself, or of its functional sibling for an in-place op."""
        if f.name in self.derivatives:
            return self.derivatives[f.name]
        if f.func.is_inplace:
            functional = f.func.name.rstrip("_") + (f".{f.func.overload_name}" if f.func.overload_name else "")
            return self.derivatives.get(functional)
        return None


# ---------------------------------------------------------------- loading


class _LineLoader(yaml.SafeLoader):
    """A yaml loader that records each mapping's line (torchgen's ``LineLoader``)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping


def load_ops_yaml(path: str | Path, *, display_name: str | None = None) -> OpsRegistry:
    """Read and validate an ops.yaml file. Raises OpsYamlError naming file, line and entry."""
    path = Path(path)
    text = path.read_text()
    shown = display_name or path.name
    try:
        document = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise OpsYamlError(Location(shown, line), "(yaml)", f"not valid YAML: {error}") from None
    if not isinstance(document, dict) or "native_functions" not in document:
        raise OpsYamlError(Location(shown, 1), "(file)", "expected a mapping with a 'native_functions' list")
    unknown = set(document) - {"native_functions", "derivatives", "__line__"}
    if unknown:
        raise OpsYamlError(Location(shown, 1), "(file)", f"unknown top-level section(s) {sorted(unknown)}")
    functions = tuple(_parse_native(entry, shown) for entry in _entries(document, "native_functions", shown))
    _check_unique(functions)
    groups = _structured_groups(functions)
    derivatives = _parse_derivatives(document, shown, functions)
    return OpsRegistry(functions, groups, derivatives, text)


def _entries(document: dict[str, Any], section: str, shown: str) -> list[dict[str, Any]]:
    entries = document.get(section) or []
    if not isinstance(entries, list):
        raise OpsYamlError(Location(shown, 1), f"({section})", f"'{section}' must be a list of entries")
    for entry in entries:
        if not isinstance(entry, dict):
            raise OpsYamlError(Location(shown, 1), f"({section})", f"every entry must be a mapping, got {entry!r}")
    return entries


def _parse_native(entry: dict[str, Any], shown: str) -> NativeFunction:
    loc = Location(shown, entry.get("__line__", 1))
    text = entry.get("func")
    if not isinstance(text, str):
        raise OpsYamlError(loc, "(no func)", "every entry needs a 'func:' schema string")
    try:
        func = FunctionSchema.parse(text)
    except SchemaParseError as error:
        raise OpsYamlError(loc, text.split("(")[0], f"bad schema: {error}") from None
    name = func.full_name
    unknown = set(entry) - NATIVE_FIELDS - {"__line__"}
    if unknown:
        raise OpsYamlError(loc, name, f"unknown field(s) {sorted(unknown)}; known fields: {sorted(NATIVE_FIELDS)}")

    variants_text = entry.get("variants", "function")
    variants = frozenset(v.strip() for v in str(variants_text).split(","))
    if not variants <= {"function", "method"}:
        raise OpsYamlError(loc, name, f"variants must be 'function' and/or 'method', got {variants_text!r}")
    if "method" in variants and func.self_arg is None:
        raise OpsYamlError(loc, name, "a method variant needs an argument named 'self'")
    if "method" in variants and func.is_out_fn():
        raise OpsYamlError(loc, name, "out= functions cannot be methods")

    dispatch = _parse_dispatch(entry.get("dispatch"), loc, name)
    structured = bool(entry.get("structured", False))
    delegate = entry.get("structured_delegate")
    inherits = entry.get("structured_inherits")
    ufunc = entry.get("ufunc_inner_loop") or {}
    if ufunc:
        if not isinstance(ufunc, dict):
            raise OpsYamlError(loc, name, "ufunc_inner_loop must map loop kinds to 'name (dtypes)'")
        ufunc = {k: v for k, v in ufunc.items() if k != "__line__"}
        for key in STRUCTURED_DISPATCH_KEYS:  # PyTorch names these kernels ufunc_<op>_<Backend>
            dispatch.setdefault(key, f"ufunc_{func.name}_{key}")
    if structured:
        if not func.is_out_fn():
            raise OpsYamlError(loc, name, "structured: True is only allowed on an out= function")
        if delegate is not None:
            raise OpsYamlError(loc, name, "an entry cannot be both structured and a structured_delegate")
        missing = [k for k in STRUCTURED_DISPATCH_KEYS if k not in dispatch]
        if missing:
            raise OpsYamlError(loc, name, f"a structured op needs kernels for {missing} in 'dispatch'")
    if not dispatch and not structured and delegate is None:
        # torchgen: an entry with no kernels at all gets at::native::<name> as CompositeImplicitAutograd.
        dispatch = {"CompositeImplicitAutograd": func.name}
    if inherits is not None and not structured:
        raise OpsYamlError(loc, name, "structured_inherits only makes sense with structured: True")
    if delegate is not None and any(k in dispatch for k in STRUCTURED_DISPATCH_KEYS):
        raise OpsYamlError(loc, name, "a structured_delegate entry may not list CPU/CUDA kernels itself")
    tags = entry.get("tags", [])
    tags = frozenset([tags] if isinstance(tags, str) else tags)
    unknown_tags = tags - KNOWN_TAGS
    if unknown_tags:
        raise OpsYamlError(loc, name, f"unknown tag(s) {sorted(unknown_tags)}")
    device_check = entry.get("device_check", "ExactSame")
    if device_check not in ("ExactSame", "NoCheck"):
        raise OpsYamlError(loc, name, f"device_check must be ExactSame or NoCheck, got {device_check!r}")
    return NativeFunction(
        func=func,
        loc=loc,
        variants=variants,
        dispatch=dispatch,
        structured=structured,
        structured_delegate=delegate,
        structured_inherits=inherits,
        manual_cpp_binding=bool(entry.get("manual_cpp_binding", False)),
        device_check=device_check,
        device_guard=bool(entry.get("device_guard", True)),
        tags=tags,
        python_module=entry.get("python_module"),
        ufunc_inner_loop=dict(ufunc),
    )


def _parse_dispatch(raw: Any, loc: Location, name: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise OpsYamlError(loc, name, "dispatch must map dispatch keys to kernel names")
    dispatch: dict[str, str] = {}
    for keys, kernel in raw.items():
        if keys == "__line__":
            continue
        for key in str(keys).split(","):
            key = key.strip()
            if key not in DISPATCH_KEYS:
                known = key in DispatchKey.__members__
                why = "a real PyTorch key the lab does not model here" if known else "not a dispatch key"
                raise OpsYamlError(loc, name, f"unknown dispatch key {key!r} ({why}); use one of {list(DISPATCH_KEYS)}")
            if not isinstance(kernel, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", kernel):
                raise OpsYamlError(loc, name, f"kernel name for {key} must be an identifier, got {kernel!r}")
            dispatch[key] = kernel
    composite = [k for k in dispatch if k.startswith("Composite")]
    if len(composite) > 1:
        raise OpsYamlError(loc, name, f"at most one Composite kernel per operator, got {composite}")
    return dispatch


def _check_unique(functions: tuple[NativeFunction, ...]) -> None:
    seen: dict[str, NativeFunction] = {}
    for f in functions:
        if f.name in seen:
            raise OpsYamlError(f.loc, f.name, f"defined twice (first at line {seen[f.name].loc.line})")
        seen[f.name] = f


def _structured_groups(functions: tuple[NativeFunction, ...]) -> tuple[StructuredGroup, ...]:
    by_name = {f.name: f for f in functions}
    groups: dict[str, dict[str, NativeFunction]] = {}
    for f in functions:
        if f.structured:
            groups.setdefault(f.name, {})["out"] = f
    for f in functions:
        if f.structured_delegate is None:
            continue
        target = by_name.get(f.structured_delegate)
        if target is None:
            raise OpsYamlError(f.loc, f.name, f"structured_delegate {f.structured_delegate!r} does not exist")
        if not target.structured:
            raise OpsYamlError(f.loc, f.name, f"structured_delegate {f.structured_delegate!r} is not structured: True")
        kind = "inplace" if f.func.is_inplace else "functional"
        members = groups[target.name]
        if kind in members:
            raise OpsYamlError(f.loc, f.name, f"{target.name} already has a {kind} variant ({members[kind].name})")
        members[kind] = f
    by_signature = {
        f.func.signature_str(): f for f in functions if not f.func.is_out_fn() and not f.func.is_inplace
    }

    def meta_name(out: NativeFunction) -> str:
        functional = by_signature.get(out.func.signature_str())
        return (functional or out).func.unambiguous_name()

    return tuple(
        StructuredGroup(
            out=m["out"], functional=m.get("functional"), inplace=m.get("inplace"), meta_name=meta_name(m["out"])
        )
        for m in groups.values()
    )


def _parse_derivatives(
    document: dict[str, Any], shown: str, functions: tuple[NativeFunction, ...]
) -> dict[str, Derivative]:
    by_name = {f.name: f for f in functions}
    derivatives: dict[str, Derivative] = {}
    for entry in _entries(document, "derivatives", shown):
        loc = Location(shown, entry.get("__line__", 1))
        text = entry.get("name")
        if not isinstance(text, str):
            raise OpsYamlError(loc, "(no name)", "every derivatives entry needs a 'name:' schema string")
        try:
            func = FunctionSchema.parse(text)
        except SchemaParseError as error:
            raise OpsYamlError(loc, text.split("(")[0], f"bad schema: {error}") from None
        target = by_name.get(func.full_name)
        if target is None:
            raise OpsYamlError(loc, func.full_name, "no native function with this name")
        if str(target.func) != str(func):
            raise OpsYamlError(loc, func.full_name, f"schema differs from the native function's: {target.func}")
        formulas = {k: str(v) for k, v in entry.items() if k not in ("name", "__line__")}
        inputs = {a.name for a in func.arguments}
        for arg, formula in formulas.items():
            if arg not in inputs:
                raise OpsYamlError(
                    loc, func.full_name, f"formula for {arg!r}, which is not an input ({sorted(inputs)})"
                )
            try:
                compile(formula, f"{shown}:{loc.line}", "eval")
            except SyntaxError as error:
                raise OpsYamlError(
                    loc, func.full_name, f"formula for {arg!r} is not a Python expression: {error.msg}"
                ) from None
        derivatives[func.full_name] = Derivative(func, loc, formulas)
    return derivatives
