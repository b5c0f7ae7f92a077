"""How much does the dispatcher itself cost? A trivial kernel called through ``Dispatcher.call``
versus the same kernel called directly, in one process; median of repeats, reported as a ratio.

Run: ``make bench`` or ``python benchmarks/dispatch_overhead.py``.
"""

from __future__ import annotations

import statistics
import timeit

import numpy as np

import labsupport as lab
from labsupport.aten import dtype as dt
from labsupport.aten.tensor import TensorBase, tensor_device


def median_ns(fn, number: int = 20000, repeat: int = 15) -> float:
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e9


def main() -> None:
    d = lab.Dispatcher("bench")
    lib = lab.Library("bench", "DEF", dispatcher=d)
    lib.define("ident(Tensor self) -> Tensor")

    def ident_cpu(x):
        return x

    lib.impl("ident", ident_cpu, "CPU")
    # An Autograd kernel keeps the call on the common path: key set -> AutogradCPU kernel -> CPU kernel.
    op = d.find_schema_or_throw("bench::ident")
    x = TensorBase._make(np.zeros(2, np.float32), (2,), dt.float32, tensor_device("cpu"))
    call, direct = d.call, ident_cpu
    with lab.AutoDispatchBelowAutograd():  # a single dispatch straight to the CPU kernel
        through = median_ns(lambda: call(op, x._ks, x))
    plain = median_ns(lambda: direct(x))
    empty = median_ns(lambda: None)
    print("dispatcher overhead: trivial kernel through Dispatcher.call vs called directly")
    print(f"  empty lambda (loop cost)      {empty:8.1f} ns")
    print(f"  direct call                   {plain:8.1f} ns")
    print(f"  through Dispatcher.call       {through:8.1f} ns")
    print(f"  ratio (net of loop cost)      {(through - empty) / (plain - empty):8.2f} x")
    print(f"  dispatcher cost per call      {through - plain:8.1f} ns")


if __name__ == "__main__":
    main()
