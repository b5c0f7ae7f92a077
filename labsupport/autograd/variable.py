"""Views for autograd: which tensor a view looks into, and how the view came to be.

Stands for ``torch/csrc/autograd/variable.h`` / ``variable.cpp`` (``DifferentiableViewMeta``,
``CreationMeta``, ``propagate_creation_meta``, ``handle_view_on_rebase``, ``VariableHooks::grad_fn``)
and the ``as_view`` helper of ``VariableTypeUtils.h`` that the generated ADInplaceOrView kernels call.

The idea in two lines: a view op's output shares its base's storage *and version counter*, and
remembers its root base (``_base``, never a view) and the grad mode it was born in (``CreationMeta``).
When the base or any of its views is modified in place, autograd uses that record to rebuild the
view's history (``AsStridedBackward0``) and to refuse the ambiguous cases (views made in no_grad or
inference mode).

What the lab simplifies:
* PyTorch keeps the view record in the tensor's ``autograd_meta_``; the lab keeps it in a table keyed by
  the tensor (entries leave the table when the tensor dies), because ``TensorBase``'s slots belong to ATen.
* PyTorch rebuilds a stale view's ``grad_fn`` lazily, when ``grad_fn`` is read; the lab's ``grad_fn``
  is a plain attribute, so it rebuilds every live view on the shared version counter right after each
  bump and again once an in-place op has given the base its new history (``refresh_views``). The errors
  PyTorch raises while rebuilding are raised by the lab the next time autograd uses the view (an op that
  records it, an in-place op on it, ``backward``) or ``grad_fn(view)`` reads it.
* No ``view_func`` replay and no forward-mode views: on CPU PyTorch also rebuilds with ``as_strided``.
"""

from __future__ import annotations

import enum
import weakref
from typing import Any

from labsupport.c10 import autograd_state

__all__ = [
    "CreationMeta", "DifferentiableViewMeta", "as_view", "creation_meta_for_mode", "get_view_meta", "grad_fn",
    "handle_view_on_rebase", "propagate_creation_meta", "refresh_view", "refresh_views",
]


class CreationMeta(enum.IntEnum):
    """``torch::autograd::CreationMeta``: how a view was created (same names and order as variable.h)."""

    DEFAULT = 0
    IN_CUSTOM_FUNCTION = 1
    MULTI_OUTPUT_NODE = 2
    NO_GRAD_MODE = 3
    INFERENCE_MODE = 4


def propagate_creation_meta(prev: CreationMeta, new: CreationMeta) -> CreationMeta:
    """A view of a view is never less restricted than its parent (``propagate_creation_meta``)."""
    if new == CreationMeta.DEFAULT:
        return prev
    return prev if prev == CreationMeta.INFERENCE_MODE else new


def creation_meta_for_mode(default: CreationMeta = CreationMeta.DEFAULT) -> CreationMeta:
    """What the generated ADInplaceOrView kernel passes to ``as_view``:
    ``InferenceMode::is_enabled() ? INFERENCE_MODE : (GradMode::is_enabled() ? default : NO_GRAD_MODE)``."""
    if autograd_state.is_inference_mode_enabled():
        return CreationMeta.INFERENCE_MODE
    return default if autograd_state._state.enabled else CreationMeta.NO_GRAD_MODE


class DifferentiableViewMeta:
    """The view record of one view tensor (``DifferentiableViewMeta`` + its backward ``ViewInfo``).

    ``base`` is the root base (a strong reference, as ``ViewInfo::base_`` is); ``attr_version`` is the
    version of the shared counter when ``grad_fn`` was last set; ``pending`` holds the error PyTorch
    would raise on the next ``grad_fn`` read (see the module docstring)."""

    __slots__ = ("base", "creation_meta", "attr_version", "pending", "view", "key", "counter_key", "__weakref__")

    def __init__(self, base: Any, view: Any, creation_meta: CreationMeta) -> None:
        self.base = base
        self.creation_meta = creation_meta
        self.attr_version = view._version_counter.value
        self.pending: str | None = None
        self.view = weakref.ref(view, self._forget)
        self.key = id(view)
        self.counter_key = id(view._version_counter)  # the counter it shares with its base

    def _forget(self, _ref: weakref.ref) -> None:
        """The view died: drop its record (the table must not hand it to a new tensor with the same id)."""
        if _VIEW_META.get(self.key) is self:
            del _VIEW_META[self.key]
        siblings = _LIVE_VIEWS.get(self.counter_key)
        if siblings is not None:
            try:
                siblings.remove(self)
            except ValueError:
                pass
            if not siblings:
                del _LIVE_VIEWS[self.counter_key]

    def __repr__(self) -> str:
        return f"DifferentiableViewMeta(creation_meta={self.creation_meta.name}, attr_version={self.attr_version})"


