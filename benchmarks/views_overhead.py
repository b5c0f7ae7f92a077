"""What do views cost? The lab's view operators against PyTorch 2.13's, and the common path untouched.

1. **torch.add, the common path**: bytecode instructions per ``torch.add(a, b)`` on two fresh CPU
   tensors (exact, ``lab.count_instructions``). Strides, storage offset and the storage are read off
   the numpy array only when asked, so making an ordinary tensor costs what it did before views.
   Compare with ``benchmarks/hooks_overhead.py`` ("hooks present, off"), the figure before views.
2. **one view op**: ``x.t()``, ``x[1]``, ``x.view(12)``, ``x[1:3]``, ``x.expand(2, 3, 4)`` on a (3, 4)
   tensor, and the stride query ``x.t().stride()``: lab microseconds and bytecodes per call, PyTorch
   microseconds per call (when installed), interleaved medians of repeats.
3. **a write through a view**: ``x[1].add_(1)`` against ``x.add_(1)``, in place on the base.

Run: ``python benchmarks/views_overhead.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import labsupport as lab
import labsupport.torch as torch
from labsupport.tools.bench import interleaved_medians

CASES: dict[str, Callable[[object], object]] = {
    "x.t()": lambda x: x.t(),
    "x[1]": lambda x: x[1],
    "x[1:3]": lambda x: x[1:3],
    "x.view(12)": lambda x: x.view(12),
    "x.expand(2, 3, 4)": lambda x: x.expand(2, 3, 4),
    "x.t().stride()": lambda x: x.t().stride(),
    "x.add_(1)": lambda x: x.add_(1),
    "x[1].add_(1)": lambda x: x[1].add_(1),
}



def main() -> None:
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    print("1. the common path: torch.add(a, b) on 2-element CPU tensors")
    print(f"   bytecode instructions per call: {lab.count_instructions(lambda: torch.add(a, b))}"
          "  (hooks_overhead.py before views: 389)")

    x = torch.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    timed = {f"lab   {name}": (lambda fn=fn: fn(x)) for name, fn in CASES.items()}
    try:
        import torch as real_torch
    except ImportError:
        real_torch = None
    if real_torch is not None:
        rx = real_torch.arange(12.0).reshape(3, 4)
        timed.update({f"torch {name}": (lambda fn=fn: fn(rx)) for name, fn in CASES.items()})
    results = interleaved_medians(timed, number=500, repeat=21)
    print("\n2./3. one view op, a write through a view: median microseconds per call (interleaved repeats)")
    width = max(len(name) for name in CASES)
    header = f"   {'op':<{width}}  {'lab us':>8}  {'lab bytecodes':>13}"
    header += f"  {'torch us':>8}  {'lab/torch':>9}" if real_torch is not None else ""
    print(header)
    for name, fn in CASES.items():
        lab_us = results[f"lab   {name}"]
        count = lab.count_instructions(lambda fn=fn: fn(x))
        line = f"   {name:<{width}}  {lab_us:8.2f}  {count:13d}"
        if real_torch is not None:
            torch_us = results[f"torch {name}"]
            line += f"  {torch_us:8.2f}  {lab_us / torch_us:8.1f}x"
        print(line)
    if real_torch is None:
        print("   (PyTorch is not installed: lab figures only)")


if __name__ == "__main__":
    main()
