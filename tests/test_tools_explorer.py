"""explain_call and KeySetExplorer: the dispatch of a demo op in a private dispatcher."""

from __future__ import annotations

import re

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


def test_changing_the_dtype_says_the_key_set_stays_the_same(capsys):
    explorer = KeySetExplorer()
    controls, output = explorer.widget and explorer._controls, explorer._output
    assert 'class="lab-explorer-change"' not in output.value  # nothing changed yet
    controls["dtype"].value = "float64"
    assert explorer.info["key_set"] == KeySetExplorer().info["key_set"]
    assert explorer.change[:2] == [
        "changed: dtype float32 → float64",
        "same key set DispatchKeySet(CPU, AutogradCPU), same dispatches: AutogradCPU -> CPU",
    ]
    assert "dtype is not a dispatch key" in explorer.change[2] and "AT_DISPATCH" in explorer.change[2]
    assert 'class="lab-explorer-change"' in output.value and "dtype float32 → float64" in output.value
    assert "dtype is not a dispatch key" in repr(explorer) and "dtype is not a dispatch key" in explorer.html()
    controls["device"].value = "meta"  # a change that does move the key set says how
    assert explorer.change == [
        "changed: device cpu → meta",
        "key set DispatchKeySet(CPU, AutogradCPU) → DispatchKeySet(Meta, AutogradMeta)",
        "dispatches AutogradCPU -> CPU → AutogradMeta -> Meta",
    ]
    assert capsys.readouterr().out == ""


def test_set_from_code_reports_the_change_too():
    explorer = KeySetExplorer().set(dtype="bool")
    assert explorer.change[0] == "changed: dtype float32 → bool" and "AT_DISPATCH" in explorer.change[-1]
    assert explorer.set(dtype="bool").change == []  # no change, nothing to say


def test_wide_tables_scroll_inside_their_box():
    html = KeySetExplorer(requires_grad=True).html()
    for table in ("lab-explorer-steps", "lab-keyset-parts"):
        wrapped = rf'<div class="lab-scroll" style="overflow-x:auto;max-width:100%">\s*<table class="{table}"'
        assert re.search(wrapped, html), table


@pytest.mark.torch
def test_pytorch_dispatches_these_dtypes_on_the_same_key_set(torch_ref):
    """The claim behind the dtype note: in PyTorch 2.13 the explorer's dtypes share one key set (the
    kernel handles the dtype); a quantized dtype changes the backend key."""
    import warnings

    from labsupport.tools.explorer import DTYPES

    torch = torch_ref
    key_sets = {str(torch._C._dispatch_keys(torch.zeros(2, dtype=getattr(torch, name)))) for name in DTYPES}
    assert key_sets == {"DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensor creation is deprecated in 2.13
        q = torch.quantize_per_tensor(torch.zeros(2), 1.0, 0, torch.qint8)
    assert "QuantizedCPU" in str(torch._C._dispatch_keys(q)) and "DispatchKeySet(CPU" not in str(torch._C._dispatch_keys(q))


def test_text_view_folds_the_autocast_keys_and_keeps_the_full_sets_one_call_away():
    explorer = KeySetExplorer(device="cuda", guards=["AutoDispatchBelowAutograd"])
    exclude = explorer.info["tls_exclude"]
    short, full = explorer.text(), explorer.text(full=True)
    assert repr(explorer) == short
    assert f"  TLS exclude              {exclude.compact()}" in short.splitlines()
    assert "Autocast{all 10}" in exclude.compact() and "AutocastCPU" not in short
    assert "Autocast{...}: the Autocast keys folded; .text(full=True) lists them all" in short
    assert f"  TLS exclude              {exclude!r}" in full.splitlines()
    assert "AutocastPrivateUse1" in full and "Autocast{" not in full
    # the HTML step table shows the compact set and carries the full one as the cell's tooltip
    page = explorer.html()
    step = explorer.info["steps"][0]["key_set"]
    assert f'title="{step!r}">{step.compact()}</td>' in page

