"""The Python key in the lab's tools: the profiler's rows, lab.trace()'s hops, the key-set views, and
``torch.utils._python_dispatch`` / ``torch.ops`` on the lab's ``torch``.

The profiler twins run one program, written once against a ``torch`` module, on the lab and on
PyTorch 2.13 (skipped without it), and compare the profiler's rows (names, ``# of Calls``) and their
nesting. PyTorch's ``pythonFallback`` (aten/src/ATen/core/PythonFallbackKernel.cpp) opens a
``RECORD_FUNCTION`` scope named ``PythonDispatchMode`` around a mode's handler and ``PythonSubclass``
around a subclass's; the handler's ``func(*args)`` enters ``Dispatcher::call`` again, so a pass-through
mode shows ``aten::add`` twice. Where PyTorch shows rows the lab cannot have, they are listed by name
with the reason (``ONLY_IN_PYTORCH_FWD_BWD``) and everything else must agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from subclasses import wrapper_subclass

import labsupport as lab
import labsupport.torch as labtorch
from labsupport.c10.dispatch_key import DispatchKey

# ---------------------------------------------------------------- one program, either torch


def _classes(torch: Any) -> dict[str, type]:
    """A pass-through mode, a logging mode and a pass-through wrapper subclass, written once against
    ``torch`` (``torch.utils._python_dispatch`` and ``torch.utils._pytree`` on both)."""
    TorchDispatchMode = torch.utils._python_dispatch.TorchDispatchMode
    tree_map = torch.utils._pytree.tree_map

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Logging(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.log: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.log.append(str(func))
            return func(*args, **(kwargs or {}))

    Wrapper = wrapper_subclass(torch, tree_map)

    return {"PassThrough": PassThrough, "Logging": Logging, "Wrapper": Wrapper}


def _scenario(name: str, torch: Any) -> Callable[[], Any]:
    """The program ``name`` on ``torch``, inputs made beforehand (so that they are not profiled)."""
    c = _classes(torch)
    a, b = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[0.5, -1.0], [2.0, 0.25]])
    leaf = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    wa, wb, wleaf = c["Wrapper"](a), c["Wrapper"](b), c["Wrapper"](leaf)

    def under_mode(x: Any, y: Any) -> Any:
        with c["PassThrough"]():
            return torch.add(x, y)

    def under_two_modes(x: Any, y: Any) -> Any:
        with c["PassThrough"](), c["PassThrough"]():
            return torch.add(x, y)

    def logging_forward_backward() -> list[str]:
        with c["Logging"]() as mode:
            torch.add(leaf, b).sum().backward()
        return mode.log

    programs: dict[str, Callable[[], Any]] = {
        "plain add": lambda: torch.add(a, b),
        "add under a pass-through mode": lambda: under_mode(a, b),
        "add on a pass-through wrapper subclass": lambda: torch.add(wa, wb),
        "add with requires_grad": lambda: torch.add(leaf, b),
        "add with requires_grad under a pass-through mode": lambda: under_mode(leaf, b),
        "add on a wrapper with requires_grad": lambda: torch.add(wleaf, wb),
        "add on a wrapper under a mode": lambda: under_mode(wa, wb),
        "add under two nested modes": lambda: under_two_modes(a, b),
        "logging mode around add + sum + backward": logging_forward_backward,
    }
    return programs[name]


def _profile(torch: Any, program: Callable[[], Any], api: str = "torch.profiler") -> tuple[dict[str, int], str, Any]:
    """(rows as {name: # of Calls} in order of first appearance, the nesting as an indented tree, the
    program's result), from the lab's profiler or PyTorch's (``torch.profiler`` or
    ``torch.autograd.profiler``)."""
    if torch is labtorch:
        with lab.profiler.profile() as prof:
            result = program()
        roots = [e for e in prof.events() if e.parent is None]
        children = "children"
    else:
        if api == "torch.profiler":
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        else:
            profiler = torch.autograd.profiler.profile()
        with profiler as prof:
            result = program()
        events = prof.events() if api == "torch.profiler" else prof.function_events
        roots = [e for e in events if e.cpu_parent is None]
        children = "cpu_children"
    lines: list[str] = []

    def walk(event: Any, depth: int) -> None:
        lines.append("  " * depth + event.name)
        for child in getattr(event, children):
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    return {row.key: row.count for row in prof.key_averages()}, "\n".join(lines), result


SAME_ROWS = {
    "plain add": ({"aten::add": 1}, "aten::add"),
    "add under a pass-through mode": (
        {"aten::add": 2, "PythonDispatchMode": 1},
        "aten::add\n  PythonDispatchMode\n    aten::add",
    ),
    "add on a pass-through wrapper subclass": (
        {"aten::add": 2, "PythonSubclass": 1},
        "aten::add\n  PythonSubclass\n    aten::add",
    ),
    "add with requires_grad": ({"aten::add": 1}, "aten::add"),  # autograd opens no scope in the forward pass
    "add with requires_grad under a pass-through mode": (
        {"aten::add": 2, "PythonDispatchMode": 1},
        "aten::add\n  PythonDispatchMode\n    aten::add",
    ),
    "add on a wrapper with requires_grad": (
        {"aten::add": 2, "PythonSubclass": 1},
        "aten::add\n  PythonSubclass\n    aten::add",
    ),
    # the mode's func(*args) reaches the Python key again, with no mode: now the subclass handles it
    "add on a wrapper under a mode": (
        {"aten::add": 3, "PythonDispatchMode": 1, "PythonSubclass": 1},
        "aten::add\n  PythonDispatchMode\n    aten::add\n      PythonSubclass\n        aten::add",
    ),
    # the inner mode's func(*args) reaches the Python key again, now with the outer mode on top
    "add under two nested modes": (
        {"aten::add": 3, "PythonDispatchMode": 2},
        "aten::add\n  PythonDispatchMode\n    aten::add\n      PythonDispatchMode\n        aten::add",
    ),
}  # fmt: skip


# ---------------------------------------------------------------- the profiler: lab only


@pytest.mark.parametrize("name", sorted(SAME_ROWS))
def test_the_labs_profiler_shows_pytorchs_rows_for_the_python_key(name):
    counts, tree, _ = _profile(labtorch, _scenario(name, labtorch))
    assert (counts, tree) == SAME_ROWS[name]


def test_python_dispatch_mode_is_a_row_between_the_two_adds_with_pytorchs_self_and_total_times():
    with lab.profiler.profile() as prof:
        _scenario("add under a pass-through mode", labtorch)()
    outer, scope, inner = prof.events()
    assert (outer.name, scope.name, inner.name) == ("aten::add", "PythonDispatchMode", "aten::add")
    assert scope.parent is outer and inner.parent is scope and outer.children == [scope]
    assert (outer.depth, scope.depth, inner.depth) == (0, 1, 2)
    assert scope.overload_name == "" and inner.overload_name == "Tensor"
    assert outer.cpu_time_total >= scope.cpu_time_total >= inner.cpu_time_total > 0
    # self time = total minus the children's totals, as torch.autograd.profiler_util.FunctionEvent
    assert outer.self_cpu_time_total == pytest.approx(outer.cpu_time_total - scope.cpu_time_total)
    assert scope.self_cpu_time_total == pytest.approx(scope.cpu_time_total - inner.cpu_time_total)
    rows = {row.key: row for row in prof.key_averages()}
    # a key average adds up every event of its name, nested ones too (the inner add is inside the outer)
    assert rows["aten::add"].count == 2
    assert rows["aten::add"].cpu_time_total == pytest.approx(outer.cpu_time_total + inner.cpu_time_total)
    table = prof.key_averages().table(times=False)
    assert "  PythonDispatchMode             1  " in table and "           aten::add             2  " in table


def test_a_plain_add_under_the_profiler_makes_no_python_scope_and_the_hook_costs_nothing_off():
    from labsupport.c10.dispatcher import observers

    a = labtorch.tensor([1.0, 2.0])
    with lab.profiler.profile() as prof:
        labtorch.add(a, a)
    assert prof.tree() == "aten::add"  # the inner call would fold into the outer one without a scope
    assert not observers.active


def test_record_function_scopes_from_another_thread_are_not_recorded():
    import threading

    PassThrough = _classes(labtorch)["PassThrough"]
    a = labtorch.tensor([1.0, 2.0])

    def work():
        with PassThrough():
            labtorch.add(a, a)

    with lab.profiler.profile() as prof:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        labtorch.add(a, a)
    assert prof.counts() == {"aten::add": 1}


def test_the_logging_mode_under_the_labs_profiler():
    counts, tree, log = _profile(labtorch, _scenario("logging mode around add + sum + backward", labtorch))
    assert log == ["aten.add.Tensor", "aten.sum.default", "aten.ones_like.default", "aten.expand.default",
                   "aten.new_empty_strided.default", "aten.copy_.default"]  # fmt: skip
    assert counts["PythonDispatchMode"] == 6 and counts["torch::autograd::AccumulateGrad"] == 1
    assert tree == (
        "aten::add\n  PythonDispatchMode\n    aten::add\n"
        "aten::sum\n  PythonDispatchMode\n    aten::sum\n"  # the inner sum's sum.dim_IntList folds into it
        "aten::ones_like\n  PythonDispatchMode\n    aten::ones_like\n"  # .backward()'s seed
        "      aten::empty_like\n        aten::empty_strided\n      aten::fill_\n"
        "autograd::engine::evaluate_function: SumBackward0\n  SumBackward0\n"  # the engine's two scopes
        "    aten::expand\n      PythonDispatchMode\n        aten::expand\n          aten::as_strided\n"
        "autograd::engine::evaluate_function: AddBackward0\n  AddBackward0\n"
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad\n  torch::autograd::AccumulateGrad\n"
        "    aten::new_empty_strided\n      PythonDispatchMode\n        aten::new_empty_strided\n"
        "          aten::empty_strided\n"
        "    aten::copy_\n      PythonDispatchMode\n        aten::copy_"  # the clone of the expanded gradient
    )


# ---------------------------------------------------------------- the profiler: twins with PyTorch 2.13


@pytest.mark.torch
@pytest.mark.parametrize("api", ["torch.profiler", "torch.autograd.profiler"])
@pytest.mark.parametrize("name", sorted(SAME_ROWS))
def test_profiler_rows_match_pytorch(torch_ref, name, api):
    lab_counts, lab_tree, _ = _profile(labtorch, _scenario(name, labtorch))
    ref_counts, ref_tree, _ = _profile(torch_ref, _scenario(name, torch_ref), api)
    assert list(lab_counts.items()) == list(ref_counts.items())  # names, counts and first-seen order
    assert lab_tree == ref_tree
    assert (lab_counts, lab_tree) == SAME_ROWS[name]


# Rows PyTorch's profiler shows for the logging mode around add(leaf, b).sum().backward() that the lab's
# cannot: {name: (PyTorch's count minus the lab's, why)}. Every other row must agree exactly.
ONLY_IN_PYTORCH_FWD_BWD: dict[str, tuple[int, str]] = {
    # operators PyTorch's sum kernel calls inside itself (it restrides and zero-fills its output); the
    # lab's sum kernel (labsupport/aten/native/reduce_ops.py) computes with numpy. Everything else agrees:
    # the engine's scopes (``autograd::engine::evaluate_function: <node>`` and the node's own), the seed
    # ones_like -> empty_like -> empty_strided + fill_, and AccumulateGrad's new_empty_strided + copy_.
    "aten::as_strided": (1, "sum's structured kernel restrides its output; the lab's sets strides directly "
                         "(expand's as_strided, the other one, is in both)"),
    "aten::fill_": (1, "sum's kernel zero-fills its output (ones_like's fill_ is in both)"),
}
# Nodes to take out of PyTorch's tree before comparing nestings: engine scopes are spliced (their
# children move up), the other PyTorch-only rows go with their whole subtree.
_SPLICE = {name for name, (_, why) in ONLY_IN_PYTORCH_FWD_BWD.items() if "scope" in why and name != "PythonDispatchMode"}
_DROP = set(ONLY_IN_PYTORCH_FWD_BWD) - _SPLICE - {"PythonDispatchMode"}


def _prune(tree: str) -> str:
    """PyTorch's indented tree without the rows of ONLY_IN_PYTORCH_FWD_BWD (see _SPLICE and _DROP)."""
    out: list[str] = []
    shift: list[tuple[int, int]] = []  # (depth of a spliced or dropped node, levels it removes; -1: drop)
    for line in tree.splitlines():
        name = line.lstrip(" ")
        depth = (len(line) - len(name)) // 2
        while shift and shift[-1][0] >= depth:
            shift.pop()
        if any(levels < 0 for _, levels in shift):
            continue
        if name in _DROP:
            shift.append((depth, -1))
            continue
        removed = sum(levels for _, levels in shift)
        if name in _SPLICE:
            shift.append((depth, 1))
            continue
        out.append("  " * (depth - removed) + name)
    return "\n".join(out)


@pytest.mark.torch
@pytest.mark.parametrize("api", ["torch.profiler", "torch.autograd.profiler"])
def test_a_logging_mode_around_forward_and_backward_matches_pytorch_but_for_named_rows(torch_ref, api):
    name = "logging mode around add + sum + backward"
    lab_counts, lab_tree, lab_log = _profile(labtorch, _scenario(name, labtorch))
    ref_counts, ref_tree, ref_log = _profile(torch_ref, _scenario(name, torch_ref), api)
    assert ref_log == ["aten.add.Tensor", "aten.sum.default", "aten.ones_like.default", "aten.expand.default",
                       "aten.new_empty_strided.default", "aten.copy_.default"]  # fmt: skip
    assert lab_log == ref_log
    assert set(lab_counts) <= set(ref_counts)  # the lab shows no row PyTorch does not
    differences = {key: ref_counts[key] - lab_counts.get(key, 0) for key in ref_counts}
    assert {key: d for key, d in differences.items() if d} == {k: n for k, (n, _) in ONLY_IN_PYTORCH_FWD_BWD.items()}
    # same first-seen order (PyTorch's first as_strided and fill_ are sum's, before the lab's first ones)
    assert [k for k in ref_counts if k in lab_counts and k not in ONLY_IN_PYTORCH_FWD_BWD] == [
        k for k in lab_counts if k not in ONLY_IN_PYTORCH_FWD_BWD
    ]
    assert _prune(ref_tree) == _prune(lab_tree)  # as_strided and fill_ rows leave both trees (the counts cover them)


def test_prune_drops_pytorch_only_subtrees():
    tree = (
        "aten::sum\n  PythonDispatchMode\n    aten::sum\n      aten::as_strided\n      aten::fill_\n"
        "autograd::engine::evaluate_function: SumBackward0\n  SumBackward0\n    aten::expand"
    )
    assert _prune(tree) == (
        "aten::sum\n  PythonDispatchMode\n    aten::sum\n"
        "autograd::engine::evaluate_function: SumBackward0\n  SumBackward0\n    aten::expand"
    )


# ---------------------------------------------------------------- lab.trace(): the Python hops


def test_a_wrapper_subclass_call_walks_python_tls_snapshot_autograd_python_then_the_handlers_call():
    Wrapper = _classes(labtorch)["Wrapper"]
    w = Wrapper(labtorch.tensor([1.0, 2.0]))
    with lab.trace() as rec:
        labtorch.add(w, w)
    hops = [(f.torch_name, f.key.name, str(f.key_set)) for f in rec.frames if f.layer == "dispatcher" and f.key]
    assert hops == [
        ("c10::Dispatcher::call", "PythonTLSSnapshot", "DispatchKeySet(CPU, Python, AutogradCPU, PythonTLSSnapshot)"),
        ("c10::Dispatcher::redispatchBoxed", "AutogradCPU", "DispatchKeySet(CPU, Python, AutogradCPU)"),
        ("c10::Dispatcher::redispatch", "Python", "DispatchKeySet(CPU, Python)"),
        ("c10::Dispatcher::call", "CPU", "DispatchKeySet(CPU)"),  # func(*unwrapped) in the handler
    ]  # fmt: skip
    names = rec.torch_names()
    order = ["(anonymous namespace)::pythonTLSSnapshotFallback",
             "torch::autograd::VariableType::(anonymous namespace)::add_Tensor",
             "(anonymous namespace)::pythonFallback", "torch::handle_torch_function_no_python_arg_parser",
             "torch._ops.OpOverload.__call__", "at::native::structured_ufunc_add_CPU::impl"]  # fmt: skip
    at = -1  # each frame after the previous one (the binding's __torch_function__ frames come first)
    for name in order:
        at = names.index(name, at + 1)


def test_a_call_under_a_mode_shows_the_python_keys_in_the_trace_and_its_first_frames_key_set():
    PassThrough = _classes(labtorch)["PassThrough"]
    a = labtorch.tensor([1.0, 2.0])
    with PassThrough(), lab.trace() as rec:
        labtorch.add(a, a)
    first = next(f for f in rec.frames if f.layer == "dispatcher")
    # tensor keys (CPU, ADInplaceOrView, AutogradCPU, AutocastCPU) + the TLS include the mode added
    assert first.key is DispatchKey.PythonTLSSnapshot
    assert first.key_set.has(DispatchKey.Python)
    handler_call = [f for f in rec.frames if f.torch_name == "c10::Dispatcher::call"][1]
    assert str(handler_call.key_set) == "DispatchKeySet(CPU)"  # mode popped, keys above Python excluded


# ---------------------------------------------------------------- key sets and their views


def _wrapper_keys(torch: Any) -> Any:
    w = _classes(torch)["Wrapper"](torch.tensor([1.0, 2.0]))
    return lab.dispatch_keys(w) if torch is labtorch else torch._C._dispatch_keys(w)


def test_a_subclass_key_set_in_every_view():
    ks = _wrapper_keys(labtorch)
    expected = "DispatchKeySet(CPU, Python, ADInplaceOrView, AutogradCPU, AutocastCPU, PythonTLSSnapshot)"
    assert repr(ks) == expected
    assert ks.compact() == expected  # one Autocast key: nothing to fold
    assert ks.highest_priority_key() is DispatchKey.PythonTLSSnapshot
    text = repr(lab.show_keyset(ks))
    assert text.splitlines()[1] == "highest priority key: PythonTLSSnapshot"
    assert text.splitlines()[2] == (
        "functionality bits, highest priority first: PythonTLSSnapshot (56), AutocastCPU (39), "
        "AutogradFunctionality (36), ADInplaceOrView (34), Python (28), Dense (16)"
    )
    html = ks._repr_html_()
    assert 'class="lab-bit lab-bit-on lab-bit-top" title="bit 56: PythonTLSSnapshot"' in html
    assert 'class="lab-bit lab-bit-on" title="bit 28: Python"' in html
    assert 'class="lab-bit" title="bit 29: FuncTorchDynamicLayerBackMode"' in html  # off


def test_the_tls_include_set_under_a_mode_in_every_view():
    PassThrough = _classes(labtorch)["PassThrough"]
    with PassThrough():
        include, exclude = lab.tls_include_set(), lab.tls_exclude_set()
    assert include.compact() == repr(include) == "DispatchKeySet(BackendSelect, Python, ADInplaceOrView, PythonTLSSnapshot)"
    assert exclude.compact() == "DispatchKeySet(Autocast{all 10})"  # a mode leaves the exclude set alone
    text = repr(lab.show_keyset(include, parts={"tls_include": include}))
    assert "Python (28)" in text and "PythonTLSSnapshot (56)" in text


@pytest.mark.torch
def test_key_set_bits_match_pytorchs_raw_repr(torch_ref):
    assert int(_wrapper_keys(labtorch)) == _wrapper_keys(torch_ref).raw_repr()
    assert repr(_wrapper_keys(labtorch)) == str(_wrapper_keys(torch_ref))
    with _classes(labtorch)["PassThrough"]():
        lab_include = lab.tls_include_set()
    with _classes(torch_ref)["PassThrough"]():
        ref_include = torch_ref._C._dispatch_tls_local_include_set()
    assert int(lab_include) == ref_include.raw_repr() and repr(lab_include) == str(ref_include)


# ---------------------------------------------------------------- torch.utils, torch.ops on the lab's torch


def test_torch_utils_and_torch_ops_are_reachable_from_the_labs_torch():
    from labsupport.utils import _python_dispatch, _pytree

    assert labtorch.utils._python_dispatch.TorchDispatchMode is _python_dispatch.TorchDispatchMode
    assert labtorch.utils._pytree.tree_map is _pytree.tree_map
    add = labtorch.ops.aten.add.Tensor
    assert (str(add), add.name(), add.__name__, str(add.overloadpacket)) == (
        "aten.add.Tensor", "aten::add.Tensor", "add.Tensor", "aten.add",
    )  # fmt: skip
    assert lab.ops is labtorch.ops
    assert add(labtorch.tensor([1.0]), labtorch.tensor([2.0]), alpha=3).tolist() == [7.0]


def test_func_is_lab_ops_aten_add_tensor_inside_a_handler():
    seen = []

    class Spy(labtorch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    a = labtorch.tensor([1.0, 2.0])
    with Spy():
        labtorch.add(a, a)
        labtorch.ops.aten.sum.default(a)
    assert seen[0] is lab.ops.aten.add.Tensor is labtorch.ops.aten.add.Tensor
    assert seen[1] is lab.ops.aten.sum.default


@pytest.mark.torch
def test_func_is_torch_ops_aten_add_tensor_on_pytorch_too(torch_ref):
    seen = []

    class Spy(torch_ref.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    a = torch_ref.tensor([1.0, 2.0])
    with Spy():
        torch_ref.add(a, a)
    assert seen[0] is torch_ref.ops.aten.add.Tensor


def test_lab_ops_on_a_library_operator_still_calls_through_the_dispatcher():
    lib = lab.Library("h24ops", "DEF")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: labtorch.add(x, x), "CPU")
        x = labtorch.tensor([1.0, 2.0])
        assert lab.ops.h24ops.twice(x).tolist() == [2.0, 4.0]
        assert lab.ops.h24ops.twice.default(x).tolist() == [2.0, 4.0]
        assert str(lab.ops.h24ops.twice.default) == "h24ops.twice.default"
        with lab.profiler.profile() as prof:
            lab.ops.h24ops.twice(x)
        assert prof.tree() == "h24ops::twice\n  aten::add"
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            lab.ops.h24ops.nope  # noqa: B018
    finally:
        lib.close()


def test_importing_the_labs_torch_in_a_fresh_process_in_any_order_has_no_cycle():
    import subprocess
    import sys

    for first in ("labsupport.utils", "labsupport.utils.python_arg_parser", "labsupport.utils._pytree",
                  "labsupport._ops", "labsupport.aten.tensor", "labsupport.torch"):  # fmt: skip
        code = (
            f"import {first}\nimport labsupport.torch as torch\n"
            "assert torch.utils._python_dispatch.TorchDispatchMode is not None\n"
            "assert str(torch.ops.aten.add.Tensor) == 'aten.add.Tensor'\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"import {first} first:\n{done.stderr}"


# ---------------------------------------------------------------- the KeySetExplorer's TorchDispatchMode guard


def test_the_explorer_shows_a_mode_as_python_tls_snapshot_then_autograd_then_python():
    from labsupport.tools.explorer import GUARDS, KeySetExplorer, explain_call

    assert "TorchDispatchMode" in GUARDS
    info = explain_call(requires_grad=True, guards=["TorchDispatchMode"])
    assert repr(info["tls_include"]) == "DispatchKeySet(BackendSelect, Python, ADInplaceOrView, PythonTLSSnapshot)"
    assert repr(info["key_set"]) == "DispatchKeySet(CPU, Python, AutogradCPU, PythonTLSSnapshot)"
    assert info["key"] == "PythonTLSSnapshot"
    assert info["table_row"] == (
        "PythonTLSSnapshot: registered at aten/src/ATen/core/PythonFallbackKernel.cpp:200 [backend fallback]"
    )
    assert info["chain"] == ["PythonTLSSnapshot", "AutogradCPU", "Python", "CPU"]
    assert [s["redispatch"] for s in info["steps"]] == [False, True, True, False]  # the handler's func() calls
    assert repr(info["steps"][-1]["key_set"]) == "DispatchKeySet(CPU)"
    assert info["grad_fn"] == "MyaddBackward0"  # autograd ran above the mode
    assert any("Python key, below autograd" in note for note in info["notes"])
    # below autograd, the mode still runs; a CompositeImplicitAutograd kernel runs above it, so the mode
    # never sees the call (as matmul under a mode)
    assert explain_call(guards=["AutoDispatchBelowAutograd", "TorchDispatchMode"])["chain"] == [
        "PythonTLSSnapshot", "Python", "CPU",
    ]  # fmt: skip
    assert explain_call(guards=["TorchDispatchMode"], registrations=["CompositeImplicitAutograd"])["chain"] == [
        "PythonTLSSnapshot", "AutogradCPU",
    ]  # fmt: skip
    explorer = KeySetExplorer().set(guards=["TorchDispatchMode"])
    assert explorer.change[1] == (
        "key set DispatchKeySet(CPU, AutogradCPU) → DispatchKeySet(CPU, Python, AutogradCPU, PythonTLSSnapshot)"
    )
    assert "PythonTLSSnapshot -> AutogradCPU -> Python -> CPU" in explorer.text()
    assert 'title="bit 56: PythonTLSSnapshot"' in explorer.html()
    failed = explain_call(guards=["TorchDispatchMode"], registrations=["Autograd"])  # no CPU kernel
    assert failed["chain"] == ["PythonTLSSnapshot", "AutogradCPU", "Python", "CPU"] and failed["error"]
    assert repr(lab.tls_include_set()) == "DispatchKeySet(BackendSelect, ADInplaceOrView)"  # the mode exited
    from labsupport.c10.torch_dispatch_mode_tls import stack_len

    assert stack_len() == 0


@pytest.mark.torch
def test_pytorch_runs_a_custom_ops_kernels_in_the_explorers_order_under_a_mode(torch_ref, library):
    torch = torch_ref
    ran: list[str] = []
    lib = library("h24explorer", "DEF")
    lib.define("myadd(Tensor self, Tensor other) -> Tensor")

    def cpu(a, b):
        ran.append("CPU")
        return a + b

    def autograd(ks, a, b):
        ran.append("Autograd")
        return torch.ops.h24explorer.myadd.default.redispatch(ks & torch._C._after_autograd_keyset, a, b)

    lib.impl("myadd", cpu, "CPU")
    lib.impl("myadd", autograd, "Autograd", with_keyset=True)

    class Mode(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ran.append("Python")
            self.include = torch._C._dispatch_tls_local_include_set()
            return func(*args, **(kwargs or {}))

    t = torch.zeros(2)
    with Mode() as mode:
        outer_include = torch._C._dispatch_tls_local_include_set()
        torch.ops.h24explorer.myadd(t, t)
    from labsupport.tools.explorer import explain_call

    info = explain_call(guards=["TorchDispatchMode"])
    assert ran == ["Autograd", "Python", "CPU"]
    assert [k.removesuffix("CPU") or "CPU" for k in info["chain"][1:]] == ran
    assert str(outer_include) == repr(info["tls_include"])
    assert str(mode.include) == "DispatchKeySet(BackendSelect, ADInplaceOrView)"  # the mode popped in its handler
