"""Claims notebook 09 (the real PyTorch) makes in its prose about PyTorch 2.13.

The notebook's side-by-side comparisons are asserted by ``tests/test_real_pytorch_agreement.py`` and
``tests/test_realtorch.py``; this file checks the sentences around them that no cell prints. Each test
carries the id of a ``<!-- claim: ... -->`` marker in the notebook (see ``claims.py``).
"""

from __future__ import annotations

import pathlib

import pytest
from claims import claim


def torch_213():
    """The installed PyTorch if it is the 2.13 these claims are about, else a skip."""
    torch = pytest.importorskip("torch")
    if not torch.__version__.startswith("2.13."):
        pytest.skip(f"the course's claims are about PyTorch 2.13, this is {torch.__version__}")
    return torch


@pytest.fixture
def torch_ref():
    """conftest's ``torch_ref``, restricted to PyTorch 2.13."""
    return torch_213()


def profiled(torch_ref, call) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {row.key: row.count for row in prof.key_averages()}


@claim("nb09.size_unobserved")
def test_size_unobserved(torch_ref):
    x = torch_ref.ones(2)
    assert profiled(torch_ref, lambda: torch_ref.ops.aten.size.int(x, 0)) == {}
    assert profiled(torch_ref, lambda: torch_ref.ops.aten.dim(x)) == {"aten::dim": 1}


@claim("nb09.manual_cpp_binding_metadata")
def test_manual_cpp_binding_metadata(torch_ref):
    import torchgen
    import yaml

    path = pathlib.Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    entries = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    manual = {e["func"].split("(")[0] for e in entries if e.get("manual_cpp_binding")}
    assert len(manual) == 31
    assert {"dim", "size.int", "numel", "stride.int"} <= manual
    x = torch_ref.ones(2)
    assert profiled(torch_ref, lambda: (x.dim(), x.size(0), x.numel(), x.stride(0))) == {}


@claim("nb09.ceanf_for_structured")
def test_ceanf_for_structured(torch_ref):
    import torchgen
    import yaml

    path = pathlib.Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    entries = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    delegating = [e["func"].split("(")[0] for e in entries if e.get("structured_delegate")]
    assert len(delegating) == 385
    for name in delegating:
        assert "CompositeExplicitAutogradNonFunctional[alias]" in torch_ref._C._dispatch_dump("aten::" + name), name
