"""The code generator: deterministic output, incremental rebuilds, validation of ops.yaml, and
manual_cpp_binding builds that use hand-written functions."""

from __future__ import annotations

import textwrap
import types

import pytest

from labsupport.codegen import OpsYamlError, load_build, write_build
from labsupport.codegen.build import DEFAULT_OPS_YAML, generate
from labsupport.codegen.model import load_ops_yaml


def test_generated_output_is_byte_identical(tmp_path):
    a = write_build(DEFAULT_OPS_YAML, "a", out_dir=tmp_path / "a", force=True)
    b = write_build(DEFAULT_OPS_YAML, "b", out_dir=tmp_path / "b", force=True)
    files_a = sorted(p.name for p in a.glob("*.py"))
    assert files_a == sorted(p.name for p in b.glob("*.py"))
    assert len(files_a) >= 15
    for name in files_a:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_build_is_regenerated_only_when_inputs_change(tmp_path):
    yaml_path = tmp_path / "ops.yaml"
    yaml_path.write_text(DEFAULT_OPS_YAML.read_text())
    folder = write_build(yaml_path, "inc", out_dir=tmp_path / "out")
    before = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.py")}
    write_build(yaml_path, "inc", out_dir=tmp_path / "out")
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("*.py")} == before
    stamp = (folder / ".stamp").read_text()
    # a change that generates the same code: new stamp, untouched files
    yaml_path.write_text(yaml_path.read_text().replace("tags: [core, pointwise]", "tags: [pointwise]", 1))
    write_build(yaml_path, "inc", out_dir=tmp_path / "out")
    assert (folder / ".stamp").read_text() != stamp
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("*.py")} == before
    # a change to a formula rewrites exactly the file that holds it
    yaml_path.write_text(yaml_path.read_text().replace("  self: grad.neg()", "  self: -grad", 1))
    write_build(yaml_path, "inc", out_dir=tmp_path / "out")
    after = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.py")}
    assert [name for name in after if after[name] != before[name]] == ["autograd_functions.py"]
    assert "(-grad)" in (folder / "autograd_functions.py").read_text()


def test_generated_layers_have_pytorch_names():
    files = generate(load_ops_yaml(DEFAULT_OPS_YAML), "ops.yaml")
    assert "class add_Tensor:" in files["_ops.py"]
    assert "def wrapper_CPU_add_Tensor(self, other, alpha):" in files["register_cpu.py"]
    assert "def wrapper_CPU_add__Tensor(self, other, alpha):" in files["register_cpu.py"]
    assert "def wrapper_CPU_add_out_out(self, other, alpha, out):" in files["register_cpu.py"]
    assert "class structured_ufunc_add_CPU_functional(native.structured_ufunc_add_CPU):" in files["register_cpu.py"]
    assert "class AddBackward0(Node):" in files["autograd_functions.py"]
    assert "class SumBackward1(Node):" in files["autograd_functions.py"]
    assert "def add_Tensor(ks, self, other, alpha):" in files["variable_type.py"]
    assert "def randn(size, dtype, layout, device, pin_memory):" in files["register_backend_select.py"]
    assert "def THPVariable" not in files["python_torch_functions.py"]  # bindings keep torch's Python names
    assert "torch::autograd::THPVariable_add" in files["python_torch_functions.py"]


# ---------------------------------------------------------------- broken ops.yaml corpus

GOOD_ENTRY = """
- func: neg(Tensor self) -> Tensor
  structured_delegate: neg.out
  variants: function, method

- func: neg.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  structured_inherits: TensorIteratorBase
  dispatch:
    CPU, CUDA: neg_out
"""

