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
    mine = str(lab.jit.trace(lambda x: x.expand(3, 2, 2), (lab_torch.randn(2, 2),)).graph)
    assert "Float(3, 2, 2, strides=[0, 2, 1]" in mine
    assert "_force_outplace" in inspect.signature(torch_ref.jit.trace).parameters


# Section 2: vmap (FuncTorchBatched and levels)

FALLBACK_SCRIPT = """
import warnings
import torch
warnings.simplefilter("always")
lib = torch.library.Library("claims10v", "DEF")
lib.define("scaled(Tensor self, Tensor other) -> Tensor")
lib.impl("scaled", lambda s, o: (s + o) * o, "CPU")
x = torch.ones(3, 2)
with warnings.catch_warnings(record=True) as caught:
    for _ in range(2):
        torch.vmap(torch.ops.claims10v.scaled.default)(x, x)
    torch._C._functorch._set_vmap_fallback_warning_enabled(False)
    torch.vmap(torch.ops.claims10v.scaled.default)(x, x)
print("\\n".join(str(w.message) for w in caught))
"""


def _vmap_seen(torch_ref, fn, *args, **kwargs):
    seen = []
    torch_ref.vmap(lambda *a: seen.append(fn(*a)) or a[0], **kwargs)(*args)
    return seen


@claim("nb10.batched_tensor_keys")
def test_batched_tensor_keeps_backend_keys(torch_ref):
    keys = _vmap_seen(torch_ref, lambda t: str(torch_ref._C._dispatch_keys(t)), torch_ref.ones(3, 2))
    assert keys == ["DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU, FuncTorchBatched)"]
    lab_keys = []
    lab_torch.vmap(lambda t: lab_keys.append(str(lab.dispatch_keys(t))) or t)(lab_torch.ones(3, 2))
    assert lab_keys == keys


@claim("nb10.vmap_profiler_one_add")
def test_profiler_records_one_add_under_vmap(torch_ref):
    a = torch_ref.ones(2, 2)
    with torch_ref.profiler.profile() as prof:
        torch_ref.vmap(lambda t: torch_ref.add(t, t).sin())(a)
    names = collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::"))
    assert names["aten::add"] == 1 and names["aten::sin"] == 1


@claim("nb10.vmap_levels_reused")
def test_consecutive_vmaps_reuse_level_one(torch_ref):
    level = torch_ref._C._functorch.maybe_get_level
    x = torch_ref.ones(3, 2)
    assert _vmap_seen(torch_ref, level, x) + _vmap_seen(torch_ref, level, x) == [1, 1]
    inner = []
    torch_ref.vmap(lambda row: torch_ref.vmap(lambda e: inner.append((level(e), level(row))) or e)(row))(x)
    assert inner == [(2, 1)]