# id(view tensor) -> its record; id(shared version counter) -> records of the live views on it (for
# refresh_views: the counter, not the base, so that an in-place op through a detach()ed alias finds them).
_VIEW_META: dict[int, DifferentiableViewMeta] = {}
_LIVE_VIEWS: dict[int, list[DifferentiableViewMeta]] = {}


def get_view_meta(tensor: Any) -> DifferentiableViewMeta | None:
    """``impl::get_view_autograd_meta``: the view record of ``tensor``, or None if it is not a view."""
    return _VIEW_META.get(id(tensor))


def as_view(base: Any, tensor: Any, creation_meta: CreationMeta = CreationMeta.DEFAULT) -> Any:
    """``as_view(base, tensor, is_bw_differentiable=true, is_fw_differentiable=true, view_func,
    rev_view_func, creation_meta)``: make ``tensor`` (fresh from the view kernel) a view of ``base``.

    The root base is recorded (a view of a view points at the root), the creation meta propagates from
    the parent view, and ``tensor`` takes the base's version counter. Views of inference tensors are
    left alone (Note [View of inference tensor])."""
    if base.is_inference():
        return tensor
    if tensor is base:
        raise RuntimeError(
            "View operation returned a tensor that is the same as the input base tensor.  This is no longer "
            "allowed; you must explicitly create a new tensor (e.g., using .detach()). As a user, you could "
            "have made a mistake implementing __torch_dispatch__ or a Python operator decomposition or meta "
            "registration; if that's not the case, please report a bug to PyTorch or the backend you are using."
        )
    parent = _VIEW_META.get(id(base))
    if parent is not None:
        creation_meta = propagate_creation_meta(parent.creation_meta, creation_meta)
        base = parent.base
    tensor._version_counter = base._version_counter
    meta = DifferentiableViewMeta(base, tensor, creation_meta)
    _VIEW_META[id(tensor)] = meta
    _LIVE_VIEWS.setdefault(meta.counter_key, []).append(meta)
    # DifferentiableViewMeta::requires_grad(): a view requires grad when its base does.
    if base.requires_grad:
        tensor.requires_grad = True
    return tensor


_TAIL = (
    " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
    "moving both the view and the inplace either both inside the {block} block (if you don't want the "
    "inplace to be tracked) or both outside (if you want the inplace to be tracked)."
)


def view_on_rebase_error(tensor: Any, meta: DifferentiableViewMeta, indirect: bool) -> str | None:
    """The message ``handle_view_on_rebase`` raises for a view whose creation meta is not DEFAULT
    (PyTorch 2.13's words), or None when the in-place op is allowed."""
    creation = meta.creation_meta
    if creation == CreationMeta.DEFAULT:
        return None
    grad_fn = tensor.grad_fn
    modified = "its base or another view of its base has been" if indirect else "is being"
    if creation == CreationMeta.MULTI_OUTPUT_NODE:
        head = (
            f"Output {tensor._output_nr} of {short_node_name(grad_fn)} is a view and {modified} modified inplace."
            if grad_fn is not None
            else f"A view was created in no_grad mode and {modified} modified inplace with grad mode enabled."
        )
        return (
            head + " This view is the output of a function that returns multiple views. Such functions do not "
            "allow the output views to be modified inplace. You should replace the inplace operation by an "
            "out-of-place one."
        )
    if creation == CreationMeta.INFERENCE_MODE:
        made, mode, block = "inference mode", "in normal mode", "inference_mode"
    elif creation == CreationMeta.NO_GRAD_MODE:
        made, mode, block = "no_grad mode", "with grad mode enabled", "no_grad"
    else:  # IN_CUSTOM_FUNCTION: the lab has no custom autograd.Function
        made, mode, block = "a custom Function", "", "custom Function"
    if grad_fn is not None:
        node = short_node_name(grad_fn)
        head = f"Output {tensor._output_nr} of {node} is a view of a view which was created in {made} and"
    else:
        head = f"A view was created in {made} and"
    return f"{head} {modified} modified inplace {mode}.{_TAIL.format(block=block)}"


