"""The four two-part exercises of issue 12: ex04b (fill the table), ex04c (autocast), ex04d (predict
the path) and ex07b (BackendSelect).

``grade`` below is tests/grade_harness.py, which plays the runner's role in-process: for each check
it calls ``plan(check_rng(...))`` (parent), sends the inputs through JSON, imports the learner's file,
calls the observer (worker side), sends the observations through JSON and calls ``decide`` (parent).

For every exercise: the reference solution scores full marks, the untouched stub
(``labsupport.grade.pristine``, so an edited exercises/ folder does not matter) scores 0 with "not done yet", each common
misunderstanding, written as a wrong submission, fails with a hint that names it, and answers
hard-coded from one seed fail on another.
"""

from __future__ import annotations

import importlib
import itertools
import json
import re
from pathlib import Path
from typing import Any

import grade_harness as harness
import numpy as np
import pytest

from labsupport.grade.checking import Verdict, check_rng
from labsupport.grade.registry import REPO_ROOT, load_exercise

PACKAGES = {
    "ex04b": "labsupport.grade.ex04b_fill_table",
    "ex04c": "labsupport.grade.ex04c_autocast",
    "ex04d": "labsupport.grade.ex04d_predict_path",
    "ex07b": "labsupport.grade.ex07b_backend_select",
}


# ------------------------------------------------------------------------------------ harness
load_learner = harness.import_learner
solution = harness.solution


def grade(exercise_id: str, path: Path, seed: int = 0) -> dict[str, tuple[Verdict, int]]:
    """``{check number: (verdict, points)}`` for the learner file at ``path`` (tests/grade_harness.py:
    the inputs the grader plans for ``seed``, errors described as the grader describes them)."""
    return {n: (g.verdict, g.score) for n, g in harness.grade(exercise_id, path, seed=seed).items()}


def score(results: dict[str, tuple[Verdict, int]]) -> int:
    return sum(points for _, points in results.values())


def max_score(exercise_id: str) -> int:
    return load_exercise(exercise_id).max_points


def variant(exercise_id: str, tmp_path: Path, replacements: list[tuple[str, str]], name: str) -> Path:
    """The reference solution with some lines replaced: a wrong submission."""
    text = solution(exercise_id).read_text()
    for old, new in replacements:
        assert old in text, f"{old!r} not in the solution of {exercise_id}"
        text = text.replace(old, new)
    target = tmp_path / f"{exercise_id}_{name}.py"
    target.write_text(text)
    return target


def failed_hint(results: dict[str, tuple[Verdict, int]], number: str) -> str:
    verdict, _ = results[number]
    assert not verdict.passed, f"check {number} passed: {verdict.message}"
    assert verdict.hints, f"check {number} failed without a hint: {verdict.message}"
    return " ".join(verdict.hints)


def first_hint(results: dict[str, tuple[Verdict, int]], number: str) -> str:
    failed_hint(results, number)
    return results[number][0].hints[0]


# ------------------------------------------------------------------------------------- common
@pytest.mark.parametrize("exercise_id", sorted(PACKAGES))
@pytest.mark.parametrize("seed", [0, 1])
def test_solution_scores_full_marks(exercise_id: str, seed: int) -> None:
    results = grade(exercise_id, solution(exercise_id), seed)
    failures = {n: v.message for n, (v, _) in results.items() if not v.passed}
    assert not failures
    assert score(results) == max_score(exercise_id) == 10


@pytest.mark.parametrize("exercise_id", sorted(PACKAGES))
def test_untouched_stub_scores_zero_not_done_yet(exercise_id: str, tmp_path: Path) -> None:
    results = grade(exercise_id, harness.pristine_stub(exercise_id, tmp_path))
    assert score(results) == 0
    for verdict, _ in results.values():
        assert verdict.hints and verdict.hints[0].startswith("not done yet"), verdict


@pytest.mark.parametrize("exercise_id", sorted(PACKAGES))
def test_registered_with_a_lettered_id(exercise_id: str) -> None:
    from labsupport.grade.registry import MODULES

    assert MODULES[exercise_id] == PACKAGES[exercise_id] + ".decide"
    exercise = importlib.import_module(MODULES[exercise_id]).EXERCISE
    assert exercise.id == exercise_id
    assert (REPO_ROOT / "exercises" / exercise.filename).exists()
    assert (REPO_ROOT / "solutions" / exercise.filename).exists()
    assert exercise.observer == PACKAGES[exercise_id] + ".observe"


