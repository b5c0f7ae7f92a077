"""Claims of notebook 02 (keys and key sets) about PyTorch 2.13, checked against an installed PyTorch."""

from __future__ import annotations

import re
import warnings

from claims import claim

import labsupport as lab
import labsupport.torch as lab_torch
from labsupport.c10.dispatch_key import BACKENDS, FUNCTIONALITIES
from labsupport.c10.dispatch_key_set import NUM_RUNTIME_ENTRIES

K = lab.DispatchKey
KS = lab.DispatchKeySet


def fallthrough_keys(torch_ref, op: str) -> set[str]:
    """The keys whose entry in PyTorch's computed table for ``op`` is a fallthrough."""
    return {
        line.split(":")[0] for line in torch_ref._C._dispatch_dump_table(op).splitlines() if ": fallthrough " in line
    }


def call_key_set(torch_ref, op: str, *tensors) -> KS:
    """PyTorch's key set for a call: its tensors' keys and TLS, minus the keys ``op`` falls through."""
    C = torch_ref._C
    raw = C._dispatch_tls_local_include_set().raw_repr()
    for t in tensors:
        raw |= C._dispatch_keys(t).raw_repr()
    ks = C.DispatchKeySet.from_raw_repr(raw) - C._dispatch_tls_local_exclude_set()
    result = KS.from_raw(ks.raw_repr())
    for name in fallthrough_keys(torch_ref, op):
        result = result.remove(name)
    return result


def highest(torch_ref, ks: KS) -> str:
    return str(torch_ref._C.DispatchKeySet.from_raw_repr(int(ks)).highestPriorityTypeId()).removeprefix("DispatchKey.")


def torch_key(torch_ref, name: str):
    key = torch_ref._C._parse_dispatch_key(name)
    return key if key is not None else getattr(torch_ref._C.DispatchKey, name)


@claim("nb02.backends_and_functionalities")
def test_backends_and_functionalities(torch_ref):
    assert torch_ref._C._dispatch_num_backends() == len(BACKENDS) == 16
    full = torch_ref._C._dispatch_keyset_full().raw_repr()
    assert full == (1 << (16 + 46)) - 1 and len(FUNCTIONALITIES) == 46
    for bit, backend in enumerate(BACKENDS):  # CPU is bit 0 ... Meta is bit 15, in the lab's order
        assert torch_ref._C.DispatchKeySet(torch_key(torch_ref, backend)).raw_repr() == (1 << bit) | (1 << 16)


@claim("nb02.enum_values")
def test_enum_values(torch_ref):
    for name in ("CPU", "CUDA", "Meta", "SparseCPU", "AutogradCPU", "AutogradCUDA", "BackendSelect", "ADInplaceOrView"):
        assert int(getattr(torch_ref._C.DispatchKey, name)) == K[name].value
    assert int(torch_ref._C.DispatchKey.AutocastCPU) == K.AutocastCPU.value
    assert int(torch_ref._C.DispatchKey.CPU) - 1 == K.StartOfDenseBackends.value


@claim("nb02.bit_layout")
def test_bit_layout(torch_ref):
    def raw(name):
        return torch_ref._C.DispatchKeySet(torch_key(torch_ref, name)).raw_repr()

    assert raw("CPU") == 1 << 0 | 1 << 16  # backend bit 0 + Dense, bit 16
    assert raw("Meta") == 1 << 15 | 1 << 16
    assert raw("AutogradCUDA") == 1 << 1 | 1 << 36
    assert raw("BackendSelect") == 1 << 26
    assert raw("PythonDispatcher") == 1 << 61
    for name in ("CPU", "Meta", "AutogradCUDA", "BackendSelect", "PythonDispatcher"):
        assert raw(name) == int(KS([name]))


@claim("nb02.seed_sets_in_2_13")
def test_seed_sets_in_2_13(torch_ref):
    C = torch_ref._C
    cpu = C.DispatchKeySet(C.DispatchKey.CPU)
    assert cpu.raw_repr() == 65537
    assert (cpu | C.DispatchKeySet(C.DispatchKey.AutogradCPU)).raw_repr() == 68719542273


@claim("nb02.cpu_raw_value")
def test_cpu_raw_value(torch_ref):
    assert torch_ref._C._dispatch_keys(torch_ref.randn(2)).raw_repr() == 0x94_0001_0001


