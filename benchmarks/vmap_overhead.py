"""What does vmap cost? The lab's ``torch.vmap`` against plain calls, batching rule against the
for-loop fallback, and (when PyTorch is installed) the same on PyTorch 2.13.

Cases, each an interleaved median of repeats in microseconds per call:

1. **off**: ``torch.add(x, y)`` on plain (B, 2) tensors: the common path, with vmap installed
   (nothing of it runs: no tensor carries FuncTorchBatched, FrontMode/BackMode are not in the TLS);
2. **vmap, batching rule**: ``vmap(torch.add)(x, y)``: FrontMode -> FuncTorchBatched plumbing +
   ``binary_pointwise_batch_rule`` -> BackMode -> Autograd -> CPU, once for the whole batch, plus
   vmap's own wrapping and unwrapping;
3. **vmap, for-loop fallback**: ``vmap(mysub)(x, y)`` for an operator with only a CPU kernel: the
   boxed fallback calls it B times and stacks (its warning is silenced while timing);
4. **a plain op inside vmap**: ``torch.add(p, p)`` on unbatched tensors while a vmap is active
   (FrontMode and BackMode are in the TLS, so even unbatched calls pay for the two fallbacks);
5. **Python loop**: ``B`` plain ``torch.sub`` calls (what the fallback does, without dispatching).

Run: ``python benchmarks/vmap_overhead.py [--batch 8]``.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable

import labsupport as lab
import labsupport.torch as torch
from labsupport.functorch import set_vmap_fallback_warning_enabled
from labsupport.tools.bench import interleaved_medians


def lab_cases(batch: int) -> dict[str, Callable[[], object]]:
    lib = lab.Library("vmapbench", "DEF")
    lib.define("mysub(Tensor self, Tensor other) -> Tensor")
    lib.impl("mysub", lambda a, b: torch.sub(a, b), "CPU")
    mysub = lab.ops.vmapbench.mysub.default
    x, y = torch.randn(batch, 2), torch.randn(batch, 2)
    p = torch.randn(2)
    rows = [torch.randn(2) for _ in range(batch)]
    vadd, vsub = torch.vmap(torch.add), torch.vmap(mysub)
    inside: dict[str, Callable[[], object]] = {}

    def plain_inside_vmap() -> object:
        return torch.vmap(lambda a: inside["fn"]())(x)

    inside["fn"] = lambda: torch.add(p, p)
    cases = {
        "off: torch.add(x, y)": lambda: torch.add(x, y),
        "vmap(torch.add) -- batching rule": lambda: vadd(x, y),
        "vmap(mysub) -- for-loop fallback": lambda: vsub(x, y),
        "vmap(lambda a: torch.add(p, p)) -- plain op inside": plain_inside_vmap,
        f"Python loop: {batch} x torch.sub": lambda: [torch.sub(r, r) for r in rows],
    }
    cases["(keep the library alive)"] = lambda: lib
    return cases


def torch_cases(batch: int) -> dict[str, Callable[[], object]]:
    import torch as real

    x, y = real.randn(batch, 2), real.randn(batch, 2)
    vadd = real.vmap(real.add)
    n = real.tensor(2.0)
    vcheb = real.vmap(real.special.chebyshev_polynomial_t, in_dims=(0, None))
    return {
        "PyTorch off: torch.add(x, y)": lambda: real.add(x, y),
        "PyTorch vmap(torch.add) -- batching rule": lambda: vadd(x, y),
        "PyTorch vmap(chebyshev_polynomial_t) -- for-loop fallback": lambda: vcheb(x, n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--number", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    set_vmap_fallback_warning_enabled(False)
    cases = lab_cases(args.batch)
    try:
        import torch as real

        real._C._functorch._set_vmap_fallback_warning_enabled(False)
        cases.update(torch_cases(args.batch))
    except ImportError:
        print("(PyTorch not installed: lab cases only)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        medians = interleaved_medians(cases, number=args.number, repeat=args.repeat)
    medians.pop("(keep the library alive)")
    width = max(len(name) for name in medians)
    print(f"batch size {args.batch}; microseconds per call (median of {args.repeat} x {args.number})")
    for name, us in medians.items():
        print(f"  {name:<{width}}  {us:9.2f}")
    off = medians["off: torch.add(x, y)"]
    rule = medians["vmap(torch.add) -- batching rule"]
    loop = medians["vmap(mysub) -- for-loop fallback"]
    print()
    print(f"lab: vmap with a batching rule costs {rule / off:.1f}x a plain call; the for-loop fallback "
          f"{loop / rule:.1f}x the batching rule")  # fmt: skip
    if "PyTorch off: torch.add(x, y)" in medians:
        t_off = medians["PyTorch off: torch.add(x, y)"]
        t_rule = medians["PyTorch vmap(torch.add) -- batching rule"]
        print(f"PyTorch: vmap with a batching rule costs {t_rule / t_off:.1f}x a plain call")
        print(f"lab / PyTorch: plain {off / t_off:.2f}x, vmap(add) {rule / t_rule:.2f}x")


if __name__ == "__main__":
    main()
