"""The lab and an installed PyTorch 2.13 agree on what notebook 09 puts side by side.

One test per comparison of the notebook: tensor key sets and the TLS sets (section 1), the computed
table of ``aten::add.Tensor`` (section 2), ``PythonDispatcher``'s text (section 3), the profiler's
names and counts (sections 4 and 5) and the order of the real backtrace's frames (section 7).

Covered elsewhere and not repeated here:

* the gdb frame names of the real ``torch.add`` and its callgrind instruction count:
  ``tests/test_realtorch.py`` (this file never runs valgrind);
* dump tables of many random registration sets, and all 1536 registration sets ``PythonDispatcher``
  accepts: ``tests/test_dispatch_tables.py``.

Without PyTorch the whole module skips; with a PyTorch other than 2.13 too (the lab mirrors 2.13:
file:line strings and kernel sets change between versions). The gdb test also skips without gdb.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")
if not torch.__version__.startswith("2.13."):
    pytest.skip(f"the lab mirrors PyTorch 2.13, this is {torch.__version__}", allow_module_level=True)

import labsupport as lab  # noqa: E402
import labsupport.torch as lt  # noqa: E402
from labsupport import DispatchKey as K  # noqa: E402
from labsupport.aten.tensor import compute_key_set  # noqa: E402
from labsupport.tools import realtorch  # noqa: E402

pytestmark = pytest.mark.torch


# ------------------------------------------------------------------ 1. key sets and TLS sets


def _tensor_pairs():
    """The same tensor made by the lab's front end and by PyTorch."""
    pairs = {}
    for tm in (lt, torch):
        a = tm.tensor([1.0, 2.0])
        w = tm.tensor([1.0, 2.0], requires_grad=True)
        made = {
            "cpu float32": a,
            "cpu requires_grad": w,
            "cpu int64": tm.tensor([1, 2]),
            "cpu 0-dim": tm.tensor(3.0),
            "cpu factory (zeros)": tm.zeros(2, 3),
            "meta": tm.empty(2, device="meta"),
            "meta requires_grad": tm.empty(2, device="meta", requires_grad=True),
            "result of add": tm.add(a, a),
            "result with a grad_fn": tm.add(w, w),
        }
        for name, t in made.items():
            pairs.setdefault(name, []).append(t)
    return pairs


@pytest.mark.parametrize("name", list(_tensor_pairs()))
def test_tensor_key_sets_match(name):
    mine, real = _tensor_pairs()[name]
    real_keys = torch._C._dispatch_keys(real)
    assert repr(lab.dispatch_keys(mine)) == str(real_keys)
    assert int(lab.dispatch_keys(mine)) == real_keys.raw_repr()


def test_inference_tensor_key_set_matches_the_labs_constant():
    """The key set the lab gives a tensor made under ``torch.inference_mode()``
    (``compute_key_set(device, inference=True)``) is what PyTorch gives one."""
    with torch.inference_mode():
        real = torch.tensor([1.0, 2.0])
        real_meta = torch.empty(2, device="meta")
    assert compute_key_set("cpu", inference=True) == torch._C._dispatch_keys(real).raw_repr()
    assert compute_key_set("meta", inference=True) == torch._C._dispatch_keys(real_meta).raw_repr()


def _tls(include_set, exclude_set):
    return str(include_set()), str(exclude_set())


GUARDS = {
    "default": (lambda: [], lambda: []),
    "AutoDispatchBelowAutograd": (
        lambda: [lab.AutoDispatchBelowAutograd()],
        lambda: [torch._C._AutoDispatchBelowAutograd()],
    ),
    "AutoDispatchBelowADInplaceOrView": (
        lambda: [lab.AutoDispatchBelowADInplaceOrView()],
        lambda: [torch._C._AutoDispatchBelowADInplaceOrView()],
    ),
    "both, nested": (
        lambda: [lab.AutoDispatchBelowAutograd(), lab.AutoDispatchBelowADInplaceOrView()],
        lambda: [torch._C._AutoDispatchBelowAutograd(), torch._C._AutoDispatchBelowADInplaceOrView()],
    ),
    "include Python": (
        lambda: [lab.IncludeDispatchKeyGuard(K.Python)],
        lambda: [torch._C._IncludeDispatchKeyGuard(torch._C.DispatchKey.Python)],
    ),
    "exclude CPU and AutocastCPU": (
        lambda: [lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet([K.AutocastCPU, K.CPU]))],
        lambda: [
            torch._C._ExcludeDispatchKeyGuard(
                torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
                | torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
            )
        ],
    ),
}


