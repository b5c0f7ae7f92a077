"""The checks of exercises ex02, ex04, ex06, ex07 and ex08, tested on their own (issue 12, item 1).

Each exercise's checks are two-part (plan/decide in the parent, observe in the worker); the in-process
harness (tests/grade_harness.py) runs them without the runner. For every exercise: the reference
solution scores full marks; the untouched stub (``labsupport.grade.pristine``, never the learner's
edited file) scores 0 with "not done yet"; and each common misunderstanding, written as a wrong submission,
fails its check with a hint that names the misunderstanding and never shows the answer's code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import grade_harness as harness
import pytest

from labsupport.grade.checking import check_rng
from labsupport.grade.registry import REPO_ROOT, load_exercise

SOLUTIONS = REPO_ROOT / "solutions"
EXERCISES = REPO_ROOT / "exercises"
FILES = {
    "ex02": "ex02_keyset.py",
    "ex04": "ex04_register.py",
    "ex06": "ex06_structured.py",
    "ex07": "ex07_boxed_fallback.py",
    "ex08": "ex08_bypass.py",
}


@pytest.fixture(autouse=True)
def _scratch(tmp_path, monkeypatch):
    """Builds made by observers (ex06, ex08) go to the test's temporary folder."""
    monkeypatch.setenv("LAB_GRADE_TMP", str(tmp_path / "scratch"))


def mutate(tmp_path: Path, exercise: str, *edits: tuple[str, str], tag: str = "wrong") -> Path:
    """The reference solution with ``edits`` applied; each replaced text must be there exactly once."""
    name = FILES[exercise]
    text = (SOLUTIONS / name).read_text()
    for old, new in edits:
        assert text.count(old) == 1, f"{old!r} is not (once) in solutions/{name}"
        text = text.replace(old, new)
    folder = tmp_path / tag
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    for extra in ("ex06_sqdiff.yaml",):
        if exercise == "ex06":
            (folder / extra).write_text((EXERCISES / extra).read_text())
    return path


CODE_PATTERNS = [  # what a hint must never contain: the answer's code
    r"ks\s*-\s*tls_exclude",
    r"\|\s*tls_include",
    r"&\s*fallthrough_mask",
    r"highest_priority_key\(\)",
    r"op\.call\(self,\s*other\)",
    r"with lab\.\w+\(",
    r"np\.copyto\(",
    r"del stack\[",
    r"stack\.append\(",
    r"_device\.type\s*==",
    r"__dispatch_add\(",
    r"\[grad,\s*grad\]",
    r"_make\(data",
]


def assert_fails_with(graded: dict[str, harness.Graded], number: str, *words: str) -> harness.Graded:
    """Check ``number`` failed; every hint level names the misunderstanding (``words``, case-insensitive,
    all in the first hint) and none of them shows the answer's code."""
    result = graded[number]
    assert not result.passed, f"{number} passed: {result.verdict.message}"
    hints = result.verdict.hints
    assert hints, f"{number} failed without a hint: {result.verdict.message}"
    first = hints[0].lower()
    for word in words:
        assert word.lower() in first, f"{number}: {word!r} not in the first hint {hints[0]!r}"
    assert "not done yet" not in " ".join(hints)
    for hint in hints:
        for pattern in CODE_PATTERNS:
            assert not re.search(pattern, hint), f"{number}: the hint shows code ({pattern}): {hint!r}"
    return result


# ---- every exercise: solution full, stub zero -----------------------------------------------------


@pytest.mark.parametrize("exercise", sorted(FILES))
def test_reference_solution_scores_full_marks(exercise):
    graded = harness.grade(exercise, SOLUTIONS / FILES[exercise], seed=11)
    failures = {n: g.verdict.message for n, g in graded.items() if not g.passed}
    assert not failures
    assert harness.score(graded) == load_exercise(exercise).max_points == 10
    assert len(graded) == len(load_exercise(exercise).checks)


@pytest.mark.parametrize("exercise", sorted(FILES))
def test_untouched_stub_scores_zero_not_done_yet(exercise, tmp_path):
    stub = harness.pristine_stub(exercise, tmp_path)  # the yaml ex06 reads comes with it
    graded = harness.grade(exercise, stub, seed=5)
    assert harness.score(graded) == 0
    for result in graded.values():
        assert "NotImplementedError" in result.verdict.message, result.verdict.message
        assert "not done yet" in result.hint(), result.verdict


