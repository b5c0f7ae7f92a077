"""Claims of notebook 10 (beyond add: Tracer, functorch's keys) about PyTorch 2.13, checked against an installed PyTorch."""

from __future__ import annotations

import collections
import mmap
import pathlib
import re
import warnings

import pytest
from claims import claim, warnings_in_fresh_python

import labsupport as lab
import labsupport.torch as lab_torch


def tracer_row(torch_ref, op: str) -> str:
    row = next(r for r in torch_ref._C._dispatch_dump_table(op).splitlines() if r.startswith("Tracer:"))
    return re.sub(r"/\S*?/pytorch/pytorch/", "", row)


def trace(torch_ref, fn, inputs, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch_ref.jit.trace(fn, inputs, **kwargs)


@pytest.fixture
def custom_twice(torch_ref):
    lib = torch_ref.library.Library("claims10", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: torch_ref.add(x, x), "CPU")
    yield torch_ref.ops.claims10.twice
    lib._destroy()


def libtorch_cpu(torch_ref) -> bytes:
    path = pathlib.Path(torch_ref.__file__).parent / "lib" / "libtorch_cpu.so"
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data[:]


@claim("nb10.vmap_keys")
def test_functorch_keys_only_while_vmap_runs(torch_ref):
    C = torch_ref._C
    x = torch_ref.randn(3, 2)
    assert str(C._dispatch_keys(x)) == "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    assert str(C._dispatch_tls_local_include_set()) == "DispatchKeySet(BackendSelect, ADInplaceOrView)"
    seen = {}

    def f(row):
        seen["keys"], seen["include"] = str(C._dispatch_keys(row)), str(C._dispatch_tls_local_include_set())
        return row.sin()

    torch_ref.vmap(f)(x)
    assert "FuncTorchBatched" in seen["keys"]
    assert "FuncTorchDynamicLayerFrontMode" in seen["include"] and "FuncTorchDynamicLayerBackMode" in seen["include"]


@claim("nb10.tracer_kernels_and_fallback")
def test_generated_manual_and_fallback_tracer_kernels(torch_ref, custom_twice):
    kinds = collections.Counter()
    names = [n for n in torch_ref._C._dispatch_get_all_op_names() if n.startswith("aten::")]
    for name in names:
        row = tracer_row(torch_ref, name)
        kinds["generated" if "TraceType_" in row else "manual" if "TraceTypeManual" in row and "[kernel]" in row
              else "other"] += 1
    assert (len(names), kinds["generated"]) == (3110, 3086)
    assert 0 < kinds["manual"] < 20
    assert tracer_row(torch_ref, "claims10::twice") == (
        "Tracer: registered at torch/csrc/autograd/TraceTypeManual.cpp:296 [backend fallback]")
    assert re.search(rb"_ZN5torch3jitL22general_trace_function", libtorch_cpu(torch_ref))


@claim("nb10.tracer_not_on_tensors")
def test_tracer_is_on_no_tensor_and_not_included(torch_ref):
    C = torch_ref._C
    for t in (torch_ref.randn(2), torch_ref.randn(2, requires_grad=True)):
        assert "Tracer" not in str(C._dispatch_keys(t))
    assert "Tracer" not in str(C._dispatch_tls_local_include_set())  # DispatchKey.Tracer is not bound in Python
    assert tracer_row(torch_ref, "aten::add.Tensor").endswith("[kernel]")


@claim("nb10.copy_manual")
def test_copy_has_a_hand_written_tracer_kernel(torch_ref):
    row = tracer_row(torch_ref, "aten::copy_")
    assert "TraceTypeManual.cpp" in row and row.endswith("[kernel]")


@claim("nb10.tracer_tls_include")
def test_tracing_puts_tracer_in_the_include_set(torch_ref):
    C = torch_ref._C
    seen = []

    def f(a):
        seen.append("Tracer" in str(C._dispatch_tls_local_include_set()))
        return a.sin()

    trace(torch_ref, f, (torch_ref.randn(2),))
    assert seen == [True, True, False]
    assert "Tracer" not in str(C._dispatch_tls_local_include_set())


@claim("nb10.tracer_key_order")
def test_tracer_between_autograd_and_autocast(torch_ref):
    C = torch_ref._C
    seen = []

    def f(a):
        seen.append(str(C._dispatch_keys(a) | C._dispatch_tls_local_include_set()))
        return a.sin()

    trace(torch_ref, f, (torch_ref.randn(2, requires_grad=True),), check_trace=False)
    # a key set prints from the lowest priority to the highest
    assert seen == ["DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU, Tracer, AutocastCPU)"]
    mine = lab.DispatchKeySet("AutocastCPU") | lab.DispatchKeySet("Tracer") | lab.DispatchKeySet("AutogradCPU")
    assert repr(mine) == "DispatchKeySet(AutogradCPU, Tracer, AutocastCPU)"


@claim("nb10.check_trace_three_runs")
def test_check_trace_runs_the_function_three_times(torch_ref):
    import inspect

    assert inspect.signature(torch_ref.jit.trace).parameters["check_trace"].default is True
    calls = []

    def f(a, b):
        calls.append(1)
        return torch_ref.mul(torch_ref.add(a, b).sin(), b)

    trace(torch_ref, f, (torch_ref.randn(2, 2), torch_ref.randn(2, 2)))
    assert len(calls) == 3
    calls.clear()
    trace(torch_ref, f, (torch_ref.randn(2, 2), torch_ref.randn(2, 2)), check_trace=False)
    assert len(calls) == 1


@claim("nb10.trace_deprecated")
def test_jit_trace_warns_that_it_is_deprecated(torch_ref):
    text = warnings_in_fresh_python("""
        import torch
        torch.jit.trace(lambda x: x.sin(), (torch.ones(2),))
        torch.jit.trace(lambda x: x.cos(), (torch.ones(2),))
    """)
    lines = [line for line in text.splitlines() if "torch.jit.trace" in line and "deprecated" in line]
    assert len(lines) >= 2 and "torch.compile" in lines[0] and "torch.export" in lines[0]


def graph_of(m, a, b):
    def fn(a, b):
        return m.mul(m.add(a, b).sin(), b)

    if m is lab_torch:
        return lab.jit.trace(fn, (a, b)).graph
    return trace(m, fn, (a, b)).graph


@claim("nb10.graph_format")
def test_graph_text_matches_the_labs(torch_ref):
    a, b = lab_torch.randn(2, 2), lab_torch.randn(2, 2)
    real = graph_of(torch_ref, torch_ref.tensor(a.numpy()), torch_ref.tensor(b.numpy())).str(False)
    assert real == graph_of(lab_torch, a, b).str(False)
    assert "%2 : int = prim::Constant[value=1]()" in real and "aten::add(%a, %b, %2)" in real


@claim("nb10.source_range")
def test_nodes_name_the_callers_file_and_line(torch_ref):
    graph = str(graph_of(torch_ref, torch_ref.randn(2, 2), torch_ref.randn(2, 2)))
    here = re.escape(str(pathlib.Path(__file__).resolve()))
    assert re.search(r"aten::add\(%a, %b, %2\) # " + here + r":\d+:0", graph)


@claim("nb10.constants_and_warnings")
def test_wrapped_numbers_and_python_floats_become_constants(torch_ref):
    x = torch_ref.tensor([[1.0, 2.0], [3.0, 4.0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t2 = torch_ref.jit.trace(lambda x: (x + 1) * float(x.sum()), (x,))
    text = t2.graph.str(False)
    assert "%1 : Long(requires_grad=0, device=cpu) = prim::Constant[value={1}]()" in text
    assert "Double(requires_grad=0, device=cpu) = prim::Constant[value={10}]()" in text
    assert "aten::sum" not in text and "%4" not in text and "%6" in text
    tracer = [w for w in caught if type(w.message).__name__ == "TracerWarning"]
    assert len(tracer) == 2 and str(tracer[0].message).startswith("Converting a tensor to a Python float")
    assert t2(x + 1).tolist() == ((x + 2) * 10).tolist()  # the old sum, replayed


@claim("nb10.tracetype_symbol")
def test_generated_tracer_kernels_live_in_an_anonymous_namespace(torch_ref):
    assert re.search(rb"_ZN5torch9TraceType12_GLOBAL__N_110add_Tensor", libtorch_cpu(torch_ref))


@claim("nb10.custom_op_one_node")
def test_custom_op_is_one_node(torch_ref, custom_twice):
    traced = trace(torch_ref, lambda x: custom_twice(x).neg(), (torch_ref.randn(2, 2),))
    kinds = [node.kind() for node in traced.graph.nodes()]
    assert kinds == ["claims10::twice", "aten::neg"]


@claim("nb10.matmul_not_mm")
def test_matmul_is_traced_as_matmul(torch_ref):
    traced = trace(torch_ref, lambda a, b: torch_ref.matmul(a, b), (torch_ref.randn(2, 2), torch_ref.randn(2, 2)))
    assert [node.kind() for node in traced.graph.nodes()] == ["aten::matmul"]


@claim("nb10.code_inlines")
def test_code_is_torchscript_source(torch_ref):
    def f(a, b):
        return torch_ref.mul(torch_ref.add(a, b).sin(), b)

    traced = trace(torch_ref, f, (torch_ref.randn(2, 2), torch_ref.randn(2, 2)))
    assert "_0 = torch.mul(torch.sin(torch.add(a, b)), b)" in traced.code


@claim("nb10.left_out")
def test_what_the_lab_leaves_out(torch_ref):
    import inspect

    x = torch_ref.randn(2, 2)
    sizes = trace(torch_ref, lambda x: x * x.size(0), (x,))
    assert "aten::size" in [node.kind() for node in sizes.graph.nodes()]
    view = trace(torch_ref, lambda x: x.expand(3, 2, 2), (x,)).graph.str(False)
    assert "Float(3, 2, 2, strides=[0, 2, 1]" in view
    assert "_force_outplace" in inspect.signature(torch_ref.jit.trace).parameters
