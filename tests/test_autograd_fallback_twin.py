"""The default autograd fallback (``basicAutogradNotImplementedFallback``) still reaches an operator's
ADInplaceOrView kernel: the same scenario on the lab and on PyTorch 2.13 (a twin test)."""

from __future__ import annotations

import labsupport as lab
import labsupport.torch as ltorch


def _lab_keysets() -> list[str]:
    seen: list[str] = []
    lib = lab.Library("fbtwin", "DEF")
    try:
        lib.define("f(Tensor x) -> Tensor")

        def cpu(x):
            return x

        def inplace_or_view(ks, x):
            seen.append(repr(ks))
            return cpu(x)

        lib.impl("f", cpu, "CPU")
        lib.impl("f", inplace_or_view, "ADInplaceOrView", with_keyset=True)
        lab.ops.fbtwin.f(ltorch.tensor([1.0]).requires_grad_())  # no Autograd kernel: the fallback runs
    finally:
        lib.close()
    return seen


def test_lab_fallback_redispatches_to_adinplaceorview() -> None:
    assert _lab_keysets() == ["DispatchKeySet(CPU, ADInplaceOrView)"]


def test_pytorch_fallback_redispatches_to_adinplaceorview(torch_ref) -> None:
    seen: list[str] = []
    lib = torch_ref.library.Library("fbtwin_torch", "DEF")
    try:
        lib.define("f(Tensor x) -> Tensor")

        def cpu(x):
            return x.clone()

        def inplace_or_view(ks, x):
            seen.append(str(ks))
            return torch_ref.ops.fbtwin_torch.f.default.redispatch(ks & torch_ref._C._after_ADInplaceOrView_keyset, x)

        lib.impl("f", cpu, "CPU")
        lib.impl("f", inplace_or_view, "ADInplaceOrView", with_keyset=True)
        torch_ref.ops.fbtwin_torch.f(torch_ref.tensor([1.0], requires_grad=True))
    finally:
        lib._destroy()
    assert seen == _lab_keysets()