def short_node_name(grad_fn: Any) -> str:
    """``Node::name()`` without the ``Backward<N>`` suffix, as PyTorch's view messages print it."""
    name = grad_fn.name()
    stripped = name.rstrip("0123456789")
    return stripped[: -len("Backward")] if stripped.endswith("Backward") else name


def handle_view_on_rebase(tensor: Any, meta: DifferentiableViewMeta, indirect: bool = False) -> None:
    """``handle_view_on_rebase``: raise PyTorch's RuntimeError for a view that may not be rebased."""
    message = view_on_rebase_error(tensor, meta, indirect)
    if message is not None:
        raise RuntimeError(message)


def refresh_view(tensor: Any, meta: DifferentiableViewMeta, eager: bool = False) -> None:
    """``VariableHooks::grad_fn`` for a view: if the shared version moved since ``grad_fn`` was set
    (the base or another view was modified in place), replace ``grad_fn`` by an ``AsStridedBackward0``
    from the view's geometry to its base's current history.

    ``eager``: called by ``refresh_views`` right after an in-place op elsewhere; an error is then kept in
    ``meta.pending`` for the next time autograd uses the view, instead of being raised now."""
    if meta.pending is not None:
        if eager:
            return
        raise RuntimeError(meta.pending)  # raised on every read, as PyTorch does
    if tensor.grad_fn is None and not meta.base.requires_grad:
        return
    current = tensor._version_counter.value
    if meta.attr_version == current:
        return
    message = view_on_rebase_error(tensor, meta, indirect=True)
    if message is not None:
        if not eager:
            raise RuntimeError(message)
        meta.pending = message
        return
    from labsupport.autograd.copy_slices import AsStridedBackward0

    tensor.grad_fn = AsStridedBackward0.regenerate(meta.base, tensor)
    tensor._output_nr = 0
    tensor.requires_grad = True
    meta.attr_version = current


def grad_fn(tensor: Any) -> Any:
    """``Tensor.grad_fn`` as PyTorch reads it (``VariableHooks::grad_fn``): a stale view is refreshed
    first, and raises if it may not be. The lab's plain ``tensor.grad_fn`` attribute skips this check."""
    meta = _VIEW_META.get(id(tensor))
    if meta is not None:
        refresh_view(tensor, meta)
    return tensor.grad_fn


def refresh_views(tensor: Any, rebased: bool = False) -> None:
    """Bring every live view that shares ``tensor``'s version counter up to date after an in-place op
    (the lab's eager stand-in for PyTorch's lazy ``grad_fn`` refresh). Called twice for a recorded
    in-place op: by the ADInplaceOrView kernel after the bump, and by ``rebase_history`` once the base has
    its new ``grad_fn`` (``rebased``: every view must point at it, even those refreshed a moment ago)."""
    views = _LIVE_VIEWS.get(id(tensor._version_counter))
    if not views:
        return
    for view_meta in list(views):
        view = view_meta.view()
        if view is None:
            continue
        if view_meta.base.requires_grad:
            view.requires_grad = True  # DifferentiableViewMeta::requires_grad() follows the base
        if rebased:
            view_meta.attr_version = -1
        refresh_view(view, view_meta, eager=True)


# --- the Python properties (torch/csrc/autograd/python_variable.cpp) --------------------------------
# In PyTorch, ``Tensor._base`` and ``Tensor._is_view()`` are defined by the autograd layer's Python
# binding (THPVariable_get_base, THPVariable__is_view), not by ATen. The lab installs them on TensorBase
# from here for the same reason.

def _get_base(self: Any) -> Any:
    """``Tensor._base``: the root base of a view, else None."""
    meta = _VIEW_META.get(id(self))
    return None if meta is None else meta.base


def _is_view(self: Any) -> bool:
    """``Tensor._is_view()``: True for the output of a view op (not for ``detach()``)."""
    return id(self) in _VIEW_META


def install_tensor_properties(cls: type) -> None:
    """Give ``cls`` (TensorBase) ``_base`` and ``_is_view`` unless ATen already defines them."""
    if "_base" not in vars(cls):
        cls._base = property(_get_base, doc=_get_base.__doc__)  # type: ignore[attr-defined]
    if "_is_view" not in vars(cls):
        cls._is_view = _is_view  # type: ignore[attr-defined]
