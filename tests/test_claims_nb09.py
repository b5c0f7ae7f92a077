"""Claims notebook 09 (the real PyTorch) makes in its prose about PyTorch 2.13.

The notebook's side-by-side comparisons are asserted by ``tests/test_real_pytorch_agreement.py`` and
``tests/test_realtorch.py``; this file checks the sentences around them that no cell prints. Each test
carries the id of a ``<!-- claim: ... -->`` marker in the notebook (see ``claims.py``).
"""

from __future__ import annotations

import pathlib

from claims import claim


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


def functionality_keys(torch_ref) -> list[str]:
    """The functionality keys of the installed wheel's ``c10/core/DispatchKey.h``, lowest priority first."""
    import re

    header = pathlib.Path(torch_ref.__file__).parent / "include" / "c10" / "core" / "DispatchKey.h"
    text = header.read_text()
    body = text[text.index("enum class DispatchKey : uint16_t") : text.index("\n  EndOfFunctionalityKeys,")]
    body = re.sub(r"//[^\n]*", "", body)
    return re.findall(r"^\s*([A-Za-z_]\w*)\s*(?:=[^,]*)?,", body, re.M)


@claim("nb09.functorch_key_order")
def test_functorch_key_order(torch_ref):
    keys = functionality_keys(torch_ref)
    assert keys[0] == "Undefined"
    top = keys[keys.index("FuncTorchDynamicLayerFrontMode") + 1 :]
    assert top == ["TESTING_ONLY_GenericWrapper", "TESTING_ONLY_GenericMode", "PreDispatch", "PythonDispatcher"]
    back = keys.index("FuncTorchDynamicLayerBackMode")
    assert keys.index("Python") < back < keys.index("ADInplaceOrView") < keys.index("AutogradOther")
    # the same order in the real table of a fresh operator (rows come in slot order)
    lib = torch_ref.library.Library("claims_nb09", "DEF")
    try:
        lib.define("f(Tensor x) -> Tensor")
        rows = [line.split(":")[0] for line in torch_ref._C._dispatch_dump_table("claims_nb09::f").splitlines()]
    finally:
        lib._destroy()
    assert rows[-1] == "PythonDispatcher"
    assert rows.index("FuncTorchDynamicLayerFrontMode") < rows.index("PreDispatch") < rows.index("PythonDispatcher")


@claim("nb09.grad_wrapper_key")
def test_grad_wrapper_key(torch_ref):
    from torch.func import grad

    seen = []

    def f(x):
        seen.append(torch_ref._C._dispatch_keys(x))
        return x.sin().sum()

    grad(f)(torch_ref.tensor([1.0, 2.0]))
    assert seen[0].has(torch_ref._C.DispatchKey.FuncTorchGradWrapper)
    assert not torch_ref._C._dispatch_keys(torch_ref.tensor([1.0])).has(torch_ref._C.DispatchKey.FuncTorchGradWrapper)


@claim("nb09.exclude_autograd_functionality")
def test_exclude_autograd_functionality(torch_ref):
    C = torch_ref._C
    default = C._dispatch_tls_local_exclude_set()
    with C._AutoDispatchBelowAutograd():
        excluded = C._dispatch_tls_local_exclude_set()
    assert str(excluded - default) == "DispatchKeySet(AutogradOther, AutogradNestedTensor)"
    # three functionality bits: AutogradOther, AutogradFunctionality, AutogradNestedTensor
    assert bin((excluded - default).raw_repr()).count("1") == 3
    keys = C._dispatch_keys(torch_ref.tensor([1.0]))
    assert keys.has(C.DispatchKey.AutogradCPU)
    assert not (keys - excluded).has(C.DispatchKey.AutogradCPU)
    assert (keys - excluded).has(C.DispatchKey.CPU)


@claim("nb09.cast_inside_kernel")
def test_cast_inside_kernel(torch_ref):
    a = torch_ref.tensor([1, 2])
    x = torch_ref.tensor([1.0, 2.0])
    counts = profiled(torch_ref, lambda: torch_ref.add(a, x))
    assert counts == {"aten::add": 1, "aten::to": 1, "aten::_to_copy": 1, "aten::empty_strided": 1, "aten::copy_": 1}
    # same dtypes: nothing but the add
    assert profiled(torch_ref, lambda: torch_ref.add(x, x)) == {"aten::add": 1}


def header(torch_ref, *parts: str) -> str:
    return pathlib.Path(torch_ref.__file__).parent.joinpath("include", *parts).read_text()


@claim("nb09.ambiguous_autogradother_source")
def test_ambiguous_autogradother_source(torch_ref):
    text = header(torch_ref, "ATen", "core", "dispatch", "OperatorEntry.h")
    assert "computeDispatchTableEntryWithDebug(" in text
    assert "ambiguousAutogradOtherKernel()" in text


