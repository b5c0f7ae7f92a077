"""The generators for kernel registration: RegisterCPU / RegisterCUDA / RegisterMeta,
RegisterCompositeExplicitAutograd and RegisterBackendSelect.

Stands for ``torchgen/dest/register_dispatch_key.py`` and ``ComputeBackendSelect`` in
``torchgen/gen.py``. For a structured op group it writes, per backend:

* three small classes that differ only in ``set_output_raw_strided`` (functional: allocate;
  inplace: check self; out: resize out=), each deriving from the hand-written ``impl()`` class;
* one wrapper per variant that runs ``meta()`` then ``impl()`` (Meta runs ``meta()`` only);
* the ``m.impl(...)`` calls that register the wrappers.
"""

from __future__ import annotations

from labsupport.codegen.api import arg_names
from labsupport.codegen.gen import header
from labsupport.codegen.model import NativeFunction, OpsRegistry, StructuredGroup

BACKENDS = ("CPU", "CUDA", "Meta")
STRUCTURED_KEYS = ("CPU", "CUDA")
TORCH_FILES = {
    "CPU": "RegisterCPU_0.cpp",
    "CUDA": "RegisterCUDA_0.cpp (simulated: numpy memory, CUDA dispatch keys)",
    "Meta": "RegisterMeta_0.cpp",
}


def wrapper_name(key: str, f: NativeFunction, structured: bool | None = None) -> str:
    """PyTorch 2.13's wrapper names: ``wrapper_CPU_add_Tensor`` for structured ops,
    ``wrapper_CPU_memory_format_empty`` (``wrapper_<key>_<overload>_<name>``) for the others."""
    cpp = f.func.name + ("_out" if f.func.is_out_fn() else "")
    if structured is None:
        structured = f.structured or f.structured_delegate is not None
    if structured:
        return f"wrapper_{key}_{cpp}" + (f"_{f.func.overload_name}" if f.func.overload_name else "")
    return f"wrapper_{key}_{f.func.overload_name}_{cpp}"


HELPERS = '''

np_empty = np.empty


def check_inplace(self, sizes, options):
    """An in-place op must produce exactly self's dtype, device and sizes."""
    if options.dtype is not self._dtype:
        raise RuntimeError(
            f"Bad in-place call: input tensor dtype {self._dtype.typemeta_name} and output tensor dtype {options.dtype.typemeta_name} should match"
        )
    if options.device != self._device:
        raise RuntimeError(
            f"Bad in-place call: input tensor device {self._device} and output tensor device {options.device} should match"
        )
    if tuple(sizes) != self._sizes:
        raise RuntimeError(
            f"Bad in-place call: input tensor size {list(self._sizes)} and output tensor size {list(sizes)} should match"
        )


def resize_out(out, sizes, strides, options):
    """Check an out= tensor and resize it if needed (at::native::resize_output)."""
    if options.dtype is not out._dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {options.dtype.typemeta_name}, but got {out._dtype.typemeta_name} instead")
    if options.device != out._device:
        raise RuntimeError(
            f"Expected out tensor to have device {options.device}, but got {out._device} instead"
        )
    sizes = tuple(sizes)
    if out._sizes != sizes:
        resize_output(out, sizes)
'''


def _variant_class(group: StructuredGroup, key: str, kind: str, base: str) -> str:
    cls = f"{base.split('.')[-1]}_{kind}"
    if kind == "functional":
        alloc = "None" if key == "Meta" else "np_empty(sizes, dtype.np)"
        what = "a data-less meta tensor" if key == "Meta" else f"a new {key} tensor"
        body = (
            "    outputs = (None,)  # outputs_: undefined until set_output_raw_strided allocates them\n\n"
            "    def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):\n"
            f"        # create_out(sizes, strides, options), inlined: {what}\n"
            f"        # (at::detail::empty_strided_{key.lower()}); sizes is a tuple\n"
            "        dtype = options.dtype\n"
            f"        self.outputs = [make_tensor(Tensor, {alloc}, sizes, dtype, options.device)]\n"
        )
        doc = "functional variant: allocates its output"
    elif kind == "inplace":
        body = (
            "    def __init__(self, self_):\n"
            "        self.outputs = [self_]\n\n"
            "    def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):\n"
            "        check_inplace(self.outputs[output_idx], sizes, options)\n"
        )
        doc = "in-place variant: writes into self"
    else:
        body = (
            "    def __init__(self, out):\n"
            "        self.outputs = [out]\n\n"
            "    def set_output_raw_strided(self, output_idx, sizes, strides, options, names=None):\n"
            "        resize_out(self.outputs[output_idx], sizes, strides, options)\n"
        )
        doc = "out= variant: checks and resizes out"
    maybe = (
        "    def maybe_get_output(self, output_idx=0):\n"
        "        return self.outputs[output_idx]\n"
    )
    # The functional class keeps `outputs` in its instance dict, so the class-level `(None,)` can stand
    # for "not allocated yet" without an __init__ call on the hot path.
    slots = "" if kind == "functional" else '    __slots__ = ("outputs",)\n\n'
    return (
        f"\n\nclass {cls}({base}):\n"
        f'    """The {doc}; everything else comes from {base.split(".")[-1]}."""\n\n'
        f"{slots}"
        f"{body}\n{maybe}"
    )


