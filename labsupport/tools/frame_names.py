"""Which PyTorch frame each lab frame stands for: one table, read top to bottom.

A frame is named by its module and its ``co_qualname``. Generated modules are recognised by the
last part of their module name under any build package (``lab_build_torch_0.register_cpu`` and
``lab_build_after_3.register_cpu`` follow the same rules), hand-written ones by their module path.
The first rule whose regular expression matches the whole qualname wins; its template, filled with
the named groups, is the C++ name gdb would print for the matching frame of ``torch.add``. Generated
kernels keep the anonymous namespaces PyTorch 2.13 puts them in (checked against the wheel's symbol
table): a structured kernel's wrapper is ``at::(anonymous namespace)::wrapper_CPU_add_Tensor``, an
unstructured or composite one sits one namespace deeper
(``at::(anonymous namespace)::(anonymous namespace)::wrapper_CPU__zero_``), and the autograd and
ADInplaceOrView kernels are ``torch::autograd::VariableType::(anonymous namespace)::add_Tensor`` and
``torch::ADInplaceOrView::(anonymous namespace)::add__Tensor``.

Layers (the ``layer`` field of trace frames):

==================  =====================================================================
binding             Python bindings: ``torch::autograd::THPVariable_add``
api                 the C++ API: ``at::add``, ``at::Tensor::add``, ``at::cpu::add``
op_handle           operator handles: ``at::_ops::add_Tensor::call`` / ``::redispatch``
dispatcher          ``c10::Dispatcher::call`` / ``redispatch`` / ``callBoxed``
autograd            autograd kernels: ``torch::autograd::VariableType::(anonymous namespace)::add_Tensor``
ad_inplace_or_view  ``torch::ADInplaceOrView::(anonymous namespace)::add__Tensor``
tracer              Tracer kernels: ``torch::TraceType::(anonymous namespace)::add_Tensor``
kernel              backend kernels: ``at::(anonymous namespace)::wrapper_CPU_add_Tensor``, BackendSelect, Composite
meta                structured ``meta()`` functions and the TensorIterator set-up they run
native              ``at::native::`` kernels, structured ``impl()``
boxing              boxed <-> unboxed adapters (``c10::impl::BoxedKernelWrapper``)
fallback            backend fallbacks (autograd fallback, meta fallback, pass-through ones)
autograd_node       grad_fn nodes: ``torch::autograd::generated::AddBackward0::apply``
engine              the autograd engine
==================  =====================================================================

Everything not in the table (tensor construction, guards, small helpers, the instruments
themselves, the dispatcher's observer slow path) is left out of traces; its children still show.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import CodeType, FrameType
from typing import NamedTuple

from labsupport.aten import native as _native

# Where ipykernel compiles notebook cells (not ipykernel_launcher.py, which is the kernel itself).
_NOTEBOOK_CELL = re.compile(r"[/\\]ipykernel_\d+[/\\]")


class FrameName(NamedTuple):
    """What one lab frame stands for."""

    layer: str
    torch_name: str


# (qualname pattern, layer, PyTorch frame name template)
Rule = tuple[str, str, str]
TOP = r"(?P<f>[a-z]\w*)"  # a public module-level function
ANON = "(anonymous namespace)::"

# Generated modules, keyed by the last part of their module name.
GENERATED_RULES: dict[str, tuple[Rule, ...]] = {
    "python_torch_functions": ((TOP, "binding", "torch::autograd::THPVariable_{f}"),),
    "python_variable_methods": (
        (r"scalar_to_tensor", "", ""),
        (r"Tensor\.backward", "binding", "torch.Tensor.backward"),
        (r"(?P<f>__\w+__)", "binding", "torch.Tensor.{f}"),
        (TOP, "binding", "torch::autograd::THPVariable_{f}"),
    ),
    "functions": (
        (r"__dispatch_(?P<f>\w+)", "api", "at::__dispatch_{f}"),
        (TOP, "api", "at::{f}"),
    ),
    "tensor_body": ((r"TensorBody\.(?P<f>\w+)", "api", "at::Tensor::{f}"),),
    "cpu_functions": ((TOP, "api", "at::cpu::{f}"),),
    "_ops": ((r"(?P<op>\w+)\.(?P<m>call|redispatch)", "op_handle", "at::_ops::{op}::{m}"),),
    "variable_type": ((TOP, "autograd", "torch::autograd::VariableType::" + ANON + "{f}"),),
    "ad_inplace_or_view_type": (
        # copy_ is hand-written (VariableTypeManual.cpp) and not in an anonymous namespace
        (r"copy_", "ad_inplace_or_view", "torch::ADInplaceOrView::copy_"),
        (TOP, "ad_inplace_or_view", "torch::ADInplaceOrView::" + ANON + "{f}"),
    ),
    "trace_type": ((TOP, "tracer", "torch::TraceType::(anonymous namespace)::{f}"),),
    "register_cpu": (
        (r"(?P<f>wrapper_\w+)", "kernel", "at::{anon}{f}"),
        (r"(?P<c>structured_\w+)\.(?P<m>set_output_raw_strided)", "meta", "at::" + ANON + "{c}::{m}"),
    ),
    "register_cuda": (
        (r"(?P<f>wrapper_\w+)", "kernel", "at::{anon}{f}"),
        (r"(?P<c>structured_\w+)\.(?P<m>set_output_raw_strided)", "meta", "at::" + ANON + "{c}::{m}"),
    ),
    "register_meta": (
        (r"(?P<f>wrapper_\w+)", "kernel", "at::{anon}{f}"),
        (r"(?P<c>structured_\w+)\.(?P<m>set_output_raw_strided)", "meta", "at::" + ANON + "{c}::{m}"),
    ),
    "register_composite_explicit_autograd": ((r"(?P<f>wrapper_\w+)", "kernel", "at::{anon}{f}"),),
    # The BackendSelect kernels share their names with the at:: API, so keep C++'s namespace.
    "register_backend_select": ((TOP, "kernel", "at::" + ANON + "{f}"),),
    "autograd_functions": ((r"(?P<c>\w+)\.apply", "autograd_node", "torch::autograd::generated::{c}::apply"),),
}

# How a C++ symbol of an autocast wrapper starts (nm -C libtorch_cpu.so, PyTorch 2.13).
_WRAP = "at::autocast::WrapFunction_<(at::autocast::CastPolicy){}, ...>::call"

# Hand-written modules: an exact module name, or a prefix ending in ".".
LAB_RULES: dict[str, tuple[Rule, ...]] = {
    "labsupport.c10.dispatcher": (
        (r"Dispatcher\.call", "dispatcher", "c10::Dispatcher::call"),
        (r"Dispatcher\.redispatch", "dispatcher", "c10::Dispatcher::redispatch"),
        (r"Dispatcher\.call_boxed", "dispatcher", "c10::Dispatcher::callBoxed"),
        (r"Dispatcher\.redispatch_boxed", "dispatcher", "c10::Dispatcher::redispatchBoxed"),
    ),
    "labsupport.c10.operator_entry": (
        (r"OperatorEntry\.__call__", "binding", "torch._ops.OpOverload.__call__"),
        (r"OperatorEntry\.call", "op_handle", "c10::TypedOperatorHandle::call"),
        (r"OperatorEntry\.redispatch", "op_handle", "c10::TypedOperatorHandle::redispatch"),
        (r"OperatorEntry\.call_boxed", "op_handle", "c10::OperatorHandle::callBoxed"),
        (r"OperatorEntry\.redispatch_boxed", "op_handle", "c10::OperatorHandle::redispatchBoxed"),
        (r"_missing_reporter\.<locals>\.\w+", "dispatcher", "c10::impl::OperatorEntry::reportError"),
        (r"_ambiguous_reporter\.<locals>\.\w+", "dispatcher", "c10::impl::ambiguous_autogradother_kernel"),
    ),
    "labsupport.c10.kernel_function": (
        (r"KernelFunction\.call_boxed", "boxing", "c10::KernelFunction::callBoxed"),
        (r"make_boxed_adapter\.<locals>\.\w+", "boxing", "c10::impl::BoxedKernelWrapper::call"),
    ),
    "labsupport.c10.backend_fallbacks": (
        (r"meta_fallback", "fallback", "at::impl::metaFallback"),
        # The pass-through fallbacks are named after their key when the dispatcher runs them.
    ),
    "labsupport.overrides": (
        # __torch_function__ at the Python binding (torch/csrc/utils/python_arg_parser.cpp, torch/overrides.py)
        (r"handle_binding_torch_function", "binding", "torch::handle_torch_function"),
        (r"_dispatch", "binding", "torch::handle_torch_function_no_python_arg_parser"),
        (r"tensor_torch_function", "binding", "torch.Tensor.__torch_function__"),
    ),
    "labsupport.autograd.variable_fallback": (
        (r"autograd_fallback", "fallback", "torch::autograd::basicAutogradNotImplementedFallbackImpl"),
        (r"_not_implemented", "fallback", "torch::autograd::autogradNotImplementedFallbackImpl"),
    ),
    "labsupport.jit.trace_type_manual": (
        (r"general_trace_function", "fallback", "torch::jit::general_trace_function"),
    ),
    "labsupport.autograd.node": (
        (r"(?P<c>AccumulateGrad|\w*NotImplemented)\.apply", "autograd_node", "torch::autograd::{c}::apply"),
    ),
    "labsupport.autograd.engine": (
        (r"backward", "engine", "torch::autograd::backward"),
        (r"run_backward", "engine", "torch::autograd::Engine::execute"),
    ),
    "labsupport.aten.autocast_mode": (
        # CastPolicy: lower_precision_fp 0, fp32 1, fp32_set_opt_dtype 2, fp32_append_dtype 3, promote 4; the
        # full C++ name goes on with (c10::DeviceType)0 (CPU) or 1 (CUDA), the signature and &at::_ops::<op>::call.
        (r"WrapFunction_lower_precision_fp\.call", "kernel", _WRAP.format(0)),
        (r"WrapFunction_fp32\.call", "kernel", _WRAP.format(1)),
        (r"WrapFunction_fp32_set_opt_dtype\.call", "kernel", _WRAP.format(2)),
        (r"WrapFunction_promote\.call", "kernel", _WRAP.format(4)),
        (r"cached_cast", "kernel", "at::autocast::cached_cast"),
    ),
    "labsupport.aten.tensor_iterator": (
        (r"TensorIteratorBase\.(?P<m>build\w*)", "meta", "at::TensorIteratorBase::{m}"),
    ),
    "labsupport.aten.native.": (
        (r"(?P<c>structured_\w+)\.impl", "native", "at::native::{c}::impl"),
        # the kernels at::native exports (helpers such as add_kernel stay out of traces)
        ("(?P<f>" + "|".join(sorted(_native.__all__, key=len, reverse=True)) + ")", "native", "at::native::{f}"),
    ),
}

# Any module (kernel files handed to a build, exercises): structured kernels by their shape.
ANY_MODULE_RULES: tuple[Rule, ...] = (
    (r"(?P<c>structured_\w+)\.meta", "meta", "at::meta::{c}::meta"),
    (r"(?P<c>structured_\w+)\.impl", "native", "at::native::{c}::impl"),
)

# Dispatcher methods, also when a subclass (e.g. a benchmark's) overrides them in another module.
DISPATCHER_METHODS = {
    "call": "c10::Dispatcher::call",
    "redispatch": "c10::Dispatcher::redispatch",
    "call_boxed": "c10::Dispatcher::callBoxed",
    "redispatch_boxed": "c10::Dispatcher::redispatchBoxed",
}

_COMPILED: dict[str, tuple[tuple[re.Pattern[str], str, str], ...]] = {}


def _rules(key: str, rules: tuple[Rule, ...]) -> tuple[tuple[re.Pattern[str], str, str], ...]:
    compiled = _COMPILED.get(key)
    if compiled is None:
        compiled = _COMPILED[key] = tuple((re.compile(p), layer, template) for p, layer, template in rules)
    return compiled


def _wrapper_namespaces(module: str, name: str) -> str:
    """The anonymous namespaces around a generated kernel wrapper in PyTorch 2.13's Register*.cpp:
    one for a structured kernel's wrapper (it builds a ``structured_*`` class), two for any other."""
    fn = getattr(sys.modules.get(module), name, None)
    code = getattr(fn, "__code__", None)
    if code is not None and any(n.startswith("structured_") for n in code.co_names):
        return ANON
    return ANON + ANON


