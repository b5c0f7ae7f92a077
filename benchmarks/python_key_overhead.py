"""What does the Python key cost? ``torch.add`` on 2-element CPU tensors, three ways, on the lab and
(when it is installed) on PyTorch 2.13:

1. **plain**: ``torch.add(a, b)`` with no mode and plain tensors: the common path. The Python keys are
   neither on the tensors nor in the TLS include set, so nothing of the Python key runs;
2. **pass-through mode**: the same call inside ``with PassThrough():``, a ``TorchDispatchMode`` whose
   ``__torch_dispatch__`` only calls ``func(*args, **kwargs)``: PythonTLSSnapshot's fallback, the
   Python key's fallback (unbox, build args/kwargs, pop the mode, call the handler), then a second
   dispatch from inside the handler;
3. **pass-through wrapper subclass**: ``torch.add(wa, wb)`` on ``_make_wrapper_subclass`` tensors whose
   ``__torch_dispatch__`` unwraps with ``tree_map``, calls ``func`` and rewraps the result.

Timings are interleaved medians of repeats (microseconds per call); the lab's bytecode instruction
counts (``lab.count_instructions``) are exact and the same on every machine.
Run: ``python benchmarks/python_key_overhead.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labsupport.tools.bench import interleaved_medians


def cases_for(torch: Any, mode_base: type, tree_map: Callable[..., Any]) -> dict[str, Callable[[], object]]:
    """The three cases, written once for either library."""

    class PassThrough(mode_base):  # type: ignore[misc, valid-type]
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Wrapper(torch.Tensor):  # type: ignore[misc, name-defined]
        @staticmethod
        def __new__(cls, elem):
            return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

        def __init__(self, elem):
            self.elem = elem

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def unwrap(x):
                return x.elem if isinstance(x, Wrapper) else x

            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
            return tree_map(lambda x: Wrapper(x) if type(x) is torch.Tensor else x, out)

    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    wa, wb = Wrapper(a), Wrapper(b)
    mode = PassThrough()

    def under_mode() -> object:
        with mode:
            return torch.add(a, b)

    return {
        "plain torch.add(a, b)": lambda: torch.add(a, b),
        "inside a pass-through TorchDispatchMode": under_mode,
        "on pass-through wrapper subclass tensors": lambda: torch.add(wa, wb),
    }


def main() -> None:
    import labsupport as lab
    import labsupport.torch as labtorch
    from labsupport.utils._python_dispatch import TorchDispatchMode
    from labsupport.utils._pytree import tree_map

    lab_cases = cases_for(labtorch, TorchDispatchMode, tree_map)
    results = {f"lab      {name}": us for name, us in interleaved_medians(lab_cases, number=500, repeat=21).items()}
    counts = {name: lab.count_instructions(fn) for name, fn in lab_cases.items()}
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode as RealMode
        from torch.utils._pytree import tree_map as real_tree_map
    except ImportError:
        torch = None
    if torch is not None:
        real_cases = cases_for(torch, RealMode, real_tree_map)
        results.update(
            {f"PyTorch  {name}": us for name, us in interleaved_medians(real_cases, number=2000, repeat=21).items()}
        )
    width = max(map(len, results))
    print("torch.add on 2-element CPU tensors: median time per call (interleaved repeats)")
    for prefix in ("lab", "PyTorch"):
        rows = {name: us for name, us in results.items() if name.startswith(prefix + " ")}
        if not rows:
            print("  (PyTorch is not installed: no PyTorch rows)")
            continue
        base = next(iter(rows.values()))
        for name, us in rows.items():
            print(f"  {name:<{width}}  {us:8.2f} us   {us / base:6.2f}x plain")
    print("lab bytecode instructions per call (exact):")
    for name, count in counts.items():
        print(f"  {name:<{width - 9}}  {count:6d}")
    print(
        "The plain call pays nothing for the Python key: its key set never holds Python or PythonTLSSnapshot\n"
        "(benchmarks/hooks_overhead.py gives the same count as before the Python key existed)."
    )


if __name__ == "__main__":
    main()
