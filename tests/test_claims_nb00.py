"""Claims of notebook 00 (start here) about PyTorch 2.13, checked against an installed PyTorch."""

from __future__ import annotations

from claims import claim

import labsupport as lab
import labsupport.torch as lab_torch


def _cuda_like(torch_ref):
    """A tensor that reports device cuda without a GPU: a wrapper subclass (it adds Python keys)."""

    class CudaWrapper(torch_ref.Tensor):
        @staticmethod
        def __new__(cls):
            return torch_ref.Tensor._make_wrapper_subclass(cls, (2,), device="cuda")

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise NotImplementedError

    return CudaWrapper()


def tensor_key_names(torch_ref, t) -> list[str]:
    """The runtime keys of a PyTorch tensor, without the Python keys a wrapper subclass adds."""
    names = str(torch_ref._C._dispatch_keys(t)).removeprefix("DispatchKeySet(").removesuffix(")").split(", ")
    return [name for name in names if name not in ("Python", "PythonTLSSnapshot")]


@claim("nb00.cpu_tensor_keys")
def test_cpu_tensor_keys(torch_ref):
    expected = ["CPU", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"]
    assert tensor_key_names(torch_ref, torch_ref.tensor([1.0, 2.0])) == expected
    assert [key.name for key in lab.dispatch_keys(lab_torch.tensor([1.0, 2.0]))] == expected


@claim("nb00.cuda_tensor_keys")
def test_cuda_tensor_keys(torch_ref):
    expected = ["CUDA", "ADInplaceOrView", "AutogradCUDA", "AutocastCUDA"]
    assert tensor_key_names(torch_ref, _cuda_like(torch_ref)) == expected
    assert [key.name for key in lab.dispatch_keys(lab_torch.tensor([1.0], device="cuda"))] == expected


@claim("nb00.binding_torch_function")
def test_binding_checks_torch_function(torch_ref):
    seen = []

    class Intercept:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return "intercepted"

    assert torch_ref.add(torch_ref.tensor([1.0]), Intercept()) == "intercepted"
    assert seen == [torch_ref.add]