@claim("nb02.highest_priority")
def test_highest_priority(torch_ref):
    examples = [
        KS([K.CPU, K.ADInplaceOrView, K.AutogradCPU, K.AutocastCPU]),
        KS([K.CPU, K.AutogradCPU]),
        KS([K.CPU, K.CUDA]),
        KS([K.CPU, K.Meta]),
        KS([K.SparseCPU, K.QuantizedCUDA]),
        KS(),
    ]
    for ks in examples:
        assert highest(torch_ref, ks) == ks.highest_priority_key().name
    assert highest(torch_ref, examples[4]) == "SparseCUDA"


@claim("nb02.table_slots")
def test_table_slots(torch_ref):
    runtime_keys = str(torch_ref._C._dispatch_keyset_full()).removeprefix("DispatchKeySet(").split(", ")
    assert len(runtime_keys) == 136
    assert len(runtime_keys) + 1 == NUM_RUNTIME_ENTRIES == 137  # + the Undefined slot


def _wrapper_on(torch_ref, device: str):
    class Wrapper(torch_ref.Tensor):
        @staticmethod
        def __new__(cls):
            return torch_ref.Tensor._make_wrapper_subclass(cls, (2,), device=device)

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise NotImplementedError

    return Wrapper()


@claim("nb02.tensor_key_sets")
def test_tensor_key_sets(torch_ref):
    C = torch_ref._C
    cpu = C._dispatch_keys(torch_ref.tensor([1.0, 2.0]))
    meta = C._dispatch_keys(torch_ref.empty(2, device="meta"))
    assert cpu.raw_repr() == int(lab.dispatch_keys(lab_torch.tensor([1.0, 2.0])))
    assert meta.raw_repr() == int(lab.dispatch_keys(lab_torch.tensor([1.0, 2.0], device="meta")))
    python_keys = C.DispatchKeySet(C.DispatchKey.Python) | C.DispatchKeySet(C.DispatchKey.PythonTLSSnapshot)
    cuda = C._dispatch_keys(_wrapper_on(torch_ref, "cuda")) - python_keys
    assert cuda.raw_repr() == int(lab.dispatch_keys(lab_torch.tensor([1.0], device="cuda"))) == 0x8014_0001_0002


@claim("nb02.requires_grad_same_keys")
def test_requires_grad_same_keys(torch_ref):
    keys = torch_ref._C._dispatch_keys
    assert keys(torch_ref.ones(2, requires_grad=True)) == keys(torch_ref.ones(2))


