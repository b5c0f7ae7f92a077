"""A small pytree library: map and flatten nested lists, tuples and dicts (stands for torch/utils/_pytree.py).

``__torch_dispatch__`` handlers use it to unwrap every tensor in ``args`` / ``kwargs`` and to rewrap
the results::

    unwrapped = tree_map(lambda x: x.elem if isinstance(x, Wrapper) else x, args)

What the lab simplifies: PyTorch's version knows many more containers (namedtuples, OrderedDict,
defaultdict, deque, registered classes) and describes a structure with a ``TreeSpec`` class; here
lists, tuples and dicts are the containers and the spec is a small nested tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A spec is ("leaf",), or (container type, keys or None, child specs).
TreeSpec = tuple[Any, ...]
LEAF: TreeSpec = ("leaf",)


def _children(tree: Any) -> tuple[list[Any], Any] | None:
    if isinstance(tree, dict):
        keys = list(tree)
        return [tree[k] for k in keys], keys
    if isinstance(tree, (list, tuple)):
        return list(tree), None
    return None


def tree_flatten(tree: Any) -> tuple[list[Any], TreeSpec]:
    """The leaves of ``tree`` in order, and the spec that ``tree_unflatten`` rebuilds it from."""
    leaves: list[Any] = []

    def walk(node: Any) -> TreeSpec:
        found = _children(node)
        if found is None:
            leaves.append(node)
            return LEAF
        children, keys = found
        return (type(node), keys, tuple(walk(child) for child in children))

    return leaves, walk(tree)


def tree_unflatten(leaves: list[Any], spec: TreeSpec) -> Any:
    """Rebuild the structure ``spec`` describes, filled with ``leaves`` in order."""
    it = iter(leaves)

    def build(node: TreeSpec) -> Any:
        if node is LEAF or node == LEAF:
            return next(it)
        kind, keys, children = node
        values = [build(child) for child in children]
        if keys is not None:
            return kind(zip(keys, values)) if kind is not dict else dict(zip(keys, values))
        if kind is list or kind is tuple:
            return kind(values)
        return kind(*values) if hasattr(kind, "_fields") else kind(values)  # namedtuples take fields

    result = build(spec)
    rest = list(it)
    if rest:
        raise ValueError(f"tree_unflatten: {len(rest)} leaves left over; the spec holds fewer")
    return result


def tree_leaves(tree: Any) -> list[Any]:
    """``tree_flatten(tree)[0]``."""
    return tree_flatten(tree)[0]


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """The same structure with ``fn`` applied to every leaf."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(leaf) for leaf in leaves], spec)


def tree_map_only(type_or_types: type | tuple[type, ...], fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree_map`` that applies ``fn`` only to leaves of the given type(s) and keeps the others."""
    return tree_map(lambda leaf: fn(leaf) if isinstance(leaf, type_or_types) else leaf, tree)


def tree_any(pred: Callable[[Any], bool], tree: Any) -> bool:
    """Whether ``pred`` holds for some leaf."""
    return any(pred(leaf) for leaf in tree_leaves(tree))


__all__ = ["TreeSpec", "tree_any", "tree_flatten", "tree_leaves", "tree_map", "tree_map_only", "tree_unflatten"]
