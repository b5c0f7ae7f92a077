"""The stored notebooks are what a fresh run produces, cleanly: every code cell executed in order,
no widget state or timing metadata, no machine-specific text, and nbval markers kept rare.

nbval itself (run by ``make test`` over notebooks/) re-executes each notebook and compares outputs.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP", "NBVAL_RAISES_EXCEPTION", "NBVAL_CHECK_OUTPUT")
MACHINE_TEXT = re.compile(r"/(home|root|tmp|Users|work)/|0x[0-9a-f]{8,}|ipykernel_\d+")


def _load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_code_cell_was_executed_in_order(path):
    nb = _load(path)
    counts = [c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"]
    assert counts, "a notebook without code cells teaches nothing runnable"
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: re-run top to bottom (tools/refresh_notebooks.py)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_no_unstable_metadata_or_machine_text(path):
    nb = _load(path)
    assert "widgets" not in nb.get("metadata", {}), "widget state is stored (random ids)"
    for i, cell in enumerate(nb["cells"]):
        assert "execution" not in cell.get("metadata", {}), f"cell {i}: timing metadata"
        if cell["cell_type"] != "code":
            continue
        text = json.dumps([o for o in cell.get("outputs", []) if o.get("output_type") != "display_data"
                           or "text/plain" in o.get("data", {})])  # fmt: skip
        plain = json.dumps([o.get("text", o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", [])])
        assert not MACHINE_TEXT.search(plain), f"cell {i}: output shows a path, address or kernel file: {plain[:200]}"
        assert "Traceback" not in text or "NBVAL_RAISES_EXCEPTION" in "".join(cell["source"]), f"cell {i} failed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_nbval_markers_are_rare_and_explained(path):
    nb = _load(path)
    code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    marked = 0
    for cell in code_cells:
        lines = "".join(cell["source"]).splitlines()
        for i, line in enumerate(lines):
            comment = line.strip().lstrip("#").strip()
            if line.strip().startswith("#") and comment in MARKERS:
                marked += 1
                reason = lines[i + 1].strip() if i + 1 < len(lines) else ""
                assert reason.startswith("#") and len(reason) > 10, f"{comment} needs a reason comment on the next line"
    assert marked <= max(3, len(code_cells) // 8), f"{path.name}: {marked} marked cells of {len(code_cells)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_has_the_teaching_shape(path):
    text = "".join("".join(c["source"]) for c in _load(path)["cells"] if c["cell_type"] == "markdown")
    assert "What you will learn" in text, f"{path.name}: missing 'What you will learn'"
    assert re.search(r"\bSummary\b", text), f"{path.name}: missing a Summary"
