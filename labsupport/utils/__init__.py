"""Helpers shared by the generated Python bindings (stands for torch/csrc/utils), and the Python-side
``torch.utils`` modules the Python key needs: ``_python_dispatch`` (``TorchDispatchMode``) and
``_pytree`` (``tree_map``), so that ``torch.utils._python_dispatch.TorchDispatchMode`` works on the
lab's ``torch`` as on PyTorch's."""

# Imported last, and only here: python_arg_parser (what the generated bindings import) needs neither.
# _python_dispatch pulls in the Python key's fallbacks (aten/python_fallback_kernel.py); they change no
# table row and cost nothing on a call without a mode or subclass.
from labsupport.utils import _python_dispatch, _pytree  # noqa: F401
