"""The student edition (no solutions, no instructor files, grading cells cleared) and the Gradescope
bundle, run the way Gradescope runs it (paths parameterised with AUTOGRADER_ROOT)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from labsupport.grade.gradescope import build_bundle
from labsupport.grade.registry import REPO_ROOT, exercise_ids, load_exercise
from labsupport.grade.release import clear_grading_outputs, course_files, write_student_edition
from labsupport.grade.sandbox import landlock_abi

SOLUTIONS = REPO_ROOT / "solutions"
GRADESCOPE_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}  # fmt: skip
needs_solutions = pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="the student edition has no solutions/")
sandboxed = sys.platform == "linux" and landlock_abi() >= 4


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("edition") / "student"
    write_student_edition(out)
    return out


@needs_solutions
def test_the_student_edition_has_no_answers(edition):
    assert not (edition / "solutions").exists()
    kept = sorted(p.name for p in (edition / "tests").glob("test_grade*.py"))
    assert kept == ["test_grade.py", "test_grade_editions.py", "test_grade_hostile.py"]
    answers = {p.name: p.read_text() for p in SOLUTIONS.glob("*.py")}
    for path in edition.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".ipynb", ".md", ".yaml"):
            text = path.read_text(errors="replace")
            for name, answer in answers.items():
                assert answer not in text, f"{path} holds solutions/{name}"
    # everything else of the course is there, with the stubs and a pristine copy of them
    for name in ("Makefile", "pyproject.toml", "ops.yaml", "labsupport/__init__.py", "exercises/README.md"):
        assert (edition / name).is_file(), name
    for exercise_id in exercise_ids():
        filename = load_exercise(exercise_id).filename
        assert (edition / "exercises" / filename).read_text() == (
            edition / "tests/data/pristine_exercises" / filename
        ).read_text()
    assert not (edition / ".venv").exists() and not (edition / "build").exists()


def test_grading_cells_lose_their_outputs_and_keep_their_counts(edition):
    notebooks = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    cleared = 0
    for original in notebooks:
        before = json.loads(original.read_text())
        after = json.loads((edition / "notebooks" / original.name).read_text())
        assert len(before["cells"]) == len(after["cells"])
        for old, new in zip(before["cells"], after["cells"]):
            assert old.get("execution_count") == new.get("execution_count")
            if old.get("outputs") != new.get("outputs"):
                source = "".join(new["source"])
                assert "lab.grade(" in source or "load_exercise(" in source
                assert new["outputs"] == []
                cleared += 1
    assert cleared >= 1  # the notebooks' lab.grade cells show the instructor's grades in the repo


def test_clear_grading_outputs_only_touches_uncompared_grading_cells():
    cell = lambda source, tags=(): {"cell_type": "code", "source": source, "metadata": {"tags": list(tags)},  # noqa: E731
                                    "outputs": [{"output_type": "stream", "text": "x"}], "execution_count": 1}  # fmt: skip
    nb = {"cells": [cell("# NBVAL_SKIP\n# depends on your work\nlab.grade('ex04')"), cell("lab.grade('ex04')"),
                    cell("x = 1", ["exercise", "nbval-ignore-output"]), cell("print(2)")]}  # fmt: skip
    assert clear_grading_outputs(nb) == [0, 2]
    assert nb["cells"][1]["outputs"] and nb["cells"][3]["outputs"]  # compared by nbval: kept


def test_course_files_never_include_local_state():
    names = course_files()
    assert "Makefile" in names and "labsupport/grade/runner.py" in names
    assert not [n for n in names if n.startswith((".venv/", "build/", "dist/")) or "__pycache__" in n]


def test_the_student_edition_grades_its_own_stubs(edition):
    """In the edition (no git, no solutions), the stub-grading tests use the packaged pristine copy."""
    shutil.copy(REPO_ROOT / "tests" / "test_grade.py", edition / "tests" / "test_grade.py")
    env = {**os.environ, "PYTHONPATH": str(edition)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "tests/test_grade.py", "-k", "untouched"],
        cwd=edition, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _autograder(tmp_path: Path, bundle: Path, files: dict[str, str]) -> dict:
    """Lay out a folder as Gradescope does, unzip the bundle into source/, run run_autograder."""
    root = tmp_path / "autograder"
    for sub in ("source", "submission", "results"):
        (root / sub).mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    os.chmod(root / "run_autograder", 0o755)
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "LAB_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return build_bundle(tmp_path_factory.mktemp("bundle") / "autograder.zip", ["ex02", "ex04"], timeout=30)


def test_the_bundle_holds_setup_run_and_the_lab_without_solutions(bundle):
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
        config = json.loads(archive.read("gradescope.json"))
    assert {"setup.sh", "run_autograder", "gradescope.json", "labsupport/grade/runner.py", "ops.yaml"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert not [n for n in names if n.startswith("solutions/")]
    assert config == {"exercises": ["ex02", "ex04"], "timeout": 30}


@needs_solutions
def test_run_autograder_grades_a_submission_like_gradescope(tmp_path, bundle):
    files = {name: (SOLUTIONS / name).read_text() for name in ("ex02_keyset.py", "ex04_register.py")}
    results = _autograder(tmp_path / "good", bundle, files)
    assert set(results) <= GRADESCOPE_TOP
    assert {t["status"] for t in results["tests"]} <= {"passed", "failed"}
    assert {t["tags"][0] for t in results["tests"]} == {"ex02", "ex04"}
    if sandboxed:
        assert results["score"] == results["extra_data"]["max_score"] == 20, results["output"]
    else:  # fail closed: nothing runs without the kernel sandbox
        assert results["score"] == 0 and "sandbox-unavailable" in results["output"]
    forged = dict(files, **{"ex02_keyset.py": "import os\nos._exit(0)\n"})
    results = _autograder(tmp_path / "forged", bundle, forged)
    assert results["extra_data"]["exercises"]["ex02"]["score"] == 0


def test_run_autograder_always_writes_results(tmp_path, bundle):
    """An empty submission: every check fails, results.json is still written."""
    results = _autograder(tmp_path / "empty", bundle, {})
    assert set(results) <= GRADESCOPE_TOP and results["score"] == 0
    assert len(results["tests"]) == len(load_exercise("ex02").checks) + len(load_exercise("ex04").checks)
    assert all(t["status"] == "failed" for t in results["tests"])
    assert "is missing" in results["tests"][0]["output"] or "sandbox-unavailable" in results["tests"][0]["output"]
