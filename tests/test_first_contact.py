"""First contact: what a new learner runs before anything else works.

- ``make lab`` starts JupyterLab as root (containers, cloud VMs) and as a normal user: it passes
  ``--allow-root`` exactly when the user id is 0, says so in one line, and forwards ``LAB_ARGS``.
- The notebooks that draw call graphs pass nbval on a machine without graphviz's ``dot``: their
  stored outputs (refreshed wherever ``dot`` happens to exist) must not depend on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT_LINE = "make lab: running as root, so JupyterLab gets --allow-root"


# ---------------------------------------------------------------------------- make lab


def _make_n_lab(*assignments: str) -> list[str]:
    """The commands ``make -n lab`` would run (nothing is run, nothing is installed)."""
    if shutil.which("make") is None:
        pytest.skip("no make on PATH")
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "lab", *assignments], cwd=REPO, capture_output=True, text=True,
        timeout=60, env={**os.environ, "MAKEFLAGS": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _jupyterlab_command(lines: list[str]) -> list[str]:
    found = [line.split() for line in lines if "-m jupyterlab" in line]
    assert len(found) == 1, "expected one JupyterLab command in make -n lab:\n" + "\n".join(lines)
    return found[0]


def test_make_lab_as_root_passes_allow_root_and_says_why():
    lines = _make_n_lab("LAB_UID=0")
    command = _jupyterlab_command(lines)
    assert command.count("--allow-root") == 1, command
    assert any(ROOT_LINE in line for line in lines), lines


def test_make_lab_as_a_normal_user_does_not_pass_allow_root():
    lines = _make_n_lab("LAB_UID=1000")
    command = _jupyterlab_command(lines)
    assert "--allow-root" not in command, command
    assert not any(ROOT_LINE in line for line in lines), lines


def test_make_lab_detects_the_current_user():
    command = _jupyterlab_command(_make_n_lab())
    assert ("--allow-root" in command) == (os.getuid() == 0), (os.getuid(), command)


def test_make_lab_forwards_lab_args_after_its_own_options():
    command = _jupyterlab_command(_make_n_lab("LAB_UID=0", "LAB_ARGS=--no-browser --port=8899"))
    assert command[-2:] == ["--no-browser", "--port=8899"], command
    assert command.index("--allow-root") < command.index("--no-browser")
    assert "notebooks/00_start_here.ipynb" in command


def test_make_lab_turns_on_saving_widget_state(tmp_path):
    """The app-wide setting ``make lab`` writes into .venv: a saved notebook keeps its widgets' state,
    so reopening it shows the key-set explorer instead of "Error displaying widget: model not found"."""
    lines = _make_n_lab("LAB_UID=1000", f"LAB_OVERRIDES={tmp_path}/settings/overrides.json")
    recipe = "\n".join(lines)
    assert "saveState" in recipe and f"{tmp_path}/settings/overrides.json" in recipe, recipe
    target = tmp_path / "settings" / "overrides.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}))
    done = subprocess.run(
        ["make", "--no-print-directory", "-B", "-o", ".venv/.installed", f"LAB_OVERRIDES={target}", str(target)],
        cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "MAKEFLAGS": ""},
    )  # fmt: skip
    if done.returncode != 0 and not (REPO / ".venv/bin/python").exists():
        pytest.skip("no .venv to run the settings writer with")
    assert done.returncode == 0, done.stderr
    settings = json.loads(target.read_text())
    assert settings["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True}
    assert settings["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}  # kept


def test_readme_explains_root_and_lab_args():
    readme = (REPO / "README.md").read_text()
    assert "--allow-root" in readme and "LAB_ARGS" in readme
    for tool in ("graphviz", "valgrind", "gdb", "chromium"):
        assert tool in readme.lower(), tool


# ---------------------------------------------------------------------------- notebooks without dot


def _graph_notebooks() -> list[str]:
    """Notebooks with a cell that draws a call graph."""
    found = []
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        if any(c["cell_type"] == "code" and "call_graph(" in "".join(c["source"]) for c in cells):
            found.append(str(path.relative_to(REPO)))
    return found


def _path_without(program: str, shadow_root: Path) -> str:
    """PATH with ``program`` hidden: each folder holding it is replaced by a folder of links to
    everything else in it (so git, make, etc. still resolve)."""
    entries = []
    for i, entry in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        folder = Path(entry or ".")
        if not (folder / program).exists():
            entries.append(entry)
            continue
        shadow = shadow_root / f"path{i}"
        shadow.mkdir(parents=True)
        for item in folder.iterdir():
            if item.name != program:
                (shadow / item.name).symlink_to(item)
        entries.append(str(shadow))
    return os.pathsep.join(entries)


@pytest.mark.slow
def test_graph_notebooks_pass_nbval_with_dot_hidden(tmp_path):
    notebooks = _graph_notebooks()
    assert notebooks, "no notebook draws a call graph (call_graph() in a code cell)"
    path = _path_without("dot", tmp_path / "bin")
    assert shutil.which("dot", path=path) is None
    env = {**os.environ, "PATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", *notebooks],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, f"nbval with dot hidden from PATH failed:\n{tail}"
    assert " passed" in done.stdout and "failed" not in done.stdout, tail