BROKEN = {
    "unknown_field": ("- func: frob(Tensor self) -> Tensor  # <-\n  dispatch:\n    CPU: frob\n  structurd: True\n",
                      "in entry 'frob': unknown field(s) ['structurd']"),
    "bad_schema": ("- func: frob(Tensor self, Tensor other -> Tensor  # <-\n",
                   "in entry 'frob': bad schema: expected"),
    "unknown_key": ("- func: frob(Tensor self) -> Tensor  # <-\n  dispatch:\n    CPUU: frob\n",
                    "in entry 'frob': unknown dispatch key 'CPUU' (not a dispatch key)"),
    "unmodelled_key": ("- func: frob(Tensor self) -> Tensor  # <-\n  dispatch:\n    SparseCPU: frob\n",
                       "unknown dispatch key 'SparseCPU' (a real PyTorch key the lab does not model here)"),
    "missing_meta": ("- func: frob.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)  # <-\n  structured: True\n"
                     "  dispatch:\n    CPU, CUDA: frob_out\n",
                     "in entry 'frob.out': structured op needs at::meta::structured_frob_out"),
    "missing_delegate": ("- func: frob(Tensor self) -> Tensor  # <-\n  structured_delegate: frob.out\n",
                         "in entry 'frob': structured_delegate 'frob.out' does not exist"),
    "missing_kernel": ("- func: frob(Tensor self) -> Tensor  # <-\n  dispatch:\n    CPU: frob_cpu\n",
                       "in entry 'frob': dispatch CPU: kernel at::native::frob_cpu does not exist"),
    "structured_not_out": ("- func: frob(Tensor self) -> Tensor  # <-\n  structured: True\n",
                           "structured: True is only allowed on an out= function"),
    "method_without_self": ("- func: frob(Tensor x) -> Tensor  # <-\n  variants: method\n",
                            "a method variant needs an argument named 'self'"),
    "manual_without_binding": ("- func: frob(Tensor self) -> Tensor  # <-\n  manual_cpp_binding: True\n"
                               "  dispatch:\n    CompositeExplicitAutograd: expand\n",
                               "manual_cpp_binding: True, but no hand-written 'frob' was given"),
    "bad_tag": ("- func: frob(Tensor self) -> Tensor  # <-\n  tags: pointwse\n", "unknown tag(s) ['pointwse']"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_ops_yaml_names_file_line_and_entry(tmp_path, case):
    entry, expected = BROKEN[case]
    text = "native_functions:\n" + textwrap.dedent(GOOD_ENTRY) + "\n" + entry
    path = tmp_path / f"broken_{case}.yaml"
    path.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), start=1) if row.endswith("# <-"))
    out = tmp_path / "out"
    with pytest.raises(OpsYamlError) as info:
        write_build(path, case, out_dir=out)
    message = str(info.value)
    assert message.startswith(f"broken_{case}.yaml:{line}: "), message
    assert expected in message, message
    assert not out.exists(), "nothing may be written when validation fails"


def test_broken_derivative_and_yaml_syntax(tmp_path):
    path = tmp_path / "bad_derivative.yaml"
    path.write_text("native_functions:\n" + textwrap.dedent(GOOD_ENTRY) + "derivatives:\n"
                    "- name: neg(Tensor self) -> Tensor\n  other: grad\n")  # fmt: skip
    with pytest.raises(OpsYamlError, match=r"bad_derivative.yaml:13: in entry 'neg': formula for 'other'"):
        load_ops_yaml(path)
    path.write_text("native_functions:\n- func: neg(Tensor self) -> Tensor\n  dispatch: [oops\n")
    with pytest.raises(OpsYamlError, match=r"bad_derivative.yaml:\d+: in entry '\(yaml\)': not valid YAML"):
        load_ops_yaml(path)


# ---------------------------------------------------------------- manual_cpp_binding

def test_manual_cpp_binding_build_uses_hand_written_functions(tmp_path):
    yaml_path = tmp_path / "ops_after.yaml"
    text = DEFAULT_OPS_YAML.read_text().replace(
        "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n"
        "  device_check: NoCheck   # TensorIterator\n"
        "  structured_delegate: add.out\n",
        "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n"
        "  manual_cpp_binding: True\n"
        "  dispatch:\n"
        "    CPU: add_cpu_manual\n",
    )
    assert "manual_cpp_binding" in text
    yaml_path.write_text(text)
    calls = []

    def add_cpu_manual(self, other, alpha=1):
        calls.append("kernel")
        return build.cpu_functions.add_out(self, other, alpha, build.functions.empty(self._sizes))

    def add(self, other, alpha=1):
        calls.append("manual")
        return add_cpu_manual(self, other, alpha)

    manual = types.SimpleNamespace(add=add)
    kernels = types.SimpleNamespace(add_cpu_manual=add_cpu_manual)
    build = load_build(yaml_path, "manual_test", manual=manual, kernels=[kernels], out_dir=tmp_path / "b")
    functions_py = (tmp_path / "b" / "functions.py").read_text()
    assert "add = manual.add" in functions_py and "def __dispatch_add(" in functions_py
    x = build.python_variable_methods.scalar_to_tensor(1.5)
    build.python_torch_functions.add(x, x)
    assert calls == ["manual", "kernel"]


