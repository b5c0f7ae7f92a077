"""What does autocast cost? ``torch.mm`` (4x4) and ``torch.add`` (2 elements) on CPU float32 tensors,
with autocast off and on, in one process (interleaved medians of repeats, microseconds per call).

* ``torch.add`` has no autocast kernel: with autocast on, the AutocastCPU key is out of the exclude
  set but its fallthrough is masked out of the call, so the cost should be the same as off.
* ``torch.mm`` under autocast runs the AutocastCPU kernel (WrapFunction_<lower_precision_fp>), which
  casts both inputs (two ``aten::to -> aten::_to_copy -> empty + copy_`` chains) and dispatches mm
  again: several more dispatches per call. A weight that requires grad is cast once (cached).
* PyTorch's own figures are printed beside the lab's when PyTorch is installed.

Run: ``python benchmarks/autocast_overhead.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import labsupport as lab
from labsupport.tools.bench import interleaved_medians


def _cases(module, label: str) -> dict[str, tuple[Callable[[], object], Callable]]:
    a, b = module.tensor([1.0, 2.0]), module.tensor([3.0, 4.0])
    m, n = module.randn(4, 4), module.randn(4, 4)
    w = module.randn(4, 4, requires_grad=True)
    off = contextlib.nullcontext

    def on():
        return module.autocast("cpu")

    add, mm = module.add, module.mm
    return {
        f"{label} torch.add, autocast off": (lambda: add(a, b), off),
        f"{label} torch.add, autocast on": (lambda: add(a, b), on),
        f"{label} torch.mm, autocast off": (lambda: mm(m, n), off),
        f"{label} torch.mm, autocast on (two casts)": (lambda: mm(m, n), on),
        f"{label} torch.mm, autocast on, cached weight": (lambda: mm(w, n), on),
    }


def main() -> None:
    import labsupport.torch as lab_torch

    cases = _cases(lab_torch, "lab")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        cases.update(_cases(torch, "PyTorch"))
    results = interleaved_medians(cases, number=2000, repeat=15)
    width = max(map(len, results))
    print(f"{'us per call (median)':<{width}}  ")
    for name, value in results.items():
        print(f"{name:<{width}}  {value:8.2f}")
    print()
    for label in ("lab", "PyTorch") if torch is not None else ("lab",):
        add_ratio = results[f"{label} torch.add, autocast on"] / results[f"{label} torch.add, autocast off"]
        mm_ratio = results[f"{label} torch.mm, autocast on (two casts)"] / results[f"{label} torch.mm, autocast off"]
        print(f"{label:<8} autocast on/off: torch.add {add_ratio:5.2f}x   torch.mm {mm_ratio:5.2f}x")
    m, n = lab_torch.randn(4, 4), lab_torch.randn(4, 4)
    with lab.profiler.profile() as prof, lab_torch.autocast("cpu"):
        lab_torch.mm(m, n)
    print("\nlab operators per torch.mm under autocast:", prof.counts())


if __name__ == "__main__":
    main()