@pytest.mark.parametrize("name", list(GUARDS))
def test_tls_sets_match_inside_guards(name):
    lab_guards, torch_guards = GUARDS[name]
    sets = []
    for guards, include, exclude in [
        (lab_guards, lab.tls_include_set, lab.tls_exclude_set),
        (torch_guards, torch._C._dispatch_tls_local_include_set, torch._C._dispatch_tls_local_exclude_set),
    ]:
        entered = guards()
        for guard in entered:
            guard.__enter__()
        try:
            sets.append(_tls(include, exclude))
        finally:
            for guard in reversed(entered):
                guard.__exit__(None, None, None)
    assert sets[0] == sets[1]
    assert _tls(lab.tls_include_set, lab.tls_exclude_set) == _tls(
        torch._C._dispatch_tls_local_include_set, torch._C._dispatch_tls_local_exclude_set
    ), "the guards restored different defaults"


# ------------------------------------------------------------------ 2. the table of aten::add.Tensor
#
# Normalisation (the same as notebook 09's `table_rows`): every line of `_dispatch_dump_table` /
# `lab.dispatcher.dump_table` is `Key: [fallthrough ]<debug> [<label>]`, parsed into
# key -> (label, fallthrough, debug). In `debug`, a folder prefix up to PyTorch's build-machine
# checkout (`/__w/pytorch/pytorch/`) or up to `site-packages/` is dropped; nothing else changes.
# Compared on the keys both tables have: their order, label and fallthrough flag, and for global
# fallbacks the debug string. Kernel rows are compared by label only: PyTorch prints where a
# kernel was registered (`registered at <file>:<line>`), the lab prints the kernel's function name.

ROW = re.compile(r"(?P<key>\w+): (?P<fallthrough>fallthrough )?(?P<debug>.*) \[(?P<label>[a-z ]+)\]$")
BUILD_FOLDERS = re.compile(r"^(registered at )\S*?(/__w/pytorch/pytorch/|site-packages/)")


class Row(NamedTuple):
    label: str
    fallthrough: bool
    debug: str


def table_rows(text: str) -> dict[str, Row]:
    rows = {}
    for line in text.splitlines():
        match = ROW.match(line)
        assert match, f"not a dump_table line: {line!r}"
        rows[match["key"]] = Row(match["label"], bool(match["fallthrough"]), BUILD_FOLDERS.sub(r"\1", match["debug"]))
    return rows


# Shared keys whose entries differ, each for a known reason (notebook 09 explains them):
# (PyTorch's label, the lab's label)
ADD_LABEL_DIFFERENCES = {
    "ZeroTensor": ("kernel", "backend fallback"),  # RegisterZeroTensor_0.cpp; the lab has no ZeroTensor kernel
    "Batched": ("kernel", "backend fallback"),  # a legacy batching rule, LegacyBatchingRegistrations.cpp
}
if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
    # a CPU-only wheel has no CUDA kernels: the CEANF kernel fills CUDA; the lab simulates a CUDA kernel
    ADD_LABEL_DIFFERENCES["CUDA"] = ("default backend kernel", "kernel")

# Rows only PyTorch has: explicit kernels of native_functions.yaml that ops.yaml leaves out ...
ADD_KERNELS_ONLY_IN_PYTORCH = {
    "MkldnnCPU",
    "SparseCPU",
    "SparseMeta",
    "SparseCsrCPU",
    "SparseCsrMeta",
    "NestedTensorCPU",
    "NestedTensorHPU",
}
# ... and the CompositeExplicitAutogradNonFunctional kernel of structured ops, which the lab does not register.
CEANF_FILE = "build/aten/src/ATen/RegisterCompositeExplicitAutogradNonFunctional_0.cpp"