def _match(key: str, rules: tuple[Rule, ...], qualname: str, module: str = "") -> FrameName | bool | None:
    """The first matching rule's name; ``False`` when a rule says "skip"; ``None`` when none match."""
    for pattern, layer, template in _rules(key, rules):
        m = pattern.fullmatch(qualname)
        if m:
            if not layer:
                return False
            fields = m.groupdict()
            if "{anon}" in template:
                fields["anon"] = _wrapper_namespaces(module, qualname)
            return FrameName(layer, template.format(**fields))
    return None


def generated_module_kind(module: str) -> str | None:
    """``"register_cpu"`` for ``lab_build_torch_0.register_cpu``: the generated file a module is, if any."""
    parent, _, leaf = module.rpartition(".")
    if not parent or leaf not in GENERATED_RULES:
        return None
    package = sys.modules.get(parent)
    return leaf if package is not None and hasattr(package, "build_folder") else None


def classify(module: str, qualname: str) -> FrameName | None:
    """The (layer, PyTorch name) of a function, or None when traces leave it out."""
    kind = generated_module_kind(module)
    found: FrameName | bool | None = None
    if kind is not None:
        found = _match(kind, GENERATED_RULES[kind], qualname, module)
    else:
        for key, rules in LAB_RULES.items():
            if module == key or (key.endswith(".") and module.startswith(key)):
                found = _match(key, rules, qualname)
                break
    if found is None:
        found = _match("*", ANY_MODULE_RULES, qualname)
    return found or None


