"""Dimension wrapping (stands for c10/core/WrapDimMinimal.h and ATen/WrapDimUtils.h)."""

from __future__ import annotations

__all__ = ["maybe_wrap_dim", "format_sizes"]


def maybe_wrap_dim(dim: int, ndim: int, wrap_scalar: bool = True) -> int:
    """Turn a possibly negative ``dim`` into an index in ``[0, ndim)``, with torch's IndexError.

    A 0-dim tensor is treated as if it had one dimension (``wrap_scalar``), so dims 0 and -1 are valid.
    """
    if ndim == 0:
        if not wrap_scalar:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        ndim = 1
    if -ndim <= dim < ndim:
        return dim + ndim if dim < 0 else dim
    raise IndexError(
        f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})"
    )


def format_sizes(sizes: tuple[int, ...] | list[int]) -> str:
    """Sizes the way C++ prints an IntArrayRef: ``[2, 3]``."""
    return "[" + ", ".join(str(s) for s in sizes) + "]"
