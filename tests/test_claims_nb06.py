"""Claims notebook 06 (structured kernels) makes about PyTorch 2.13, checked against the installed wheel.

Each test carries the id of a ``<!-- claim: ... -->`` marker in the notebook (see ``claims.py``).
"""

from __future__ import annotations

import pathlib
import warnings

import pytest
from claims import claim, torch_213


def header(torch_ref, name: str) -> str:
    return (pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / name).read_text()


@pytest.fixture(scope="module")
def add_group():
    """torchgen's model of the add group, and the parsed yaml it came from."""
    torch_213()
    import torchgen
    from torchgen.gen import get_grouped_native_functions, parse_native_yaml
    from torchgen.model import NativeFunctionsGroup

    folder = pathlib.Path(torchgen.__file__).parent / "packaged" / "ATen" / "native"
    parsed = parse_native_yaml(str(folder / "native_functions.yaml"), str(folder / "tags.yaml"))
    (group,) = [
        g
        for g in get_grouped_native_functions(parsed.native_functions)
        if isinstance(g, NativeFunctionsGroup) and str(g.out.func.name) == "add.out"
    ]
    return parsed, group


def cpu_generator(parsed, group):
    from torchgen.dest.register_dispatch_key import StructuredRegisterDispatchKey
    from torchgen.model import DispatchKey
    from torchgen.selective_build.selector import SelectiveBuilder
    from torchgen.utils import Target

    return StructuredRegisterDispatchKey(
        parsed.backend_indices[DispatchKey.CPU],
        Target.ANONYMOUS_DEFINITION,
        SelectiveBuilder.get_nop_selector(),
        rocm=False,
        symint=False,
        class_method_name=None,
        skip_dispatcher_op_registration=False,
        g=group,
    )


@claim("nb06.set_output_chain")
def test_set_output_chain(torch_ref, add_group):
    meta = header(torch_ref, "TensorMeta.h")
    assert "virtual void set_output_strided(" in meta
    assert "virtual void set_output_raw_strided(" in meta
    assert "void set_output_contiguous(" in meta
    assert 'TORCH_INTERNAL_ASSERT(false, "set_output_strided not implemented.");' in meta
    iterator = header(torch_ref, "TensorIterator.h")
    base = iterator[iterator.index("struct TORCH_API TensorIteratorBase") : iterator.index("struct TORCH_API TensorIterator final")]
    assert "void set_output_raw_strided(" in base and ") override;" in base
    # the generated classes: both overrides, each ending with the parent's set_output_raw_strided
    parsed, group = add_group
    gen = cpu_generator(parsed, group)
    for variant in (group.functional, group.inplace, group.out):
        text = gen.gen_one(variant)
        assert "void set_output_strided(" in text and "void set_output_raw_strided(" in text
        parent = "at::native::structured_ufunc_add_CPU::set_output_raw_strided(output_idx, sizes, strides, options);"
        assert text.count(parent) == 2
        assert text.index("// super must happen after") < text.rindex(parent)
    assert group.out.structured_inherits == "TensorIteratorBase"


@claim("nb06.create_out_cpu")
def test_create_out_cpu(add_group):
    from torchgen.dest.register_dispatch_key import gen_create_out_helper
    from torchgen.model import DispatchKey

    parsed, _ = add_group
    (helper,) = gen_create_out_helper(parsed.backend_indices[DispatchKey.CPU])
    assert "return at::detail::empty_cpu(sizes, options);" in helper
    assert "return at::detail::empty_strided_cpu(sizes, strides, options);" in helper


@claim("nb06.inplace_broadcast_error")
def test_inplace_broadcast_error(torch_ref):
    with pytest.raises(RuntimeError, match=r"^output with shape \[3\] doesn't match the broadcast shape \[2, 3\]$"):
        torch_ref.tensor([1.0, 2.0, 3.0]).add_(torch_ref.tensor([[10.0], [20.0]]))


