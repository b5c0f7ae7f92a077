"""What do the instruments cost? ``torch.add`` on 2-element CPU tensors, four ways, in one process:

1. **hooks removed**: a second build of ops.yaml whose dispatcher's ``call`` / ``redispatch`` are the
   lab's own, recompiled from their source with the ``if observers.active:`` block cut out (so the
   comparison stays honest when the dispatcher changes);
2. **hooks present, off**: the lab's ``torch.add`` as learners run it (one ``observers.active``
   check per dispatch, the role of RecordFunction's check in ``Dispatcher::call``);
3. **profiler on**: inside ``lab.profiler.profile()``;
4. **trace on**: inside ``lab.trace()`` (``sys.setprofile`` sees every Python call).

Timings are interleaved medians of repeats (microseconds per call); bytecode instruction counts
(``lab.count_instructions``) are exact. Run: ``python benchmarks/hooks_overhead.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

import labsupport as lab
from labsupport.c10.dispatcher import Dispatcher
from labsupport.c10.instantiate import instantiate
from labsupport.tools.bench import interleaved_medians


def strip_hook(source: str) -> str:
    """``source`` (a dispatcher method) without its ``if observers.active:`` block; line count kept,
    so the compiled copy still points at the right lines of dispatcher.py."""
    lines = source.splitlines(keepends=True)
    kept, removed, i = [], 0, 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "if observers.active:":
            indent = len(line) - len(line.lstrip())
            i += 1
            kept.append("\n")
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                kept.append("\n")
                i += 1
            removed += 1
            continue
        kept.append(line)
        i += 1
    if removed != 1:
        raise RuntimeError(f"expected one `if observers.active:` block, found {removed}")
    return "".join(kept)


class NoHookDispatcher(Dispatcher):
    """The lab's dispatcher with the observer check taken out of ``call`` and ``redispatch``, both
    the generic methods and the per-arity instantiations the generated ``_ops`` handles use."""

    call = instantiate(Dispatcher.call, None, strip_hook)
    redispatch = instantiate(Dispatcher.redispatch, None, strip_hook)

    def typed(self, arity: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
        # Instantiate from the base class's source (this class's methods were compiled from text).
        call = instantiate(Dispatcher.call, arity, strip_hook)
        redispatch = instantiate(Dispatcher.redispatch, arity, strip_hook)
        return call.__get__(self), redispatch.__get__(self)



def main() -> None:
    import labsupport.torch as torch
    from labsupport.aten import dtype as dtypes
    from labsupport.aten.tensor import tensor_device
    from labsupport.codegen import load_build

    nohooks = load_build(name="nohooks", dispatcher=NoHookDispatcher("nohooks"))
    tensor_cls = nohooks.python_variable_methods.Tensor
    cpu = tensor_device("cpu")
    na = tensor_cls._make(np.array([1.0, 2.0], np.float32), (2,), dtypes.float32, cpu)
    nb = tensor_cls._make(np.array([3.0, 4.0], np.float32), (2,), dtypes.float32, cpu)
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    add, add_nohooks = torch.add, nohooks.python_torch_functions.add
    assert np.array_equal(add(a, b).numpy(), add_nohooks(na, nb).numpy())

    def removed() -> Any:
        return add_nohooks(na, nb)

    def present() -> Any:
        return add(a, b)

    fast = {
        "hooks removed (NoHookDispatcher build)": (removed, contextlib.nullcontext),
        "hooks present, off (lab torch.add)": (present, contextlib.nullcontext),
    }
    results = interleaved_medians(fast, number=5000, repeat=41)
    slow = {
        "profiler on (lab.profiler.profile)": (present, lab.profiler.profile),
        "trace on (lab.trace)": (present, lab.trace),
    }
    results.update(interleaved_medians(slow, number=300, repeat=15))
    counts = {
        "hooks removed": lab.count_instructions(removed),
        "hooks present, off": lab.count_instructions(present),
    }

    base = results["hooks removed (NoHookDispatcher build)"]
    width = max(map(len, results))
    print("torch.add on 2-element CPU tensors: median time per call (interleaved repeats)")
    for name, us in results.items():
        print(f"  {name:<{width}}  {us:8.2f} us   {us / base:6.2f}x hooks removed")
    off = results["hooks present, off (lab torch.add)"]
    share = (off / base - 1) * 100
    print(f"\ncost of the off hooks: {off - base:+.3f} us per call ({share:+.1f}%, timing noise included)")
    print("bytecode instructions per call (exact):")
    for name, n in counts.items():
        print(f"  {name:<20} {n}")
    extra = counts["hooks present, off"] - counts["hooks removed"]
    print(f"  difference           {extra:+d}  (the `observers.active` check, once per dispatch; two dispatches)")


if __name__ == "__main__":
    main()