@claim("nb09.record_function_in_call")
def test_record_function_in_call(torch_ref):
    text = header(torch_ref, "ATen", "core", "dispatch", "Dispatcher.h")
    call = text[text.index("Dispatcher::callWithDispatchKeySlowPath(") :]
    assert "at::RecordFunction guard(" in call[:2000]
    assert "// do not use RecordFunction on redispatch" in text


@claim("nb09.python_dispatcher_key")
def test_python_dispatcher_key(torch_ref):
    keys = functionality_keys(torch_ref)
    assert keys[-1] == "PythonDispatcher"  # the highest functionality key
    text = header(torch_ref, "c10", "core", "DispatchKey.h")
    comment = text[: text.index("\n  PythonDispatcher,")].rsplit("PreDispatch,", 1)[1]
    assert "skip running the C++ dispatcher" in " ".join(comment.replace("//", " ").split())
    assert torch_ref._C._EnablePythonDispatcher is not None  # the switch (torch._dispatch.python)


@claim("nb09.add_functorch_batched_kernel")
def test_add_functorch_batched_kernel_on_both_sides(torch_ref):
    import re

    import labsupport as lab
    import labsupport.torch  # registers the aten operators

    def row(text: str) -> str:
        line = next(r for r in text.splitlines() if r.startswith("FuncTorchBatched:"))
        return re.sub(r"/\S*?/pytorch/pytorch/", "", line)

    expected = "FuncTorchBatched: registered at aten/src/ATen/functorch/BatchRulesBinaryOps.cpp:353 [kernel]"
    assert row(torch_ref._C._dispatch_dump_table("aten::add.Tensor")) == expected
    assert row(lab.dispatcher.dump_table("aten::add.Tensor")) == expected


# --- section 5b: the same logging mode on both sides --------------------------------------------

def _aten_logs(tm, mode_base) -> dict[str, list[str]]:
    """The aten calls a logging TorchDispatchMode sees for section 5b's programs, on ``tm``."""

    class AtenLog(mode_base):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls.append(str(func).removeprefix("aten."))
            return func(*args, **(kwargs or {}))

    def fresh():
        tm.manual_seed(0)
        return tm.randn(2, 2, requires_grad=True), tm.randn(2, 2)

    def in_place():
        a, b = fresh()
        c = tm.add(a, b)
        c.add_(b)
        return c.sum()

    programs = {
        "forward": lambda: tm.add(*fresh()).sum(),
        "in_place": in_place,
        "factories": lambda: (tm.zeros(2), tm.ones(2)),
        "add_backward": lambda: tm.add(*fresh()).sum().backward(),
        "mul_backward": lambda: tm.mul(*fresh()).sum().backward(),
        "matmul_backward": lambda: tm.matmul(*fresh()).sum().backward(),
    }
    logs = {}
    for name, program in programs.items():
        with AtenLog() as mode:
            program()
        logs[name] = mode.calls
    return logs


def _both_logs(torch_ref):
    import importlib

    import labsupport.torch as lab_torch
    from labsupport.utils._python_dispatch import TorchDispatchMode

    real = _aten_logs(torch_ref, importlib.import_module("torch.utils._python_dispatch").TorchDispatchMode)
    return real, _aten_logs(lab_torch, TorchDispatchMode)


@claim("nb09.logging_mode_forward_same")
def test_logging_mode_forward_same(torch_ref):
    real, lab = _both_logs(torch_ref)
    for name in ("forward", "in_place", "factories"):
        assert real[name] == lab[name], name
    assert real["in_place"] == ["randn.default", "randn.default", "add.Tensor", "add_.Tensor", "sum.default"]


@claim("nb09.logging_mode_backward_engine_calls")
def test_logging_mode_backward_engine_calls(torch_ref):
    """Backward too: the engine's seed (ones_like), AccumulateGrad's detach or new_empty_strided + copy_,
    and mm's t() are dispatched on both, so the logs are equal."""
    real, lab = _both_logs(torch_ref)
    for name in ("add_backward", "mul_backward", "matmul_backward"):
        assert real[name] == lab[name], name
        assert "ones_like.default" in real[name]
    assert "t.default" in real["matmul_backward"] and "detach.default" in real["mul_backward"]
    assert real["add_backward"][-2:] == ["new_empty_strided.default", "copy_.default"]


@claim("nb09.dispatch_mode_func_below_autograd")
def test_dispatch_mode_func_below_autograd(torch_ref):
    import importlib

    pd = importlib.import_module("torch.utils._python_dispatch")
    seen = {}

    class Peek(pd.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen["func"] = (str(func), type(func).__name__)
            seen["autograd_excluded"] = torch_ref._C._dispatch_tls_is_dispatch_key_excluded(
                torch_ref._C.DispatchKey.AutogradFunctionality)
            return func(*args, **(kwargs or {}))

    a = torch_ref.ones(2, requires_grad=True)
    with Peek():
        out = torch_ref.add(a, a)
    assert seen == {"func": ("aten.add.Tensor", "OpOverload"), "autograd_excluded": True}
    assert type(out.grad_fn).__name__ == "AddBackward0"  # autograd ran above the mode
