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
    """The installed PyTorch, or a skip."""
    return pytest.importorskip("torch")


def pytest_collectstart(collector) -> None:
    """nbval: never compare SVG (graphviz embeds its version and layout) or HTML of widgets;
    notebooks compare the deterministic text/plain forms instead."""
    if collector.fspath and str(collector.fspath).endswith(".ipynb"):
        collector.skip_compare += ("image/svg+xml", "application/vnd.jupyter.widget-view+json")
