"""The autograd generators: grad_fn node classes, VariableType kernels, ADInplaceOrView kernels.

Stands for ``tools/autograd/gen_autograd_functions.py`` (``Functions.h/.cpp``: ``AddBackward0``),
``tools/autograd/gen_variable_type.py`` (``VariableType_*.cpp``) and
``tools/autograd/gen_inplace_or_view_type.py`` (``ADInplaceOrViewType_*.cpp``).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from labsupport.codegen.api import api_name, arg_names, functional_name_counts, py_name
from labsupport.codegen.gen import handle_name, header, type_wrapper_name
from labsupport.codegen.model import Derivative, NativeFunction, OpsRegistry

# tools/autograd/gen_variable_type.py DONT_REQUIRE_DERIVATIVE (the lab's ops in it): outputs that only
# depend on the input's shape and options get no grad_fn and never require grad.
DONT_REQUIRE_DERIVATIVE = {"empty_like", "ones_like", "zeros_like", "new_empty_strided"}
# Hand-written autograd kernels in PyTorch (VariableTypeManual.cpp, MANUAL_AUTOGRAD_AND_TRACER): detach
# makes no graph, its output shares the version counter but is not a view to autograd.
NO_GRAPH = DONT_REQUIRE_DERIVATIVE | {"detach"}
# Nodes whose name is not the generated ``<Op>Backward<N>``: copy_'s node is hand-written in PyTorch
# (torch/csrc/autograd/functions/tensor.h, ``CopyBackwards``); the lab generates it from the formulas in
# ops.yaml and gives it PyTorch's class name and ``name()``.
MANUAL_NODES = {"copy_": ("CopyBackwards", "torch::autograd::CopyBackwards")}
# derivatives.yaml numbers the nodes of one base name in file order, counting overloads the lab does not
# have: fill.Scalar and fill.Tensor (FillBackward0, 1) come before fill_.Scalar, so it is FillBackward2.
PYTORCH_NODE_NUMBER = {"fill_.Scalar": 2}


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.strip("_").split("_"))


def is_view_op(f: NativeFunction) -> bool:
    """A view op by its schema: a return carries a non-writing alias annotation (``Tensor(a)``), as
    ``torchgen.model.NativeFunction.is_view_op`` decides. CompositeImplicitAutograd ops (``to.dtype``,
    ``reshape``) get no ADInplaceOrView kernel: their views come from the view ops they call.

    (torchgen's gen_inplace_or_view_type.py picks the kernels from its VIEW_FUNCTIONS name list; for
    every view op with a kernel of its own the list and the annotations agree. tests/test_views_autograd.py
    checks the lab's ops against the installed torchgen.)"""
    if f.has_composite_implicit_kernel or "CompositeImplicitAutograd" in f.dispatch:
        return False
    if f.func.name in NO_GRAPH:
        return False  # detach: a manual kernel in PyTorch; its output is not _is_view()
    return any(r.annotation is not None and not r.annotation.is_write for r in f.func.returns)


def view_base_argument(f: NativeFunction) -> str:
    """The argument every output is a view of (``VIEW_FUNCTIONS[name]``, "self" for the lab's ops): the
    one whose alias set the return shares (torchgen's ``aliased_return_names``)."""
    ret = next(r for r in f.func.returns if r.annotation is not None and not r.annotation.is_write)
    for a in f.func.arguments:
        if a.annotation is not None and a.annotation.alias_set == ret.annotation.alias_set:
            return a.name
    raise ValueError(f"{f.loc}: view op {f.name} returns Tensor({ret.annotation}) but no argument has that alias set")


def node_names(reg: OpsRegistry) -> dict[str, str]:
    """``add.Tensor -> AddBackward0``: base name in CamelCase, numbered in derivatives order."""
    counts: dict[str, int] = {}
    names = {}
    for full_name, d in reg.derivatives.items():
        if d.func.name in MANUAL_NODES:
            names[full_name] = MANUAL_NODES[d.func.name][0]
            continue
        base = _camel(d.func.name)
        n = counts.get(base, 0)
        counts[base] = n + 1
        names[full_name] = f"{base}Backward{PYTORCH_NODE_NUMBER.get(full_name, n)}"
    return names


Overloads = dict[str, list[tuple[str, int, int]]]  # name -> [(python API name, min args, max args)]


def cpp_overloads(reg: OpsRegistry, variant: str) -> Overloads:
    """The generated C++ API's names by PyTorch name: Python has no overloading, so ``squeeze(dim)``
    is ``squeeze_dim`` there. Arguments counted without ``self`` for methods."""
    counts = functional_name_counts(reg.functions, variant)
    found: Overloads = {}
    for f in reg.functions:
        if variant not in f.variants or f.func.is_out_fn():
            continue
        args = [a for a in f.func.arguments if not (variant == "method" and a.name == "self")]
        required = sum(1 for a in args if a.default is None and not a.kwarg_only)
        found.setdefault(f.func.name, []).append((api_name(f, counts), required, len(args)))
    return found


def _resolve(overloads: Overloads, name: str, nargs: int) -> str | None:
    for api, low, high in overloads.get(name, ()):
        if low <= nargs <= high:
            return api
    return None


class _CppApiCalls(ast.NodeTransformer):
    """Make a formula call the C++ API, as derivatives.yaml's C++ formulas do: ``grad.expand(s)`` becomes
    ``at.Tensor.expand(grad, s)`` (``at::Tensor::expand``, not the Python binding ``THPVariable_expand``;
    ``grad.squeeze(dim)`` picks ``at.Tensor.squeeze_dim`` as C++ overload resolution would),
    ``zeros_like(grad)`` becomes ``at.zeros_like(grad)`` (``at::zeros_like``), and a FunctionsManual.cpp
    helper gets the build's ``at`` as its first argument (``sum_to(at, grad, sizes)``)."""

    def __init__(self, helpers: set[str], methods: Overloads, functions: Overloads) -> None:
        self.helpers, self.methods, self.functions = helpers, methods, functions

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        at = ast.Name("at", ast.Load())
        func = node.func
        nargs = len(node.args) + len(node.keywords)
        if isinstance(func, ast.Attribute):
            api = _resolve(self.methods, func.attr, nargs)
            if api is not None:
                method = ast.Attribute(ast.Attribute(at, "Tensor", ast.Load()), api, ast.Load())
                return ast.Call(method, [func.value, *node.args], node.keywords)
        elif isinstance(func, ast.Name) and func.id in self.helpers:
            return ast.Call(func, [at, *node.args], node.keywords)
        elif isinstance(func, ast.Name):
            api = _resolve(self.functions, func.id, nargs)
            if api is not None:
                return ast.Call(ast.Attribute(at, api, ast.Load()), node.args, node.keywords)
        return node


def cpp_api_formula(expr: str, methods: Overloads, functions: Overloads) -> str:
    """``expr`` rewritten by ``_CppApiCalls``."""
    from labsupport.autograd import formulas

    helpers = set(formulas.__all__) - {"TensorGeometry"}
    tree = _CppApiCalls(helpers, methods, functions).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree))