@pytest.mark.parametrize("exercise_id", sorted(PACKAGES))
def test_observer_never_imports_the_parent_side(exercise_id: str) -> None:
    """Expected values live in decide.py; the worker-side module must not pull it in."""
    source = (REPO_ROOT / "labsupport" / "grade" / PACKAGES[exercise_id].split(".")[-1] / "observe.py").read_text()
    assert "decide" not in source.replace("decide.py", "")


HELPERS = {"ex04c": {"cast"}}  # helpers the stubs provide ready-made (how to make a lab tensor)


@pytest.mark.parametrize("exercise_id", sorted(PACKAGES))
def test_stub_holds_no_formula(exercise_id: str) -> None:
    """Every function of the stub only raises "not done yet": the learner writes every rule."""
    import ast

    exercise = importlib.import_module(PACKAGES[exercise_id] + ".decide").EXERCISE
    tree = ast.parse((REPO_ROOT / "exercises" / exercise.filename).read_text())
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert functions
    for function in functions:
        if function.name in HELPERS.get(exercise_id, set()):
            continue
        body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        assert len(body) == 1 and isinstance(body[0], ast.Raise), function.name
        assert ast.get_docstring(function), function.name


# --------------------------------------------------------------------- answers of another seed
def hardcoded(exercise_id: str, tmp_path: Path, seed: int, function: str) -> Path:
    """The solution, with ``function`` replaced by one that returns, in order, what the solution's
    ``function`` returned while seed ``seed`` was graded: a submission that hard-codes one run."""
    exercise = importlib.import_module(PACKAGES[exercise_id] + ".decide").EXERCISE
    observer = importlib.import_module(exercise.observer)
    learner = load_learner(solution(exercise_id))
    real = getattr(learner, function)
    recorded: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        recorded.append(result)
        return result

    setattr(learner, function, spy)
    for index, check in enumerate(exercise.checks):
        inputs = json.loads(json.dumps(check.plan(check_rng(seed, exercise, index))))
        getattr(observer, check.observe)(learner, inputs)
    text = solution(exercise_id).read_text() + (
        f"\n\nimport itertools as _it\n\n_ANSWERS = _it.cycle({json.loads(json.dumps(recorded))!r})\n\n\n"
        f"def {function}(*args, **kwargs):\n    return next(_ANSWERS)\n"
    )
    target = tmp_path / f"{exercise_id}_hardcoded.py"
    target.write_text(text)
    return target


# ---------------------------------------------------------------------------- ex04b fill table
def test_ex04b_hardcoded_answers_fail_on_another_seed(tmp_path: Path) -> None:
    path = hardcoded("ex04b", tmp_path, 0, "fill_table")
    assert score(grade("ex04b", path, seed=0)) == 10  # the run it copied
    assert score(grade("ex04b", path, seed=1)) == 0


EX04B_WRONG = {
    # the math kernel beats the default backend kernel
    "cia_before_cea": (
        [("    if _CEANF in registered and (undefined", "    if _CIA in registered and (undefined or backend):\n"
          "        return f\"fn_{_CIA}\", \"math kernel\"\n    if _CEANF in registered and (undefined")],
        "math kernel (CompositeImplicitAutograd) beat a default backend kernel",
    ),
    # CIA fills every autograd key, even when the backend has a kernel of its own
    "math_everywhere": (
        [("        if not has_backend_kernel:", "        if True:")],
        "although its backend has a kernel of its own",
    ),
    # no ambiguity on AutogradOther
    "no_ambiguity": (
        [('        if key == "AutogradOther" and registered', '        if False and registered')],
        "AutogradOther ambiguity",
    ),
    # CEA covers the autograd keys too
    "cea_on_autograd": (
        [("    if _CEA in registered and (undefined or backend):", "    if _CEA in registered and (undefined or backend or autograd):")],
        "CompositeExplicitAutograd/CEANF kernel on an autograd key",
    ),
    # the Autograd alias is forgotten
    "no_autograd_alias": (
        [('    if autograd and "Autograd" in registered:', "    if False:")],
        "skipped the Autograd alias",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EX04B_WRONG))
def test_ex04b_misunderstanding_fails_with_a_hint_naming_it(name: str, tmp_path: Path) -> None:
    replacements, phrase = EX04B_WRONG[name]
    path = variant("ex04b", tmp_path, replacements, name)
    for seed in (0, 1):
        results = grade("ex04b", path, seed)
        assert phrase in first_hint(results, "4b.1"), results["4b.1"][0]
        assert "notebook 04, section 10" in first_hint(results, "4b.1")