@pytest.mark.parametrize("exercise", sorted(FILES))
def test_checks_are_two_part_and_plans_are_plain_json(exercise):
    ex = load_exercise(exercise)
    assert ex.observer == f"labsupport.grade.{FILES[exercise].removesuffix('.py')}.observe"
    for index, check in enumerate(ex.checks):
        assert check.plan and check.decide and check.observe
        first = json.dumps(check.plan(check_rng(1, ex, index)))
        assert first == json.dumps(check.plan(check_rng(1, ex, index)))  # same seed, same inputs


@pytest.mark.parametrize("exercise", sorted(FILES))
def test_stub_does_not_hold_the_answer(exercise):
    """No TODO spells out the code: the stub keeps signatures, docstrings and names only."""
    text = (EXERCISES / FILES[exercise]).read_text()
    assert "TODO" not in text
    for pattern in CODE_PATTERNS:
        if pattern == r"_make\(data":
            continue  # the given scaffolding of ex08 makes tensors itself
        assert not re.search(pattern, text), (exercise, pattern)
    assert "lab.load_exercise(" in text or exercise == "ex07"


@pytest.mark.parametrize("exercise", sorted(FILES))
def test_decide_survives_garbage_observations(exercise):
    ex = load_exercise(exercise)
    for index, check in enumerate(ex.checks):
        inputs = json.loads(json.dumps(check.plan(check_rng(2, ex, index))))
        for garbage in (None, 3, "PASS", [], {}, {"results": "all passed"}, {"results": [{"raw": "x"}]}):
            verdict = check.decide(inputs, garbage)
            assert verdict.passed is False, (check.number, garbage)


# ---- ex02: the key set of a call ------------------------------------------------------------------


def test_ex02_and_not_drops_backend_bits(tmp_path):
    path = mutate(
        tmp_path, "ex02", ("    ks = ks - tls_exclude", "    ks = DispatchKeySet.from_raw(int(ks) & ~int(tls_exclude))")
    )
    graded = harness.grade("ex02", path, seed=1)
    assert graded["2.1"].passed and graded["2.2"].passed
    result = assert_fails_with(graded, "2.3", "backend bit", "excluding")
    assert "functionality bits x backend bits" in result.hint(1)
    assert "missing: backend bits" in result.verdict.message


def test_ex02_forgetting_the_tls_include_set(tmp_path):
    path = mutate(tmp_path, "ex02", ("    ks = ks | tls_include", "    pass"))
    graded = harness.grade("ex02", path, seed=2)
    assert graded["2.1"].passed
    assert_fails_with(graded, "2.2", "include set", "missing")


def test_ex02_forgetting_the_exclude_set(tmp_path):
    path = mutate(tmp_path, "ex02", ("    ks = ks - tls_exclude", "    pass"))
    assert_fails_with(harness.grade("ex02", path, seed=3), "2.2", "exclude set", "still in your answer")


def test_ex02_adding_include_after_exclude(tmp_path):
    path = mutate(
        tmp_path,
        "ex02",
        ("    ks = ks | tls_include", "    ks = ks - tls_exclude"),
        ("    ks = ks - tls_exclude  # 3.", "    ks = ks | tls_include  # 3."),
    )
    assert_fails_with(harness.grade("ex02", path, seed=4), "2.2", "both included and excluded")


def test_ex02_mask_applied_before_the_include_set(tmp_path):
    path = mutate(
        tmp_path,
        "ex02",
        ("    ks = ks | tls_include", "    ks = (ks & fallthrough_mask) | tls_include"),
        ("    return ks & fallthrough_mask", "    return ks"),
    )
    graded = harness.grade("ex02", path, seed=5)
    assert graded["2.1"].passed and graded["2.2"].passed and graded["2.3"].passed
    assert_fails_with(graded, "2.4", "fallthrough", "include set", "whole key set")


def test_ex02_forgetting_the_mask(tmp_path):
    path = mutate(tmp_path, "ex02", ("    return ks & fallthrough_mask", "    return ks"))
    assert_fails_with(harness.grade("ex02", path, seed=6), "2.4", "fallthrough")