@claim("nb02.sparse_quantized_keys")
def test_sparse_and_quantized_keys(torch_ref):
    keys = torch_ref._C._dispatch_keys
    assert (
        str(keys(torch_ref.ones(2).to_sparse()))
        == "DispatchKeySet(SparseCPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensor creation is deprecated in 2.13
        q = torch_ref.quantize_per_tensor(torch_ref.ones(2), 0.1, 0, torch_ref.qint8)
    assert str(keys(q)) == "DispatchKeySet(QuantizedCPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"


@claim("nb02.inference_tensor_keys")
def test_inference_tensor_keys(torch_ref):
    with torch_ref.inference_mode():
        t = torch_ref.ones(2)
    with lab_torch.inference_mode():
        lab_t = lab_torch.ones(2)
    assert str(torch_ref._C._dispatch_keys(t)) == "DispatchKeySet(CPU, AutocastCPU)" == repr(lab.dispatch_keys(lab_t))


@claim("nb02.default_tls")
def test_default_tls(torch_ref):
    C = torch_ref._C
    assert (
        str(C._dispatch_tls_local_include_set())
        == repr(lab.tls_include_set())
        == "DispatchKeySet(BackendSelect, ADInplaceOrView)"
    )
    exclude = C._dispatch_tls_local_exclude_set()
    assert str(exclude) == repr(lab.tls_exclude_set())
    assert re.findall(r"Autocast\w+", str(exclude)) == [key.name for key in lab.tls_exclude_set()]
    assert len(re.findall(r"Autocast\w+", str(exclude))) == 10


@claim("nb02.autograd_exclude_bits")
def test_autograd_exclude_bits(torch_ref):
    C = torch_ref._C
    default = C._dispatch_tls_local_exclude_set()
    with C._AutoDispatchBelowAutograd():
        added = C._dispatch_tls_local_exclude_set() - default
    assert str(added) == "DispatchKeySet(AutogradOther, AutogradNestedTensor)"
    assert added.raw_repr() == int(lab.autograd_dispatch_keyset)  # three bits, two printed names


@claim("nb02.add_fallthrough_keys")
def test_add_fallthrough_keys(torch_ref):
    op = lab.dispatcher.find_op("aten::add.Tensor")
    lab_cleared = ~KS.from_raw(op.fallthrough_mask(int(KS([K.CPU, K.AutogradCPU]))))
    expected = {"BackendSelect", "ADInplaceOrView", "AutocastCPU", "AutocastMTIA", "AutocastMAIA", "AutocastXPU"}
    expected |= {"AutocastMPS", "AutocastCUDA", "FuncTorchVmapMode", "VmapMode"}
    assert fallthrough_keys(torch_ref, "aten::add.Tensor") == expected == {key.name for key in lab_cleared}
    assert "ADInplaceOrView" not in fallthrough_keys(torch_ref, "aten::add_.Tensor")


@claim("nb02.add_call_keyset")
def test_add_call_keyset(torch_ref):
    x = torch_ref.ones(2)
    ks = call_key_set(torch_ref, "aten::add.Tensor", x, x)
    assert repr(ks) == "DispatchKeySet(CPU, AutogradCPU)" and highest(torch_ref, ks) == "AutogradCPU"


@claim("nb02.mixed_devices")
def test_mixed_devices(torch_ref):
    x, m = torch_ref.ones(2), torch_ref.empty(2, device="meta")
    ks = call_key_set(torch_ref, "aten::add.Tensor", x, m)
    assert repr(ks) == "DispatchKeySet(CPU, Meta, AutogradCPU, AutogradMeta)"
    assert highest(torch_ref, ks) == "AutogradMeta"
    try:
        torch_ref.add(x, m)
    except RuntimeError:
        pass
    else:
        raise AssertionError("torch.add(cpu, meta) did not raise")


@claim("nb02.zeros_backendselect")
def test_zeros_backendselect(torch_ref):
    rows = [line for line in torch_ref._C._dispatch_dump_table("aten::zeros").splitlines()]
    backend_select = [line for line in rows if line.startswith("BackendSelect:")]
    assert len(backend_select) == 1 and backend_select[0].endswith("[kernel]")
    assert "RegisterBackendSelect.cpp" in backend_select[0]
    assert repr(call_key_set(torch_ref, "aten::zeros")) == "DispatchKeySet(BackendSelect)"


@claim("nb02.default_included_set_header")
def test_backendselect_is_in_the_default_included_set(torch_ref):
    import pathlib

    header = (pathlib.Path(torch_ref.__file__).parent / "include" / "c10" / "core" / "DispatchKeySet.h").read_text()
    block = re.search(r"default_included_set = DispatchKeySet\(\{(.*?)\}\);", header, re.DOTALL)
    assert block is not None
    assert re.findall(r"DispatchKey::(\w+)", block.group(1)) == ["BackendSelect", "ADInplaceOrView"]
    # what a fresh thread sees is exactly that set: the TLS stores differences from the defaults
    import threading

    seen = []
    worker = threading.Thread(target=lambda: seen.append(str(torch_ref._C._dispatch_tls_local_include_set())))
    worker.start()
    worker.join()
    assert seen == ["DispatchKeySet(BackendSelect, ADInplaceOrView)"]


@claim("nb02.backendselect_kernels")
def test_backendselect_kernels_for_factories_and_tensor_moves(torch_ref):
    def backend_select_row(op: str) -> str:
        return next(line for line in torch_ref._C._dispatch_dump_table(op).splitlines() if line.startswith("BackendSelect:"))

    for op in ("aten::zeros", "aten::_to_copy", "aten::to.dtype_layout"):  # a factory, and two that take a tensor
        assert backend_select_row(op).endswith("[kernel]"), op
    assert "fallthrough" in backend_select_row("aten::add.Tensor")


@claim("nb02.zero_tensor")
def test_zero_tensor_allocates_no_memory_for_its_values(torch_ref):
    import pytest

    z = torch_ref._efficientzerotensor(3)
    assert "ZeroTensor" in str(torch_ref._C._dispatch_keys(z))
    with pytest.raises(RuntimeError, match="invalid python storage"):
        z.untyped_storage().data_ptr()  # a storage object, but no data behind it
    assert torch_ref.equal(z + torch_ref.ones(3), torch_ref.ones(3))