def test_ex04b_table_builder_is_off_while_the_learner_runs(tmp_path: Path) -> None:
    path = tmp_path / "ex04b_engine.py"
    path.write_text(
        "import labsupport as lab\n\n"
        "def fill_table(registrations, fallbacks, keys):\n"
        "    pd = lab.PythonDispatcher()\n"
        "    return {}\n"
    )
    results = grade("ex04b", path)
    assert score(results) == 0
    assert "switches the dispatch-table builders (the lab's and PyTorch's) off" in results["4b.1"][0].message
    import labsupport as lab

    assert "fn_CPU [kernel]" in _registered_cpu_table(lab)  # restored afterwards


def _registered_cpu_table(lab: Any) -> str:
    pd = lab.PythonDispatcher()
    pd.register(["CPU"])
    return pd.dispatchTable()


def test_ex04b_pytorch_dispatcher_is_off_too(torch_ref: Any, tmp_path: Path) -> None:
    path = tmp_path / "ex04b_torch.py"
    path.write_text(
        "def fill_table(registrations, fallbacks, keys):\n"
        "    import torch\n"
        "    lib = torch._C._dispatch_library('FRAGMENT', 'cheat', '')\n"
        "    return {}\n"
    )
    results = grade("ex04b", path)
    assert score(results) == 0
    assert "switches the dispatch-table builders" in results["4b.1"][0].message
    assert "CPU: " in torch_ref._C._dispatch_dump_table("aten::add.Tensor")  # restored afterwards


def test_ex04b_lenient_spelling_of_labels(tmp_path: Path) -> None:
    """Labels in brackets, as the dump prints them, and "missing" for an empty kernel are accepted."""
    path = variant(
        "ex04b",
        tmp_path,
        [
            ("    return {key: _entry(key, set(registrations), fallbacks) for key in keys}",
             "    return {key: bracket(*_entry(key, set(registrations), fallbacks)) for key in keys}\n\n\n"
             "def bracket(kernel, label):\n    return (kernel or 'missing', f'[{label}]')"),
        ],
        "brackets",
    )  # fmt: skip
    assert score(grade("ex04b", path)) == 10


def test_ex04b_garbage_answers_fail_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "ex04b_garbage.py"
    path.write_text("def fill_table(registrations, fallbacks, keys):\n    return [1, 2, {'x': object()}]\n")
    results = grade("ex04b", path)
    assert score(results) == 0
    assert "not a dict" in results["4b.1"][0].message


def test_ex04b_reference_matches_the_test_vectors() -> None:
    """The parent's reference reproduces notes §3.5 rows P6, W5, W7 and W8 on the keys they share."""
    from labsupport.grade.ex04b_fill_table.decide import reference_table

    fallbacks = {"AutogradOther": "fallback", "AutogradCPU": "fallback"}
    p6 = reference_table(["FPGA", "CompositeImplicitAutograd"], fallbacks, ["FPGA", "AutogradOther", "AutogradCPU"])
    assert p6 == {
        "FPGA": ["fn_FPGA", "kernel"],
        "AutogradOther": ["ambiguous_autogradother", "ambiguous autogradother"],
        "AutogradCPU": ["fn_CompositeImplicitAutograd", "math kernel"],
    }
    w5 = reference_table(["CompositeExplicitAutograd", "CompositeImplicitAutograd"], fallbacks, ["CPU", "AutogradCPU"])
    assert w5 == {
        "CPU": ["fn_CompositeExplicitAutograd", "default backend kernel"],
        "AutogradCPU": ["fallback", "backend fallback"],
    }
    w8 = reference_table(
        ["SparseCPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd"],
        fallbacks,
        ["AutogradOther", "Undefined"],
    )
    assert w8 == {
        "AutogradOther": ["ambiguous_autogradother", "ambiguous autogradother"],
        "Undefined": ["fn_CompositeExplicitAutograd", "default backend kernel"],
    }


def test_ex04b_reference_agrees_with_pytorch(torch_ref: Any) -> None:
    """Random registration sets from the exercise's own plan, computed by PyTorch 2.13's dispatcher."""
    from labsupport.grade.ex04b_fill_table.decide import plan_tables, reference_table

    C = torch_ref._C
    for seed in range(3):
        for number, scenario in enumerate(plan_tables(np.random.default_rng([seed, 7]))["scenarios"]):
            ns = f"h5ex04b_{seed}_{number}"
            lib = C._dispatch_library("FRAGMENT", ns, "")
            lib.def_("foo(Tensor x) -> Tensor")
            for key in scenario["registrations"]:
                lib.impl_t_t("foo", dispatch=key, debug=f"fn_{key}")
            dump = {
                line.split(": ", 1)[0]: line.split(": ", 1)[1]
                for line in C._dispatch_dump_table(f"{ns}::foo").splitlines()
                if ": " in line
            }
            expected = reference_table(scenario["registrations"], scenario["fallbacks"], scenario["keys"])
            for key, (kernel, label) in expected.items():
                if label in ("backend fallback", "missing"):
                    continue  # PyTorch's fallbacks are its own, the scenario's are a random subset
                assert dump[key] == f"{kernel} [{label}]", (scenario, key)