def test_ex02_picking_the_lowest_priority_key(tmp_path):
    path = mutate(tmp_path, "ex02", ("    return ks.highest_priority_key()", "    return next(iter(ks))"))
    graded = harness.grade("ex02", path, seed=7)
    assert all(graded[f"2.{i}"].passed for i in range(1, 5))
    assert_fails_with(graded, "2.5", "lowest-priority")


def test_ex02_answering_with_a_functionality_key(tmp_path):
    path = mutate(tmp_path, "ex02", ("    return ks.highest_priority_key()", "    return ks.highest_functionality_key()"))
    assert_fails_with(harness.grade("ex02", path, seed=8), "2.5", "functionality", "runtime key")


def test_ex02_key_from_the_tensors_alone(tmp_path):
    path = mutate(
        tmp_path,
        "ex02",
        (
            "    ks = compute_dispatch_key_set(tensor_key_sets, tls_include, tls_exclude, fallthrough_mask)",
            "    ks = compute_dispatch_key_set(tensor_key_sets, DispatchKeySet(), DispatchKeySet(), DispatchKeySet.full())",
        ),
    )
    assert_fails_with(harness.grade("ex02", path, seed=9), "2.5", "tensors' keys alone")


def test_ex02_hard_coded_answers_fail(tmp_path):
    folder = tmp_path / "hard"
    folder.mkdir()
    path = folder / "ex02_keyset.py"
    path.write_text(
        "import labsupport as lab\n"
        "def compute_dispatch_key_set(tensor_key_sets, tls_include, tls_exclude, fallthrough_mask):\n"
        "    return lab.DispatchKeySet(['CPU', 'BackendSelect', 'ADInplaceOrView', 'AutogradCPU'])\n"
        "def dispatch_key_for(tensor_key_sets, tls_include, tls_exclude, fallthrough_mask):\n"
        "    return lab.DispatchKey.AutogradCPU\n"
    )
    assert harness.score(harness.grade("ex02", path, seed=10)) == 0


def test_ex02_a_crash_on_a_factory_call_is_explained(tmp_path):
    path = mutate(
        tmp_path,
        "ex02",
        ("    ks = DispatchKeySet()  # the empty set\n", "    ks = DispatchKeySet()\n    ks = list(tensor_key_sets)[0]\n"),
    )
    result = assert_fails_with(harness.grade("ex02", path, seed=12), "2.1", "no tensor arguments")
    assert "IndexError" in result.verdict.message and "ex02_keyset.py:" in result.verdict.message


# ---- ex04: myadd and myadd_ -----------------------------------------------------------------------

NO_GUARD = (
    "        with lab.AutoDispatchBelowADInplaceOrView():\n            result = op.call(self, other)\n",
    "        result = op.call(self, other)\n",
)


def test_ex04_redispatch_without_excluding_autograd(tmp_path):
    graded = harness.grade("ex04", mutate(tmp_path, "ex04", NO_GUARD), seed=1)
    assert graded["4.1"].passed and graded["4.7"].passed and graded["4.6"].passed
    result = assert_fails_with(graded, "4.2", "misunderstanding", "keeps no record", "autograd", "section 6")
    message = result.verdict.message
    assert message.count("DispatchRecursionError") == 1 and "wrong/ex04_register.py" not in message
    assert "ex04_register.py:" in message and "times before" not in message
    # the exception explains itself; the hint names the misunderstanding without saying it again
    first_sentence = message.split("DispatchRecursionError: ", 1)[1].split(". ", 1)[0]
    assert "re-entered" in first_sentence and "infinite recursion" in first_sentence
    words = first_sentence.lower().split()
    runs = {" ".join(words[i : i + 4]) for i in range(len(words) - 3)}
    for hint in result.verdict.hints:
        assert first_sentence not in hint
        assert "re-entered" not in hint and "infinite recursion" not in hint and "again and again" not in hint
        assert not [run for run in runs if run in hint.lower()], hint
    # the same mistake reads the same in every check it breaks, so the report prints it once
    same = {(graded[n].verdict.message, graded[n].verdict.hints) for n in ("4.2", "4.3", "4.4", "4.5")}
    assert len(same) == 1


def test_ex04_autograd_kernel_registered_on_cpu(tmp_path):
    path = mutate(
        tmp_path,
        "ex04",
        (
            'autograd = lab.Library("myops", "IMPL", "Autograd", dispatcher=dispatcher)',
            'autograd = lab.Library("myops", "IMPL", "CPU", dispatcher=dispatcher)',
        ),
    )
    assert_fails_with(harness.grade("ex04", path, seed=2), "4.1", "autograd kernel on the CPU key", "Autograd alias")