def _structured(group: StructuredGroup, key: str) -> tuple[str, list[tuple[str, str]]]:
    """Classes, wrappers and registrations of one structured group for one backend key."""
    if key == "Meta":
        base = f"meta.{group.meta_class}"
        torch_base = f"at::meta::{group.meta_class}"
    else:
        kernel_class = group.impl_class(key)
        base = f"native.{kernel_class}"
        torch_base = f"at::native::{kernel_class}"
    out = [f"\n\n# ---- {group.out.name}: structured ({torch_base}) " + "-" * 20]
    registrations = []
    for kind, _f in group.variants():
        out.append(_variant_class(group, key, kind, base))
    meta_args = [n for n, a in zip(arg_names(group.out.func), group.out.func.arguments) if not a.is_out]
    meta_call = ", ".join(meta_args)
    for kind, f in group.variants():
        cls = f"{base.split('.')[-1]}_{kind}"
        name = wrapper_name(key, f, structured=True)
        params = ", ".join(arg_names(f.func))
        if kind == "functional":
            make, result, impl_out = f"{cls}()", "op.outputs[0]", "op.outputs[0]"
        elif kind == "inplace":
            make, result, impl_out = f"{cls}(self)", "self", "op.outputs[0]"
        else:
            out_name = next(a.name for a in f.func.arguments if a.is_out)
            make, result, impl_out = f"{cls}({out_name})", out_name, "op.maybe_get_output(0)"
        impl_line = "" if key == "Meta" else f"    op.impl({meta_call}, {impl_out})\n"
        skipped = "  # meta tensors have no data: impl() is skipped" if key == "Meta" else ""
        out.append(
            f"\n\ndef {name}({params}):\n"
            f'    """at::(anonymous namespace)::{name}: {kind} {f.name} on {key}."""\n'
            f"    op = {make}\n"
            f"    op.meta({meta_call}){skipped}\n"
            f"{impl_line}"
            f"    return {result}\n"
        )
        registrations.append((f.name, name))
    return "".join(out), registrations


def _unstructured(f: NativeFunction, key: str, kernel: str) -> tuple[str, tuple[str, str]]:
    name = wrapper_name(key, f, structured=False)
    params = ", ".join(arg_names(f.func))
    extra = ", tensor_cls=Tensor" if f.is_factory else ""
    code = (
        f"\n\ndef {name}({params}):\n"
        f'    """at::(anonymous namespace)::(anonymous namespace)::{name}: calls at::native::{kernel}."""\n'
        f"    return native.{kernel}({params}{extra})\n"
    )
    return code, (f.name, name)


def gen_register_backend(reg: OpsRegistry, key: str, source: str) -> str:
    """RegisterCPU / RegisterCUDA / RegisterMeta."""
    parts = [header(f"Kernels registered to the {key} key: TORCH_LIBRARY_IMPL(aten, {key}, m)", TORCH_FILES[key], source)]
    parts.append(
        "import numpy as np\n\n"
        "from . import dispatcher, meta, native\n"
        "from .python_variable_methods import Tensor\n"
        "from labsupport.aten.resize import resize_output\n"
        "from labsupport.aten.tensor import make_tensor\n"
        "from labsupport.c10.library import Library\n"
    )
    parts.append(HELPERS)
    registrations: list[tuple[str, str]] = []
    for group in reg.groups:
        code, regs = _structured(group, key)
        parts.append(code)
        registrations.extend(regs)
    for f in reg.functions:
        kernel = f.dispatch.get(key)
        if kernel is None or f.structured:
            continue
        code, registration = _unstructured(f, key, kernel)
        parts.append(code)
        registrations.append(registration)
    parts.append(f'\n\nm = Library("aten", "IMPL", "{key}", dispatcher=dispatcher)\n')
    for op_name, wrapper in registrations:
        parts.append(f'm.impl("{op_name}", {wrapper})\n')
    return "".join(parts)