@claim("nb10.vmap_mm_matmul_rules")
def test_mm_and_matmul_have_batching_kernels(torch_ref):
    def row(op, key):
        return next(r for r in torch_ref._C._dispatch_dump_table(op).splitlines() if r.startswith(key + ":"))

    for op in ("aten::mm", "aten::bmm", "aten::mv", "aten::dot"):
        assert "BatchRulesLinearAlgebra.cpp" in row(op, "FuncTorchBatched")
        assert row(op, "FuncTorchBatched").endswith("[kernel]")
    # FuncTorchBatchedDecomposition is an alias key: the table shows its kernel in the FuncTorchBatched row
    assert "BatchRulesDecompositions.cpp" in row("aten::matmul", "FuncTorchBatched")
    assert row("aten::matmul", "FuncTorchBatched").endswith("[batched kernel]")
    # the out= overloads and the factories the notebook names have no rule in PyTorch either
    for op in ("aten::add.out", "aten::zeros", "aten::empty.memory_format"):
        assert row(op, "FuncTorchBatched").endswith("LegacyBatchingRegistrations.cpp:730 [backend fallback]")
    warned = warnings_in_fresh_python(
        "import torch\na = torch.ones(3, 2, 2)\nv = torch.ones(3, 2)\ntorch.vmap(torch.mm)(a, a)\n"
        "torch.vmap(torch.matmul)(a, a)\ntorch.vmap(torch.matmul)(a, v)\ntorch.vmap(torch.matmul)(v, v)\n"
    )
    assert "performance drop" not in warned
    a = torch_ref.ones(3, 2, 2)
    assert torch_ref.equal(torch_ref.vmap(torch_ref.mm)(a, a), torch_ref.bmm(a, a))
    # view operators and squeeze_ (matmul's 1-D x 2-D path) have rules too
    for op in ("aten::unsqueeze", "aten::transpose.int", "aten::view", "aten::_unsafe_view"):
        assert "BatchRulesViews.cpp" in row(op, "FuncTorchBatched")
    assert "LegacyBatchingRegistrations.cpp" in row("aten::squeeze_.dim", "FuncTorchBatched")
    # the lab: the same rows, no warning, PyTorch's values
    for op in ("aten::mm", "aten::bmm", "aten::mv", "aten::dot", "aten::matmul", "aten::add.out", "aten::zeros",
               "aten::unsqueeze", "aten::squeeze_.dim"):
        mine = next(r for r in lab.dispatcher.dump_table(op).splitlines() if r.startswith("FuncTorchBatched:"))
        assert mine == row(op, "FuncTorchBatched").replace("/__w/pytorch/pytorch/", "")
    la, lv, l3 = lab_torch.ones(3, 2, 2), lab_torch.ones(3, 2), lab_torch.ones(3, 2, 2, 2)
    for fn, args in ((lab_torch.mm, (la, la)), (lab_torch.matmul, (la, la)), (lab_torch.matmul, (la, lv)),
                     (lab_torch.matmul, (lv, lv)), (lab_torch.matmul, (lv, la)), (lab_torch.matmul, (l3, l3)),
                     (lab_torch.bmm, (l3, l3))):  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = lab_torch.vmap(fn)(*args)
        real = torch_ref.vmap(getattr(torch_ref, fn.__name__))(*(torch_ref.ones(*t.shape) for t in args))
        assert tuple(out.shape) == tuple(real.shape) and out.tolist() == real.tolist()


@claim("nb10.vmap_fallback_warns_every_call")
def test_fallback_warning_every_call_and_switch(torch_ref):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", FALLBACK_SCRIPT], capture_output=True, text=True, check=True)
    message = (
        "There is a performance drop because we have not yet implemented the batching rule for "
        "claims10v::scaled. Please file us an issue on GitHub so that we can prioritize its implementation."
    )
    # TORCH_WARN, not _ONCE: two calls, two warnings; the switch silences the third
    assert (run.stdout + run.stderr).count(message) == 2


@claim("nb10.vmap_fallback_refuses_out")
def test_fallback_refuses_out_ops(torch_ref):
    x = torch_ref.ones(3, 2)
    with pytest.raises(RuntimeError) as real:
        torch_ref.vmap(lambda a, o: torch_ref.add(a, a, out=o))(x, torch_ref.empty(3, 2))
    assert str(real.value) == (
        "Batching rule not implemented for aten::add.out; the fallback path doesn't work on out= or view ops."
    )


@claim("nb10.register_vmap")
def test_register_vmap_and_legacy_batched_key_exist(torch_ref):
    assert callable(torch_ref.library.register_vmap)
    rows = torch_ref._C._dispatch_dump_table("aten::add.Tensor").splitlines()
    assert any(r.startswith("Batched:") for r in rows) and any(r.startswith("FuncTorchBatched:") for r in rows)