def test_ex04_autograd_kernel_that_computes_instead_of_redispatching(tmp_path):
    path = mutate(
        tmp_path,
        "ex04",
        (NO_GUARD[0], "        result = myadd_cpu(self, other)\n"),
    )
    graded = harness.grade("ex04", path, seed=3)
    assert graded["4.2"].passed
    assert_fails_with(graded, "4.4", "computes the result itself", "below autograd")


def test_ex04_numpy_broadcasting_instead_of_a_shape_check(tmp_path):
    path = mutate(
        tmp_path,
        "ex04",
        ("    if self._sizes != other._sizes:\n        raise RuntimeError(\n            f\"myadd: self", "    if False:\n        raise RuntimeError(\n            f\"myadd: self"),
        ("    data = (self._data + other._data).astype(self._dtype.np, copy=False)\n    return type(self)._make(data, self._sizes,",
         "    data = (self._data + other._data).astype(self._dtype.np, copy=False)\n    return type(self)._make(data, data.shape,"),
    )
    graded = harness.grade("ex04", path, seed=4)
    assert graded["4.2"].passed
    assert_fails_with(graded, "4.3", "same shape", "broadcast")


def test_ex04_inplace_returning_a_new_tensor(tmp_path):
    path = mutate(
        tmp_path,
        "ex04",
        (
            '    np.add(self._data, other._data, out=self._data, casting="unsafe")  # the storage self already has\n'
            "    return self\n",
            "    return type(self)._make(self._data + other._data, self._sizes, self._dtype, self._device)\n",
        ),
    )
    graded = harness.grade("ex04", path, seed=5)
    assert graded["4.2"].passed and graded["4.4"].passed
    assert_fails_with(graded, "4.6", "returns its own input")


def test_ex04_inplace_rebinding_the_data(tmp_path):
    path = mutate(
        tmp_path,
        "ex04",
        (
            '    np.add(self._data, other._data, out=self._data, casting="unsafe")  # the storage self already has\n',
            "    self._data = self._data + other._data\n",
        ),
    )
    assert_fails_with(harness.grade("ex04", path, seed=6), "4.6", "storage self already has", "alias")


def test_ex04_inplace_without_an_ad_inplace_or_view_kernel(tmp_path):
    path = mutate(
        tmp_path,
        "ex04",
        ('    inplace_or_view.impl("myadd_", myadd__ad_inplace_or_view, with_keyset=True)\n', ""),
    )
    graded = harness.grade("ex04", path, seed=7)
    assert_fails_with(graded, "4.1", "ADInplaceOrView", "bumps the version")
    assert_fails_with(graded, "4.6", "nothing bumped the version", "fallthrough")


def test_ex04_backward_with_one_gradient_for_two_inputs(tmp_path):
    path = mutate(tmp_path, "ex04", ("        return [grad, grad]", "        return [grad]"))
    graded = harness.grade("ex04", path, seed=8)
    assert graded["4.4"].passed
    assert_fails_with(graded, "4.5", "one gradient per input")


def test_ex04_graph_recorded_under_no_grad(tmp_path):
    path = mutate(tmp_path, "ex04", ("        if compute_requires_grad(self, other):\n", "        if True:\n"))
    assert_fails_with(harness.grade("ex04", path, seed=9), "4.5", "only when some input requires grad")


def test_ex04_not_returning_every_library(tmp_path):
    path = mutate(tmp_path, "ex04", ("    return [defs, cpu, autograd, inplace_or_view]", "    return [cpu, autograd, inplace_or_view]"))
    graded = harness.grade("ex04", path, seed=10)
    assert_fails_with(graded, "4.1", "no schema any more", "the DEF one included")


# ---- ex06: the structured kernel sqdiff -----------------------------------------------------------

COPYTO = '        np.copyto(out._data, cast_array(np.multiply(diff, diff), out._data.dtype), casting="unsafe")'


