"""Shared test helpers. Tests that compare with PyTorch use the ``torch_ref`` fixture or
``pytest.importorskip("torch")`` so that they skip cleanly when PyTorch is not installed."""

from __future__ import annotations

import json
import pathlib

import pytest

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def vectors() -> dict:
    """Test vectors recorded from PyTorch 2.13 (tables, TLS defaults, tensor key sets)."""
    return json.loads((DATA / "pytorch-dispatcher-vectors.json").read_text())


@pytest.fixture
def torch_ref():
    """The installed PyTorch 2.13 (the reference the lab is checked against), or a skip."""
    from claims import torch_213

    return torch_213()


@pytest.fixture
def library(torch_ref):
    """``library(ns, kind, *args)``: a torch.library.Library dropped after the test."""
    made = []

    def make(ns: str, kind: str = "DEF", *args):
        lib = torch_ref.library.Library(ns, kind, *args)
        made.append(lib)
        return lib

    yield make
    for lib in reversed(made):
        lib._destroy()


class _NbvalSkipCompare:
    """nbval: never compare SVG (graphviz embeds its version and layout; without ``dot`` the call graph
    is a text picture) or widget views; notebooks compare the deterministic text/plain forms instead.

    Registered as a global plugin: a ``pytest_collectstart`` hook in this conftest alone would only
    see collectors under tests/, never the notebooks. When pytest runs a notebook by itself (this file
    not loaded), the SVG rule of tests/nbval_sanitize.cfg has the same effect."""

    @staticmethod
    def pytest_collectstart(collector) -> None:
        if collector.fspath and str(collector.fspath).endswith(".ipynb") and hasattr(collector, "skip_compare"):
            collector.skip_compare += ("image/svg+xml", "application/vnd.jupyter.widget-view+json")


def pytest_configure(config) -> None:
    if not config.pluginmanager.has_plugin("lab-nbval-skip-compare"):
        config.pluginmanager.register(_NbvalSkipCompare(), "lab-nbval-skip-compare")