@claim("nb10.vmap_randomness_error")
def test_random_ops_refused_unless_randomness_set(torch_ref):
    x = torch_ref.ones(3, 2)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        torch_ref.vmap(lambda t: torch_ref.randn(2))(x)
    same = torch_ref.vmap(lambda t: torch_ref.randn(2), randomness="same")(x)
    different = torch_ref.vmap(lambda t: torch_ref.randn(2), randomness="different")(x)
    assert tuple(same.shape) == tuple(different.shape) == (3, 2)
    assert torch_ref.equal(same[0], same[1]) and torch_ref.equal(same[1], same[2])
    assert not torch_ref.equal(different[0], different[1])
    row = next(r for r in torch_ref._C._dispatch_dump_table("aten::randn").splitlines() if r.startswith("FuncTorchVmapMode:"))
    assert "functorch/BatchRulesRandomness.cpp" in row and row.endswith("[kernel]")


@claim("nb10.legacy_batched_keys")
def test_legacy_batched_tensor_has_no_backend_key(torch_ref):
    from torch._vmap_internals import _vmap

    assert _vmap_seen(torch_ref, lambda t: None, torch_ref.ones(1)) == [None]  # the helper itself works
    seen = []
    _vmap(lambda t: seen.append(str(torch_ref._C._dispatch_keys(t))) or t)(torch_ref.ones(3, 2))
    assert seen == ["DispatchKeySet(ADInplaceOrView, AutogradOther, Batched)"]
    include = []
    _vmap(lambda t: include.append(str(torch_ref._C._dispatch_tls_local_include_set())) or t)(torch_ref.ones(3, 2))
    assert include == ["DispatchKeySet(BackendSelect, ADInplaceOrView, VmapMode)"]


@claim("nb10.legacy_batched_add_kernel")
def test_add_has_legacy_batched_kernel(torch_ref):
    row = next(r for r in torch_ref._C._dispatch_dump_table("aten::add.Tensor").splitlines() if r.startswith("Batched:"))
    row = re.sub(r"/\S*?/pytorch/pytorch/", "", row)
    assert row == "Batched: registered at aten/src/ATen/LegacyBatchingRegistrations.cpp:1076 [kernel]"


@claim("nb10.dynamic_layer_key_order")
def test_dynamic_layer_keys_bracket_the_order(torch_ref):
    order = str(torch_ref._C._dispatch_keyset_full())
    order = order[order.index("(") + 1 : -1].split(", ")  # lowest priority first
    front, back = order.index("FuncTorchDynamicLayerFrontMode"), order.index("FuncTorchDynamicLayerBackMode")
    assert order[front + 1 :] == ["TESTING_ONLY_GenericWrapper", "TESTING_ONLY_GenericMode", "PreDispatch", "PythonDispatcher"]
    assert order[back - 1] == "Python" and back < order.index("ADInplaceOrView") < order.index("AutogradCPU")
    assert back > order.index("CPU")


@claim("nb10.vmap_interpreter_tls")
def test_vmap_interpreter_tls_seen_by_a_batching_rule(torch_ref):
    from torch._C import _functorch as ft

    seen = {}
    lib = torch_ref.library.Library("claims10t", "DEF")
    try:
        lib.define("s(Tensor a) -> Tensor")
        lib.impl("s", lambda a: a * 2, "CPU")

        def rule(a):
            seen["include"] = str(torch_ref._C._dispatch_tls_local_include_set())
            seen["exclude"] = str(torch_ref._C._dispatch_tls_local_exclude_set())
            level = ft.current_level()
            value, bdim = ft._unwrap_batched(a, level)
            return ft._add_batch_dim(value * 2, bdim, level)

        lib.impl("s", rule, "FuncTorchBatched")
        torch_ref.vmap(torch_ref.ops.claims10t.s)(torch_ref.ones(3, 2))
    finally:
        lib._destroy()
    assert "FuncTorchVmapMode" in seen["include"]
    excluded = seen["exclude"][len("DispatchKeySet(") : -1].split(", ")
    for key in ("FuncTorchDynamicLayerFrontMode", "AutogradCPU", "ADInplaceOrView", "AutocastCPU", "Tracer", "Batched"):
        assert key in excluded
    assert "FuncTorchBatched" not in excluded and "FuncTorchDynamicLayerBackMode" not in excluded
    # the lab's VmapInterpreter sets up the same TLS
    lab_seen = {}
    lab_lib = lab.Library("claims10t", "DEF")
    try:
        from labsupport.functorch import add_batch_dim, get_unwrapped, maybe_current_level

        lab_lib.define("s(Tensor a) -> Tensor")
        lab_lib.impl("s", lambda a: lab_torch.mul(a, 2.0), "CPU")

        def lab_rule(a):
            lab_seen["include"], lab_seen["exclude"] = lab.tls_include_set(), lab.tls_exclude_set()
            return add_batch_dim(lab_torch.mul(get_unwrapped(a), 2.0), 0, maybe_current_level())

        lab_lib.impl("s", lab_rule, "FuncTorchBatched")
        lab_torch.vmap(lab.ops.claims10t.s.default)(lab_torch.ones(3, 2))
    finally:
        lab_lib.close()
    assert str(lab_seen["include"]) == seen["include"]
    lab_excluded = str(lab_seen["exclude"])
    for key in ("FuncTorchDynamicLayerFrontMode", "Tracer", "Batched", "AutocastCPU"):
        assert key in lab_excluded
    assert "FuncTorchBatched" not in lab_excluded