def test_ex06_rebinding_out_data_instead_of_writing_into_it(tmp_path):
    """The issue's case: `out._data = (a - b) * (a - b)` scored 10/10."""
    path = mutate(tmp_path, "ex06", (COPYTO, "        out._data = np.multiply(diff, diff)"))
    graded = harness.grade("ex06", path, seed=1)
    assert graded["6.1"].passed
    result = assert_fails_with(graded, "6.4", "writes into the", "storage it is given", "set_output")
    assert "reports dtype float64 but its storage holds float32" in result.verdict.message or "replaced" in result.verdict.message
    assert_fails_with(graded, "6.3", "replaced the output's array")


def test_ex06_wider_out_reports_float64_but_holds_float32(tmp_path):
    path = mutate(tmp_path, "ex06", (COPYTO, "        out._data = np.multiply(diff, diff)"))
    graded = harness.grade("ex06", path, seed=2, only="6.4")
    # every seed's plan has a float32 x float32 -> float64 out= case; whichever case fails first, the
    # decision names the rebinding; the float64/float32 disagreement is reported when that case comes first
    cases = graded["6.4"].inputs["cases"]
    assert any(c["self"]["dtype"] == "float32" and c["out"]["dtype"] == "float64" for c in cases)
    assert_fails_with(graded, "6.4", "replaced the output's array")


def test_ex06_meta_without_the_bool_check(tmp_path):
    """The issue's case: without sub_check, a raw numpy TypeError under 6.1."""
    path = mutate(tmp_path, "ex06", ("        sub_check(self_, other)  # like sub: no bool tensors\n", ""))
    graded = harness.grade("ex06", path, seed=3)
    assert graded["6.2"].passed and graded["6.4"].passed
    result = assert_fails_with(graded, "6.1", "bool tensors", "meta()")
    assert "TypeError" in result.verdict.message  # the raw error is shown once, with the hint naming the check


def test_ex06_meta_that_announces_no_output(tmp_path):
    path = mutate(
        tmp_path, "ex06", ("        self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)", "        pass")
    )
    graded = harness.grade("ex06", path, seed=4)
    assert_fails_with(graded, "6.1", "announced no output")


def test_ex06_meta_with_the_unary_builder(tmp_path):
    """Transcribing notebook 06's unary `twice` example: no broadcasting, no type promotion."""
    path = mutate(
        tmp_path,
        "ex06",
        (
            "        self.build_borrowing_binary_op(self.maybe_get_output(0), self_, other)",
            "        self.build_borrowing_unary_op(self.maybe_get_output(0), self_)",
        ),
    )
    graded = harness.grade("ex06", path, seed=7)
    assert_fails_with(graded, "6.1", "from self alone", "binary")


def test_ex06_impl_that_returns_a_new_tensor(tmp_path):
    path = mutate(
        tmp_path,
        "ex06",
        (COPYTO, "        return type(out)._make(np.multiply(diff, diff), out._sizes, out._dtype, out._device)"),
    )
    graded = harness.grade("ex06", path, seed=5)
    assert graded["6.1"].passed
    assert_fails_with(graded, "6.2", "common dtype")


# ---- ex07: the boxed for-loop fallback ------------------------------------------------------------

GUARD = "    with lab.ExcludeDispatchKeyGuard(BATCHED_KEY_SET):  # run below Batched\n"
POP = (
    "    arguments = stack[len(stack) - num_arguments :]\n"
    "    del stack[len(stack) - num_arguments :]  # a boxed kernel pops its arguments...\n"
)


def test_ex07_fallback_without_the_exclude_guard(tmp_path):
    """The issue's case: no ExcludeDispatchKeyGuard scored 10/10."""
    graded = harness.grade("ex07", mutate(tmp_path, "ex07", (GUARD, "    if True:\n")), seed=1)
    assert all(graded[n].passed for n in ("7.1", "7.2", "7.3", "7.5"))
    result = assert_fails_with(graded, "7.4", "below the batched key", "excluded")
    assert "exclude set" in result.verdict.message


def test_ex07_popping_the_whole_stack(tmp_path):
    """The issue's case: `args = list(stack); stack.clear()` scored 10/10 (one-argument stacks only)."""
    path = mutate(tmp_path, "ex07", (POP, "    arguments = list(stack)\n    stack.clear()\n"))
    graded = harness.grade("ex07", path, seed=2)
    assert graded["7.1"].passed and graded["7.4"].passed
    assert_fails_with(graded, "7.5", "only the top", "as many as the operator's schema has arguments")


