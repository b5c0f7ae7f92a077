"""Pictures of a DispatchKeySet: its 46 functionality bits and 16 backend bits, highest priority first.

``keyset_html(ks)`` is what ``DispatchKeySet._repr_html_`` shows in a notebook; ``keyset_text(ks)``
the same in plain text. Given ``parts`` (the pieces ``Dispatcher::call`` combines: tensor keys,
TLS include, TLS exclude, fallthrough mask) both also show where each bit of the result came from.
The output depends only on the arguments (no ids, no times), so stored notebooks compare equal.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping

from labsupport.c10.dispatch_key import (
    BACKENDS,
    FUNCTIONALITIES,
    NUM_BACKENDS,
    DispatchKey,
    parse_dispatch_key,
    to_backend_component,
    to_functionality_key,
)
from labsupport.c10.dispatch_key_set import DispatchKeySet, highest_priority_key

__all__ = ["KeySetView", "keyset_html", "keyset_text", "show_keyset"]

KeyLike = DispatchKey | str

# (bit number, name) of every bit, highest priority first: functionality bits, then backend bits.
FUNCTIONALITY_BITS: tuple[tuple[int, str], ...] = tuple(
    (NUM_BACKENDS + value - 1, name) for value, name in reversed(list(enumerate(FUNCTIONALITIES, start=1)))
)
BACKEND_BITS: tuple[tuple[int, str], ...] = tuple((i, name) for i, name in reversed(list(enumerate(BACKENDS))))
ALL_BITS = FUNCTIONALITY_BITS + BACKEND_BITS
_FUNCTIONALITY_MASK = ((1 << len(FUNCTIONALITIES)) - 1) << NUM_BACKENDS

_CHIP = "display:inline-block;margin:1px;padding:0 3px;border-radius:3px;border:1px solid {border};{colors}"
_ON = "background:#4c72b0;color:#ffffff"
_OFF = "background:#f2f2f2;color:#9a9a9a"
_TOP = "background:#c44e52;color:#ffffff;font-weight:bold"


def raw_hex(raw: int) -> str:
    """``0x94_0001_0001``: the raw 64 bits, grouped by four hex digits (readable, and not mistaken
    for a memory address by output sanitizers)."""
    return f"{raw:#_x}"


def _raw(ks: int) -> int:
    return int(ks)


def _highlight_bits(ks: int, highlight: KeyLike | Iterable[KeyLike] | None) -> tuple[int, list[str]]:
    """The bits to mark and the names of the marked keys (default: the highest-priority key)."""
    if highlight is None:
        key = highest_priority_key(ks)
        keys = [] if key is DispatchKey.Undefined or key.name.startswith("StartOf") else [key]
    elif isinstance(highlight, (DispatchKey, str)):
        keys = [parse_dispatch_key(highlight)]
    else:
        keys = [parse_dispatch_key(k) for k in highlight]
    bits = 0
    for key in keys:
        functionality = to_functionality_key(key)
        if functionality.value:
            bits |= 1 << (NUM_BACKENDS + functionality.value - 1)
        backend = int(to_backend_component(key))
        if backend:
            bits |= 1 << (backend - 1)
    return bits, [k.name for k in keys]


# The dispatcher's names for the parts of a call's key set, as the notebooks spell them.
_PART_LABELS = {
    "tensor_keys": "tensor keys",
    "tls_include": "TLS include",
    "tls_exclude": "TLS exclude",
    "fallthrough_mask": "fallthrough mask",
    "from_caller": "from the caller",
}


def _part_role(name: str) -> str:
    """How a part acts on the key set: ``add`` (tensor keys, include), ``remove`` (exclude), ``keep`` (mask)."""
    lowered = name.lower()
    if "exclude" in lowered:
        return "remove"
    if "mask" in lowered:
        return "keep"
    return "add"


def _provenance(ks: int, parts: Mapping[str, int]) -> tuple[list[tuple[int, str]], list[tuple[str, list[str]]]]:
    """Columns (bits that any adding part or the result sets) and one row of marks per part."""
    relevant = ks
    for name, value in parts.items():
        if _part_role(name) == "add":
            relevant |= _raw(value)
    columns = [(bit, name) for bit, name in ALL_BITS if relevant >> bit & 1]
    rows: list[tuple[str, list[str]]] = []
    for name, value in parts.items():
        raw, role = _raw(value), _part_role(name)
        marks = []
        for bit, _ in columns:
            has = raw >> bit & 1
            if role == "add":
                marks.append("+" if has else "")
            elif role == "remove":  # "a - b" clears functionality bits only
                marks.append("-" if has and (1 << bit) & _FUNCTIONALITY_MASK else "")
            else:
                marks.append("" if has else "-")
        rows.append((_PART_LABELS.get(name, name), marks))
    rows.append(("= key set", ["*" if ks >> bit & 1 else "" for bit, _ in columns]))
    return columns, rows


def keyset_text(
    ks: int, *, parts: Mapping[str, int] | None = None, highlight: KeyLike | Iterable[KeyLike] | None = None
) -> str:
    """A plain-text picture of ``ks`` (see ``keyset_html``)."""
    raw = _raw(ks)
    _, marked = _highlight_bits(raw, highlight)
    lines = [f"{DispatchKeySet.from_raw(raw)!r}  raw {raw_hex(raw)}"]
    label = "highest priority key" if highlight is None else "marked"
    lines.append(f"{label}: {', '.join(marked) if marked else '(none)'}")
    for title, bits in (("functionality bits", FUNCTIONALITY_BITS), ("backend bits", BACKEND_BITS)):
        on = [f"{name} ({bit})" for bit, name in bits if raw >> bit & 1]
        lines.append(f"{title}, highest priority first: {', '.join(on) if on else '(none)'}")
    if parts:
        columns, rows = _provenance(raw, parts)
        lines.append("where the bits came from (+ adds, - removes, * in the result):")
        name_w = max(len(name) for name, _ in rows)
        widths = [len(name) for _, name in columns]
        lines.append("  " + " " * name_w + "  " + "  ".join(name for _, name in columns))
        for name, marks in rows:
            cells = "  ".join(mark.center(w) for mark, w in zip(marks, widths))
            lines.append(f"  {name.ljust(name_w)}  {cells}".rstrip())
    return "\n".join(lines)


def _chip(bit: int, name: str, raw: int, marked: int) -> str:
    on = raw >> bit & 1
    top = on and marked >> bit & 1
    classes = "lab-bit" + (" lab-bit-on" if on else "") + (" lab-bit-top" if top else "")
    colors = _TOP if top else _ON if on else _OFF
    style = _CHIP.format(border="#c44e52" if marked >> bit & 1 else "#cccccc", colors=colors)
    return f'<span class="{classes}" title="bit {bit}: {name}" style="{style}">{html.escape(name)}</span>'


def keyset_html(
    ks: int, *, parts: Mapping[str, int] | None = None, highlight: KeyLike | Iterable[KeyLike] | None = None
) -> str:
    """Static HTML of a DispatchKeySet: functionality and backend bits in priority order (highest
    first), set bits filled, the highest-priority key (or ``highlight``) in red; with ``parts``, a
    table of which part set or cleared each bit (scrolling inside its box when the cell is narrower
    than the table). Byte-for-byte the same for the same input."""
    raw = _raw(ks)
    marked, names = _highlight_bits(raw, highlight)
    label = "highest priority key" if highlight is None else "marked"
    out = [
        '<div class="lab-keyset" style="font-family:monospace;font-size:12px;line-height:1.7">',
        f'<div class="lab-keyset-title"><b>{html.escape(repr(DispatchKeySet.from_raw(raw)))}</b> '
        f"&nbsp;raw {raw_hex(raw)} &nbsp;{label}: <b>{html.escape(', '.join(names) or '(none)')}</b></div>",
    ]
    for title, bits in (("functionality", FUNCTIONALITY_BITS), ("backend", BACKEND_BITS)):
        chips = "".join(_chip(bit, name, raw, marked) for bit, name in bits)
        out.append(
            f'<div class="lab-keyset-{title}"><span style="display:inline-block;width:8em;color:#555555">'
            f"{title}</span>{chips}</div>"
        )
    if parts:
        columns, rows = _provenance(raw, parts)
        cell = "border:1px solid #dddddd;padding:0 6px;text-align:center"
        first = "border:1px solid #dddddd;padding:0 6px;text-align:left"
        out.append('<div class="lab-scroll" style="overflow-x:auto;max-width:100%">')
        out.append('<table class="lab-keyset-parts" style="border-collapse:collapse;margin-top:4px">')
        head = "".join(f'<th style="{cell}">{html.escape(name)}</th>' for _, name in columns)
        out.append(f'<tr><th style="{first}">part</th>{head}</tr>')
        symbols = {"+": "+", "-": "&minus;", "*": "&#9679;", "": ""}
        for name, marks in rows:
            cells = "".join(f'<td style="{cell}">{symbols[m]}</td>' for m in marks)
            out.append(f'<tr><td style="{first}">{html.escape(name)}</td>{cells}</tr>')
        out.append("</table></div>")
    out.append("</div>")
    return "\n".join(out)


class KeySetView:
    """A key set to look at: HTML in notebooks, the text picture as ``repr``."""

    def __init__(
        self, ks: int, *, parts: Mapping[str, int] | None = None, highlight: KeyLike | Iterable[KeyLike] | None = None
    ) -> None:
        self.ks = DispatchKeySet.from_raw(int(ks))
        self.parts = dict(parts) if parts else None
        self.highlight = highlight

    def _repr_html_(self) -> str:
        return keyset_html(self.ks, parts=self.parts, highlight=self.highlight)

    def __repr__(self) -> str:
        return keyset_text(self.ks, parts=self.parts, highlight=self.highlight)


def show_keyset(
    ks: int, *, parts: Mapping[str, int] | None = None, highlight: KeyLike | Iterable[KeyLike] | None = None
) -> KeySetView:
    """``lab.show_keyset(ks, parts=frame.parts)``: a view of ``ks`` for a notebook cell."""
    return KeySetView(ks, parts=parts, highlight=highlight)