# ---------------------------------------------------------------- section 3: views, ADInplaceOrView, version counters


def _adinplaceorview_row(dump_table_text: str) -> str:
    return next(r for r in dump_table_text.splitlines() if r.startswith("ADInplaceOrView:"))


@claim("nb10.views_need_adinplaceorview_without_grad")
def test_version_counter_matters_for_a_tensor_that_does_not_require_grad(torch_ref):
    w, x = torch_ref.randn(3, requires_grad=True), torch_ref.ones(3)
    y = w * x
    x.add_(1)
    with pytest.raises(RuntimeError, match=r"\[torch.FloatTensor \[3\]\] is at version 1; expected version 0 instead"):
        y.sum().backward()
    assert str(torch_ref._C._dispatch_keys(x)) == "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"


@claim("nb10.view_shares_storage_and_version")
def test_view_shares_storage_and_version(torch_ref):
    for tm in (torch_ref, lab_torch):
        x = tm.zeros(3, 4)
        row = x.select(0, 1)
        assert row._is_view() and row._base is x
        assert tuple(row.stride()) == (1,) and row.storage_offset() == 4
        row.add_(1)
        assert x.tolist()[1] == [1.0] * 4 and (x._version, row._version) == (1, 1)


@claim("nb10.one_version_counter")
def test_one_counter_for_base_views_and_detach(torch_ref):
    for tm in (torch_ref, lab_torch):
        x = tm.zeros(3, 4)
        row, xt, d = x.select(0, 1), x.t(), x.detach()
        row.add_(1)
        x.mul_(2)
        assert (x._version, row._version, xt._version, d._version) == (2, 2, 2, 2)
        assert not d._is_view() and x.clone()._version == 0
        assert xt.select(0, 2)._base is x


@claim("nb10.view_ops_have_adinplaceorview_kernels")
def test_adinplaceorview_rows(torch_ref):
    for op in ("aten::t", "aten::select.int", "aten::view", "aten::as_strided", "aten::add_.Tensor"):
        assert _adinplaceorview_row(torch_ref._C._dispatch_dump_table(op)).endswith("[kernel]"), op
        assert _adinplaceorview_row(lab.dispatcher.dump_table(op)).endswith("[kernel]"), op
    theirs = _adinplaceorview_row(torch_ref._C._dispatch_dump_table("aten::add.Tensor"))
    assert "fallthrough" in theirs and "fallthrough" in _adinplaceorview_row(lab.dispatcher.dump_table("aten::add.Tensor"))


@claim("nb10.below_adinplaceorview")
def test_below_adinplaceorview_no_bump_no_view(torch_ref):
    x = torch_ref.zeros(3, 4)
    with torch_ref._C._AutoDispatchBelowADInplaceOrView():
        x.add_(1)
        v = x.view(12)
    assert x._version == 0 and not v._is_view()