def test_ex07_running_the_whole_batch_at_once(tmp_path):
    """The issue's case: not splitting the batch gave a raw ValueError from make_batched."""
    path = mutate(
        tmp_path,
        "ex07",
        (
            "            element_stack = [select_batch_element(a, index) if is_batched(a) else a for a in arguments]\n",
            "            element_stack = [unwrap_batched(a) if is_batched(a) else a for a in arguments]\n",
        ),
        ("        for index in range(size):\n", "        for index in range(1):\n"),
        (
            "        stack.append(stack_results([returns[i] for returns in per_element]))",
            "        stack.append(make_batched(per_element[0][i]))",
        ),
    )
    graded = harness.grade("ex07", path, seed=3)
    assert graded["7.1"].passed  # elementwise operators hide it...
    result = assert_fails_with(graded, "7.3", "once on the whole batch", "once per batch element")
    # the full sum (always the last case of 7.3) is where make_batched raised its ValueError: decided alone,
    # the raw error is shown once and the hint explains it
    from labsupport.grade.ex07_boxed_fallback.decide import decide_calls

    last = {"cases": result.inputs["cases"][-1:]}
    alone = decide_calls(last, {"results": result.observed["results"][-1:]})
    assert "ValueError: make_batched needs" in alone.message and alone.hints == result.verdict.hints


def test_ex07_leaving_the_arguments_on_the_stack(tmp_path):
    path = mutate(
        tmp_path, "ex07", (POP, "    arguments = stack[len(stack) - num_arguments :]\n")
    )
    graded = harness.grade("ex07", path, seed=4)
    assert graded["7.1"].passed is False or graded["7.5"].passed is False
    assert_fails_with(graded, "7.5", "pops its arguments")


def test_ex07_splitting_plain_tensors_too(tmp_path):
    path = mutate(
        tmp_path,
        "ex07",
        (
            "select_batch_element(a, index) if is_batched(a) else a for a in arguments]",
            "select_batch_element(a, index) if isinstance(a, TensorBase) else a for a in arguments]",
        ),
    )
    graded = harness.grade("ex07", path, seed=5)
    assert graded["7.1"].passed
    assert_fails_with(graded, "7.2", "only the batched arguments are split")


def test_ex07_results_not_wrapped_as_batched(tmp_path):
    path = mutate(tmp_path, "ex07", ("    return make_batched(full)", "    return full"))
    assert_fails_with(harness.grade("ex07", path, seed=6), "7.1", "batched result")


# ---- ex08: bypassing the dispatcher ---------------------------------------------------------------

CPU_TEST = '    if self._device.type == "cpu" and other._device.type == "cpu":\n'


def test_ex08_a_binding_that_never_bypasses(tmp_path):
    graded = harness.grade("ex08", mutate(tmp_path, "ex08", (CPU_TEST, "    if False:\n")), seed=1)
    assert [graded[f"8.{i}"].passed for i in range(1, 6)] == [True, True, True, False, False]
    assert_fails_with(graded, "8.4", "still enters the dispatcher", "profiler")
    result = assert_fails_with(graded, "8.5", "dispatcher's work")
    assert "instructions per call" in result.verdict.message


def test_ex08_bypassing_every_device(tmp_path):
    graded = harness.grade("ex08", mutate(tmp_path, "ex08", (CPU_TEST, "    if True:\n")), seed=2)
    assert graded["8.2"].passed and graded["8.4"].passed
    assert_fails_with(graded, "8.3", "only cpu tensors", "dispatcher")


def test_ex08_checking_only_self_device(tmp_path):
    graded = harness.grade("ex08", mutate(tmp_path, "ex08", (CPU_TEST, '    if self._device.type == "cpu":\n')), seed=3)
    assert graded["8.2"].passed and graded["8.4"].passed and graded["8.5"].passed
    result = assert_fails_with(graded, "8.3", "not on the cpu")
    assert "CPU scalar with a CUDA tensor" in result.hint(1)


def test_ex08_dropping_alpha(tmp_path):
    path = mutate(
        tmp_path,
        "ex08",
        ("        return add_functional(self, other, alpha)  #", "        return add_functional(self, other)  #"),
    )
    graded = harness.grade("ex08", path, seed=4)
    assert graded["8.4"].passed
    assert_fails_with(graded, "8.2", "drops alpha")