# ------------------------------------------------------------------------- ex04d predict the path
def test_ex04d_hardcoded_answers_fail_on_another_seed(tmp_path: Path) -> None:
    path = hardcoded("ex04d", tmp_path, 0, "predict_path")
    assert score(grade("ex04d", path, seed=0)) == 10
    assert score(grade("ex04d", path, seed=1)) == 0


def test_ex04d_solution_agrees_with_the_engine_on_many_scenarios() -> None:
    from labsupport.grade.ex04d_predict_path.decide import plan_paths, reference_path

    learner = load_learner(solution("ex04d"))
    for seed in range(8):
        for scenario in plan_paths(np.random.default_rng([seed, 99]))["scenarios"]:
            expected = [[k, n, sorted(ks)] for k, n, ks in reference_path(scenario)]
            assert [[k, n, sorted(ks)] for k, n, ks in learner.predict_path(scenario)] == expected, scenario


EX04D_WRONG = {
    # "a tensor that does not require grad skips autograd"
    "requires_grad_skips_autograd": (
        [('        if t["inference"]:\n', '        if t["inference"] or not t["requires_grad"]:\n')],
        "requires_grad does not change a tensor's dispatch keys",
    ),
    # the default TLS exclude set is forgotten: AutocastCPU stays in every CPU call
    "autocast_not_excluded": (
        [("    exclude = lab.autocast_dispatch_keyset\n", "    exclude = _KS()\n")],
        "Autocast keys are in the default TLS exclude set",
    ),
    # no fallthrough mask: ADInplaceOrView and BackendSelect from the include set stay in the key set
    "no_mask": (
        [("    _run(kernels, ks & _mask(kernels, ks), tensor_keys", "    _run(kernels, ks, tensor_keys")],
        "fallthrough keys are masked out",
    ),
    # autograd kernels redispatch below ADInplaceOrView too
    "autograd_skips_inplace_or_view": (
        [('    if kind == "autograd":\n        _run(kernels, ks & lab.after_autograd_keyset',
          '    if kind == "autograd":\n        _run(kernels, ks & lab.after_ADInplaceOrView_keyset')],
        "what a kernel redispatches with",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EX04D_WRONG))
def test_ex04d_misunderstanding_fails_with_a_hint_naming_it(name: str, tmp_path: Path) -> None:
    replacements, phrase = EX04D_WRONG[name]
    path = variant("ex04d", tmp_path, replacements, name)
    for seed in (0, 1):
        results = grade("ex04d", path, seed)
        assert phrase in first_hint(results, "4d.1"), results["4d.1"][0]


def test_ex04d_second_hint_is_more_specific(tmp_path: Path) -> None:
    path = variant("ex04d", tmp_path, EX04D_WRONG["requires_grad_skips_autograd"][0], "rg")
    verdict, _ = grade("ex04d", path)["4d.1"]
    assert len(verdict.hints) >= 2
    assert "notebook" in verdict.hints[0]
    assert "whether or not it requires grad" in verdict.hints[1]
    assert "def " not in " ".join(verdict.hints)


# --------------------------------------------------------------------------- ex07b BackendSelect
def test_ex07b_hardcoded_keys_fail_on_another_seed(tmp_path: Path) -> None:
    path = hardcoded("ex07b", tmp_path, 0, "compute_dispatch_key")
    assert grade("ex07b", path, seed=0)["7b.1"][0].passed
    assert not grade("ex07b", path, seed=1)["7b.1"][0].passed


