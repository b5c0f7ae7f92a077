"""The grader: reference solutions score full marks, untouched stubs score zero, hangs and crashes
are contained, results.json has Gradescope's shape, and wrong or hard-coded answers fail.

Each exercise is graded in its own process (that is what is being tested), so these tests run the
real command line in-process (``labsupport.grade.__main__.main``) and let it start the workers.
Tests that grade the stubs use a pristine copy (``labsupport.grade.pristine``), never the learner's
edited ``exercises/``, so they stay green after the exercises are solved.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import labsupport as lab
from labsupport.grade.__main__ import main
from labsupport.grade.pristine import pristine_exercises
from labsupport.grade.registry import REPO_ROOT, exercise_ids, load_exercise, resolve

SOLUTIONS = REPO_ROOT / "solutions"
EXERCISES = REPO_ROOT / "exercises"
ALL = exercise_ids()
FULL = sum(load_exercise(i).max_points for i in ALL)
needs_solutions = pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="the student edition has no solutions/")
GRADESCOPE_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}  # fmt: skip
GRADESCOPE_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                   "tags", "visibility", "extra_data"}  # fmt: skip


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    """The untouched stubs (the learner's exercises/ may be solved by now)."""
    return pristine_exercises(tmp_path_factory.mktemp("pristine") / "exercises")


def run(tmp_path: Path, *args: str, name: str = "results.json") -> tuple[int, dict]:
    out = tmp_path / name
    code = main([*args, "--jobs", "2", "--json", str(out)])
    return code, json.loads(out.read_text())


def checks(results: dict) -> dict[str, dict]:
    return {t["number"]: t for t in results["tests"]}


def assert_gradescope_shape(results: dict) -> None:
    assert set(results) <= GRADESCOPE_TOP, set(results) - GRADESCOPE_TOP  # only fields Gradescope defines
    for key, kind in (
        ("score", int),
        ("execution_time", float),
        ("output", str),
        ("output_format", str),
        ("visibility", str),
        ("stdout_visibility", str),
        ("tests", list),
    ):
        assert isinstance(results[key], kind), key
    assert results["output_format"] in ("text", "simple_format", "html", "md", "ansi")
    for test in results["tests"]:
        assert set(test) >= {
            "name",
            "number",
            "score",
            "max_score",
            "status",
            "output",
            "output_format",
            "tags",
            "visibility",
        }
        assert set(test) <= GRADESCOPE_TEST, set(test) - GRADESCOPE_TEST
        assert test["status"] in ("passed", "failed")
        assert (test["status"] == "passed") == (test["score"] == test["max_score"])
        assert test["number"].split(".")[0] == test["tags"][0].removeprefix("ex").lstrip("0")
    assert results["score"] == sum(t["score"] for t in results["tests"])
    assert results["extra_data"]["max_score"] == sum(t["max_score"] for t in results["tests"])


@needs_solutions
def test_reference_solutions_score_full_marks(tmp_path):
    code, results = run(tmp_path, "--solutions")
    assert code == 0, results["output"]
    assert_gradescope_shape(results)
    assert results["score"] == results["extra_data"]["max_score"] == FULL
    assert sorted(results["extra_data"]["exercises"]) == ALL
    assert {t["tags"][0] for t in results["tests"]} == set(ALL)


def test_untouched_exercises_score_zero_with_hints(tmp_path, stubs):
    code, results = run(tmp_path, "--folder", str(stubs))
    assert code == 1
    assert_gradescope_shape(results)
    assert results["score"] == 0 and results["extra_data"]["max_score"] == FULL
    for test in results["tests"]:
        assert test["status"] == "failed"
        assert "NotImplementedError" in test["output"] and "not done yet" in test["output"], test


@needs_solutions
def test_hang_crash_and_import_errors_are_contained(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "ex02_keyset.py").write_text(
        (SOLUTIONS / "ex02_keyset.py")
        .read_text()
        .replace("    ks = DispatchKeySet()  # the empty set\n", "    while True:\n        pass\n")
    )
    shutil.copy(SOLUTIONS / "ex04_register.py", folder)
    (folder / "ex06_structured.py").write_text("raise RuntimeError('boom at import')\n")
    (folder / "ex07_boxed_fallback.py").write_text(
        (SOLUTIONS / "ex07_boxed_fallback.py")
        .read_text()
        .replace("    num_arguments = len(op.schema.arguments)\n", "    import os\n    os._exit(7)\n")
    )
    (folder / "ex08_bypass.py").write_text("while True:\n    pass\n")
    code, results = run(tmp_path, "--folder", str(folder), "--timeout", "4")
    assert code == 1
    assert_gradescope_shape(results)
    by_number = checks(results)
    # ex02 hangs in its first check: that check times out, the rest are reported as not run
    assert by_number["2.1"]["status"] == "failed" and "timed out after 4 s" in by_number["2.1"]["output"]
    assert "not run: grading stopped when check 2.1 timed out" in by_number["2.2"]["output"]
    # ex04 is unaffected by its neighbours
    assert all(by_number[f"4.{i}"]["status"] == "passed" for i in range(1, 7))
    # ex06 raises at import: every check shows the exception and the line
    for number in ("6.1", "6.5"):
        assert "importing work/ex06_structured.py failed" in by_number[number]["output"]
        assert "RuntimeError: boom at import" in by_number[number]["output"]
        assert "work/ex06_structured.py:1" in by_number[number]["output"]
    # ex07's process dies: reported as a crash with its exit code
    assert "stopped unexpectedly (exit code 7)" in by_number["7.1"]["output"]
    assert "while running check 7.1" in by_number["7.1"]["output"]
    # ex08 hangs while being imported
    assert "timed out after 4 s" in by_number["8.1"]["output"]
    assert "while running start-up" in by_number["8.1"]["output"]
    assert results["extra_data"]["exercises"]["ex02"]["status"] == "timeout"
    assert results["extra_data"]["exercises"]["ex07"]["status"] == "crashed"


@needs_solutions
def test_wrong_and_hard_coded_answers_fail(tmp_path):
    folder = tmp_path / "wrong"
    folder.mkdir()
    # ex02: a hard-coded answer (the key set of a CPU tensor after the default TLS)
    (folder / "ex02_keyset.py").write_text(
        "import labsupport as lab\n"
        "def compute_dispatch_key_set(tensor_key_sets, tls_include, tls_exclude, fallthrough_mask):\n"
        "    return lab.DispatchKeySet(['CPU', 'BackendSelect', 'ADInplaceOrView', 'AutogradCPU'])\n"
        "def dispatch_key_for(tensor_key_sets, tls_include, tls_exclude, fallthrough_mask):\n"
        "    return lab.DispatchKey.AutogradCPU\n"
    )
    # ex04: the autograd kernel forgets to step below autograd
    (folder / "ex04_register.py").write_text(
        (SOLUTIONS / "ex04_register.py")
        .read_text()
        .replace(
            "        with lab.AutoDispatchBelowADInplaceOrView():\n            result = op.call(self, other)\n",
            "        result = op.call(self, other)\n",
        )
    )
    # ex08: a binding that never bypasses anything
    (folder / "ex08_bypass.py").write_text(
        (SOLUTIONS / "ex08_bypass.py")
        .read_text()
        .replace('    if self._device.type == "cpu" and other._device.type == "cpu":\n', "    if False:\n")
    )
    code, results = run(tmp_path, "ex02", "ex04", "8", "--folder", str(folder), "--seed", "1234")
    assert code == 1
    by_number = checks(results)
    assert all(by_number[f"2.{i}"]["status"] == "failed" for i in range(1, 6))
    assert by_number["4.1"]["status"] == "passed"
    assert "DispatchRecursionError" in by_number["4.2"]["output"]
    assert "section 6" in by_number["4.2"]["output"]  # where the notebook shows it, not the fix's code
    assert "AutoDispatchBelowADInplaceOrView" not in by_number["4.2"]["output"]
    assert "after_autograd_keyset" not in by_number["4.2"]["output"]
    assert "ex04_register.py:" in by_number["4.2"]["output"]  # the learner's line
    assert [by_number[f"8.{i}"]["status"] for i in range(1, 6)] == ["passed"] * 3 + ["failed"] * 2
    assert "aten::add" in by_number["8.4"]["output"]
    assert results["extra_data"]["seed"] == 1234


@needs_solutions
def test_dropping_backend_bits_is_caught(tmp_path):
    folder = tmp_path / "bits"
    folder.mkdir()
    (folder / "ex02_keyset.py").write_text(
        (SOLUTIONS / "ex02_keyset.py")
        .read_text()
        .replace("    ks = ks - tls_exclude", "    ks = DispatchKeySet.from_raw(int(ks) & ~int(tls_exclude))")
    )
    code, results = run(tmp_path, "ex02", "--folder", str(folder))
    by_number = checks(results)
    assert code == 1 and by_number["2.1"]["status"] == "passed"
    assert by_number["2.3"]["status"] == "failed"
    assert "backend bit" in by_number["2.3"]["output"]


@needs_solutions
def test_submissions_are_graded_per_student(tmp_path, stubs):
    root = tmp_path / "submissions"
    (root / "alice" / "exercises").mkdir(parents=True)
    for name in ("ex02_keyset.py", "ex04_register.py"):
        shutil.copy(SOLUTIONS / name, root / "alice" / "exercises")
    (root / "bob").mkdir()
    shutil.copy(stubs / "ex02_keyset.py", root / "bob")  # bob: a flat folder, ex04 not handed in
    code = main(["ex02", "ex04", "--submissions", str(root), "--jobs", "2"])
    assert code == 1
    alice = json.loads((root / "alice" / "results.json").read_text())
    bob = json.loads((root / "bob" / "results.json").read_text())
    assert_gradescope_shape(alice)
    assert_gradescope_shape(bob)
    assert alice["score"] == alice["extra_data"]["max_score"] == 20
    assert bob["score"] == 0
    assert "bob/ex04_register.py is missing" in checks(bob)["4.1"]["output"]
    code, data = run(tmp_path, "ex02", "--submissions", str(root), name="all.json")
    assert sorted(data) == ["alice", "bob"] and data["alice"]["score"] == 10


def test_results_json_is_written_when_grading_cannot_run(tmp_path, capsys):
    code, results = run(tmp_path, "ex99")
    assert code == 2
    assert_gradescope_shape(results)
    assert "unknown exercise" in results["output"] and results["tests"] == []
    code, results = run(tmp_path, "--submissions", str(tmp_path / "nowhere"), name="r2.json")
    assert code == 2 and "nowhere" in results["output"]
    with pytest.raises(SystemExit) as stop:  # a usage error: argparse exits, a results.json is still there
        main(["--timeout", "soon", "--json", str(tmp_path / "r3.json")])
    assert stop.value.code == 2
    assert "invalid command line" in json.loads((tmp_path / "r3.json").read_text())["output"]


@needs_solutions
def test_lab_grade_in_a_notebook_prints_the_same_text_every_run(capsys, stubs):
    first = lab.grade("ex02", seed=1, folder=stubs)
    text_1 = capsys.readouterr().out
    second = lab.grade("ex02", seed=2, folder=stubs)
    text_2 = capsys.readouterr().out
    assert text_1 == text_2 and "NotImplementedError" in text_1
    assert "seed" not in text_1 and " s]" not in text_1
    assert first.score == second.score == 0 and first.max_score == 10
    assert repr(first) == "<GradeResult ex02: 0/10 points>"
    solved = lab.grade("2", solutions=True, quiet=True)
    assert solved.passed and solved["ex02"].score == 10
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ex04", "ex04"),
        ("4", "ex04"),
        ("04", "ex04"),
        ("ex04_register.py", "ex04"),
        ("exercises/ex08_bypass.py", "ex08"),
        ("4b", "ex04b"),
        ("04b", "ex04b"),
        ("ex04b", "ex04b"),
        ("EX04B", "ex04b"),
        ("ex04b_fill_table.py", "ex04b"),
        ("7b", "ex07b"),
    ],
)
def test_exercise_names(name, expected):
    assert resolve(name) == expected