_SIZES = re.compile(r"\b(\w+)\.sym_sizes\(\)")
_GEOMETRY = re.compile(r"\bTensorGeometry\((\w+)\)")
_OPTIONS = re.compile(r"\b(\w+)\.options\(\)")


def _rewrite(formula: str) -> tuple[str, set[str]]:
    """Rewrite a formula for the node's ``apply``: ``self.sym_sizes()`` becomes a saved
    ``self_sym_sizes`` and ``TensorGeometry(self)`` a saved ``self_geometry`` (only the geometry is kept,
    not the tensor, so later in-place ops on it do not matter); input names become the saved
    ``<name>_`` attributes. Returns the expression
    and the saved names it uses."""
    saved: set[str] = set()

    def sizes(match: re.Match[str]) -> str:
        saved.add(f"{match.group(1)}_sym_sizes")
        return f"{match.group(1)}_sym_sizes"

    def options(match: re.Match[str]) -> str:
        saved.add(f"{match.group(1)}_options")
        return f"{match.group(1)}_options"

    def geometry(match: re.Match[str]) -> str:
        saved.add(f"{match.group(1)}_geometry")
        return f"{match.group(1)}_geometry"

    text = _GEOMETRY.sub(geometry, _OPTIONS.sub(options, _SIZES.sub(sizes, formula)))
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    names = {
        tok.string
        for i, tok in enumerate(tokens)
        if tok.type == tokenize.NAME and (i == 0 or tokens[i - 1].string != ".")
    }
    return text, names | saved


