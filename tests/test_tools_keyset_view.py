"""keyset_html / keyset_text / show_keyset: stable pictures of a DispatchKeySet."""

from __future__ import annotations

import labsupport as lab
import labsupport.torch as torch
from labsupport.tools.keyset_view import KeySetView, keyset_html, keyset_text

K = lab.DispatchKey
CPU_AUTOGRAD = lab.DispatchKeySet([K.CPU, K.AutogradCPU])


def test_html_is_byte_stable_and_marks_the_highest_key():
    html = keyset_html(CPU_AUTOGRAD)
    assert html == keyset_html(lab.DispatchKeySet.from_raw(int(CPU_AUTOGRAD)))
    assert html == CPU_AUTOGRAD._repr_html_()
    assert "<b>DispatchKeySet(CPU, AutogradCPU)</b> &nbsp;raw 0x10_0001_0001 &nbsp;highest priority key: <b>AutogradCPU</b>" in html
    assert '<span class="lab-bit lab-bit-on lab-bit-top" title="bit 36: AutogradFunctionality"' in html
    assert '<span class="lab-bit lab-bit-on lab-bit-top" title="bit 0: CPU"' in html
    assert '<span class="lab-bit lab-bit-on" title="bit 16: Dense"' in html
    assert '<span class="lab-bit" title="bit 61: PythonDispatcher"' in html
    assert html.count('class="lab-bit') == 46 + 16
    assert "0x7f" not in html and "id=" not in html
    # priority order: the highest functionality first, Dense last; Meta first among backends
    assert html.index("bit 61: PythonDispatcher") < html.index("bit 36: AutogradFunctionality") < html.index("bit 16: Dense")
    assert html.index("bit 15: Meta") < html.index("bit 0: CPU")


def test_highlight_marks_another_key():
    html = keyset_html(CPU_AUTOGRAD, highlight=K.CPU)
    assert "marked: <b>CPU</b>" in html
    assert '<span class="lab-bit lab-bit-on lab-bit-top" title="bit 16: Dense"' in html
    assert '<span class="lab-bit lab-bit-on" title="bit 36: AutogradFunctionality"' in html


def test_parts_show_where_each_bit_came_from():
    a = torch.tensor([1.0])
    with lab.trace() as rec:
        torch.add(a, a)
    call = rec.find("c10::Dispatcher::call")
    text = keyset_text(call.key_set, parts=call.parts)
    assert text.splitlines()[:4] == [
        "DispatchKeySet(CPU, AutogradCPU)  raw 0x10_0001_0001",
        "highest priority key: AutogradCPU",
        "functionality bits, highest priority first: AutogradFunctionality (36), Dense (16)",
        "backend bits, highest priority first: CPU (0)",
    ]
    lines = text.splitlines()[6:]

    def row(label):
        return next(line.strip() for line in lines if line.strip().startswith(label)).strip()[len(label) :].split()

    header = text.splitlines()[5]
    assert header.split() == ["AutocastCPU", "AutogradFunctionality", "ADInplaceOrView", "BackendSelect", "Dense", "CPU"]
    assert row("tensor keys") == ["+", "+", "+", "+", "+"]
    assert row("TLS include") == ["+", "+"]
    assert row("TLS exclude") == ["-"]
    assert row("fallthrough mask") == ["-", "-", "-"]
    assert row("= key set") == ["*", "*", "*"]
    html = keyset_html(call.key_set, parts=call.parts)
    assert '<table class="lab-keyset-parts"' in html and "&minus;" in html and "&#9679;" in html
    assert html == keyset_html(call.key_set, parts=dict(call.parts))


def test_show_keyset_gives_a_view_for_notebooks():
    view = lab.show_keyset(CPU_AUTOGRAD, parts={"tensor_keys": CPU_AUTOGRAD})
    assert isinstance(view, KeySetView)
    assert repr(view) == keyset_text(CPU_AUTOGRAD, parts={"tensor_keys": CPU_AUTOGRAD})
    assert view._repr_html_() == keyset_html(CPU_AUTOGRAD, parts={"tensor_keys": CPU_AUTOGRAD})
    empty = keyset_text(lab.DispatchKeySet())
    assert empty.splitlines()[1] == "highest priority key: (none)"


def test_the_parts_table_scrolls_inside_its_box():
    """A table of many columns scrolls inside the output instead of spilling out (1280 px windows)."""

    html = keyset_html(lab.DispatchKeySet([lab.DispatchKey.CPU]), parts={"tensor_keys": lab.DispatchKeySet([lab.DispatchKey.CPU])})
    scroll = '<div class="lab-scroll" style="overflow-x:auto;max-width:100%">\n<table class="lab-keyset-parts"'
    assert scroll in html and html.count("</table></div>") == 1
