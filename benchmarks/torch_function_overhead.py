"""What does ``__torch_function__`` cost? ``torch.add`` on 2-element CPU tensors, on the lab and (when
it is installed) on PyTorch 2.13:

1. **off**: plain tensors, no mode: the binding's fast path (one ``type(x) is _FastTensor`` test per
   argument, the test it made before the hook existed);
2. **subclass, default hook**: one argument is a ``class Sub(torch.Tensor): pass``: parse, collect the
   overloaded argument, call ``Tensor.__torch_function__``, which runs ``torch.add`` again with
   subclass handling disabled and rewraps the result with ``as_subclass``;
3. **pass-through mode**: plain tensors inside a ``TorchFunctionMode`` whose handler just calls
   ``func``: every call parses, pops the mode, runs the handler, and calls ``torch.add`` again;
4. **off, after a mode**: plain tensors again, once a mode has come and gone (the fast path is back).

Interleaved medians of repeats, microseconds per call; bytecode instruction counts
(``lab.count_instructions``) are exact. Run: ``python benchmarks/torch_function_overhead.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import labsupport as lab
import labsupport.torch as torch
from labsupport.overrides import TorchFunctionMode
from labsupport.tools.bench import interleaved_medians


def cases_for(tm, mode_base) -> dict[str, Callable[[], object]]:
    class Sub(tm.Tensor):
        pass

    class PassThrough(mode_base):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    a, b = tm.ones(2), tm.ones(2)
    s = tm.ones(2).as_subclass(Sub)
    mode = PassThrough()

    def under_mode() -> object:
        with mode:
            return tm.add(a, b)

    def enter_exit() -> object:
        with mode:
            pass

    with mode:
        pass
    return {
        "off": lambda: tm.add(a, b),
        "subclass, default hook": lambda: tm.add(s, b),
        "pass-through mode (incl. enter/exit)": under_mode,
        "  of which enter/exit": enter_exit,
        "off, after a mode": lambda: tm.add(a, b),
    }


def main() -> None:
    lab_cases = cases_for(torch, TorchFunctionMode)
    print("bytecode instructions per call (exact), lab:")
    for name, fn in lab_cases.items():
        print(f"  {name:<38} {lab.count_instructions(fn):6d}")
    cases = {f"lab {name}": fn for name, fn in lab_cases.items()}
    try:
        import torch as real

        cases.update({f"PyTorch {name}": fn for name, fn in cases_for(real, real.overrides.TorchFunctionMode).items()})
    except ImportError:
        print("(PyTorch not installed: lab cases only)")
    medians = interleaved_medians(cases, number=2000, repeat=9)
    print("\nmicroseconds per call (interleaved medians)")
    for name, us in medians.items():
        print(f"  {name:<46} {us:8.2f}")
    for side in ("lab", "PyTorch"):
        if f"{side} off" in medians:
            off = medians[f"{side} off"]
            print(f"{side}: subclass {medians[f'{side} subclass, default hook'] / off:.1f}x off, "
                  f"mode {medians[f'{side} pass-through mode (incl. enter/exit)'] / off:.1f}x off, "
                  f"after a mode {medians[f'{side} off, after a mode'] / off:.2f}x off")  # fmt: skip


if __name__ == "__main__":
    main()
