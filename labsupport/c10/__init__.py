"""c10 in miniature: dispatch keys, key sets, thread-local state, schemas and the dispatcher.

Mirrors PyTorch's ``c10/core`` and ``aten/src/ATen/core/dispatch``. It is the bottom layer: it imports
nothing from aten, autograd, codegen or tools (those register what c10 needs from them). README.md in
this folder lists where the lab prints or behaves differently from PyTorch 2.13, and why.
"""
