"""Write the JupyterLab settings the lab ships into an environment (``make lab``, Binder's postBuild).

One setting: *Save Widget State Automatically* (``@jupyter-widgets/jupyterlab-manager``'s
``saveState``), so a saved notebook reopened in JupyterLab shows the key-set explorer's last state
instead of "Error displaying widget: model not found". The file is JupyterLab's app-wide
``<prefix>/share/jupyter/lab/settings/overrides.json``; settings already in it are kept.

    python tools/lab_settings.py [FILE]   # FILE defaults to this Python's <sys.prefix>/share/.../overrides.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PLUGIN = "@jupyter-widgets/jupyterlab-manager:plugin"


def overrides_file(prefix: Path) -> Path:
    return prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def write_overrides(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings.setdefault(PLUGIN, {})["saveState"] = True
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


if __name__ == "__main__":
    print(write_overrides(Path(sys.argv[1]) if len(sys.argv) > 1 else overrides_file(Path(sys.prefix))))