def test_unknown_exercise_name():
    with pytest.raises(ValueError, match="unknown exercise 'ex05'"):
        resolve("ex05")
    with pytest.raises(ValueError, match="unknown exercise '4z'"):
        resolve("4z")


@needs_solutions
def test_lettered_exercise_ids_work_everywhere(tmp_path, capsys):
    """"4b"/"ex04b": the command line, lab.grade, and the seeds each check plans its inputs with."""
    from labsupport.grade.checking import check_rng

    code, results = run(tmp_path, "4b", "7b", "--solutions", "--seed", "3")
    assert code == 0 and results["score"] == 20
    assert {t["number"].split(".")[0] for t in results["tests"]} == {"4b", "7b"}
    assert lab.grade("ex04b", solutions=True, seed=4, quiet=True).passed
    four, four_b, four_c = (load_exercise(i) for i in ("ex04", "ex04b", "ex04c"))
    draws = {ex.id: check_rng(9, ex, 0).integers(1 << 30, size=4).tolist() for ex in (four, four_b, four_c)}
    assert len({tuple(d) for d in draws.values()}) == 3  # each exercise its own stream, letters included
    assert check_rng(9, four_b, 0).integers(1 << 30, size=4).tolist() == draws["ex04b"]  # and reproducible


def test_lab_grade_is_callable_and_the_grader_package():
    """DESIGN.md's ``lab.grade("ex04")`` and ``import labsupport.grade.<submodule>`` both work."""
    import labsupport.grade.checking as checking
    from labsupport.grade import grade

    assert lab.grade is sys.modules["labsupport.grade"] and callable(lab.grade)
    assert checking.Verdict(True, "ok").passed and lab.grade.grade is grade
    assert "exercises" in str(__import__("inspect").signature(lab.grade))


