"""How long the grader takes for a class: ``python benchmarks/grade_class.py [--students 200] [--jobs 2]``.

Builds a synthetic class in a temporary folder: every student hands in every exercise, each file being
the reference solution, a wrong answer (the untouched stub, a file that does not import, a wrong
function body) or a hostile file (os._exit at import, a fork bomb, forged result lines, a memory hog,
an output flood, a sleep bomb, a CPU spin...). Then it grades the class exactly as an instructor does
(``.venv/bin/python -m labsupport.grade --submissions DIR --jobs N``, strict sandbox, one fresh worker per
student and exercise) and reports the wall time, the time per worker and whether every solution got
full marks and every other file got less.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from labsupport.grade.pristine import pristine_exercises  # noqa: E402
from labsupport.grade.registry import exercise_ids, load_exercise  # noqa: E402

HOSTILE = {
    "exit_at_import": "import os\nos._exit(0)\n",
    "sys_exit": "import sys\nsys.exit(0)\n",
    "fork_bomb": "import os\nwhile True:\n    os.fork()\n",
    "fake_json": (
        "import json, os\nprint(json.dumps({'score': 100}))\n"
        "for fd in range(3, 40):\n    try:\n        os.write(fd, b'{\"check\": \"1.1\", \"observed\": 1}\\n')\n"
        "    except OSError:\n        pass\n"
    ),
    "memory_hog": "hog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))\n",
    "stdout_flood": "while True:\n    print('x' * 65536)\n",
    "read_solutions": f"print(open({str(REPO / 'solutions' / 'ex02_keyset.py')!r}).read())\n",
    "os_system": "import os\nos.system('echo pwned')\n",
    "file_flood": "for i in range(1000):\n    open(f'f{i}', 'wb').write(b'x' * (1 << 20))\n",
}
SLOW_HOSTILE = {"sleep_bomb": "import time\ntime.sleep(1000)\n", "cpu_spin": "while True:\n    pass\n"}


def build_class(root: Path, students: int, seed: int) -> dict[tuple[str, str], str]:
    """Write the class; returns (student, exercise) -> kind ("solution", "wrong:...", "hostile:...")."""
    rng = random.Random(seed)
    stubs = pristine_exercises(root / "_stubs")
    kinds: dict[tuple[str, str], str] = {}
    for i in range(students):
        student = f"student{i:03d}"
        folder = root / student / "exercises"
        folder.mkdir(parents=True)
        for exercise_id in exercise_ids():
            exercise = load_exercise(exercise_id)
            solution = (REPO / "solutions" / exercise.filename).read_text()
            roll = rng.random()
            if roll < 0.55:
                kind, text = "solution", solution
            elif roll < 0.70:
                kind, text = "wrong:stub", (stubs / exercise.filename).read_text()
            elif roll < 0.78:
                kind, text = "wrong:no-import", solution.replace("import", "imprt", 1)
            elif roll < 0.85:
                kind, text = "wrong:raises", _break_functions(solution)
            elif roll < 0.99:
                name = rng.choice(sorted(HOSTILE))
                kind, text = f"hostile:{name}", HOSTILE[name] + solution
            else:
                name = rng.choice(sorted(SLOW_HOSTILE))
                kind, text = f"hostile:{name}", SLOW_HOSTILE[name] + solution
            (folder / exercise.filename).write_text(text)
            for extra in (REPO / "exercises").glob("*.yaml"):  # given data files travel with the stubs
                (folder / extra.name).write_text(extra.read_text())
            kinds[(student, exercise_id)] = kind
    return kinds


def _break_functions(source: str) -> str:
    """The solution with every function and method answering wrongly (it raises on entry)."""
    lines = source.splitlines()
    starts = sorted((node.body[0].lineno, node.body[0].col_offset) for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.FunctionDef))  # fmt: skip
    for lineno, col in reversed(starts):
        lines.insert(lineno - 1, " " * col + "raise ValueError('a wrong answer')")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0, help="time limit per worker (seconds)")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lab-class-") as tmp:
        root = Path(tmp) / "submissions"
        kinds = build_class(root, args.students, args.seed)
        out = Path(tmp) / "all.json"
        command = [sys.executable, "-m", "labsupport.grade", "--submissions", str(root), "--jobs", str(args.jobs),
                   "--timeout", str(args.timeout), "--seed", "1", "--json", str(out)]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode not in (0, 1):
            print(done.stdout[-3000:], done.stderr[-3000:])
            return 2
        data = json.loads(out.read_text())
    problems = []
    for (student, exercise_id), kind in kinds.items():
        info = data[student]["extra_data"]["exercises"][exercise_id]
        full = info["score"] == info["max_score"]
        if (kind == "solution") != full:
            problems.append(f"{student} {exercise_id} {kind}: {info['score']}/{info['max_score']} ({info['status']})")
            if kind == "solution":
                report = data[student]["output"]
                problems.append(report[report.find(exercise_id + "  ") :][:600])
    counts: dict[str, int] = {}
    for kind in kinds.values():
        counts[kind.split(":")[0]] = counts.get(kind.split(":")[0], 0) + 1
    workers = len(kinds)
    print(f"class: {args.students} students x {len(exercise_ids())} exercises = {workers} workers "
          f"({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})")  # fmt: skip
    slow = sum(1 for k in kinds.values() if k.split(":")[-1] in SLOW_HOSTILE)
    print(f"of which {slow} hit the {args.timeout:g} s time limit (sleep bombs, CPU spins)")
    per_worker = seconds / workers * 1000
    print(f"graded with --submissions --jobs {args.jobs} in {seconds:.1f} s ({per_worker:.0f} ms per worker)")
    print("every solution full marks, every other file less: " + ("yes" if not problems else "NO"))
    for line in problems[:20]:
        print("  " + line)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