def gen_autograd_functions(reg: OpsRegistry, source: str) -> str:
    names = node_names(reg)
    parts = [header("Backward nodes (grad_fn): one class per differentiable operator", "torch/csrc/autograd/generated/Functions.h / Functions.cpp", source)]
    parts.append(
        "from . import functions, tensor_body\n"
        "from labsupport.aten.native.composite import CppApi\n"
        "from labsupport.autograd.formulas import *  # noqa: F403 -- FunctionsManual.cpp: every name in its __all__\n"
        "from labsupport.autograd.node import Node\n\n"
        "# What the formulas call at::: this build's functions API and at::Tensor's C++ methods (never the\n"
        "# Python bindings). Lab-only: the engine (shared by every build) finds it on the tensor's class.\n"
        "at = CppApi(functions, tensor_body.TensorBody)\n"
        "tensor_body.TensorBody._cpp_api = at\n"
    )
    methods, functions = cpp_overloads(reg, "method"), cpp_overloads(reg, "function")
    for full_name, d in reg.derivatives.items():
        cls = names[full_name]
        inputs = [a for a in d.func.arguments if a.type.is_tensor_like and a.name in d.formulas]
        saved: set[str] = set()
        exprs = []
        for i, a in enumerate(inputs):
            expr, used = _rewrite(d.formulas[a.name])
            saved |= used
            exprs.append((i, a.name, cpp_api_formula(expr, methods, functions)))
        arg_set = {a.name for a in d.func.arguments}
        saved_names = sorted(n for n in saved if n in arg_set or n.endswith(("_sym_sizes", "_options", "_geometry")))
        tensors = {a.name for a in d.func.arguments if a.type.is_tensor}
        unpack = "".join(
            f"        {py_name(n)} = node.{n}_{'.unpack()' if n in tensors else ''}\n" for n in saved_names
        )
        title = d.func.name + (f".{d.func.overload_name}" if d.func.overload_name else "")
        manual = MANUAL_NODES.get(d.func.name)
        where = ", hand-written in PyTorch (torch/csrc/autograd/functions/tensor.h)" if manual else ""
        lines = [
            f"\n\nclass {cls}(Node):\n",
            f'    """The backward of {title} ({d.loc}{where}). Saved: {", ".join(saved_names) or "nothing"}."""\n\n',
        ]
        if manual:
            lines += ["    def name(node):  # noqa: N805\n", f'        return "{manual[1]}"\n\n']
        lines += [
            "    def apply(node, grads):  # noqa: N805 -- `self` is the name of an input in the formulas\n",
            "        grad = grads[0]\n",
            "        if grad is None:\n",
            f"            return [None] * {len(inputs)}\n",
            unpack,
            "        return [\n",
        ]
        for i, name, expr in exprs:
            lines.append(f"            ({expr}) if node.next_functions[{i}][0] is not None else None,  # {name}\n")
        lines.append("        ]\n")
        parts.append("".join(lines))
    return "".join(parts)


