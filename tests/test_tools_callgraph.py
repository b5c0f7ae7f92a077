"""rec.call_graph(): DOT source, a text tree, SVG only when graphviz's dot is installed."""

from __future__ import annotations

import shutil

import pytest

import labsupport as lab
import labsupport.torch as torch
from labsupport.tools import callgraph


def _graph():
    a = torch.tensor([1.0, 2.0])
    with lab.trace() as rec:
        torch.add(a, a)
    return rec.call_graph()


def test_dot_source_is_deterministic_and_labels_dispatch_edges():
    graph = _graph()
    source = graph.source
    assert source == _graph().source
    assert source.startswith("digraph call_graph {")
    assert 'n0 [label="torch::autograd::THPVariable_add\\nbuild/torch/python_torch_functions.py:' in source
    assert '[label="DispatchKeySet(CPU, AutogradCPU)\\n-> AutogradCPU"]' in source
    assert '[label="DispatchKeySet(CPU)\\n-> CPU"]' in source


def test_text_tree_puts_key_sets_on_edges():
    text = _graph().text()
    lines = text.splitlines()
    assert lines[0].startswith("torch::autograd::THPVariable_add  (build/torch/python_torch_functions.py:")
    assert any("└── [DispatchKeySet(CPU, AutogradCPU) -> AutogradCPU] torch::autograd::VariableType::(anonymous namespace)::add_Tensor" in line
               for line in lines)  # fmt: skip
    assert any("└── [DispatchKeySet(CPU) -> CPU] at::(anonymous namespace)::wrapper_CPU_add_Tensor" in line for line in lines)
    assert lines[-1].strip().startswith("└── at::native::structured_ufunc_add_CPU::impl")
    assert text == _graph().text() == repr(_graph())


def test_without_dot_only_the_text_tree_and_how_to_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    graph = _graph()
    bundle = graph._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    tree, hint = bundle["text/plain"].rsplit("\n", 1)
    assert tree == graph.text()
    assert "apt-get install graphviz" in hint and "conda install -c conda-forge graphviz" in hint
    assert "brew install graphviz" in hint
    with pytest.raises(lab.bench.ToolMissing):
        graph.svg()


def test_with_dot_the_bundle_has_svg_and_the_same_text(monkeypatch):
    if callgraph.find_dot() is None:
        pytest.skip("graphviz's dot is not installed")
    bundle = _graph()._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    assert "<svg" in bundle["image/svg+xml"] and "AutogradCPU" in bundle["image/svg+xml"]
    assert bundle["text/plain"] == _graph().text()
    monkeypatch.setattr(callgraph, "find_dot", lambda: None)
    assert set(_graph()._repr_mimebundle_()) == {"text/plain"}