@claim("nb06.result_types")
def test_result_types(torch_ref):
    T = torch_ref.tensor
    rt = torch_ref.result_type
    assert rt(T([1, 2, 3]), T([1.0, 2.0, 3.0])) == torch_ref.float32
    assert rt(T([1, 2, 3]), 2.5) == torch_ref.float32
    assert rt(T([1.0, 2.0, 3.0], dtype=torch_ref.float16), T(2.0, dtype=torch_ref.float64)) == torch_ref.float16
    assert rt(T([1.0, 2.0, 3.0], dtype=torch_ref.float16), T([2.0], dtype=torch_ref.float64)) == torch_ref.float64
    assert rt(T([True, False]), 3) == torch_ref.int64


@claim("nb06.meta_errors")
def test_meta_errors(torch_ref):
    T = torch_ref.tensor
    assert torch_ref.add(torch_ref.empty(2, 1), torch_ref.empty(1, 3)).shape == (2, 3)
    with pytest.raises(RuntimeError) as e:
        torch_ref.add(torch_ref.empty(2, 3), torch_ref.empty(4))
    assert str(e.value) == "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
    with pytest.raises(RuntimeError) as e:
        torch_ref.add(T([1, 2]), T([3, 4]), alpha=1.5)
    assert str(e.value) == "For integral input tensors, argument alpha must not be a floating point number."


@claim("nb06.meta_add_python_registration")
def test_meta_add_python_registration(torch_ref):
    lines = torch_ref._C._dispatch_dump("aten::add.Tensor").splitlines()
    assert any(x.startswith("Meta: ") and "torch/_meta_registrations.py" in x for x in lines)
    assert any(x.startswith("Meta (inactive): ") and "RegisterMeta_" in x for x in lines)
    x = torch_ref.empty(4096, 1_000_000, device="meta")
    with pytest.raises(RuntimeError, match=r"^Attempting to broadcast a dimension of length 4096 "):
        x.add(torch_ref.empty(4096, device="meta"))


@claim("nb06.out_rules")
def test_out_rules(torch_ref):
    a = torch_ref.tensor([1, 2, 3])
    f = torch_ref.tensor([0.5, 0.5, 0.5])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = torch_ref.add(a, a, out=torch_ref.empty(2))
    assert r.tolist() == [2.0, 4.0, 6.0]
    # (PyTorch 2.13 may report the warning more than once; the lab shows it once)
    assert {str(w.message).split(". ")[0] + "." for w in caught} == {
        "An output with one or more elements was resized since it had shape [2], which does not match the "
        "required output shape [3]."
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch_ref.add(a, a, out=torch_ref.empty(0))
    assert not caught
    with pytest.raises(RuntimeError, match=r"^result type Float can't be cast to the desired output type Long$"):
        torch_ref.add(a, f, out=torch_ref.empty(3, dtype=torch_ref.int64))


@claim("nb06.inplace_dtype_error")
def test_inplace_dtype_error(torch_ref):
    with pytest.raises(RuntimeError, match=r"^result type Float can't be cast to the desired output type Long$"):
        torch_ref.tensor([1, 2, 3]).add_(torch_ref.tensor([0.5, 0.5, 0.5]))
    # the same safe-cast rule as out=: an int64 result into float32 self is fine
    f = torch_ref.tensor([0.5, 0.5, 0.5])
    assert f.add_(torch_ref.tensor([1, 2, 3])).dtype == torch_ref.float32


@claim("nb06.ufunc_generated_impl")
def test_ufunc_generated_impl(torch_ref):
    import inspect

    import torchgen
    import yaml
    from torchgen.dest import ufunc

    path = pathlib.Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    entries = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (add_out,) = [e for e in entries if e["func"].startswith("add.out(")]
    assert "ufunc_inner_loop" in add_out
    assert not any("CPU" in k.split(", ") for k in add_out["dispatch"])  # no hand-written CPU kernel is named
    # torchgen's ufunc generator writes the impl() of the CPU class: one call of the <op>_stub
    source = inspect.getsource(ufunc.compute_ufunc_cpu)
    assert "StructuredImplSignature(g, ufunc.kernel_name(g, DispatchKey.CPU))" in source
    assert "stub_sig.call(sig.arguments())" in source
    assert '_stub"' in inspect.getsource(ufunc.StubSignature)
    import torchgen.gen

    assert 'f"UfuncCPU_{name}.cpp"' in inspect.getsource(torchgen.gen)
