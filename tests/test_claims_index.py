"""Every claim a notebook marks has a test, and every claim test still has its sentence (see claims.py)."""

from __future__ import annotations

import json
import pathlib

from claims import DECORATOR, MARKER

ROOT = pathlib.Path(__file__).resolve().parents[1]


def notebook_claims() -> dict[str, str]:
    """claim id -> notebook file, from the ``<!-- claim: ... -->`` markers in markdown cells."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                for claim_id in MARKER.findall("".join(cell["source"])):
                    found.setdefault(claim_id, path.name)
    return found


def claims_with_tests() -> dict[str, str]:
    """claim id -> test file, from the ``@claim("...")`` decorators in tests/test_claims_nb*.py."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tests").glob("test_claims_nb*.py")):
        for claim_id in DECORATOR.findall(path.read_text()):
            assert claim_id not in found, f"claim {claim_id} is tested twice ({found[claim_id]}, {path.name})"
            found[claim_id] = path.name
    return found


def test_every_marked_claim_has_a_test() -> None:
    missing = {c: nb for c, nb in notebook_claims().items() if c not in claims_with_tests()}
    assert not missing, f"claims marked in notebooks with no @claim test: {missing}"


def test_every_claim_test_has_its_sentence() -> None:
    orphans = {c: f for c, f in claims_with_tests().items() if c not in notebook_claims()}
    assert not orphans, f"@claim tests whose <!-- claim: --> marker is in no notebook: {orphans}"


def test_claim_ids_name_their_notebook() -> None:
    for claim_id, notebook in notebook_claims().items():
        assert notebook.startswith(claim_id[2:4]), f"claim {claim_id} is marked in {notebook}"