EX07B_WRONG = {
    # notebook 07's BackendSelect kernel transcribed: the lab's helper, which models strided cpu/cuda/meta only
    "lab_helper_from_notebook_07": (
        [("    key_set = lab.DispatchKeySet(compute_dispatch_key(dtype, layout, device))\n",
          "    from labsupport.c10 import tensor_options\n\n"
          "    key_set = tensor_options.compute_dispatch_key_set(dtype, layout, device)\n")],
        {"7b.2": "your kernel raised for some options"},
    ),
    # the dtype is ignored: quantized dtypes give the dense key
    "ignores_dtype": (
        [('        return f"Quantized{backend}" if dtype in _QUANTIZED_DTYPES else backend', "        return backend")],
        {key: "quantized dtype selects the Quantized key" for key in ("7b.1", "7b.2", "7b.3")},
    ),
    # the layout is ignored: every layout is dense
    "ignores_layout": (
        [('    layout = layout or "strided"\n', '    layout = "strided"\n')],
        {key: "the layout option selects the functionality" for key in ("7b.1", "7b.2", "7b.3")},
    ),
    # a tensor argument's keys are dropped: only the options decide
    "ignores_tensor_keys": (
        [(") | lab.dispatch_keys(self)\n", ")\n")],
        {"7b.3": "combines the options' key with the tensors' keys"},
    ),
    # the thread-local sets are skipped: a call under an include or exclude guard on a backend key
    # reaches another kernel (or key set) than PyTorch's generated kernel, which applies them
    "skips_tls_sets": (
        [("    computed = (wanted | lab.tls_include_set()) - lab.tls_exclude_set()  # c10::impl::computeDispatchKeySet\n",
          "    computed = wanted\n")],
        {"7b.3": "applies the thread-local include/exclude sets before masking"},
    ),
    # the key set the kernel received stands in for the TLS sets: right under an include guard (the
    # dispatcher put the included key there), wrong under an exclude guard on the options' functionality
    "received_keyset_for_tls": (
        [("    computed = (wanted | lab.tls_include_set()) - lab.tls_exclude_set()  # c10::impl::computeDispatchKeySet\n",
          "    computed = wanted | ks\n")],
        {"7b.3": "applies the thread-local include/exclude sets before masking"},
    ),
    # the tensor's keys are kept but not masked: Autograd/ADInplaceOrView/Autocast stay in the set
    "no_mask": (
        [('    key_set = computed & lab.DispatchKeySet.full_after("BackendSelect")', "    key_set = computed")],
        {"7b.3": "only hold keys below BackendSelect"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EX07B_WRONG))
def test_ex07b_misunderstanding_fails_with_a_hint_naming_it(name: str, tmp_path: Path) -> None:
    replacements, phrases = EX07B_WRONG[name]
    path = variant("ex07b", tmp_path, replacements, name)
    for seed in (0, 1):
        results = grade("ex07b", path, seed)
        for number, phrase in phrases.items():
            assert phrase in first_hint(results, number), results[number][0]


def test_ex07b_reference_key_agrees_with_pytorch(torch_ref: Any) -> None:
    """computeDispatchKey through real factories on the devices a CPU build has (cpu, meta)."""
    from labsupport.grade.ex07b_backend_select.decide import reference_key

    layouts = {
        "strided": torch_ref.strided, "sparse_coo": torch_ref.sparse_coo, "sparse_csr": torch_ref.sparse_csr,
    }  # fmt: skip
    for device in ("cpu", "meta"):
        for name, layout in layouts.items():
            t = (
                torch_ref.empty(0, 0, layout=layout, device=device)
                if name != "strided"
                else torch_ref.empty(2, device=device)
            )
            keys = str(torch_ref._C._dispatch_keys(t))
            assert reference_key(None, name, device) in keys, (name, device, keys)
    q = torch_ref.quantize_per_tensor(torch_ref.ones(2), 1.0, 0, torch_ref.qint8)
    assert reference_key("qint8", None, "cpu") in str(torch_ref._C._dispatch_keys(q))
    assert reference_key(None, "_mkldnn", None) in str(torch_ref._C._dispatch_keys(torch_ref.ones(2).to_mkldnn()))


def test_ex07b_guards_separate_a_kernel_that_skips_the_tls_sets(tmp_path: Path) -> None:
    """Every seed plans calls under an include and under an exclude guard; the solution passes them all
    and a kernel without the TLS sets fails them, with the hint naming that."""
    from labsupport.grade.ex07b_backend_select import decide

    replacements, _ = EX07B_WRONG["skips_tls_sets"]
    skipping = variant("ex07b", tmp_path, replacements, "skips_tls_sets")
    for seed in range(2, 7):
        inputs = decide.plan_tensor(check_rng(seed, decide.EXERCISE, 2))
        guards = [g for g in inputs["guards"] if g is not None]
        assert {g["kind"] for g in guards} == {"include", "exclude"}
        assert sum(g is None for g in inputs["guards"]) >= 4  # plain calls show the other mistakes
        assert grade("ex07b", solution("ex07b"), seed)["7b.3"][0].passed
        results = grade("ex07b", skipping, seed)
        assert "applies the thread-local include/exclude sets before masking" in first_hint(results, "7b.3")
        assert "Guard(" in results["7b.3"][0].message


def test_ex07b_guarded_reference_agrees_with_pytorch(torch_ref: Any) -> None:
    """The expected key sets of the guarded calls are what c10::impl::computeDispatchKeySet gives in
    PyTorch under the same guards (real TLS, real DispatchKeySet algebra, FULL_AFTER BackendSelect)."""
    from labsupport.grade.ex07b_backend_select import decide, observe

    C = torch_ref._C

    def key(name: str) -> Any:  # MkldnnCPU has no attribute on torch._C.DispatchKey, QuantizedXLA no parse
        return getattr(C.DispatchKey, name, None) or C._parse_dispatch_key(name)

    mask = C._dispatch_keyset_full_after(key("BackendSelect"))
    compared = 0
    for seed in range(4):
        inputs = decide.plan_tensor(check_rng(seed, decide.EXERCISE, 2))
        expected = observe.tensor_calls(decide.REFERENCE, inputs)
        for option, spec, guard, lab_record in zip(inputs["options"], inputs["tensors"], inputs["guards"], expected):
            if guard is None:
                continue
            device = decide.TENSOR_KEYS[spec["device"]]
            tensor_keys = C.DispatchKeySet(key(device)) | C.DispatchKeySet(key(f"Autograd{device}"))
            if guard["kind"] == "include":
                guard_object = C._IncludeDispatchKeyGuard(key(guard["key"]))
            else:
                guard_object = C._ExcludeDispatchKeyGuard(C.DispatchKeySet(key(guard["key"])))
            with guard_object:
                wanted = C.DispatchKeySet(key(decide.reference_key(*option))) | tensor_keys
                included, excluded = C._dispatch_tls_local_include_set(), C._dispatch_tls_local_exclude_set()
                real = ((wanted | included) - excluded) & mask
            names = str(real).removeprefix("DispatchKeySet(").removesuffix(")").split(", ")
            assert lab_record == {"kernel": C._dispatch_key_name(real.highestPriorityTypeId()), "keys": names}, (
                option, spec, guard, str(real)
            )
            compared += 1
    assert compared >= 16


# ------------------------------------------------------------------------------ ex04c autocast
EX04C_WRONG = {
    # no guard: the kernel calls the operator again with its own key still in the key set
    "notebook_04_copied": (  # the notebook's kernel: AutocastCPU excluded even in the CUDA kernel, one dtype
        [("    with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet(_AUTOCAST_KEY[device_type])):",
          '    with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet("AutocastCPU")):')],
        {"4c.1": "must exclude its own Autocast key"},
    ),
    "no_guard": (
        [("    with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet(_AUTOCAST_KEY[device_type])):\n",
          "    if True:\n")],
        {"4c.1": "must exclude its own Autocast key", "4c.2": "must exclude its own Autocast key"},
    ),
    # the mask instead of the guard: one redispatch skips the kernel, nested calls autocast again
    "redispatch_without_guard": (
        [("    with lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet(_AUTOCAST_KEY[device_type])):\n", "    if True:\n"),
         ("        return op.call(*args)", "        return op.redispatch(ks - lab.DispatchKeySet(_AUTOCAST_KEY[device_type]), *args)")],
        {"4c.2": "not only the next dispatch"},
    ),
    # every Autocast key excluded, as the older header did
    "excludes_every_autocast_key": (
        [("lab.ExcludeDispatchKeyGuard(lab.DispatchKeySet(_AUTOCAST_KEY[device_type]))",
          "lab.ExcludeDispatchKeyGuard(lab.autocast_dispatch_keyset)")],
        {"4c.2": "excludes only its own key"},
    ),
    # every floating tensor is cast, float64 and other-device tensors included
    "casts_everything": (
        [("    return t.device.type == device_type and t.is_floating_point() and t.dtype is not torch.float64",
          "    return t.is_floating_point()")],
        {"4c.1": "only eligible inputs are cast"},
    ),
    # promote casts to the autocast dtype
    "promote_is_lower_precision": (
        [("            target = torch.float32 if torch.float32 in widest else autocast_dtype", "            target = autocast_dtype")],
        {"4c.1": "each policy casts to its own dtype"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EX04C_WRONG))
def test_ex04c_misunderstanding_fails_with_a_hint_naming_it(name: str, tmp_path: Path) -> None:
    replacements, phrases = EX04C_WRONG[name]
    path = variant("ex04c", tmp_path, replacements, name)
    for seed in (0, 1):
        results = grade("ex04c", path, seed)
        for number, phrase in phrases.items():
            assert phrase in first_hint(results, number), results[number][0]


def test_ex04c_fixed_cast_fails(tmp_path: Path) -> None:
    """A kernel that always runs in float16, whatever the policy or the inputs, fails on every seed."""
    path = variant(
        "ex04c",
        tmp_path,
        [("        args = [cast(t, target) if", "        args = [cast(t, torch.float16) if True or")],
        "fixed",
    )
    for seed in (0, 1):
        assert not grade("ex04c", path, seed)["4c.1"][0].passed


def test_ex04c_reference_follows_pytorch_policies(torch_ref: Any) -> None:
    """PyTorch 2.13's CPU autocast kernels, one op per policy: lower_precision_fp (mm), fp32 (prod),
    promote (cat), under ``torch.autocast("cpu", dtype=torch.float16)``. For every dtype combination
    PyTorch accepts, the dtype PyTorch's op returns is the type promotion of the dtypes the lab's
    reference kernel passes on. (The CPU build has no CUDA: the other-device rule is read in
    autocast_mode.h, where is_autocast_eligible checks the device.)"""
    import warnings

    from labsupport.grade.ex04c_autocast import decide, observe

    ops = {"lower_precision_fp": (2, torch_ref.mm), "fp32": (1, torch_ref.prod), "promote": (2, None)}
    names = ["float16", "float32", "float64", "int64"]
    compared = 0
    for policy, (arity, fn) in ops.items():
        for dtypes in itertools.product(names, repeat=arity):
            args = [torch_ref.ones(2, 2, dtype=getattr(torch_ref, d)) for d in dtypes]
            try:
                with warnings.catch_warnings(), torch_ref.autocast("cpu", dtype=torch_ref.float16):
                    warnings.simplefilter("ignore")
                    out = torch_ref.cat(args) if fn is None else fn(*args)
            except RuntimeError:
                continue  # mm of different dtypes after the casts: PyTorch refuses, nothing to compare
            scenario = {"policy": policy, "tensors": [{"device": "cpu", "dtype": d} for d in dtypes],
                        "enabled": ["cpu"], "nested": False}  # fmt: skip
            inputs = {"autocast_dtype": "float16", "scenarios": [scenario]}
            (record,) = observe.autocast_calls(decide.REFERENCE, inputs)
            seen = [getattr(torch_ref, d) for d in record["backend"][0]["dtypes"]]
            expected = seen[0]
            for d in seen[1:]:
                expected = torch_ref.promote_types(expected, d)
            assert out.dtype == expected, (policy, dtypes, record)
            compared += 1
    assert compared >= 15


# ------------------------------------------------------------------ untrusted observations
GARBAGE = [
    None, 1, "x", [], {"a": 1},
    lambda n: [None] * n, lambda n: [{"a": 1}] * n, lambda n: [[1, 2]] * n, lambda n: ["CPU"] * n,
    lambda n: [{"kernel": 1, "keys": [[1]]}] * n, lambda n: [{"kernel": "CPU", "keys": "CPU"}] * n,
    lambda n: [{"backend": [1], "inner": "x", "autocast_kernel_calls": "y"}] * n,
    lambda n: [{"backend": [{"kernel": "CPU", "dtypes": 3, "excluded": []}], "inner": [], "autocast_kernel_calls": 1}] * n,
    lambda n: [[["CPU", "fn_CPU", [1]]]] * n, lambda n: [{"CPU": ["fn_CPU"]}] * n, lambda n: [{"error": 5}] * n,
]  # fmt: skip


@pytest.mark.parametrize("exercise_id", sorted(PACKAGES))
def test_decide_fails_cleanly_on_garbage_observations(exercise_id: str) -> None:
    """``observed`` comes from the learner's process: decide must fail the check, never crash."""
    exercise = importlib.import_module(PACKAGES[exercise_id] + ".decide").EXERCISE
    for index, check in enumerate(exercise.checks):
        inputs = json.loads(json.dumps(check.plan(np.random.default_rng([3, index]))))
        n = len(next(v for v in inputs.values() if isinstance(v, list)))
        for garbage in GARBAGE:
            observed = garbage(n) if callable(garbage) else garbage
            verdict = check.decide(inputs, observed)
            assert isinstance(verdict, Verdict) and not verdict.passed, (check.number, observed)
            assert verdict.hints, (check.number, observed)


def test_ex04d_reference_paths_agree_with_pytorch(torch_ref: Any) -> None:
    """The same scenarios run on PyTorch 2.13 (custom ops with recording ``with_keyset`` kernels): the
    kernels that run and the key sets they receive match the lab's path. The CPU build has no CUDA and
    no Python ``Tracer`` key, so those scenarios are left out; backend fallbacks are not observable
    from Python, so their steps are dropped from the lab's path."""
    import contextlib
    import re
    import warnings

    from labsupport.grade.ex04d_predict_path.decide import plan_paths, reference_path

    C = torch_ref._C
    autocast_cpu = C.DispatchKeySet(C.DispatchKey.AutocastCPU)
    compared = 0
    for seed in range(6):
        for number, scenario in enumerate(plan_paths(np.random.default_rng([seed, 5]))["scenarios"]):
            if any(t["device"] == "cuda" for t in scenario["tensors"]):
                continue
            if any(g["kind"] == "IncludeDispatchKeyGuard" for g in scenario["guards"]):
                continue
            ns = f"h5ex04d_{seed}_{number}"
            lib = torch_ref.library.Library(ns, "DEF")
            lib.define(scenario["schema"])
            name = scenario["schema"].split("(")[0]
            packet = getattr(getattr(torch_ref.ops, ns), name).default
            path: list[list[Any]] = []

            def make(key: str, kind: str, path: list[list[Any]] = path, packet: Any = packet) -> Any:
                def kernel(ks: Any, a: Any, b: Any) -> Any:
                    path.append([f"fn_{key}", sorted(re.findall(r"\w+", str(ks))[1:])])
                    if kind == "autograd":
                        return packet.redispatch(ks & C._after_autograd_keyset, a, b)
                    if kind == "inplace_or_view":
                        return packet.redispatch(ks & C._after_ADInplaceOrView_keyset, a, b)
                    if kind == "autocast":
                        with C._ExcludeDispatchKeyGuard(autocast_cpu):
                            return packet(a, b)
                    return a

                return kernel

            for key, kind in scenario["kernels"].items():
                if kind == "fallthrough":
                    lib.impl(name, torch_ref.library.fallthrough_kernel, key)
                else:
                    lib.impl(name, make(key, kind), key, with_keyset=True)
            tensors = []
            for spec in scenario["tensors"]:
                with torch_ref.inference_mode() if spec["inference"] else contextlib.nullcontext():
                    t = torch_ref.ones(2, dtype=getattr(torch_ref, spec["dtype"]), device=spec["device"])
                tensors.append(t.requires_grad_(True) if spec["requires_grad"] else t)
            with contextlib.ExitStack() as stack, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for guard in scenario["guards"]:
                    kind = guard["kind"]
                    if kind == "AutoDispatchBelowAutograd":
                        stack.enter_context(C._AutoDispatchBelowAutograd())
                    elif kind == "AutoDispatchBelowADInplaceOrView":
                        stack.enter_context(C._AutoDispatchBelowADInplaceOrView())
                    elif kind == "ExcludeDispatchKeyGuard":
                        keys = C.DispatchKeySet(getattr(C.DispatchKey, guard["keys"][0]))
                        stack.enter_context(C._ExcludeDispatchKeyGuard(keys))
                    elif kind == "autocast_cpu":
                        stack.enter_context(torch_ref.autocast("cpu", dtype=torch_ref.float16))
                    elif kind == "InferenceMode":
                        stack.enter_context(torch_ref.inference_mode())
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    packet(*tensors)
            expected = [[kernel, sorted(keys)] for _, kernel, keys in reference_path(scenario) if kernel != "fallback"]
            assert path == expected, scenario
            compared += 1
    assert compared >= 25


@pytest.mark.parametrize("exercise_id", sorted(PACKAGES))
def test_hints_start_at_the_notebook_and_never_show_code(exercise_id: str) -> None:
    """Every misunderstanding has progressive hints: the first points at a notebook section, a later
    one is more specific, none holds a line of the answer's code."""
    hints = importlib.import_module(PACKAGES[exercise_id] + ".decide").HINTS
    for reason, levels in hints.items():
        if reason in ("format", "raised"):
            continue
        assert len(levels) >= 2, reason
        assert "notebook" in levels[0], reason
        assert levels[1] != levels[0], reason
        for text in levels:
            assert "def " not in text and "return " not in text and "\n" not in text, reason
            for code in (r"with lab\.", r"DispatchKeySet\(", r"ks\s*[&|-]", r"after_autograd_keyset", r"\.redispatch\("):
                assert not re.search(code, text), (reason, code, text)
