"""explain_call and KeySetExplorer: the dispatch of a demo op in a private dispatcher."""

from __future__ import annotations

import pytest

import labsupport as lab
from labsupport.c10.dispatcher import dispatcher as default_dispatcher
from labsupport.c10.dispatcher import observers
from labsupport.tools.explorer import REGISTRATIONS, KeySetExplorer, explain_call


def test_cpu_float_requires_grad_goes_through_autograd():
    info = explain_call("cpu", "float32", True)
    assert info["key"] == "AutogradCPU" and info["chain"] == ["AutogradCPU", "CPU"]
    assert repr(info["key_set"]) == "DispatchKeySet(CPU, AutogradCPU)"
    assert repr(info["tensor_keys"]) == "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    assert repr(info["masked_out"]) == "DispatchKeySet(BackendSelect, ADInplaceOrView)"
    assert info["table_row"] == "AutogradCPU: myadd_autograd [autograd kernel]"
    assert info["grad_fn"] == "MyaddBackward0" and info["error"] is None
    assert explain_call("cpu", "float32", False)["grad_fn"] is None
    assert explain_call("cpu", "float32", False)["chain"] == ["AutogradCPU", "CPU"]  # same keys either way


def test_guards_change_the_chosen_key():
    assert explain_call(guards=["AutoDispatchBelowAutograd"])["key"] == "CPU"
    assert explain_call(guards=["AutoDispatchBelowADInplaceOrView"])["chain"] == ["CPU"]
    inference = explain_call(guards=["InferenceMode"], requires_grad=True)
    assert inference["chain"] == ["CPU"] and inference["grad_fn"] is None
    assert "ADInplaceOrView" not in repr(inference["tls_include"])
    assert lab.tls_include_set() == lab.DispatchKeySet([lab.DispatchKey.BackendSelect, lab.DispatchKey.ADInplaceOrView])


def test_meta_goes_through_autograd_meta_then_meta():
    info = explain_call("meta", "float32", False)
    assert info["chain"] == ["AutogradMeta", "Meta"]
    no_meta_kernel = explain_call("meta", registrations=["CPU", "Autograd"])
    assert no_meta_kernel["chain"] == ["AutogradMeta", "Meta"]
    assert no_meta_kernel["error"].startswith("NotImplementedError: explorer::myadd: attempted to run this operator with Meta")


def test_registrations_change_the_table():
    assert explain_call(registrations=["CPU", "fallthrough AutogradCPU"])["chain"] == ["CPU"]
    fallback = explain_call(registrations=["CPU"])
    assert fallback["label"] == "backend fallback" and fallback["chain"] == ["AutogradCPU", "CPU"]
    math = explain_call(registrations=["CompositeImplicitAutograd"])
    assert math["table_row"] == "AutogradCPU: myadd_math [math kernel]" and math["chain"] == ["AutogradCPU"]
    default = explain_call("cuda", registrations=["CompositeExplicitAutograd"])
    assert default["chain"] == ["AutogradCUDA", "CUDA"] and default["steps"][1]["label"] == "default backend kernel"
    missing = explain_call(registrations=[])
    assert missing["error"].startswith("NotImplementedError: Could not run 'explorer::myadd'")
    with pytest.raises(ValueError, match="device must be one of cpu, cuda, meta"):
        explain_call("xla")


def test_the_default_dispatcher_is_untouched():
    before = set(default_dispatcher.operators)
    explain_call(registrations=REGISTRATIONS)
    assert set(default_dispatcher.operators) == before
    assert not any(name.startswith("explorer::") for name in default_dispatcher.operators)
    assert not observers.active


def test_static_views_are_stable():
    first, second = KeySetExplorer(requires_grad=True), KeySetExplorer(requires_grad=True)
    assert repr(first) == repr(second) and first.html() == second.html()
    text = repr(first)
    assert text.splitlines()[:2] == ["KeySetExplorer (interactive in JupyterLab)",
                                     "explorer::myadd(Tensor self, Tensor other) -> Tensor"]  # fmt: skip
    assert "  chosen key               AutogradCPU" in text
    assert "  dispatches               AutogradCPU -> CPU" in text
    assert 'class="lab-explorer-keyset"' in first.html()


def test_mimebundle_has_widget_and_stable_fallbacks(capsys):
    explorer = KeySetExplorer()
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == repr(explorer)
    assert bundle["text/html"] == explorer.html()
    assert capsys.readouterr().out == ""


def test_widget_controls_are_findable_and_update_the_output(capsys):
    explorer = KeySetExplorer()
    root = explorer.widget
    assert "lab-explorer" in root._dom_classes
    controls = explorer._controls
    assert controls["device"].description == "device" and "lab-explorer-device" in controls["device"]._dom_classes
    assert controls["dtype"].description == "dtype"
    assert controls["reg:fallthrough AutogradCPU"]._dom_classes == ("lab-explorer-reg-fallthrough-autogradcpu",)
    assert "lab-explorer-guard-autodispatchbelowautograd" in controls["guard:AutoDispatchBelowAutograd"]._dom_classes
    output = explorer._output
    assert "lab-explorer-output" in output._dom_classes and 'class="lab-explorer-keyset"' in output.value
    controls["device"].value = "meta"
    assert explorer.info["chain"] == ["AutogradMeta", "Meta"]
    assert "AutogradMeta: myadd_autograd [autograd kernel]" in output.value
    controls["guard:AutoDispatchBelowAutograd"].value = True
    assert explorer.info["chain"] == ["Meta"]
    explorer.set(device="cpu", guards=())
    assert controls["device"].value == "cpu" and not controls["guard:AutoDispatchBelowAutograd"].value
    assert explorer.info["chain"] == ["AutogradCPU", "CPU"] and "AutogradCPU" in output.value
    assert capsys.readouterr().out == ""
