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


def wheel_has_symbol(torch_ref, mangled: str) -> bool:
    """Whether libtorch_cpu.so's symbol table holds a (mangled) name: anonymous namespaces show up
    there as ``12_GLOBAL__N_1``, the way gdb reads them back as ``(anonymous namespace)``."""
    import mmap
    import pathlib

    library = pathlib.Path(torch_ref.__file__).parent / "lib" / "libtorch_cpu.so"
    with open(library, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(mangled.encode()) != -1


@claim("nb00.frame_names")
def test_frame_names_with_anonymous_namespaces(torch_ref):
    # at::(anonymous namespace)::wrapper_CPU_add_Tensor
    assert wheel_has_symbol(torch_ref, "_ZN2at12_GLOBAL__N_122wrapper_CPU_add_TensorE")
    assert not wheel_has_symbol(torch_ref, "_ZN2at22wrapper_CPU_add_TensorE")
    # torch::autograd::VariableType::(anonymous namespace)::add_Tensor
    assert wheel_has_symbol(torch_ref, "_ZN5torch8autograd12VariableType12_GLOBAL__N_110add_TensorE")
    assert not wheel_has_symbol(torch_ref, "_ZN5torch8autograd12VariableType10add_TensorE")
    # the frames that are not file-local keep their plain names
    assert wheel_has_symbol(torch_ref, "_ZN2at4_ops10add_Tensor4callE")
    assert wheel_has_symbol(torch_ref, "_ZN2at4_ops10add_Tensor10redispatchE")
    assert wheel_has_symbol(torch_ref, "_ZN2at6native24structured_ufunc_add_CPU4implE")
    # and the lab's trace uses the same names
    with lab.trace() as rec:
        lab_torch.add(lab_torch.tensor([1, 1]), lab_torch.tensor([1, 1]))
    names = rec.torch_names()
    assert "at::(anonymous namespace)::wrapper_CPU_add_Tensor" in names
    assert "torch::autograd::VariableType::(anonymous namespace)::add_Tensor" in names
