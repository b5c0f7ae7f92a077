"""A tensor a backward node keeps, and the check that it was not modified in the meantime.

Stands for ``torch/csrc/autograd/saved_variable.h``. Saving remembers the tensor's version counter;
unpacking during backward compares it, because an in-place op on a saved tensor (which bumps the
counter in its ADInplaceOrView kernel) would make the gradient silently wrong.
"""

from __future__ import annotations

from typing import Any

from labsupport.autograd.variable import short_node_name

_LEGACY_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "bool": "Bool"}


class SavedVariable:
    """``SavedVariable``: the tensor plus its version at the time it was saved."""

    __slots__ = ("tensor", "version")

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor
        self.version = tensor._version

    def unpack(self) -> Any:
        """The saved tensor, or PyTorch's error when an in-place op changed it after it was saved."""
        tensor = self.tensor
        if tensor._version != self.version:
            kind = _LEGACY_NAMES.get(tensor._dtype.name, tensor._dtype.name.capitalize())
            device = "cuda." if tensor._device.type == "cuda" else ""
            what = f"[torch.{device}{kind}Tensor {list(tensor._sizes)}]"
            if tensor.grad_fn is not None:  # the node that last wrote it, named without "Backward0"
                what += f", which is output {tensor._output_nr} of {short_node_name(tensor.grad_fn)},"
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: {what} is at version {tensor._version}; expected version {self.version} "
                "instead. Hint: the lab has no anomaly mode; look for an in-place op (add_, mul_, ...) on "
                "this tensor between the forward call and backward()."
            )
        return tensor
