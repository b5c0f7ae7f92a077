"""Thread-local include/exclude sets and the guards: defaults, nesting, exceptions, threads."""

from __future__ import annotations

import threading

import pytest

import labsupport as lab
from labsupport import DispatchKey as K
from labsupport import DispatchKeySet


def test_defaults_match_pytorch_vectors(vectors):
    assert repr(lab.tls_include_set()) == vectors["tls_default"]["include"]
    assert repr(lab.tls_exclude_set()) == vectors["tls_default"]["exclude"]


@pytest.mark.torch
def test_defaults_match_installed_pytorch(torch_ref):
    assert repr(lab.tls_include_set()) == str(torch_ref._C._dispatch_tls_local_include_set())
    assert repr(lab.tls_exclude_set()) == str(torch_ref._C._dispatch_tls_local_exclude_set())


def test_guards_nest_and_restore():
    before_inc, before_exc = lab.tls_include_set(), lab.tls_exclude_set()
    with lab.AutoDispatchBelowAutograd():
        assert lab.tls_exclude_set().has_all(lab.autograd_dispatch_keyset)
        assert not lab.tls_exclude_set().has(K.ADInplaceOrView)
        with lab.AutoDispatchBelowADInplaceOrView():
            assert lab.tls_exclude_set().has(K.ADInplaceOrView)
            with lab.IncludeDispatchKeyGuard(K.Python):
                assert lab.tls_include_set().has(K.Python)
            assert not lab.tls_include_set().has(K.Python)
        assert not lab.tls_exclude_set().has(K.ADInplaceOrView)
    assert lab.tls_include_set() == before_inc and lab.tls_exclude_set() == before_exc


def test_guards_restore_when_the_body_raises():
    before = lab.tls_exclude_set()
    with pytest.raises(ZeroDivisionError):
        with lab.ExcludeDispatchKeyGuard(DispatchKeySet([K.CPU, K.AutogradCPU])):
            with lab.AutoNonVariableTypeMode():
                1 / 0  # noqa: B018
    assert lab.tls_exclude_set() == before


def test_force_guard_replaces_both_sets():
    with lab.ForceDispatchKeyGuard(DispatchKeySet(K.Python), DispatchKeySet()):
        assert repr(lab.tls_include_set()) == "DispatchKeySet(Python)"
        assert repr(lab.tls_exclude_set()) == "DispatchKeySet()"
    assert lab.tls_include_set().has(K.BackendSelect)


def test_each_thread_has_its_own_sets():
    inside = threading.Event()
    release = threading.Event()
    seen: dict[str, str] = {}

    def guarded_thread() -> None:
        with lab.AutoDispatchBelowAutograd():
            seen["guarded"] = repr(lab.tls_exclude_set())
            inside.set()
            release.wait(5)
        seen["after"] = repr(lab.tls_exclude_set())

    def fresh_thread() -> None:
        inside.wait(5)
        seen["fresh"] = repr(lab.tls_exclude_set())
        seen["fresh_include"] = repr(lab.tls_include_set())
        release.set()

    with lab.IncludeDispatchKeyGuard(K.Tracer):  # the main thread's change must not leak either
        a = threading.Thread(target=guarded_thread)
        b = threading.Thread(target=fresh_thread)
        a.start()
        b.start()
        a.join(10)
        b.join(10)
    default_exclude = repr(lab.c10.tls.DEFAULT_EXCLUDED)
    assert "AutogradOther, AutogradNestedTensor" in seen["guarded"]
    assert seen["fresh"] == default_exclude
    assert seen["fresh_include"] == "DispatchKeySet(BackendSelect, ADInplaceOrView)"
    assert seen["after"] == default_exclude


def test_inference_mode_sets_tls_grad_mode_and_makes_inference_tensors(vectors):
    import labsupport.torch as torch

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with lab.InferenceMode():
        assert repr(lab.tls_include_set()) == "DispatchKeySet(BackendSelect)"
        assert lab.tls_exclude_set().has_all(lab.autograd_dispatch_keyset)
        assert not torch.is_grad_enabled() and lab.is_inference_mode_enabled()
        y = torch.add(x, x)
        assert y.grad_fn is None and not y.requires_grad
        assert repr(lab.dispatch_keys(y)) == vectors["tensor_keysets"]["inference_cpu"]["keyset"]
    assert repr(lab.tls_include_set()) == "DispatchKeySet(BackendSelect, ADInplaceOrView)"
    assert torch.is_grad_enabled() and not lab.is_inference_mode_enabled()
    assert lab.dispatch_keys(torch.add(x, x)).has(K.AutogradCPU)


@pytest.mark.torch
def test_inference_mode_tls_matches_pytorch(torch_ref):
    with torch_ref.inference_mode(), lab.InferenceMode():
        assert repr(lab.tls_include_set()) == str(torch_ref._C._dispatch_tls_local_include_set())
        assert repr(lab.tls_exclude_set()) == str(torch_ref._C._dispatch_tls_local_exclude_set())
