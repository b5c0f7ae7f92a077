"""Printing tensors like torch does (stands for torch/_tensor_str.py with default print options).

The rules, in short:
* every element of a tensor is printed with the same width (right-aligned);
* integers print as they are; floats whose nonzero finite values are all whole numbers print as
  ``1.`` ("int mode"); other floats print with 4 decimals; scientific notation (``1.0000e-05``)
  is used when the largest/smallest nonzero magnitudes differ by more than 1000x, or the largest
  exceeds 1e8, or (outside int mode) the smallest is below 1e-4;
* more than 1000 elements are summarized with ``...`` keeping 3 items at each edge;
* rows wrap at 80 characters; suffixes (device, dtype, grad_fn, ...) are appended after the data.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from labsupport.aten import dtype as dtypes

if TYPE_CHECKING:
    from labsupport.aten.tensor import TensorBase

__all__ = ["tensor_repr", "PRECISION", "THRESHOLD", "EDGEITEMS", "LINEWIDTH"]

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80


class _ElementFormatter:
    """Decides one common style and width for all elements of a tensor (``_Formatter``)."""

    def __init__(self, values: np.ndarray) -> None:
        self.is_float = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = values.reshape(-1)
        if not self.is_float:
            for value in flat.tolist():
                self.width = max(self.width, len(str(value)))
            return

        finite = flat[np.isfinite(flat) & (flat != 0)]
        if finite.size == 0:
            return
        magnitudes = np.abs(finite.astype(np.float64))
        smallest, largest = float(magnitudes.min()), float(magnitudes.max())
        as_python = finite.tolist()
        self.int_mode = all(v == math.ceil(v) for v in as_python)
        wide_range = largest / smallest > 1000.0 or largest > 1.0e8
        if self.int_mode:
            self.sci_mode = wide_range
            # In int mode a '.' is appended to each value, hence the +1.
            widths = (len(self._sci(v)) if self.sci_mode else len(f"{v:.0f}") + 1 for v in as_python)
        else:
            self.sci_mode = wide_range or smallest < 1.0e-4
            widths = (len(self._sci(v) if self.sci_mode else f"{v:.{PRECISION}f}") for v in as_python)
        self.width = max(self.width, *widths)

    @staticmethod
    def _sci(value: float) -> str:
        return f"{value:.{PRECISION}e}"

    def format(self, value: float | int | bool) -> str:
        if not self.is_float:
            text = str(value)
        elif self.sci_mode:
            text = self._sci(value)
        elif self.int_mode:
            text = f"{value:.0f}"
            if math.isfinite(value):
                text += "."
        else:
            text = f"{value:.{PRECISION}f}"
        return text.rjust(self.width)


def _summarized(values: np.ndarray) -> np.ndarray:
    """Only the edge items of every long dimension (``get_summarized_data``), for the formatter."""
    for axis, size in enumerate(values.shape):
        if size > 2 * EDGEITEMS:
            head = np.take(values, range(EDGEITEMS), axis=axis)
            tail = np.take(values, range(size - EDGEITEMS, size), axis=axis)
            values = np.concatenate([head, tail], axis=axis)
    return values


def _format_vector(values: np.ndarray, indent: int, summarize: bool, fmt: _ElementFormatter) -> str:
    per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
    if summarize and values.shape[0] > 2 * EDGEITEMS:
        items = [fmt.format(v) for v in values[:EDGEITEMS].tolist()]
        items.append(" ...")
        items += [fmt.format(v) for v in values[-EDGEITEMS:].tolist()]
    else:
        items = [fmt.format(v) for v in values.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _format_nested(values: np.ndarray, indent: int, summarize: bool, fmt: _ElementFormatter) -> str:
    if values.ndim == 0:
        return fmt.format(values.item())
    if values.ndim == 1:
        return _format_vector(values, indent, summarize, fmt)
    count = values.shape[0]
    if summarize and count > 2 * EDGEITEMS:
        rows = [_format_nested(values[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)]
        rows.append("...")
        rows += [
            _format_nested(values[i], indent + 1, summarize, fmt) for i in range(count - EDGEITEMS, count)
        ]
    else:
        rows = [_format_nested(values[i], indent + 1, summarize, fmt) for i in range(count)]
    separator = "," + "\n" * (values.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(rows) + "]"


def _format_data(values: np.ndarray, indent: int) -> str:
    if values.dtype == np.float16:
        values = values.astype(np.float32)  # torch prints half tensors through float
    summarize = values.size > THRESHOLD
    fmt = _ElementFormatter(_summarized(values) if summarize else values)
    return _format_nested(values, indent, summarize, fmt)


def _grad_fn_name(grad_fn: object) -> str:
    name_method = getattr(grad_fn, "name", None)
    name = name_method() if callable(name_method) else type(grad_fn).__name__
    return name.rsplit("::", 1)[-1]


def _append_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """Add ``, suffix`` pieces, starting a new line when the current one would pass 80 columns."""
    parts = [text]
    line_length = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_length += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t: TensorBase) -> str:
    """``repr(tensor)`` with torch's default print options."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes: list[str] = []
    default_dtype = dtypes.get_default_dtype()
    if t._device.type != "cpu":
        suffixes.append(f"device='{t._device}'")

    if t._data is None:
        suffixes.append(f"size={tuple(t._sizes)}")
        if t._dtype is not default_dtype:
            suffixes.append(f"dtype={t._dtype}")
        body = "..."
    elif t._data.size == 0:
        if len(t._sizes) != 1:
            suffixes.append(f"size={tuple(t._sizes)}")
        if t._dtype is not default_dtype:
            suffixes.append(f"dtype={t._dtype}")
        body = "[]"
    else:
        if t._dtype not in (default_dtype, dtypes.int64, dtypes.bool):
            suffixes.append(f"dtype={t._dtype}")
        body = _format_data(t._data, indent)

    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(t.grad_fn)}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _append_suffixes(prefix + body, suffixes, indent)