@pytest.fixture(scope="module")
def add_tables():
    real = table_rows(torch._C._dispatch_dump_table("aten::add.Tensor"))
    mine = table_rows(lab.dispatcher.dump_table("aten::add.Tensor"))
    return real, mine


def test_add_table_every_lab_key_is_in_pytorch_in_the_same_order(add_tables):
    real, mine = add_tables
    assert set(mine) <= set(real)
    assert [key for key in real if key in mine] == list(mine)


def test_add_table_labels_agree_on_shared_keys_except_the_known_ones(add_tables):
    real, mine = add_tables
    differ = {key: (real[key].label, mine[key].label) for key in mine if real[key][:2] != mine[key][:2]}
    assert differ == ADD_LABEL_DIFFERENCES
    for key, (_, lab_label) in differ.items():
        if lab_label == "backend fallback":  # what PyTorch shows for an operator without that kernel
            assert not mine[key].fallthrough and mine[key].debug.startswith("registered at ")


def test_add_table_global_fallbacks_print_the_same_file_and_line(add_tables):
    real, mine = add_tables
    fallbacks = [key for key in mine if real[key].label == mine[key].label == "backend fallback"]
    assert len(fallbacks) >= 20
    assert {key: real[key] for key in fallbacks} == {key: mine[key] for key in fallbacks}


def test_add_table_kernel_rows_differ_only_in_how_they_are_named(add_tables):
    real, mine = add_tables
    assert mine["CPU"] == Row("kernel", False, "wrapper_CPU_add_Tensor")
    assert real["CPU"].debug.startswith("registered at build/aten/src/ATen/RegisterCPU_")
    assert mine["Meta"] == Row("kernel", False, "wrapper_Meta_add_Tensor")
    # 2.13's Meta kernel for add is a Python registration overriding the structured C++ one
    assert re.fullmatch(r"registered at torch/_meta_registrations\.py:\d+", real["Meta"].debug)
    autograd = [key for key in mine if mine[key].label == "autograd kernel"]
    assert len(autograd) == 18
    assert {mine[key].debug for key in autograd} == {"add_Tensor"}
    assert {real[key].debug for key in autograd} == {real["AutogradCPU"].debug}
    assert "torch/csrc/autograd/generated/VariableType_" in real["AutogradCPU"].debug


def test_add_table_rows_only_in_pytorch_are_ceanf_or_left_out_kernels(add_tables):
    real, mine = add_tables
    only_real = {key: row for key, row in real.items() if key not in mine}
    kernels = {key for key, row in only_real.items() if row.label == "kernel"}
    assert kernels == ADD_KERNELS_ONLY_IN_PYTORCH
    rest = {key: row for key, row in only_real.items() if key not in kernels}
    assert "Undefined" in rest and next(iter(real)) == "Undefined"
    assert {row.label for row in rest.values()} == {"default backend kernel"}
    assert {row.debug.rsplit(":", 1)[0] for row in rest.values()} == {"registered at " + CEANF_FILE}


# ------------------------------------------------------------------ 3. PythonDispatcher

PD_SETS = [  # the registration sets notebook 09 shows
    ["CPU", "XLA", "AutogradCPU", "CompositeImplicitAutograd"],
    ["FPGA", "CompositeImplicitAutograd"],
    ["CompositeExplicitAutograd", "Autograd"],
]


@pytest.mark.parametrize("registrations", PD_SETS, ids=["+".join(s) for s in PD_SETS])
def test_python_dispatcher_text_is_identical(registrations):
    from torch._python_dispatcher import PythonDispatcher

    real, mine = PythonDispatcher(), lab.PythonDispatcher()
    real.register(registrations)
    mine.register(registrations)
    assert mine.dispatchTable() == real.dispatchTable()
    assert mine.registrations() == real.registrations()
    del real  # frees __test__::foo for the next PythonDispatcher


# ------------------------------------------------------------------ 4./5. the profiler


