"""``lab.KeySetExplorer()``: change a tensor, the guards and the registered kernels; watch the dispatch.

The explorer calls a small demo operator, ``explorer::myadd(Tensor self, Tensor other) -> Tensor``,
defined in a private ``Dispatcher`` (one per set of registered kernels), so it never touches the
dispatcher the lab's ``torch`` uses. Each kernel it can register only notes that it ran; the autograd
one also redispatches below autograd, like a generated VariableType kernel.

``explain_call(...)`` is the pure function behind the widget: it makes the tensor, enters the guards,
calls the operator and reports the key set of each dispatch, the chosen key and its table row.
Everything it returns is deterministic, and so are the explorer's static views: ``repr`` (text) and
``text/html``, which is what a stored notebook shows where no widget can run (GitHub, nbval).

After every change of a control the output says what changed and what that did to the dispatch, even
when nothing did: changing the dtype never changes the key set (for these dtypes), because PyTorch
handles the dtype inside the kernel, not in the dispatcher.

A saved notebook keeps a live widget only as an id of a model that lives in the kernel; reopened
with a new kernel, JupyterLab would show "Error displaying widget: model not found". ``make lab``
turns on JupyterLab's "Save Widget State Automatically" for the lab, so a saved notebook also
stores the widgets' last state and a reopened one shows the explorer as it was (re-run the cell
to make it live again). Stored notebooks in the repository keep only the static views.
"""

from __future__ import annotations

import contextlib
import functools
import html
from collections.abc import Iterable, Iterator
from typing import Any

from labsupport.autograd.grad_mode import is_grad_enabled, set_grad_enabled
from labsupport.autograd.node import Node, collect_next_edges, set_history
from labsupport.c10.dispatch_key import DispatchKey
from labsupport.c10.dispatch_key_set import (
    FUNCTIONALITY_BITS,
    DispatchKeySet,
    after_autograd_keyset,
    autograd_dispatch_keyset,
)
from labsupport.c10.dispatcher import Dispatcher, DispatchEvent, observers
from labsupport.c10.kernel_function import fallthrough_kernel
from labsupport.c10.library import Library
from labsupport.c10.operator_entry import OperatorEntry
from labsupport.c10.tls import (
    AutoDispatchBelowADInplaceOrView,
    AutoDispatchBelowAutograd,
    ForceDispatchKeyGuard,
    tls,
)
from labsupport.tools.keyset_view import keyset_html

__all__ = [
    "DEFAULT_REGISTRATIONS", "DEVICES", "DTYPES", "DTYPE_NOTE", "GUARDS", "REGISTRATIONS", "SCHEMA",
    "KeySetExplorer", "describe_change", "explain_call",
]  # fmt: skip

SCHEMA = "myadd(Tensor self, Tensor other) -> Tensor"
DEVICES = ("cpu", "cuda", "meta")
DTYPES = ("float32", "float64", "int64", "bool")
# TorchDispatchMode: a pass-through mode (torch.utils._python_dispatch) entered around the call; it puts
# Python and PythonTLSSnapshot in the TLS include set, so the call starts at PythonTLSSnapshot.
GUARDS = ("AutoDispatchBelowAutograd", "AutoDispatchBelowADInplaceOrView", "InferenceMode", "TorchDispatchMode")
REGISTRATIONS = (
    "CPU", "CUDA", "Meta", "Autograd", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
    "fallthrough AutogradCPU",
)  # fmt: skip
DEFAULT_REGISTRATIONS = ("CPU", "CUDA", "Meta", "Autograd")
# Checked against PyTorch 2.13 in tests/test_tools_explorer.py: float32, float64, int64 and bool CPU
# tensors carry the same key set; a quantized tensor (qint8) carries QuantizedCPU instead of CPU. For
# add, the CPU kernel torchgen writes (torchgen/dest/ufunc.py) switches on
# AT_DISPATCH_SWITCH(iter.common_dtype(), ...) inside the kernel.
DTYPE_NOTE = (
    "dtype is not a dispatch key: PyTorch's dispatcher picks the same kernel for every dtype listed here, "
    "and the kernel switches on the dtype itself (ATen's AT_DISPATCH_* macros). Quantized dtypes are the "
    "exception: a qint8 tensor carries QuantizedCPU instead of CPU."
)
SCROLL = "overflow-x:auto;max-width:100%"


