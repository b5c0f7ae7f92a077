"""``vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None)``.

Stands for ``torch/_functorch/vmap.py`` (``vmap_impl``, ``_process_batched_inputs``,
``_create_batched_inputs``, ``_unwrap_batched``, ``_maybe_remove_batch_dim``) and
``torch/_functorch/apis.py`` (``vmap``). The error messages are PyTorch 2.13's, word for word.

One call of the vmapped function:

1. flatten the arguments (a small pytree: tuples, lists, dicts), broadcast ``in_dims`` over them,
   check them and find the batch size;
2. push a DynamicLayer (``vmap_increment_nesting``): the level is the stack depth + 1, so levels
   are reused by consecutive vmaps and a nested vmap gets the next one;
3. wrap each mapped argument as a BatchedTensor (``_add_batch_dim``: the batch dim stays where
   in_dims says, it is not moved);
4. call ``func``; every operator inside goes FrontMode -> FuncTorchBatched -> BackMode -> ...;
5. turn the outputs back into plain tensors (``_remove_batch_dim``: batch dim moved to ``out_dims``,
   unbatched outputs expanded), then pop the layer.

Where the lab simplifies: batch dims are moved, padded and cast with numpy (PyTorch calls the
dispatched ops ``movedim``, ``view``, ``expand``, ``to``). The values are the same, but those steps
are invisible to the profiler and to autograd: gradients flow through ``vmap`` when no batch dim has
to move (``in_dims=0``, ``out_dims=0``, operands of equal logical rank), and are cut otherwise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from labsupport.aten.wrap_dim import maybe_wrap_dim
from labsupport.functorch.batch_rules import move_batch_dim_to_front
from labsupport.functorch.batched_tensor import (
    contiguous,
    expand_front,
    is_batched_at_level,
    is_batchedtensor,
    make_batched,
    move_dim,
)
from labsupport.functorch.dynamic_layer import (
    VmapInterpreter,
    get_dynamic_layer_stack,
    pop_dynamic_layer,
    push_dynamic_layer,
)

# ---- a small pytree (torch.utils._pytree) ---------------------------------------------------------


class TreeSpec:
    """``torch.utils._pytree.TreeSpec`` for tuples, lists and dicts; a leaf prints as ``*``."""

    def __init__(self, type_: type | None, context: Any, children: list[TreeSpec]) -> None:
        self.type = type_
        self.context = context
        self.children = children
        self.num_leaves = 1 if type_ is None else sum(c.num_leaves for c in children)

    def is_leaf(self) -> bool:
        return self.type is None

    def __repr__(self, indent: int = 0) -> str:
        if self.type is None:
            return "*"
        text = f"TreeSpec({self.type.__name__}, {self.context}, ["
        if self.children:
            indent += 2
            text += self.children[0].__repr__(indent)
            text += "," if len(self.children) > 1 else ""
            text += ",".join("\n" + " " * indent + c.__repr__(indent) for c in self.children[1:])
        return text + "])"


def tree_flatten(tree: Any) -> tuple[list[Any], TreeSpec]:
    """``tree_flatten``: the leaves, left to right, and the structure."""
    if type(tree) in (tuple, list):
        leaves: list[Any] = []
        specs = []
        for item in tree:
            sub, spec = tree_flatten(item)
            leaves += sub
            specs.append(spec)
        return leaves, TreeSpec(type(tree), None, specs)
    if type(tree) is dict:
        leaves, specs = [], []
        keys = list(tree)
        for key in keys:
            sub, spec = tree_flatten(tree[key])
            leaves += sub
            specs.append(spec)
        return leaves, TreeSpec(dict, keys, specs)
    return [tree], TreeSpec(None, None, [])


def tree_unflatten(leaves: list[Any], spec: TreeSpec) -> Any:
    it = iter(leaves)

    def build(s: TreeSpec) -> Any:
        if s.type is None:
            return next(it)
        items = [build(c) for c in s.children]
        if s.type is dict:
            return dict(zip(s.context, items))
        return s.type(items)

    return build(spec)


def _broadcast_to_and_flatten(tree: Any, spec: TreeSpec) -> list[Any] | None:
    """``_broadcast_to_and_flatten``: a prefix tree of ``spec`` broadcast to its leaves, or None."""
    if type(tree) not in (tuple, list, dict):
        return [tree] * spec.num_leaves
    if spec.type is None or type(tree) is not spec.type:
        return None
    if spec.type is dict:
        if sorted(tree) != sorted(spec.context):
            return None
        children = [tree[k] for k in spec.context]
    else:
        if len(tree) != len(spec.children):
            return None
        children = list(tree)
    out: list[Any] = []
    for child, child_spec in zip(children, spec.children):
        flat = _broadcast_to_and_flatten(child, child_spec)
        if flat is None:
            return None
        out += flat
    return out


# ---- vmap ---------------------------------------------------------------------------------------


def _get_name(func: Callable[..., Any]) -> str:
    return getattr(func, "__name__", repr(func))


def _is_tensor(x: Any) -> bool:
    from labsupport.aten.tensor import TensorBase

    return isinstance(x, TensorBase)


def _process_batched_inputs(
    in_dims: Any, args: tuple[Any, ...], func: Callable[..., Any]
) -> tuple[int, list[Any], list[Any], TreeSpec]:
    name = _get_name(func)
    if not isinstance(in_dims, int) and not isinstance(in_dims, tuple):
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a (potentially nested) "
            f"tuple matching the structure of inputs, got: {type(in_dims)}."
        )
    if len(args) == 0:
        raise ValueError(
            f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to vmap "
            "over a function with no inputs. The latter is unsupported."
        )
    flat_args, args_spec = tree_flatten(args)
    flat_in_dims = _broadcast_to_and_flatten(in_dims, args_spec)
    if flat_in_dims is None:
        raise ValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the structure of "
            f"`inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs has structure {args_spec}."
        )
    for i, (arg, in_dim) in enumerate(zip(flat_args, flat_in_dims)):
        if not isinstance(in_dim, int) and in_dim is not None:
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for an input but in_dim must "
                "be either an integer dimension or None."
            )
        if isinstance(in_dim, int) and not _is_tensor(arg):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for an input but the input is "
                f"of type {type(arg)}. We cannot vmap over non-Tensor arguments, "
                "please use None as the respective in_dim"
            )
        if in_dim is not None and (in_dim < -arg.dim() or in_dim >= arg.dim()):
            raise ValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for some input, but that "
                f"input is a Tensor of dimensionality {arg.dim()} so expected in_dim to satisfy "
                f"-{arg.dim()} <= in_dim < {arg.dim()}."
            )
        if in_dim is not None and in_dim < 0:
            flat_in_dims[i] = in_dim % arg.dim()
    batch_sizes = [arg._sizes[d] for d, arg in zip(flat_in_dims, flat_args) if d is not None]
    if not batch_sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(size != batch_sizes[0] for size in batch_sizes):
        raise ValueError(
            f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {batch_sizes} "
            "for the mapped dimension"
        )
    return batch_sizes[0], flat_in_dims, flat_args, args_spec


def add_batch_dim(t: Any, in_dim: int, level: int) -> Any:
    """``torch._C._functorch._add_batch_dim``: wrap without moving the batch dim."""
    return make_batched(t, in_dim, level)


def remove_batch_dim(t: Any, level: int, batch_size: int, out_dim: int) -> Any:
    """``_remove_batch_dim``: a plain tensor with the batch dim at ``out_dim`` (an unbatched output
    is expanded to the batch size)."""
    logical_rank = len(t._sizes)
    out_dim = maybe_wrap_dim(out_dim, logical_rank + 1)
    if not is_batched_at_level(t, level):
        return contiguous(move_dim(expand_front(t, batch_size), 0, out_dim))
    value = move_batch_dim_to_front(t._bt_value, t._bt_bdim)
    return contiguous(move_dim(value, 0, out_dim))


def _maybe_remove_batch_dim(name: str, output: Any, level: int, batch_size: int, out_dim: Any) -> Any:
    if out_dim is None:
        if _is_tensor(output) and is_batched_at_level(output, level):
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
        return output
    if not _is_tensor(output):
        raise ValueError(
            f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(output)}. Did you mean to set "
            "out_dims= to None for output?"
        )
    return remove_batch_dim(output, level, batch_size, out_dim)


def _unwrap_batched(outputs: Any, out_dims: Any, level: int, batch_size: int, func: Callable[..., Any]) -> Any:
    name = _get_name(func)
    flat_outputs, output_spec = tree_flatten(outputs)

    def incompatible() -> ValueError:
        return ValueError(
            f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the structure of "
            f"`outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but outputs has structure {output_spec}."
        )

    if _is_tensor(outputs):
        if isinstance(out_dims, int) or out_dims is None:
            flat_out_dims: list[Any] | None = [out_dims]
        elif isinstance(out_dims, tuple) and len(out_dims) == 1:
            flat_out_dims = list(out_dims)
        else:
            raise incompatible()
    else:
        flat_out_dims = _broadcast_to_and_flatten(out_dims, output_spec)
        if flat_out_dims is None:
            raise incompatible()
    flat = [_maybe_remove_batch_dim(name, out, level, batch_size, d) for out, d in zip(flat_outputs, flat_out_dims)]
    return tree_unflatten(flat, output_spec)


def _check_randomness_arg(randomness: str) -> None:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")


def vmap(
    func: Callable[..., Any],
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """``torch.vmap``: ``func`` mapped over a batch dimension of its inputs.

    The lab runs the whole batch at once (``chunk_size`` is checked and otherwise ignored: PyTorch
    splits the batch into chunks of that size and concatenates the results, which gives the same
    values except for 'different' randomness).
    """
    _check_randomness_arg(randomness)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        batch_size, flat_in_dims, flat_args, args_spec = _process_batched_inputs(in_dims, args, func)
        level = len(get_dynamic_layer_stack()) + 1
        push_dynamic_layer(VmapInterpreter(level, batch_size, randomness))
        try:
            batched = [arg if d is None else add_batch_dim(arg, d, level) for d, arg in zip(flat_in_dims, flat_args)]
            outputs = func(*tree_unflatten(batched, args_spec), **kwargs)
            return _unwrap_batched(outputs, out_dims, level, batch_size, func)
        finally:
            pop_dynamic_layer()

    return wrapped


__all__ = ["TreeSpec", "add_batch_dim", "is_batchedtensor", "remove_batch_dim", "tree_flatten", "vmap"]
