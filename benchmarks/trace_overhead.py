"""What does tracing cost, off and on? Small CPU tensors, one process (median of interleaved repeats).

Off (nobody traces): ``Tracer`` is in no key set, so the generated Tracer kernels are never reached;
``torch.add`` pays nothing for them. To show it, the same ops.yaml is built twice more, each on a
dispatcher of its own, and one of the two has its Tracer kernels removed (its ``trace_type`` library
closed): the bytecode count and the time of one ``torch.add`` are compared between the two. (The
before/after figure against PyTorch is ``benchmarks/torch_add.py``, run on both checkouts.)

On:
1. one ``torch.add`` recorded while a trace runs (Tracer kernel: a node, its constant, its output type);
2. ``lab.jit.trace`` of a 4-op function, with ``check_trace=False`` and with the default check
   (which runs the function twice more: a second trace and an eager run);
3. calling the traced function (the graph replayed through the dispatcher) vs calling it eagerly.

With PyTorch installed, the same figures for ``torch.jit.trace`` are printed beside them.
Run: ``python benchmarks/trace_overhead.py``.
"""

from __future__ import annotations

import statistics
import timeit
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import labsupport as lab
import labsupport.torch as lt


def median_us(fn: Callable[[], Any], number: int, repeat: int = 15) -> float:
    fn()
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def measure(mod: Any, tracer: Callable[..., Any], label: str) -> dict[str, float]:
    a, b = mod.tensor([1.0, 2.0]), mod.tensor([3.0, 4.0])

    def four_ops(x, y):
        return mod.mul(mod.add(x, y).sin(), y).sum()

    def adds(x, y):  # 20 adds: the per-op recording cost, once the trace's fixed cost is spread out
        for _ in range(20):
            x = mod.add(x, y)
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = tracer(four_ops, (a, b))
        results = {
            f"{label}: torch.add, tracing off": median_us(lambda: mod.add(a, b), 2000),
            f"{label}: 20 adds, eager": median_us(lambda: adds(a, b), 200),
            f"{label}: 20 adds, traced (check_trace=False)": median_us(
                lambda: tracer(adds, (a, b), check_trace=False), 50
            ),
            f"{label}: trace 4 ops, check_trace=False": median_us(
                lambda: tracer(four_ops, (a, b), check_trace=False), 50
            ),
            f"{label}: trace 4 ops, check_trace=True": median_us(lambda: tracer(four_ops, (a, b)), 30),
            f"{label}: 4 ops eager": median_us(lambda: four_ops(a, b), 1000),
            f"{label}: 4 ops replayed (traced(a, b))": median_us(lambda: traced(a, b), 1000),
        }
    per_add = (results[f"{label}: 20 adds, traced (check_trace=False)"] - results[f"{label}: 20 adds, eager"]) / 20
    results[f"{label}: recording cost per torch.add (derived)"] = per_add
    return results


def second_build(name: str, close_tracer_kernels: bool) -> tuple[Any, Any, Any]:
    """The same ops.yaml built again on a dispatcher of its own (optionally with its Tracer kernels
    unregistered), and two tensors of that build's own class."""
    from labsupport.c10.dispatcher import Dispatcher
    from labsupport.codegen.build import load_build

    build = load_build(name="torch", dispatcher=Dispatcher(name))
    if close_tracer_kernels:
        build.trace_type.m.close()
        assert "Tracer: add_Tensor [kernel]" not in build.dispatcher.dump_table("aten::add.Tensor")
    cls = build.python_variable_methods.Tensor
    a, b = (cls._make(np.array(v, dtype=np.float32), (2,), lt.float32, lt.device("cpu")) for v in ([1, 2], [3, 4]))
    return build.python_torch_functions.add, a, b


def main() -> None:
    # Two builds made the same way, so that the only difference is the Tracer kernels (a build made
    # second runs at its own speed: compare the pair, not either of them with labsupport.torch).
    cases = {
        "with Tracer kernels": second_build("with Tracer kernels", False),
        "without Tracer kernels": second_build("without Tracer kernels", True),
    }
    counts = {name: lab.count_instructions(lambda add=add, a=a, b=b: add(a, b)) for name, (add, a, b) in cases.items()}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(15):  # interleaved, so load that comes and goes hits both alike
        for name, (add, a, b) in cases.items():
            times[name].append(timeit.timeit(lambda add=add, a=a, b=b: add(a, b), number=2000) / 2000 * 1e6)
    print("tracing off, torch.add:")
    for name, count in counts.items():
        print(f"  {name:<24} {count} bytecode instructions, {statistics.median(times[name]):.2f} us per call")
    print()
    rows = measure(lt, lab.jit.trace, "lab")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        rows.update(measure(torch, torch.jit.trace, "PyTorch"))
    width = max(map(len, rows))
    print(f"{'us per call (median)':<{width}}  value")
    for name, value in rows.items():
        print(f"{name:<{width}}  {value:8.2f}")
    if torch is None:
        print("(PyTorch not installed: its figures are left out)")


if __name__ == "__main__":
    main()
