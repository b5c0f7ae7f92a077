"""torch.add on 2-element tensors, four ways, in one process (median of repeats, microseconds):

1. the lab's ``torch.add`` through the full stack (binding, API, handle, dispatcher, autograd
   kernel, redispatch, CPU wrapper, meta, impl);
2. PyTorch's C++ ``torch.add`` (needs PyTorch; skipped otherwise);
3. PyTorch's ``torch.add`` inside a pass-through ``TorchDispatchMode`` (PyTorch's own Python-level
   dispatch: every op call goes through a Python ``__torch_dispatch__``);
4. ``numpy.add`` (the work itself, no dispatch at all).

Targets (issue 3): 1 faster than 3, and 1 within 2x of 2. Run: ``python benchmarks/torch_add.py``.

The ratios are taken inside one process, with the four cases interleaved. Between processes the
same figures move by several percent (memory layout, CPU frequency), PyTorch's most of all, so the
script repeats the whole measurement in ``--runs`` fresh processes (default 5) and reports every
run and the median of the per-run ratios. ``--runs 1`` measures in this process only.
"""

from __future__ import annotations

import statistics

import numpy as np


def measure() -> dict[str, float]:
    """One run: the four cases' medians (us per call) in this process."""
    import contextlib

    import labsupport.torch as lab_torch
    from labsupport.tools.bench import interleaved_medians

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
    return interleaved_medians(cases, number=5000, repeat=31)


LAB, CPP, MODE = (
    "lab torch.add (full stack)", "PyTorch torch.add (C++)", "PyTorch torch.add in a pass-through TorchDispatchMode",
)


def main() -> None:
    import argparse
    import json
    import subprocess
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes to measure in (default 5)")
    parser.add_argument("--json", action="store_true", help="print one run's figures as JSON (used per run)")
    options = parser.parse_args()
    if options.json or options.runs <= 1:
        results = measure()
        if options.json:
            print(json.dumps(results))
            return
        runs = [results]
    else:
        runs = []
        for _ in range(options.runs):
            done = subprocess.run([sys.executable, __file__, "--json"], check=True, capture_output=True, text=True)
            runs.append(json.loads(done.stdout))
    names = list(runs[0])
    width = max(map(len, names))
    title = f"us per call ({len(runs)} runs)"
    print(f"{title:<{width}}  median   " + "  ".join(f"run {i + 1:<3}" for i in range(len(runs))))
    for name in names:
        values = [run[name] for run in runs]
        print(f"{name:<{width}}  {statistics.median(values):7.2f}   " + "  ".join(f"{v:7.2f}" for v in values))
    if CPP not in runs[0]:
        print("\nPyTorch is not installed: the comparisons with it were skipped (make torch).")
        return
    to_cpp = [run[LAB] / run[CPP] for run in runs]
    to_mode = [run[LAB] / run[MODE] for run in runs]
    print()
    rows = (("lab / PyTorch C++", to_cpp, "at most 2x"), ("lab / pass-through mode", to_mode, "below 1x"))
    for label, ratios, target in rows:
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"{label:<24}  {statistics.median(ratios):5.2f}x median   (runs: {each})   target: {target}")


if __name__ == "__main__":
    main()