def _saved_assignments(d: Derivative, f: NativeFunction) -> list[str]:
    """What the autograd kernel stores on the node before running the op."""
    saved: set[str] = set()
    for a in d.func.arguments:
        if a.name in d.formulas:
            saved |= _rewrite(d.formulas[a.name])[1]
    arg_set = {a.name for a in d.func.arguments}
    lines = []
    for name in sorted(saved):
        if name.endswith("_sym_sizes"):
            lines.append(f"grad_fn.{name}_ = {py_name(name[: -len('_sym_sizes')])}._sizes")
        elif name.endswith("_geometry"):
            lines.append(f"grad_fn.{name}_ = TensorGeometry({py_name(name[: -len('_geometry')])})")
        elif name.endswith("_options"):
            tensor = py_name(name[: -len("_options")])
            lines.append(f"grad_fn.{name}_ = TensorOptions({tensor}._dtype, {tensor}._device)")
        elif name in arg_set:
            arg = next(a for a in d.func.arguments if a.name == name)
            if arg.type.is_tensor_like and f.func.is_inplace and name == "self":
                lines.append(f"grad_fn.{name}_ = SavedVariable(saved_copy({py_name(name)}))  # self is about to change")
            elif arg.type.is_tensor:
                lines.append(f"grad_fn.{name}_ = SavedVariable({py_name(name)})")
            else:
                lines.append(f"grad_fn.{name}_ = {py_name(name)}")
    return lines


GUARD_CONSTANTS = (
    "# RAII guards, inlined the way C++ inlines them: save the thread-local exclude set, add the\n"
    "# guard's keys, restore it on the way out (see labsupport/c10/tls.py for the guard classes).\n"
    "BELOW_AUTOGRAD_KEEP = AutoDispatchBelowAutograd._keep\n"
    "BELOW_AUTOGRAD_KEYS = AutoDispatchBelowAutograd._keys\n"
    "BELOW_AD_INPLACE_OR_VIEW_KEEP = AutoDispatchBelowADInplaceOrView._keep\n"
    "BELOW_AD_INPLACE_OR_VIEW_KEYS = AutoDispatchBelowADInplaceOrView._keys\n"
)


def guarded(guard: str, statement: str) -> list[str]:
    """``statement`` run under an inlined ``at::<guard>``; the sets are restored even if it raises."""
    const = "BELOW_AUTOGRAD" if guard == "AutoDispatchBelowAutograd" else "BELOW_AD_INPLACE_OR_VIEW"
    return [
        f"    _tls = tls.sets  # at::{guard} guard: [included, keep, excluded]\n",
        "    _keep, _excluded = _tls[1], _tls[2]\n",
        f"    _tls[1] = _keep & {const}_KEEP\n",
        f"    _tls[2] = _excluded | {const}_KEYS\n",
        "    try:\n",
        f"        {statement}\n",
        "    finally:\n",
        "        _tls[1], _tls[2] = _keep, _excluded  # ~guard\n",
    ]


