"""What does a backward pass cost now that the lab's autograd dispatches its steps?

Since the engine seeds ``.backward()`` with ``ones_like``, sums gradients with ``add``, reduces with
``sum.dim_IntList`` + ``view`` and stores ``.grad`` with ``detach`` / ``new_empty_strided`` + ``copy_``
(as PyTorch's engine does), and the formulas call ``t``, ``unsqueeze``, ``expand`` through the C++ API,
a backward pass makes more operator calls than when those steps were numpy. This prints, for a few
small programs, the bytecode instructions (exact, ``lab.count_instructions``) and the median time of
one ``forward + backward``. Run ``python benchmarks/backward_cost.py``; to compare with an older
version, run the same file with that version first on ``PYTHONPATH`` (and ``LAB_BUILD_DIR`` pointing to
a scratch folder so the two builds do not overwrite each other).
"""

from __future__ import annotations

import statistics
import timeit

import labsupport as lab
import labsupport.torch as torch

a = torch.randn(4, 4, requires_grad=True)
b = torch.randn(4, 4)


def add_sum() -> None:
    torch.add(a, b).sum().backward()
    a.grad = None


def mul_sin_sum() -> None:
    torch.sin(torch.mul(a, b)).sum().backward()
    a.grad = None


def mm_sum_dim() -> None:
    torch.mm(a, b).sum(0).sum().backward()
    a.grad = None


def accumulate_twice() -> None:
    torch.mul(a, b).sum().backward()
    torch.mul(a, b).sum().backward()
    a.grad = None


PROGRAMS = {
    "add(a, b).sum().backward()": add_sum,
    "sin(mul(a, b)).sum().backward()": mul_sin_sum,
    "mm(a, b).sum(0).sum().backward()": mm_sum_dim,
    "mul(a, b).sum().backward() twice": accumulate_twice,
}


def main() -> None:
    print(f"{'program (4x4, forward + backward)':<36} {'bytecodes':>10} {'median us':>10}")
    for name, fn in PROGRAMS.items():
        fn()  # warm up (build, caches)
        count = lab.count_instructions(fn)
        times = [t / 200 * 1e6 for t in timeit.repeat(fn, number=200, repeat=7)]
        print(f"{name:<36} {count:>10,} {statistics.median(times):>10.1f}")


if __name__ == "__main__":
    main()
