"""Claims of notebook 01 (why a dispatcher) about PyTorch 2.13, checked against an installed PyTorch."""

from __future__ import annotations

import pytest
from claims import claim, table_rows


@claim("nb01.dtype_not_a_key")
def test_dtype_is_not_a_dispatch_key(torch_ref):
    keys = torch_ref._C._dispatch_keys
    assert keys(torch_ref.zeros(2, dtype=torch_ref.float32)) == keys(torch_ref.zeros(2, dtype=torch_ref.float64))
    assert keys(torch_ref.zeros(2, dtype=torch_ref.int64)) == keys(torch_ref.zeros(2, dtype=torch_ref.float16))
    dtype_words = ("Float", "Double", "Half", "BFloat16", "Int", "Long", "Bool", "Complex")
    assert not [name for name in torch_ref._C.DispatchKey.__members__ if any(w in name for w in dtype_words)]


@claim("nb01.aten_operator_count")
def test_aten_operator_count(torch_ref):
    overloads = [name for name in torch_ref._C._dispatch_get_all_op_names() if name.startswith("aten::")]
    names = {name.split(".")[0] for name in overloads}
    assert 1500 <= len(names) <= 1700  # "about 1,600 aten operators"
    assert len(overloads) > 3000  # "over 3,000 counting overloads"


@claim("nb01.below_autograd_guard")
def test_below_autograd_guard_excludes_autograd(torch_ref):
    import pathlib

    # the tutorial's deprecated guard and AutoDispatchBelowAutograd exclude the same key set
    header = (pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / "core" / "LegacyTypeDispatch.h").read_text()
    for guard in ("AutoNonVariableTypeMode", "AutoDispatchBelowAutograd"):
        start = header.index(f"struct TORCH_API {guard} {{")
        assert "autograd_guard_(c10::autograd_dispatch_keyset)" in header[start : header.index("};", start)]
    C = torch_ref._C
    with C._AutoDispatchBelowAutograd():
        excluded = C._dispatch_tls_local_exclude_set()
        assert C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.AutogradFunctionality)
        assert "AutogradOther" in str(excluded) and "AutogradNestedTensor" in str(excluded)
        assert (torch_ref.ones(2, requires_grad=True) * 2).grad_fn is None


@claim("nb01.autograd_kernel_keyset")
def test_autograd_alias_kernel_sees_cpu_and_autogradcpu(torch_ref, library):
    lib = library("claims01a")
    lib.define("twice(Tensor self) -> Tensor")
    lib.impl("twice", lambda t: t.detach() * 2, "CPU")
    seen = []

    def autograd_kernel(ks, t):
        seen.append(str(ks))
        with torch_ref._C._AutoDispatchBelowAutograd():
            return torch_ref.ops.claims01a.twice(t)

    lib.impl("twice", autograd_kernel, "Autograd", with_keyset=True)
    torch_ref.ops.claims01a.twice(torch_ref.ones(2))
    assert seen == ["DispatchKeySet(CPU, AutogradCPU)"]


@claim("nb01.could_not_run")
def test_could_not_run_error(torch_ref, library):
    lib = library("claims01b")
    lib.define("twice(Tensor self) -> Tensor")
    lib.impl("twice", lambda t: t, "CUDA")
    with pytest.raises(
        NotImplementedError, match=r"^Could not run 'claims01b::twice' with arguments from the 'CPU' backend"
    ):
        torch_ref.ops.claims01b.twice(torch_ref.ones(2))


@claim("nb01.dump_table_rows")
def test_dump_table_rows(torch_ref, library):
    lib = library("claims01c")
    lib.define("twice(Tensor self) -> Tensor")
    lib.impl("twice", lambda t: t, "CPU")
    lib.impl("twice", lambda t: t, "CUDA")
    lib.impl("twice", lambda t: t, "Autograd")
    rows = table_rows(torch_ref, "claims01c::twice")
    assert rows["CPU"].endswith("[kernel]") and rows["CUDA"].endswith("[kernel]")
    assert rows["AutogradCPU"].endswith("[autograd kernel]") and rows["AutogradCUDA"].endswith("[autograd kernel]")
    assert rows["Meta"] == "registered at aten/src/ATen/core/MetaFallbackKernel.cpp:23 [backend fallback]"
    assert "FPGA" not in rows and "Lazy" not in rows  # keys with nothing are not printed