def qualname_of(code: CodeType) -> str:
    """``co_qualname`` (Python 3.11+), else the bare name."""
    return getattr(code, "co_qualname", code.co_name)


_QUALNAMES: dict[CodeType, str] = {}


def frame_qualname(frame: FrameType) -> str:
    """The qualified name of a running function. Python 3.10 has no ``co_qualname``: there, look
    for the function among the classes of its module (enough for the lab's methods)."""
    code = frame.f_code
    qualname = getattr(code, "co_qualname", None)
    if qualname is not None:
        return qualname
    found = _QUALNAMES.get(code)
    if found is None:
        found = code.co_name
        module = frame.f_globals.get("__name__")
        for obj in list(frame.f_globals.values()):
            if isinstance(obj, type) and obj.__module__ == module:
                for attr in vars(obj).values():
                    fn = getattr(attr, "__func__", attr)
                    if getattr(fn, "__code__", None) is code:
                        found = fn.__qualname__
                        break
        _QUALNAMES[code] = found
    return found


_CODE_CACHE: dict[CodeType, FrameName | None] = {}


def classify_frame(frame: FrameType) -> FrameName | None:
    """``classify`` for a running frame, remembered per code object."""
    code = frame.f_code
    try:
        return _CODE_CACHE[code]
    except KeyError:
        pass
    name = classify(frame.f_globals.get("__name__", ""), frame_qualname(frame))
    if name is None and code.co_name in DISPATCHER_METHODS and code.co_varnames[:1] == ("self",):
        from labsupport.c10.dispatcher import Dispatcher

        if isinstance(frame.f_locals.get("self"), Dispatcher):
            name = FrameName("dispatcher", DISPATCHER_METHODS[code.co_name])
    if len(_CODE_CACHE) > 50_000:
        _CODE_CACHE.clear()
    _CODE_CACHE[code] = name
    return name


REPO_ROOT = Path(__file__).resolve().parents[2]
_ROOT_PREFIX = str(REPO_ROOT) + "/"


def source_path(filename: str) -> str:
    """A stable way to print a file: repo-relative, ``<notebook cell>``, or the bare file name."""
    if _NOTEBOOK_CELL.search(filename) or filename.startswith("<ipython-input"):
        return "<notebook cell>"
    if filename.startswith("<"):
        return filename
    if filename.startswith(_ROOT_PREFIX):
        return filename[len(_ROOT_PREFIX) :]
    try:
        return Path(filename).resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return Path(filename).name


def is_lab_file(filename: str) -> bool:
    """True for the lab's own files (package, builds, exercises) and notebook cells, not the venv."""
    shown = source_path(filename)
    if shown == "<notebook cell>":
        return True
    return filename.startswith(_ROOT_PREFIX) and not shown.startswith((".venv/", "venv/"))
