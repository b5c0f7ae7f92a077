"""Re-execute every notebook (or the ones named) and store fresh, deterministic outputs.

Runs on the same headless path nbval uses (nbclient, the current interpreter's kernel), then cleans
what would make stored files differ between runs or break when reopened: live widget views are
dropped (their state is not stored, so a trusted notebook would show "model not found"; each widget's
static HTML/text fallback stays), widget state and timing metadata are dropped, execution counts run
1..N. Usage:

    python tools/refresh_notebooks.py [notebooks/03_walk_torch_add.ipynb ...]
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def clean(nb: nbformat.NotebookNode) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_MIME, None)


def refresh(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
        record_timing=False,
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    clean(nb)
    text = nbformat.writes(nb)
    text = re.sub(r"/tmp/ipykernel_\d+/\d+\.py", "<cell>", text)
    path.write_text(text if text.endswith("\n") else text + "\n")
    return elapsed


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        seconds = refresh(path)
        print(f"{path.relative_to(ROOT) if path.is_absolute() else path}: {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
