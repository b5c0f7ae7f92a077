"""Claims notebook 08 (bypassing the dispatcher) makes about PyTorch 2.13, checked against the wheel.

Each test carries the id of a ``<!-- claim: ... -->`` marker in the notebook (see ``claims.py``).
"""

from __future__ import annotations

import pathlib

from claims import claim


def profiled(torch_ref, call) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {row.key: row.count for row in prof.key_averages()}


@claim("nb08.manual_cpp_binding_ops")
def test_manual_cpp_binding_ops(torch_ref):
    import torchgen
    import yaml

    path = pathlib.Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    entries = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    manual = {e["func"].split("(")[0] for e in entries if e.get("manual_cpp_binding")}
    assert len(manual) == 31
    metadata = {"dim", "numel", "size.int", "stride.int", "is_complex", "is_contiguous"}
    plumbing = {"_backward", "set_data", "data", "requires_grad_", "retain_grad", "is_leaf", "output_nr", "_version"}
    assert metadata | plumbing | {"contiguous", "conj"} <= manual
    assert not {"add.Tensor", "mul.Tensor"} & manual


@claim("nb08.manual_binding_shortcuts")
def test_manual_binding_shortcuts(torch_ref):
    x = torch_ref.ones(2, 3)
    assert x.contiguous() is x and x.conj() is x
    assert profiled(torch_ref, lambda: x.contiguous()) == {}
    assert profiled(torch_ref, lambda: x.conj()) == {}
    assert "aten::contiguous" in profiled(torch_ref, lambda: x.t().contiguous())
    c = torch_ref.ones(2, dtype=torch_ref.complex64)
    assert "aten::_conj" in profiled(torch_ref, lambda: c.conj())


@claim("nb08.dispatch_name_kept")
def test_dispatch_name_kept(torch_ref):
    body = (pathlib.Path(torch_ref.__file__).parent / "include" / "ATen" / "core" / "TensorBody.h").read_text()
    assert "at::Tensor __dispatch_contiguous(" in body
    assert "int64_t __dispatch_dim() const;" in body


@claim("nb08.metadata_queries_not_profiled")
def test_metadata_queries_not_profiled(torch_ref):
    x = torch_ref.ones(2)
    assert profiled(torch_ref, lambda: (x.dim(), x.size(0))) == {}
    assert profiled(torch_ref, lambda: torch_ref.ops.aten.dim(x)) == {"aten::dim": 1}


@claim("nb08.collect_callgrind")
def test_collect_callgrind(torch_ref):
    import inspect

    from torch.utils.benchmark import Timer

    assert callable(Timer.collect_callgrind)
    from torch.utils.benchmark.utils.valgrind_wrapper import timer_interface

    assert "callgrind" in inspect.getsource(timer_interface)
    assert "valgrind" in inspect.getsource(timer_interface)