class MyaddBackward0(Node):
    """The grad_fn the demo autograd kernel records: d(a + b) = (grad, grad)."""

    def apply(self, grads: list[Any]) -> list[Any]:
        return [grads[0], grads[0]]


def _output_like(t: Any) -> Any:
    return type(t)._make(t._data, t._sizes, t._dtype, t._device)


@functools.cache
def _demo(registrations: frozenset[str]) -> tuple[Dispatcher, OperatorEntry, Library]:
    """A private dispatcher holding explorer::myadd with the chosen kernels (kept for reuse)."""
    d = Dispatcher("explorer[" + ",".join(r for r in REGISTRATIONS if r in registrations) + "]")
    lib = Library("explorer", "DEF", dispatcher=d)
    lib.define(SCHEMA)
    op = d.find_schema_or_throw("explorer::myadd")

    def myadd_cpu(self: Any, other: Any) -> Any:
        return _output_like(self)

    def myadd_cuda(self: Any, other: Any) -> Any:
        return _output_like(self)

    def myadd_meta(self: Any, other: Any) -> Any:
        return _output_like(self)

    def myadd_math(self: Any, other: Any) -> Any:
        return _output_like(self)

    def myadd_default(self: Any, other: Any) -> Any:
        return _output_like(self)

    def myadd_autograd(ks: DispatchKeySet, self: Any, other: Any) -> Any:
        """Like VariableType: record a grad_fn if needed, step below autograd, redispatch."""
        needs_grad = (self.requires_grad or other.requires_grad) and is_grad_enabled()
        with AutoDispatchBelowADInplaceOrView():
            result = op.redispatch(ks & after_autograd_keyset, self, other)
        if needs_grad:
            node = MyaddBackward0()
            node.next_functions = collect_next_edges(self, other)
            set_history(result, node)
        return result

    kernels = {
        "CPU": myadd_cpu, "CUDA": myadd_cuda, "Meta": myadd_meta,
        "CompositeImplicitAutograd": myadd_math, "CompositeExplicitAutograd": myadd_default,
    }  # fmt: skip
    for name in REGISTRATIONS:
        if name not in registrations:
            continue
        if name == "Autograd":
            lib.impl("myadd", myadd_autograd, "Autograd", with_keyset=True)
        elif name == "fallthrough AutogradCPU":
            lib.impl("myadd", fallthrough_kernel, "AutogradCPU")
        else:
            lib.impl("myadd", kernels[name], name)
    return d, op, lib


def _tensor(device: str, dtype: str, requires_grad: bool) -> Any:
    import numpy as np

    from labsupport.aten import dtype as dtypes
    from labsupport.aten.tensor import TensorBase, tensor_device

    dt = getattr(dtypes, dtype)
    dev = tensor_device(device)
    data = None if dev.type == "meta" else np.zeros(2, dt.np)
    return TensorBase._make(data, (2,), dt, dev, requires_grad)


@contextlib.contextmanager
def _inference_mode_like() -> Iterator[None]:
    """c10::InferenceMode's TLS change: ADInplaceOrView leaves the include set, the autograd keys
    join the exclude set, grad mode goes off."""
    included, excluded = tls.included, tls.excluded
    include = DispatchKeySet.from_raw(included) - DispatchKeySet(DispatchKey.ADInplaceOrView)
    exclude = DispatchKeySet.from_raw(excluded | int(autograd_dispatch_keyset))
    with ForceDispatchKeyGuard(include, exclude), set_grad_enabled(False):
        yield


def _pass_through_mode() -> Any:
    """A ``TorchDispatchMode`` whose handler only calls ``func`` (imported here: tools load before it)."""
    from labsupport.utils._python_dispatch import TorchDispatchMode

    class PassThroughMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    return PassThroughMode()


class _Collector:
    """A dispatcher observer keeping the dispatches of one operator."""

    def __init__(self, op: OperatorEntry) -> None:
        self.op = op
        self.events: list[DispatchEvent] = []

    def on_enter(self, event: DispatchEvent) -> None:
        if event.op is self.op:
            self.events.append(event)

    def on_exit(self, event: DispatchEvent) -> None:
        pass