@claim("nb10.leaf_inplace_errors")
def test_leaf_and_view_of_leaf_errors(torch_ref):
    b = torch_ref.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError) as leaf_error:
        b.add_(1)
    assert str(leaf_error.value) == "a leaf Variable that requires grad is being used in an in-place operation."
    with pytest.raises(RuntimeError) as view_error:
        b.select(0, 0).add_(1)
    assert str(view_error.value) == "a view of a leaf Variable that requires grad is being used in an in-place operation."
    with torch_ref.no_grad():
        b.select(0, 0).add_(1)
    assert b._version == 1


@claim("nb10.nograd_view_error")
def test_view_made_in_no_grad_then_modified(torch_ref):
    b = torch_ref.randn(3, 4, requires_grad=True)
    h = b * 1
    with torch_ref.no_grad():
        v = h.select(0, 0)
    with pytest.raises(RuntimeError, match=r"^A view was created in no_grad mode and is being modified inplace with grad mode enabled"):
        v.mul_(2)


@claim("nb10.saved_tensor_modified_error")
def test_modified_by_an_inplace_operation_words(torch_ref):
    b = torch_ref.randn(3, requires_grad=True)
    y = b * 2
    z = y.sin()
    y.mul_(3)
    with pytest.raises(RuntimeError) as error:
        z.sum().backward()
    assert str(error.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.FloatTensor [3]], which is output 0 of Mul, is at version 1; expected version 0 instead. Hint:"
    )


@claim("nb10.copyslices")
def test_copyslices_after_inplace_on_a_view(torch_ref):
    for tm in (torch_ref, lab_torch):
        b = tm.ones(3, 4, requires_grad=True)
        h = b.mul(1)
        v = h.select(0, 0)
        assert type(v.grad_fn).__name__ == "SelectBackward0"
        v.mul_(2)
        assert (type(v.grad_fn).__name__, type(h.grad_fn).__name__) == ("AsStridedBackward0", "CopySlices")
        assert [None if n is None else type(n).__name__ for n, _ in h.grad_fn.next_functions] == ["MulBackward0", None]
        h.sum().backward()
        assert b.grad.tolist() == [[2.0] * 4, [1.0] * 4, [1.0] * 4]
    assert torch_ref.ones(2, requires_grad=True).mul(1).select(0, 0).mul_(2)._base.grad_fn.name() == "torch::autograd::CopySlices"


@claim("nb10.view_grad_fn_rebuilt_after_base_change")
def test_base_modified_view_grad_fn(torch_ref):
    b = torch_ref.randn(3, 4, requires_grad=True)
    h = b * 1
    v = h.view(12)
    assert type(v.grad_fn).__name__ == "ViewBackward0"
    h.add_(1)
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"
    assert type(v.grad_fn.next_functions[0][0]).__name__ == "AddBackward0"


@claim("nb10.t_calls_transpose_and_as_strided")
def test_t_runs_transpose_and_as_strided(torch_ref):
    h = torch_ref.randn(3, 4)
    with torch_ref.profiler.profile() as prof:
        h.t()
    assert sorted(e.key for e in prof.key_averages()) == ["aten::as_strided", "aten::t", "aten::transpose"]
    ours = lab_torch.randn(3, 4)
    with lab.profiler.profile() as lab_prof:
        ours.t()
    assert sorted(e.key for e in lab_prof.key_averages()) == ["aten::as_strided", "aten::t", "aten::transpose"]


@claim("nb10.view_functions_list")
def test_torchgen_picks_view_kernels_by_name(torch_ref):
    pytest.importorskip("torchgen")
    from torchgen.packaged.autograd.gen_inplace_or_view_type import VIEW_FUNCTIONS

    from labsupport.codegen.gen_autograd import is_view_op
    from labsupport.codegen.model import load_ops_yaml

    assert {"view", "t", "transpose", "select", "slice", "as_strided", "expand"} <= set(VIEW_FUNCTIONS)
    reg = load_ops_yaml(pathlib.Path(__file__).resolve().parents[1] / "ops.yaml")
    for f in reg.functions:
        assert is_view_op(f) == (f.func.name in VIEW_FUNCTIONS), f.name


