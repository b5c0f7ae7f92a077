"""c10 in miniature: dispatch keys, key sets, thread-local state, schemas and the dispatcher.

Mirrors PyTorch's ``c10/core`` and ``aten/src/ATen/core/dispatch``.
"""