def gen_register_composite(reg: OpsRegistry, source: str) -> str:
    """RegisterCompositeExplicitAutograd (and the other Composite aliases when used)."""
    parts = [
        header(
            "Kernels registered to the Composite alias keys (one kernel for every backend)",
            "RegisterCompositeExplicitAutograd_0.cpp",
            source,
        )
    ]
    parts.append(
        "from . import dispatcher, functions, native, tensor_body\n"
        "from labsupport.aten.native.composite import CppApi\n"
        "from labsupport.c10.library import Library\n\n"
        "# What the composite kernels call at::: the functions API and at::Tensor's C++ methods.\n"
        "at = CppApi(functions, tensor_body.TensorBody)\n"
    )
    registrations: dict[str, list[tuple[str, str]]] = {}
    for f in reg.functions:
        for key, kernel in f.dispatch.items():
            if not key.startswith("Composite"):
                continue
            name = wrapper_name(key, f, structured=False)
            params = ", ".join(arg_names(f.func))
            parts.append(
                f"\n\ndef {name}({params}):\n"
                f'    """at::(anonymous namespace)::(anonymous namespace)::{name}: at::native::{kernel}, which calls\n'
                f'    operators through the functions API (so they are dispatched again)."""\n'
                f"    return native.{kernel}(at, {params})\n"
            )
            registrations.setdefault(key, []).append((f.name, name))
    for key, regs in registrations.items():
        var = "m_" + "".join(c for c in key if c.isupper()).lower()
        parts.append(f'\n\n{var} = Library("aten", "IMPL", "{key}", dispatcher=dispatcher)\n')
        for op_name, wrapper in regs:
            parts.append(f'{var}.impl("{op_name}", {wrapper})\n')
    return "".join(parts)


def gen_register_backend_select(reg: OpsRegistry, source: str) -> str:
    """RegisterBackendSelect: factories pick their backend from dtype/layout/device."""
    from labsupport.codegen.gen import handle_name

    parts = [header("BackendSelect kernels for factory functions", "RegisterBackendSelect.cpp", source)]
    parts.append(
        "from . import _ops, dispatcher\n"
        "from labsupport.c10.library import Library\n"
        "from labsupport.c10.tensor_options import compute_dispatch_key_set\n"
    )
    if any(f.needs_backend_select and any(a.type.is_tensor for a in f.func.arguments) for f in reg.functions):
        parts.append(
            "from labsupport.c10.dispatch_key import DispatchKey\n"
            "from labsupport.c10.dispatch_key_set import DispatchKeySet\n\n"
            "_AFTER_BACKEND_SELECT = int(DispatchKeySet.full_after(DispatchKey.BackendSelect))\n"
        )
    regs = []
    for f in reg.functions:
        if not f.needs_backend_select:
            continue
        name = f.func.unambiguous_name()
        params = ", ".join(arg_names(f.func))
        tensors = [a.name for a in f.func.arguments if a.type.is_tensor and not a.is_out]
        if tensors:
            # _to_copy: the tensor arguments' backends join the one the options name
            # (c10::detail::multi_dispatch_key_set), masked to the keys after BackendSelect.
            ors = " | ".join(f"{t}._ks" for t in tensors)
            parts.append(
                f"\n\ndef {name}({params}):\n"
                f'    """BackendSelect kernel of aten::{f.name}: the backend named by (dtype, layout, device)\n'
                f'    joins the tensor arguments\' keys (computeDispatchKey | multi_dispatch_key_set)."""\n'
                f"    _dk_set = int(compute_dispatch_key_set(dtype, layout, device)) | (({ors}) & _AFTER_BACKEND_SELECT)\n"
                f"    return _ops.{handle_name(f)}.redispatch(DispatchKeySet.from_raw(_dk_set), {params})\n"
            )
        else:
            parts.append(
                f"\n\ndef {name}({params}):\n"
                f'    """BackendSelect kernel of aten::{f.name}: no tensor argument says which backend to use,\n'
                f'    so compute it from (dtype, layout, device) and redispatch (computeDispatchKey)."""\n'
                f"    _dk = compute_dispatch_key_set(dtype, layout, device)\n"
                f"    return _ops.{handle_name(f)}.redispatch(_dk, {params})\n"
            )
        regs.append((f.name, name))
    parts.append('\n\nm = Library("aten", "IMPL", "BackendSelect", dispatcher=dispatcher)\n')
    for op_name, fn in regs:
        parts.append(f'm.impl("aten::{op_name}", {fn})\n')
    return "".join(parts)