@claim("nb10.multi_output_views")
def test_unbind_views_refuse_inplace(torch_ref):
    h = torch_ref.randn(3, 4, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="This view is the output of a function that returns multiple views"):
        h.unbind(0)[0].add_(1)


@claim("nb10.lazy_grad_fn_refresh")
def test_pytorch_raises_when_a_stale_view_grad_fn_is_read(torch_ref):
    h = torch_ref.randn(3, 4, requires_grad=True) * 1
    with torch_ref.no_grad():
        v = h.select(0, 0)
    h.mul_(2)  # fine: the in-place op is on the base
    with pytest.raises(RuntimeError, match="its base or another view of its base has been modified inplace"):
        v.grad_fn  # noqa: B018 -- reading the attribute is what raises
    # the lab keeps the attribute and raises on the next use by autograd
    lab_h = lab_torch.randn(3, 4, requires_grad=True).mul(1)
    with lab_torch.no_grad():
        lab_v = lab_h.select(0, 0)
    lab_h.mul_(2)
    assert lab_v.grad_fn is None
    with pytest.raises(RuntimeError, match="its base or another view of its base has been modified inplace"):
        lab_v.mul(2)


# ---------------------------------------------------------------- section 3, ATen half (cells written by h20)


@claim("nb10.view_kernels_composite")
def test_view_kernels_composite_or_per_backend(torch_ref):
    for op in ("t", "transpose.int", "select.int", "slice.Tensor", "expand", "unsqueeze", "squeeze"):
        dump = torch_ref._C._dispatch_dump(f"aten::{op}")
        assert "CompositeExplicitAutograd[alias]" in dump and "\nCPU:" not in dump, op
    for op in ("view", "as_strided"):
        dump = torch_ref._C._dispatch_dump(f"aten::{op}")
        assert "\nCPU:" in dump and "\nMeta:" in dump and "CompositeExplicitAutograd[alias]" not in dump, op


@claim("nb10.view_geometry")
def test_view_geometry_matches_pytorch(torch_ref):
    def table(tm):
        x = tm.tensor([[float(4 * i + j) for j in range(4)] for i in range(3)])
        r = tm.tensor([[10.0, 20.0, 30.0, 40.0]])
        views = [x.t(), x[1], x[1:3], x[:, 1:3], x[::2], x.view(4, 3), x.unsqueeze(1), r.expand(3, 4),
                 x.as_strided((2, 2), (1, 4), 1)]
        return [(tuple(v.shape), tuple(v.stride()), v.storage_offset(), v.is_contiguous()) for v in views]

    assert table(lab_torch) == table(torch_ref)


@claim("nb10.expand_inplace_overlap")
def test_expand_inplace_overlap_error(torch_ref):
    words = []
    for tm in (torch_ref, lab_torch):
        with pytest.raises(RuntimeError) as error:
            tm.zeros(3, 4).expand(2, 3, 4).add_(1)
        words.append(str(error.value))
    assert words[0] == words[1] == (
        "unsupported operation: more than one element of the written-to tensor refers to a single memory "
        "location. Please clone() the tensor before performing the operation."
    )


@claim("nb10.view_needs_compatible_strides")
def test_view_vs_reshape(torch_ref):
    x = torch_ref.arange(12.0).reshape(3, 4).clone()
    with pytest.raises(RuntimeError, match=re.escape("view size is not compatible with input tensor's size and stride")):
        x.t().view(12)
    same = lambda a, b: a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()  # noqa: E731
    assert not same(x.t().reshape(12), x) and same(x.reshape(12), x) and x.contiguous() is x


@claim("nb10.indexing_is_view_ops")
def test_indexing_calls_select_unsqueeze_slice(torch_ref):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x = torch_ref.arange(12.0).reshape(3, 4).clone()
    with Log() as log:
        x[1, None, ::2]
    assert log.seen == ["aten.select.int", "aten.unsqueeze.default", "aten.slice.Tensor"]