def gen_variable_type(reg: OpsRegistry, source: str) -> str:
    names = node_names(reg)
    parts = [header("Autograd kernels, registered to the Autograd alias key", "torch/csrc/autograd/generated/VariableType_*.cpp", source)]
    parts.append(
        "from . import _ops, autograd_functions, dispatcher\n"
        "from labsupport.aten.tensor import TensorOptions\n"
        "from labsupport.autograd.formulas import TensorGeometry\n"
        "from labsupport.autograd.grad_mode import is_grad_enabled\n"
        "from labsupport.autograd.node import NotImplemented, collect_next_edges, set_history\n"
        "from labsupport.autograd.saved_variable import SavedVariable\n"
        "from labsupport.autograd.variable_type_utils import check_inplace, rebase_history, saved_copy\n"
        "from labsupport.c10.dispatch_key_set import after_autograd_keyset\n"
        "from labsupport.c10.library import Library\n"
        "from labsupport.c10.tls import AutoDispatchBelowADInplaceOrView, AutoDispatchBelowAutograd, tls\n\n"
        "# Kernels are registered with_keyset=\"raw\": ks arrives as the set's raw 64 bits (C++ passes a\n"
        "# DispatchKeySet by value), so masks are plain ints too.\n"
        "AFTER_AUTOGRAD_KEYSET = int(after_autograd_keyset)\n"
        + GUARD_CONSTANTS
    )
    regs = []
    for f in reg.functions:
        tensors = [a for a in f.func.arguments if a.type.is_tensor_like and not a.is_out]
        if not tensors:
            continue  # factories: the Autograd key is never in their key set
        if "CompositeImplicitAutograd" in f.dispatch:
            continue  # a composite's autograd comes from the operators it calls (matmul -> mm)
        name = type_wrapper_name(f)
        params = ", ".join(arg_names(f.func))
        handle = f"_ops.{handle_name(f)}"
        tensor_names = ", ".join(py_name(a.name) for a in tensors)
        any_rg = " or ".join(f"{py_name(a.name)}.requires_grad" for a in tensors if a.type.is_tensor)
        any_rg = any_rg or "False"
        doc = f'    """torch::autograd::VariableType::(anonymous namespace)::{name}: autograd for aten::{f.name}."""\n'
        body: list[str] = []
        if f.func.name in NO_GRAPH:
            doc = doc[:-4] + " No graph: " + (
                "VariableTypeManual.cpp's detach." if f.func.name == "detach" else "DONT_REQUIRE_DERIVATIVE."
            ) + '"""\n'
            body += guarded("AutoDispatchBelowADInplaceOrView", f"return {handle}.redispatch(ks & AFTER_AUTOGRAD_KEYSET, {params})")
        elif f.func.is_out_fn():
            outs = [py_name(a.name) for a in f.func.arguments if a.is_out]
            body += [
                f"    if is_grad_enabled() and ({any_rg} or {' or '.join(o + '.requires_grad' for o in outs)}):\n",
                f'        raise RuntimeError("{f.func.name}(): functions with out=... arguments don\'t support automatic '
                f'differentiation, but one of the arguments requires grad.")\n',
                *guarded("AutoDispatchBelowAutograd", f"return {handle}.redispatch(ks & AFTER_AUTOGRAD_KEYSET, {params})"),
            ]
        else:
            d = reg.derivative_for(f)
            inplace = f.func.is_inplace
            body.append(f"    _any_requires_grad = ({any_rg}) and is_grad_enabled()\n")
            if inplace:
                body.append("    check_inplace(self, _any_requires_grad)\n")
            body.append("    grad_fn = None\n")
            body.append("    if _any_requires_grad:\n")
            if d is None:
                body.append(f'        grad_fn = NotImplemented("{f.name}", {len(tensors)})\n')
                body.append(f"        grad_fn.next_functions = collect_next_edges({tensor_names})\n")
            else:
                diff = [a for a in d.func.arguments if a.name in d.formulas]
                body.append(f"        grad_fn = autograd_functions.{names[d.func.full_name]}()\n")
                body.append(f"        grad_fn.next_functions = collect_next_edges({', '.join(py_name(a.name) for a in diff)})\n")
                body += [f"        {line}\n" for line in _saved_assignments(d, f)]
            # In-place and view ops must reach their ADInplaceOrView kernel (version bump, as_view); the
            # other ops skip it (gen_variable_type.py: AutoDispatchBelowAutograd vs ...BelowADInplaceOrView).
            guard = "AutoDispatchBelowAutograd" if inplace or is_view_op(f) else "AutoDispatchBelowADInplaceOrView"
            body += guarded(guard, f"result = {handle}.redispatch(ks & AFTER_AUTOGRAD_KEYSET, {params})")
            if inplace and "inplace_view" in f.tags:
                # squeeze_ & co. change self's geometry, not its data: self just gets the new node
                # (gen_variable_type.py emit_history: "rebase" only when there is no view_info)
                body.append("    if grad_fn is not None:\n")
                body.append("        set_history(self, grad_fn)\n")
            elif inplace:
                body.append("    rebase_history(self, grad_fn)  # CopySlices on a view's base; refreshes the views\n")
            else:
                body.append("    if grad_fn is not None:\n")
                body.append("        set_history(result, grad_fn)\n")
            body.append("    return result\n")
        parts.append(f"\n\ndef {name}(ks, {params}):\n{doc}{''.join(body)}")
        regs.append((f.name, name))
    parts.append('\n\nm = Library("aten", "IMPL", "Autograd", dispatcher=dispatcher)\n')
    for op_name, fn in regs:
        parts.append(f'm.impl("{op_name}", {fn}, with_keyset="raw")\n')
    return "".join(parts)