def _calls(tm):
    """Notebook 09's profiled calls (and a few more), for a front end: the lab's `lt` or `torch`."""
    a = tm.tensor([1.0, 2.0])
    w = tm.tensor([1.0, 2.0], requires_grad=True)
    out = tm.empty(2)
    return {
        "torch.add(a, a), 3 times": lambda: [tm.add(a, a) for _ in range(3)],
        "torch.add(w, w), w requires grad": lambda: tm.add(w, w),
        "torch.randn(2)": lambda: tm.randn(2),
        "torch.zeros(2)": lambda: tm.zeros(2),
        "a.add(a), the method": lambda: a.add(a),
        "torch.add(a, a, alpha=2)": lambda: tm.add(a, a, alpha=2),
        "torch.add(a, a, out=out)": lambda: tm.add(a, a, out=out),
        "a.add_(a), in place": lambda: a.add_(a),
        "torch.mul(a, a), a.neg()": lambda: (tm.mul(a, a), a.neg()),
        # bypasses: manual bindings that read the TensorImpl, and plain attributes
        "a.dim(), a.size(0), a.shape": lambda: (a.dim(), a.size(0), a.shape),
        "a.numel(), a.requires_grad, w.is_leaf": lambda: (a.numel(), a.requires_grad, w.is_leaf),
    }


def _real_counts(call) -> dict[str, int]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {row.key: row.count for row in prof.key_averages()}


def _lab_counts(call) -> dict[str, int]:
    with lab.profiler.profile() as prof:
        call()
    return prof.counts()


def test_profiler_names_and_counts_agree():
    mine, real = _calls(lt), _calls(torch)
    got = {name: (_lab_counts(mine[name]), _real_counts(real[name])) for name in mine}
    assert {name: lab_counts for name, (lab_counts, _) in got.items()} == {
        name: real_counts for name, (_, real_counts) in got.items()
    }
    assert got["torch.add(a, a), 3 times"][1] == {"aten::add": 3}
    assert got["torch.add(w, w), w requires grad"][1] == {"aten::add": 1}  # two kernels, one event
    assert got["a.dim(), a.size(0), a.shape"][1] == {}


def test_dim_is_an_operator_that_x_dim_does_not_use():
    a = torch.tensor([1.0, 2.0])
    assert _real_counts(lambda: torch.ops.aten.dim(a)) == {"aten::dim": 1}
    assert _real_counts(lambda: a.dim()) == {}


# ------------------------------------------------------------------ 7. the real backtrace, frame order


def test_real_backtrace_has_the_lab_frames_in_order_except_the_inlined_dispatcher():
    """gdb's frames at the CPU kernel of a release wheel, against the lab's frames at the same point
    (``lab.trace``): the same functions in the same order, except ``c10::Dispatcher::call`` and
    ``::redispatch``, inline templates with no frame of their own in the release build, and the
    ``c10::impl::`` glue PyTorch puts before each kernel (the frame names themselves are checked by
    tests/test_realtorch.py)."""
    missing = [t for t in ("torch", "gdb") if not realtorch.status()[t]]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    native = [f for f in realtorch.gdb_backtrace() if f.is_pytorch]
    a, b = lt.tensor([1.0, 1.0]), lt.tensor([1.0, 1.0])
    with lab.trace() as rec:
        lt.add(a, b)
    stop = rec.find("at::native::structured_ufunc_add_CPU::impl")
    lab_chain = [f.torch_name for f in [stop, *stop.ancestors()]]  # innermost first, as gdb prints

    aligned = realtorch.align_frames(lab_chain, native)
    assert [name for name, index in aligned if index is None] == [
        "c10::Dispatcher::redispatch",
        "c10::Dispatcher::call",
    ]
    indices = [index for _, index in aligned if index is not None]
    assert indices == sorted(set(indices)), "the shared frames come in a different order"
    assert native[0].index == 0 and native[0].name == lab_chain[0]
    assert not [f for f in native if f.name.startswith("c10::Dispatcher::")]
    glue = [f for f in native if f.name not in lab_chain]
    assert glue and all(f.name.startswith("c10::impl::") for f in glue)
    # one glue frame right below each of the two kernels the dispatcher called
    for kernel in (
        "at::(anonymous namespace)::wrapper_CPU_add_Tensor",
        "torch::autograd::VariableType::(anonymous namespace)::add_Tensor",
    ):
        position = [f.name for f in native].index(kernel)
        assert native[position + 1].name.startswith("c10::impl::")
