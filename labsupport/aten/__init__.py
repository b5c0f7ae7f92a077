"""ATen for Dispatcher Lab: the hand-written tensor library that generated code is built on.

Sub-modules mirror PyTorch's layout: ``dtype``/``type_promotion`` (c10/core/ScalarType.h),
``tensor`` (c10/core/TensorImpl.h + ATen/core/TensorBase.h), ``tensor_iterator`` (ATen/TensorIterator.h),
``meta`` (at::meta, the shape/dtype half of structured kernels) and ``native`` (at::native kernels).
Import the sub-modules directly; this file stays empty on purpose.
"""