def gen_ad_inplace_or_view(reg: OpsRegistry, source: str) -> str:
    parts = [header("ADInplaceOrView kernels: version counters for in-place and out= ops, view tracking for view ops", "torch/csrc/autograd/generated/ADInplaceOrViewType_*.cpp", source)]
    parts.append(
        "from . import _ops, dispatcher\n"
        "from labsupport.autograd.variable_type_utils import as_view, creation_meta_for_mode, increment_version\n"
        "from labsupport.c10.dispatch_key_set import after_ADInplaceOrView_keyset\n"
        "from labsupport.c10.library import Library\n"
        "from labsupport.c10.tls import AutoDispatchBelowADInplaceOrView, AutoDispatchBelowAutograd, tls\n\n"
        "# ks arrives as the set's raw 64 bits (registered with_keyset=\"raw\").\n"
        "AFTER_AD_INPLACE_OR_VIEW_KEYSET = int(after_ADInplaceOrView_keyset)\n"
        + GUARD_CONSTANTS
    )
    regs = []
    for f in reg.functions:
        mutated = [py_name(a.name) for a in f.func.arguments if a.annotation is not None and a.annotation.is_write]
        view = is_view_op(f)
        detach = f.func.name == "detach"
        if not mutated and not view and not detach:
            continue  # functional ops: ADInplaceOrView is a fallthrough for them
        name = type_wrapper_name(f)
        params = ", ".join(arg_names(f.func))
        call = f"result = _ops.{handle_name(f)}.redispatch(ks & AFTER_AD_INPLACE_OR_VIEW_KEYSET, {params})"
        if detach:
            doc = (
                f'    """torch::ADInplaceOrView::{name} (VariableTypeManual.cpp): run detach below. PyTorch marks the\n'
                f'    output a non-differentiable view here (shared version counter, _is_view() False); the lab\'s\n'
                f'    detach kernel already shares the version counter, so nothing is left to do."""\n'
            )
            after = ""
        elif mutated:
            doc = (
                f'    """torch::ADInplaceOrView::(anonymous namespace)::{name}: run the op below, then bump the version of\n'
                f'    the tensors it wrote (so autograd can detect a saved tensor modified in place)."""\n'
            )
            after = "".join(f"    increment_version({m})\n" for m in mutated)
        else:
            base = py_name(view_base_argument(f))
            doc = (
                f'    """torch::ADInplaceOrView::(anonymous namespace)::{name}: run the view kernel below, then mark the\n'
                f'    output a view of {base} (shared version counter, root base, creation meta)."""\n'
            )
            after = (
                f"    result = as_view({base}, result, creation_meta_for_mode())"
                "  # is_bw/fw_differentiable=true; no view_func (as_strided covers CPU)\n"
            )
        parts.append(
            f"\n\ndef {name}(ks, {params}):\n"
            + doc
            + "".join(guarded("AutoDispatchBelowADInplaceOrView", call))
            + after
            + "    return result\n"
        )
        regs.append((f.name, name))
    parts.append('\n\nm = Library("aten", "IMPL", "ADInplaceOrView", dispatcher=dispatcher)\n')
    for op_name, fn in regs:
        parts.append(f'm.impl("{op_name}", {fn}, with_keyset="raw")\n')
    return "".join(parts)
