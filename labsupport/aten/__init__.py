"""ATen for Dispatcher Lab: the hand-written tensor library that generated code is built on.

Sub-modules mirror PyTorch's layout:

* ``dtype``, ``type_promotion`` - scalar types and promotion (c10/core/ScalarType.h, TypeProperties.cpp)
* ``tensor``, ``tensor_str`` - TensorImpl/TensorBase, Device, TensorOptions, printing (torch/_tensor_str.py)
* ``tensor_meta``, ``tensor_iterator`` - MetaBase and TensorIteratorBase, the base of structured kernels
* ``meta`` / ``native`` - at::meta (shape/dtype checks) and at::native (numpy kernels)
* ``cast``, ``wrap_dim``, ``generator`` - c10 conversions, dim wrapping, the random generator
* ``autocast_mode`` - the Autocast kernels, ``cached_cast`` and autocast's TLS (ATen/autocast_mode.cpp)
* ``testing`` - run a structured kernel's functional/inplace/out variants by hand

Import the sub-modules directly; this file stays empty on purpose.
"""