def test_ex08_yaml_still_structured(tmp_path):
    path = mutate(
        tmp_path,
        "ex08",
        (
            '    structured = ("structured_delegate:", "structured:", "structured_inherits:")',
            '    structured = ("no such field:",)',
        ),
    )
    assert_fails_with(harness.grade("ex08", path, seed=5), "8.1", "stop being structured")


def test_ex08_yaml_without_kernels_for_the_dispatcher_path(tmp_path):
    path = mutate(
        tmp_path,
        "ex08",
        ('        "  dispatch:\\n",\n        "    CPU, CUDA: add_functional\\n",\n        "    Meta: add_functional_meta\\n",\n', ""),
    )
    assert_fails_with(harness.grade("ex08", path, seed=6), "8.1", "without a kernel")


def test_ex08_yaml_that_also_changes_the_inplace_variant(tmp_path):
    path = mutate(
        tmp_path,
        "ex08",
        (
            '    return "".join(lines[:start] + entry + lines[end:])',
            '    return "".join(lines[:start] + entry + lines[end:]).replace("  structured_delegate: add.out\\n", "")',
        ),
    )
    assert_fails_with(harness.grade("ex08", path, seed=7), "8.1", "stay structured")


def test_ex04_guard_entered_but_never_left(tmp_path):
    path = mutate(
        tmp_path,
        "ex04",
        (
            NO_GUARD[0],
            "        lab.AutoDispatchBelowADInplaceOrView().__enter__()\n        result = op.call(self, other)\n",
        ),
    )
    from labsupport.c10.tls import tls

    saved = tls.snapshot()
    try:
        graded = harness.grade("ex04", path, seed=11, only="4.4")
    finally:
        tls.restore(saved)  # the wrong answer leaves the guard entered in this process
    assert_fails_with(graded, "4.4", "guard must be left", "context manager")


# ---- hints get more specific with repeated failures -----------------------------------------------


def test_hints_are_progressive_for_the_issue_cases(tmp_path):
    """First a pointer to the notebook section, then more detail; the last level repeats from then on."""
    cases = [
        ("ex02", "2.3", ("    ks = ks - tls_exclude", "    ks = DispatchKeySet.from_raw(int(ks) & ~int(tls_exclude))")),
        ("ex06", "6.4", (COPYTO, "        out._data = np.multiply(diff, diff)")),
        ("ex07", "7.4", (GUARD, "    if True:\n")),
        ("ex07", "7.5", (POP, "    arguments = list(stack)\n    stack.clear()\n")),
        ("ex04", "4.2", NO_GUARD),
    ]
    for n, (exercise, number, edit) in enumerate(cases):
        result = harness.grade(exercise, mutate(tmp_path, exercise, edit, tag=f"p{n}"), seed=n, only=number)[number]
        hints = result.verdict.hints
        assert len(hints) >= 2 and len(set(hints)) == len(hints), (exercise, number, hints)
        assert "notebook" in result.hint(0), (exercise, number)
        assert result.hint(0) != result.hint(1) and result.hint(7) == hints[-1]


def test_ex02_mask_before_exclude_is_not_a_mistake(tmp_path):
    """`&` and `-` commute: ((T | I) & M) - E == ((T | I) - E) & M bit for bit (`-` clears functionality
    bits only, `&` keeps the bits both sets have). Only masking before the include set is wrong."""
    path = mutate(
        tmp_path,
        "ex02",
        ("    ks = ks - tls_exclude  # 3.", "    ks = ks & fallthrough_mask  # 3."),
        ("    return ks & fallthrough_mask", "    return ks - tls_exclude"),
    )
    assert harness.score(harness.grade("ex02", path, seed=13)) == 10


def test_ex08_transcribing_notebook_08s_mul(tmp_path):
    """Notebook 08 works the change through on mul, which has no alpha: a copy with mul -> add fails."""
    path = mutate(
        tmp_path,
        "ex08",
        ("def add(self: Any, other: Any, alpha: Any = 1) -> Any:", "def add(self: Any, other: Any) -> Any:"),
        ("        return add_functional(self, other, alpha)  #", "        return add_functional(self, other)  #"),
        ("    return build.functions.__dispatch_add(self, other, alpha)", "    return build.functions.__dispatch_add(self, other)"),
    )
    graded = harness.grade("ex08", path, seed=8)
    assert graded["8.1"].passed
    assert_fails_with(graded, "8.2", "alpha included")
