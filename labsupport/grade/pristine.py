"""The untouched exercise stubs, whatever the learner has done to ``exercises/``.

Tests that check "an untouched stub scores 0 with 'not done yet'" must not grade the learner's edited
files, or ``make test`` fails as soon as the exercises are solved. The stubs come from, in order:

1. ``tests/data/pristine_exercises/`` (the student edition carries a copy: see ``release.py``);
2. ``git show HEAD:exercises/<file>`` (a clone of the course: the learner's edits are not committed
   upstream).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from labsupport.grade.registry import REPO_ROOT

PACKAGED = REPO_ROOT / "tests" / "data" / "pristine_exercises"


def pristine_exercises(dest: Path, root: Path = REPO_ROOT) -> Path:
    """Write the pristine ``exercises/`` files into ``dest`` and return it (raises when none are found)."""
    dest.mkdir(parents=True, exist_ok=True)
    packaged = root / PACKAGED.relative_to(REPO_ROOT)
    if packaged.is_dir() and any(packaged.iterdir()):
        for item in packaged.iterdir():
            if item.is_file():
                shutil.copy(item, dest / item.name)
        return dest
    names = _git(root, "ls-tree", "--name-only", "HEAD", "exercises/")
    if names is None:
        raise FileNotFoundError(
            f"no pristine copy of the exercises: neither {packaged} nor a git checkout of the course at {root}"
        )
    for name in names.decode().split():
        data = _git(root, "show", f"HEAD:{name}")
        if data is not None:
            (dest / Path(name).name).write_bytes(data)
    return dest


def _git(root: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