def test_loading_the_same_build_twice_with_new_dispatchers_gives_fresh_modules():
    """Each load with its own dispatcher binds its own modules (none reused from an earlier load)."""
    from labsupport.c10.dispatcher import Dispatcher
    from labsupport.codegen.build import load_build

    builds = [load_build(dispatcher=Dispatcher(f"d{i}")) for i in range(3)]
    assert len({b.__name__ for b in builds}) == 3
    for build in builds:
        assert build.dispatcher.find_op("aten::add", "Tensor") is not None, build.__name__
        a = build.python_variable_methods.scalar_to_tensor(2.0)
        assert build.functions.add(a, a).item() == 4.0, build.__name__


# ---------------------------------------------------------------- kernel names (type_wrapper_name)

KERNEL_FILES = ("variable_type.py", "ad_inplace_or_view_type.py", "trace_type.py")


def _registered_kernels(source: str) -> dict[str, str]:
    """``{"add.out": "add_out_out", ...}``: what each ``m.impl("<op>", <kernel>, ...)`` line registers."""
    import ast

    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "impl":
            op, fn = node.args[:2]
            assert isinstance(op, ast.Constant) and isinstance(fn, ast.Name)
            found[op.value] = fn.id
    return found


def test_autograd_kernels_follow_torchgens_type_wrapper_name():
    """Every generated VariableType / ADInplaceOrView / TraceType kernel is named as torchgen's
    ``type_wrapper_name`` names it, applied by torchgen itself to ops.yaml's schemas."""
    pytest.importorskip("torchgen")
    from torchgen.model import FunctionSchema
    from torchgen.packaged.autograd.gen_trace_type import type_wrapper_name

    reg = load_ops_yaml(DEFAULT_OPS_YAML)
    schemas = {f.name: FunctionSchema.parse(str(f.func)) for f in reg.functions}
    files = generate(reg, "ops.yaml")
    for file in KERNEL_FILES:
        kernels = _registered_kernels(files[file])
        assert kernels, file
        for op, kernel in kernels.items():
            expected = type_wrapper_name(types.SimpleNamespace(func=schemas[op]))
            assert kernel == expected, (file, op, kernel, expected)
            assert f"\ndef {expected}(ks, " in files[file], (file, expected)
    # the out= overloads are covered, not only functional and in-place ones
    assert _registered_kernels(files["variable_type.py"])["sum.IntList_out"] == "sum_out_IntList_out"


def test_out_kernels_carry_the_overload_and_call_the_ops_handle():
    """``add.out``'s kernels are ``add_out_out`` (C++ function ``add_out`` + overload ``out``) but still
    call the ``at::_ops::add_out`` handle; functional and in-place kernels keep their handle's name."""
    reg = load_ops_yaml(DEFAULT_OPS_YAML)
    files = generate(reg, "ops.yaml")
    for file in ("variable_type.py", "ad_inplace_or_view_type.py"):
        text = files[file]
        assert "\ndef add_out_out(ks, self, other, alpha, out):" in text
        assert "\ndef sum_out_IntList_out(ks, self, dim, keepdim, dtype, out):" in text
        assert "_ops.add_out.redispatch(" in text and "_ops.sum_IntList_out.redispatch(" in text
        assert "\ndef add_out(" not in text and "\ndef sum_IntList_out(" not in text
        assert 'm.impl("add.out", add_out_out, with_keyset="raw")' in text
        assert "::(anonymous namespace)::add_out_out:" in text  # the docstring's PyTorch name
    assert "class add_out:" in files["_ops.py"]  # at::_ops::add_out keeps its name
    variable_type = _registered_kernels(files["variable_type.py"])
    for f in reg.functions:
        if f.name in variable_type and not f.func.is_out_fn():
            assert variable_type[f.name] == f.func.unambiguous_name(), f.name  # add_Tensor, add__Tensor, sum
    assert variable_type["add.Tensor"] == "add_Tensor" and variable_type["add_.Tensor"] == "add__Tensor"
    assert variable_type["sum.dim_IntList"] == "sum_dim_IntList"
