"""torch.add on 2-element tensors, four ways, in one process (median of repeats, microseconds):

1. the lab's ``torch.add`` through the full stack (binding, API, handle, dispatcher, autograd
   kernel, redispatch, CPU wrapper, meta, impl);
2. PyTorch's C++ ``torch.add`` (needs PyTorch; skipped otherwise);
3. PyTorch's ``torch.add`` inside a pass-through ``TorchDispatchMode`` (PyTorch's own Python-level
   dispatch: every op call goes through a Python ``__torch_dispatch__``);
4. ``numpy.add`` (the work itself, no dispatch at all).

Targets (issue 3): 1 faster than 3, and 1 within 2x of 2. Run: ``python benchmarks/torch_add.py``.
"""

from __future__ import annotations

import statistics
import timeit

import numpy as np


def interleaved_medians(cases: dict, number: int = 5000, repeat: int = 31) -> dict[str, float]:
    """Time every case once per round, round after round, and take each case's median: load that
    comes and goes during the run then hits all cases alike, so the ratios stay honest."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for fn, _ in cases.values():
        fn()
    for _ in range(repeat):
        for name, (fn, context) in cases.items():
            with context():
                samples[name].append(timeit.timeit(fn, number=number) / number * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    import contextlib

    import labsupport.torch as lab_torch

    cases: dict = {}
    la, lb = lab_torch.tensor([1.0, 2.0]), lab_torch.tensor([3.0, 4.0])
    lab_add = lab_torch.add
    cases["lab torch.add (full stack)"] = (lambda: lab_add(la, lb), contextlib.nullcontext)
    na, nb = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    cases["numpy.add"] = (lambda: np.add(na, nb), contextlib.nullcontext)
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        torch = None
    if torch is not None:
        ta, tb = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
        cases["PyTorch torch.add (C++)"] = (lambda: torch.add(ta, tb), contextlib.nullcontext)

        class PassThrough(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        cases["PyTorch torch.add in a pass-through TorchDispatchMode"] = (lambda: torch.add(ta, tb), PassThrough)
    results = interleaved_medians(cases)
    width = max(map(len, results))
    for name, us in results.items():
        print(f"{name:<{width}}  {us:7.2f} us")
    lab = results["lab torch.add (full stack)"]
    if torch is not None:
        cpp = results["PyTorch torch.add (C++)"]
        mode = results["PyTorch torch.add in a pass-through TorchDispatchMode"]
        print(f"\nlab / PyTorch C++             {lab / cpp:5.2f}x   (target: at most 2x)")
        print(f"lab / pass-through mode       {lab / mode:5.2f}x   (target: below 1x)")
    else:
        print("\nPyTorch is not installed: the comparisons with it were skipped (make torch).")


if __name__ == "__main__":
    main()