def test_the_legacy_in_worker_checks_are_gone():
    """No exercise can decide its own verdict in the worker: every check has a parent-side decide."""
    from labsupport.grade import checking, worker

    assert not hasattr(checking, "Context") and not hasattr(checking, "CheckFailed")
    assert not hasattr(worker, "run_legacy") and not hasattr(checking.Exercise, "check")
    for exercise_id in ALL:
        for check in load_exercise(exercise_id).checks:
            assert callable(check.plan) and callable(check.decide) and check.observe, (exercise_id, check.number)
    with pytest.raises(TypeError):
        checking.Exercise("ex90", 90, "t", "f.py", "none").add_check("90.1", "x", 1)  # type: ignore[call-arg]


def test_a_python_without_numpy_is_told_to_use_the_venv():
    """``python -m labsupport.grade`` with a Python that lacks the lab: one clear line, no numpy traceback."""
    bare = [sys.executable, "-S"]  # no site-packages: numpy is not importable
    if subprocess.run([*bare, "-c", "import numpy"], capture_output=True).returncode == 0:
        pytest.skip("numpy is importable without site-packages here")
    done = subprocess.run([*bare, "-m", "labsupport.grade", "ex04"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "needs numpy" in done.stderr and "make grade" in done.stderr and ".venv/bin/python" in done.stderr


def test_instrument_fallbacks_agree_with_the_lab_tools():
    import labsupport.torch as torch
    from labsupport.grade import instruments

    x, y = torch.randn([3]), torch.randn([3])
    counts = instruments._observer_counts(lambda: torch.add(x, y))
    assert counts == instruments.op_counts(lambda: torch.add(x, y))[0] == {"aten::add": 1}
    first = instruments._settrace_count(lambda: torch.add(x, y))
    assert first == instruments._settrace_count(lambda: torch.add(x, y)) > 50


@needs_solutions
def test_exercises_and_solutions_have_the_same_public_names():
    import ast

    def public(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
        return {n for n in names if not n.startswith("_")}

    stubs = sorted(p.name for p in EXERCISES.glob("ex*.py"))
    assert stubs == sorted(p.name for p in SOLUTIONS.glob("ex*.py"))
    assert len(stubs) >= 5
    for name in stubs:
        assert public(EXERCISES / name) == public(SOLUTIONS / name), name


@needs_solutions
def test_one_explanation_per_error(tmp_path):
    """ex04 without stepping below autograd: the DispatchRecursionError is explained once, not per check."""
    folder = tmp_path / "recursion"
    folder.mkdir()
    (folder / "ex04_register.py").write_text(
        (SOLUTIONS / "ex04_register.py")
        .read_text()
        .replace(
            "        with lab.AutoDispatchBelowADInplaceOrView():\n            result = op.call(self, other)\n",
            "        result = op.call(self, other)\n",
        )
    )
    result = lab.grade("ex04", folder=folder, seed=5, quiet=True)
    report = result.report()
    words = " ".join(report.split())  # the report wraps long lines
    assert words.count("lands on this kernel again") == 1, report  # a phrase of the error's own explanation
    assert "after_autograd_keyset" not in report and "AutoDispatchBelowADInplaceOrView():" not in report
    assert "(the full message is shown under 4.2)" in report or "(same as 4.2)" in report
    hints = [line.strip() for line in report.splitlines() if line.strip().startswith("hint:")]
    shown = [h for h in hints if not h.startswith("hint: as for")]
    assert len(shown) == len(set(shown)) >= 1  # each hint in full once, then "as for 4.x"


def test_load_exercise_works_from_the_notebooks_folder(tmp_path, monkeypatch):
    """The notebooks' "try it" snippets: ``lab.load_exercise("ex06")`` from notebooks/, re-read on each call."""
    monkeypatch.chdir(REPO_ROOT / "notebooks")
    module = lab.load_exercise("ex02")
    assert module.__file__ == str(EXERCISES / "ex02_keyset.py")
    assert callable(module.compute_dispatch_key_set)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "ex02_keyset.py").write_text("ANSWER = 1\n")
    assert lab.load_exercise("2", folder=folder).ANSWER == 1
    (folder / "ex02_keyset.py").write_text("ANSWER = 2\n")
    assert lab.load_exercise("ex02_keyset.py", folder=folder).ANSWER == 2
    with pytest.raises(FileNotFoundError, match="belongs in exercises/"):
        lab.load_exercise("ex04", folder=tmp_path)


@needs_solutions
def test_make_grade_uses_the_venv():
    """``make grade EX=ex02`` runs the grader with .venv/bin/python (GRADE_ARGS passes options)."""
    if shutil.which("make") is None or not (REPO_ROOT / ".venv" / ".installed").exists():
        pytest.skip("needs make and the lab's venv")
    done = subprocess.run(
        ["make", "-s", "grade", "EX=ex02 ex04b", "SEED=3", "GRADE_ARGS=--solutions"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ex02  10/10" in done.stdout and "ex04b  10/10" in done.stdout and "seed 3" in done.stdout
    assert "Total: 20/20" in done.stdout


@needs_solutions
def test_stub_grading_tests_stay_green_after_the_exercises_are_solved(tmp_path):
    """A learner's clone with every exercise solved (not committed): the stub tests still pass."""
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                                                     capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("needs a git checkout of the course")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{REPO_ROOT}", str(clone)], check=True, timeout=120)
    # the lab and its tests as they are now (possibly uncommitted), then solve every exercise in the clone
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("labsupport", "tests"):
        shutil.copytree(REPO_ROOT / folder, clone / folder, dirs_exist_ok=True, ignore=ignore)
    for solution in (clone / "solutions").glob("ex*.py"):
        shutil.copy(solution, clone / "exercises" / solution.name)
    assert lab.grade(folder=clone / "exercises", quiet=True).passed  # really solved
    env = {**os.environ, "PYTHONPATH": str(clone)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "tests/test_grade.py",
         "tests/test_grade_exercises.py", "tests/test_grade_new_exercises.py",
         "-k", "untouched or same_text or per_student"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "12 passed" in done.stdout and "failed" not in done.stdout