def _check(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def explain_call(
    device: str = "cpu",
    dtype: str = "float32",
    requires_grad: bool = False,
    guards: Iterable[str] = (),
    registrations: Iterable[str] = DEFAULT_REGISTRATIONS,
) -> dict[str, Any]:
    """Call ``explorer::myadd(t, t)`` for a tensor made from the arguments and report its dispatch.

    Returns a dict with the settings, the parts of the first key set (``tensor_keys``,
    ``tls_include``, ``tls_exclude``, ``fallthrough_mask``, ``masked_out``), the ``key_set`` it used,
    the chosen ``key``, its ``kernel``, ``label`` and dump-table ``table_row``, every dispatch in
    ``steps`` and their keys in ``chain`` (e.g. ``["AutogradCPU", "CPU"]``), the ``grad_fn`` of the
    result, and ``error`` (the first line of the message) when the call fails.
    """
    guards = tuple(g for g in GUARDS if g in set(guards))
    wanted = set(registrations)
    for name in wanted:
        _check("a registration", name, REGISTRATIONS)
    regs = tuple(r for r in REGISTRATIONS if r in wanted)
    _check("device", device, DEVICES)
    _check("dtype", dtype, DTYPES)
    _, op, _ = _demo(frozenset(regs))
    t = _tensor(device, dtype, bool(requires_grad))
    collector = _Collector(op)
    error = None
    result = None
    observers.add(collector)
    try:
        with contextlib.ExitStack() as stack:
            if "AutoDispatchBelowAutograd" in guards:
                stack.enter_context(AutoDispatchBelowAutograd())
            if "AutoDispatchBelowADInplaceOrView" in guards:
                stack.enter_context(AutoDispatchBelowADInplaceOrView())
            if "InferenceMode" in guards:
                stack.enter_context(_inference_mode_like())
            if "TorchDispatchMode" in guards:
                stack.enter_context(_pass_through_mode())
            result = op.call(t, t)
    except Exception as exc:  # a missing kernel or the meta fallback: report, do not raise
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    finally:
        observers.remove(collector)
    wrap = DispatchKeySet.from_raw
    steps = [
        {
            "key_set": wrap(e.key_set), "key": e.key.name, "kernel": e.entry.kernel_name, "label": e.entry.label,
            "redispatch": e.redispatch,
        }
        for e in collector.events
    ]  # fmt: skip
    first = collector.events[0]
    before_mask = (first.tensor_keys | first.included) & ~(first.excluded & FUNCTIONALITY_BITS)
    info: dict[str, Any] = {
        "device": device, "dtype": dtype, "requires_grad": bool(requires_grad), "guards": guards,
        "registrations": regs,
        "tensor_keys": wrap(first.tensor_keys), "tls_include": wrap(first.included),
        "tls_exclude": wrap(first.excluded), "fallthrough_mask": wrap(first.mask),
        "masked_out": wrap(before_mask & ~first.mask),
        "key_set": wrap(first.key_set), "key": first.key.name, "kernel": first.entry.kernel_name,
        "label": first.entry.label, "table_row": _table_row(first),
        "steps": steps, "chain": [s["key"] for s in steps],
        "grad_fn": None if result is None or result.grad_fn is None else result.grad_fn.name(),
        "error": error, "notes": _notes(device, dtype, requires_grad, guards, steps),
    }  # fmt: skip
    return info


def _table_row(event: DispatchEvent) -> str:
    entry = event.entry
    if entry.label == "missing":
        return f"{event.key.name}: (no kernel, no fallback)"
    return f"{event.key.name}: {entry.kernel_name} [{entry.label}]"


def _notes(device: str, dtype: str, requires_grad: bool, guards: tuple[str, ...], steps: list[dict]) -> list[str]:
    notes = []
    if requires_grad and dtype in ("int64", "bool"):
        notes.append("PyTorch refuses requires_grad=True on integer and bool tensors; the key set is the same anyway.")
    if steps and steps[0]["key"].startswith("Autograd"):
        notes.append("requires_grad does not change the key set: the autograd kernel runs either way and only "
                     "records a grad_fn when an input requires grad.")  # fmt: skip
    if "InferenceMode" in guards:
        notes.append("InferenceMode here changes the thread-local sets only; tensors created inside it would "
                     "also lose their autograd keys.")  # fmt: skip
    if "TorchDispatchMode" in guards and any(s["key"] == "Python" for s in steps):
        notes.append("The mode's handler runs at the Python key, below autograd; its func(...) dispatches again "
                     "with the mode popped and every key above Python excluded.")  # fmt: skip
    return notes


_SETTINGS = ("device", "dtype", "requires_grad", "guards", "registrations")


def _show_setting(value: Any) -> str:
    if isinstance(value, tuple):
        return ", ".join(value) or "(none)"
    return str(value)


def describe_change(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What changed between two ``explain_call`` results and what that did to the dispatch, in a few
    lines (the explorer shows them after every change, even when the key set stays the same)."""
    changed = [f"{name} {_show_setting(before[name])} → {_show_setting(after[name])}"
               for name in _SETTINGS if before[name] != after[name]]  # fmt: skip
    if not changed:
        return []
    lines = ["changed: " + "; ".join(changed)]
    same_keys = before["key_set"] == after["key_set"]
    same_chain = before["chain"] == after["chain"] and before["kernel"] == after["kernel"]
    if same_keys and same_chain:
        lines.append(f"same key set {after['key_set'].compact()}, same dispatches: {' -> '.join(after['chain'])}")
    else:
        if not same_keys:
            lines.append(f"key set {before['key_set'].compact()} → {after['key_set'].compact()}")
        chains = (" -> ".join(info["chain"]) or "(none)" for info in (before, after))
        lines.append("dispatches {} → {}".format(*chains))
    if before["dtype"] != after["dtype"]:
        lines.append(DTYPE_NOTE)
    return lines


# ---------------------------------------------------------------------------- rendering

_ROWS = (
    ("tensor keys", "tensor_keys"), ("TLS include", "tls_include"), ("TLS exclude", "tls_exclude"),
    ("masked out (fallthrough)", "masked_out"), ("key set", "key_set"),
)  # fmt: skip


FULL_SETS_NOTE = "Autocast{...}: the Autocast keys folded; .text(full=True) lists them all"


def explain_text(info: dict[str, Any], change: list[str] | None = None, full: bool = False) -> str:
    """A stable text summary of an ``explain_call`` result (after ``change``, the lines of
    ``describe_change``, when given). Key sets are shown with ``DispatchKeySet.compact()``, which
    folds the ten Autocast keys into one item; ``full=True`` prints them as PyTorch does."""
    w = 24
    lines = [f"  {line}" for line in change or ()]
    lines += [
        f"explorer::{SCHEMA}",
        f"  {'tensor':<{w}} device={info['device']} dtype={info['dtype']} requires_grad={info['requires_grad']}",
        f"  {'guards':<{w}} {', '.join(info['guards']) or '(none)'}",
        f"  {'kernels':<{w}} {', '.join(info['registrations']) or '(none)'}",
    ]
    shown = [(label, repr(info[key]) if full else info[key].compact()) for label, key in _ROWS]
    lines.extend(f"  {label:<{w}} {text}" for label, text in shown)
    lines.append(f"  {'chosen key':<{w}} {info['key']}")
    lines.append(f"  {'table row':<{w}} {info['table_row']}")
    lines.append(f"  {'dispatches':<{w}} {' -> '.join(info['chain'])}")
    if info["grad_fn"]:
        lines.append(f"  {'grad_fn':<{w}} {info['grad_fn']}")
    if info["error"]:
        lines.append(f"  {'error':<{w}} {info['error']}")
    lines.extend(f"  note: {note}" for note in info["notes"])
    if not full and any(text != repr(info[key]) for (_, text), (_, key) in zip(shown, _ROWS)):
        lines.append(f"  ({FULL_SETS_NOTE})")
    return "\n".join(lines)


def explain_html(info: dict[str, Any], change: list[str] | None = None) -> str:
    """The explorer's output panel as static HTML (the live widget shows the same markup, after the
    lines of ``describe_change`` when a control changed). Wide tables scroll inside their box."""
    esc = html.escape
    first_parts = {
        "tensor_keys": info["tensor_keys"], "tls_include": info["tls_include"],
        "tls_exclude": info["tls_exclude"], "fallthrough_mask": info["fallthrough_mask"],
    }  # fmt: skip
    cell = "border:1px solid #dddddd;padding:1px 6px;text-align:left"
    rows = "".join(
        f'<tr><td style="{cell}">{i}</td><td style="{cell}">{"redispatch" if s["redispatch"] else "call"}</td>'
        f'<td style="{cell}" title="{esc(repr(s["key_set"]))}">{esc(s["key_set"].compact())}</td>'
        f'<td style="{cell}"><b>{esc(s["key"])}</b></td>'
        f'<td style="{cell}">{esc(s["kernel"])} [{esc(s["label"])}]</td></tr>'
        for i, s in enumerate(info["steps"])
    )
    out = ['<div class="lab-explorer-keyset" style="font-family:monospace;font-size:12px;max-width:100%">']
    if change:
        out.append(
            '<div class="lab-explorer-change" style="background:#fff6d5;border-left:3px solid #e0b000;'
            'padding:2px 6px;margin-bottom:4px;white-space:normal">'
            + "".join(f"<div>{esc(line)}</div>" for line in change)
            + "</div>"
        )
    out += [
        keyset_html(info["key_set"], parts=first_parts, highlight=DispatchKey[info["key"]]),
        f'<div class="lab-explorer-row">table row: <b>{esc(info["table_row"])}</b></div>',
        f'<div class="lab-scroll" style="{SCROLL}">',
        '<table class="lab-explorer-steps" style="border-collapse:collapse;margin-top:4px">',
        f'<tr><th style="{cell}">#</th><th style="{cell}">how</th><th style="{cell}">key set</th>'
        f'<th style="{cell}">key</th><th style="{cell}">kernel</th></tr>',
        rows,
        "</table></div>",
    ]
    if info["grad_fn"]:
        out.append(f'<div class="lab-explorer-grad-fn">grad_fn: {esc(info["grad_fn"])}</div>')
    if info["error"]:
        out.append(f'<div class="lab-explorer-error" style="color:#c44e52">{esc(info["error"])}</div>')
    out.extend(f'<div class="lab-explorer-note" style="color:#555555">{esc(n)}</div>' for n in info["notes"])
    out.append("</div>")
    return "\n".join(out)


def _css(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower())


class KeySetExplorer:
    """An ipywidgets explorer of ``explain_call``; static text/HTML views for stored notebooks.

    Controls carry descriptions and CSS classes a browser test can find: ``device`` / ``dtype``
    dropdowns (``lab-explorer-device``, ``lab-explorer-dtype``), the ``requires_grad`` checkbox, one
    checkbox per guard (``lab-explorer-guard-<name>``) and per kernel (``lab-explorer-reg-<name>``),
    and the output (``lab-explorer-output``, holding a ``lab-explorer-keyset`` div). The output is an
    ``ipywidgets.HTML`` whose value is replaced on every change (nothing is printed).
    """

    def __init__(
        self,
        device: str = "cpu",
        dtype: str = "float32",
        requires_grad: bool = False,
        guards: Iterable[str] = (),
        registrations: Iterable[str] = DEFAULT_REGISTRATIONS,
    ) -> None:
        self.state: dict[str, Any] = {
            "device": device, "dtype": dtype, "requires_grad": bool(requires_grad),
            "guards": tuple(guards), "registrations": tuple(registrations),
        }  # fmt: skip
        self.info = explain_call(**self.state)  # validates the arguments too
        self.change: list[str] = []  # what the last change did (describe_change)
        self._widget: Any = None
        self._controls: dict[str, Any] = {}
        self._output: Any = None

    # ---- the pure side
    def explain(self) -> dict[str, Any]:
        return self.info

    def set(self, **changes: Any) -> KeySetExplorer:
        """Change settings from code (``device=``, ``dtype=``, ``requires_grad=``, ``guards=``,
        ``registrations=``); the widget, if shown, follows."""
        unknown = set(changes) - set(self.state)
        if unknown:
            raise TypeError(f"unknown settings {sorted(unknown)}; use {sorted(self.state)}")
        state = dict(self.state, **changes)
        state["guards"], state["registrations"] = tuple(state["guards"]), tuple(state["registrations"])
        info = explain_call(**state)
        self.change = describe_change(self.info, info)
        self.info, self.state = info, state
        if self._widget is not None:
            self._push_to_widgets()
        return self

    def text(self, full: bool = False) -> str:
        """The static text view; key sets in their compact form, or as PyTorch prints them (``full=True``)."""
        return "KeySetExplorer (interactive in JupyterLab)\n" + explain_text(self.info, self.change, full)

    def __repr__(self) -> str:
        return self.text()

    def html(self) -> str:
        return f'<div class="lab-explorer-static">{explain_html(self.info, self.change)}</div>'

    # ---- the widget
    @property
    def widget(self) -> Any:
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def _build(self) -> Any:
        import ipywidgets as widgets

        wide = {"description_width": "initial"}
        c: dict[str, Any] = {}
        c["device"] = widgets.Dropdown(options=DEVICES, value=self.state["device"], description="device", style=wide)
        c["dtype"] = widgets.Dropdown(options=DTYPES, value=self.state["dtype"], description="dtype", style=wide)
        c["requires_grad"] = widgets.Checkbox(
            value=self.state["requires_grad"], description="requires_grad", indent=False
        )
        for name in ("device", "dtype"):
            c[name].add_class(f"lab-explorer-{name}")
        c["requires_grad"].add_class("lab-explorer-requires-grad")
        for name in GUARDS:
            box = c[f"guard:{name}"] = widgets.Checkbox(
                value=name in self.state["guards"], description=name, indent=False
            )
            box.add_class(f"lab-explorer-guard-{_css(name)}")
        for name in REGISTRATIONS:
            box = c[f"reg:{name}"] = widgets.Checkbox(
                value=name in self.state["registrations"], description=name, indent=False
            )
            box.add_class(f"lab-explorer-reg-{_css(name)}")
        self._output = widgets.HTML(value=explain_html(self.info, self.change), layout=widgets.Layout(width="100%"))
        self._output.add_class("lab-explorer-output")
        for control in c.values():
            control.observe(self._on_change, names="value")
        self._controls = c
        wrap = widgets.Layout(flex_flow="row wrap")
        root = widgets.VBox(
            [
                widgets.HBox([c["device"], c["dtype"], c["requires_grad"]], layout=wrap),
                widgets.HTML(value="<b>guards</b>"),
                widgets.HBox([c[f"guard:{n}"] for n in GUARDS], layout=wrap),
                widgets.HTML(value=f"<b>kernels registered for explorer::{html.escape(SCHEMA)}</b>"),
                widgets.HBox([c[f"reg:{n}"] for n in REGISTRATIONS], layout=wrap),
                self._output,
            ]
        )
        root.add_class("lab-explorer")
        return root

    def _on_change(self, change: Any) -> None:
        c = self._controls
        state = {
            "device": c["device"].value, "dtype": c["dtype"].value, "requires_grad": c["requires_grad"].value,
            "guards": tuple(n for n in GUARDS if c[f"guard:{n}"].value),
            "registrations": tuple(n for n in REGISTRATIONS if c[f"reg:{n}"].value),
        }  # fmt: skip
        if state == self.state:
            return
        info = explain_call(**state)
        self.change = describe_change(self.info, info)
        self.state, self.info = state, info
        self._output.value = explain_html(self.info, self.change)

    def _push_to_widgets(self) -> None:
        c = self._controls
        with contextlib.ExitStack() as stack:
            for control in c.values():
                stack.callback(control.observe, self._on_change, names="value")
                control.unobserve(self._on_change, names="value")
            c["device"].value, c["dtype"].value = self.state["device"], self.state["dtype"]
            c["requires_grad"].value = self.state["requires_grad"]
            for n in GUARDS:
                c[f"guard:{n}"].value = n in self.state["guards"]
            for n in REGISTRATIONS:
                c[f"reg:{n}"].value = n in self.state["registrations"]
        self._output.value = explain_html(self.info, self.change)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The live widget plus stable ``text/plain`` and ``text/html`` (what nbval compares)."""
        bundle: dict[str, Any] = {}
        try:
            bundle.update(self.widget._repr_mimebundle_() or {})
        except Exception:  # no ipywidgets or no frontend: the static views still work
            bundle = {}
        bundle["text/plain"] = self.text()
        bundle["text/html"] = self.html()
        return bundle
