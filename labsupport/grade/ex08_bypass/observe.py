"""Exercise 08, worker side: build the learner's "after" front end and report what its ``torch.add``
does: results, whether each call entered the dispatcher, the profiler's view (Test A) and the
instructions per call (Test B).

The "after" build is ``patch_ops_yaml(<default ops.yaml>)`` written to a temporary file and built with
``manual=<learner module>`` (the hand-written ``add`` replaces at::add and Tensor.add) and
``kernels=[<learner module>]`` (where the yaml's ``dispatch:`` names are found); then
``<learner module>.bind(after)`` so that ``add`` can reach ``functions.__dispatch_add``. The "before"
build, the reference, is the parent's own default front end.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from labsupport.grade.jsonable import attempt, build_once, decode_array, tensor, text

MAX_YAML = 32_000  # ops.yaml is under 10 kB; the cap keeps an observation small


def default_yaml() -> str:
    from labsupport.codegen.build import DEFAULT_OPS_YAML

    return DEFAULT_OPS_YAML.read_text()


def after_build(module: ModuleType, out_dir: str | Path | None = None, name: str = "after") -> ModuleType:
    """The "after" build of ``module`` (its patch_ops_yaml, add and kernels), bound to it."""
    import labsupport as lab
    from labsupport.codegen import load_build
    from labsupport.grade.tensors import scratch_dir

    folder = Path(out_dir) if out_dir is not None else scratch_dir(f"bypass-{name}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ops_after.yaml"
    path.write_text(module.patch_ops_yaml(default_yaml()))
    after = load_build(path, name, manual=module, kernels=[module], out_dir=folder / "build",
                       dispatcher=lab.Dispatcher(name))  # fmt: skip
    bind = getattr(module, "bind", None)
    if callable(bind):
        bind(after)
    return after


def before_and_after(module: ModuleType, out_dir: str | Path | None = None) -> tuple[ModuleType, ModuleType]:
    """The "before" build (default ops.yaml, its own dispatcher) and the "after" build (notebook 08)."""
    import labsupport as lab
    from labsupport.codegen import load_build
    from labsupport.grade.tensors import scratch_dir

    folder = Path(out_dir) if out_dir is not None else scratch_dir("bypass")
    before = load_build(name="before", dispatcher=lab.Dispatcher("before"), out_dir=folder / "before")
    return before, after_build(module, folder)


def _after(learner: ModuleType) -> tuple[Any, dict[str, Any] | None]:
    return build_once("ex08_after", learner, lambda name: after_build(learner, name=name))


def _tensor(b: Any, spec: Any) -> Any:
    from labsupport.grade.tensors import make

    if not isinstance(spec, dict):
        return spec  # a Python number
    if spec.get("device") == "meta":
        return make(b.python_variable_methods.Tensor, None, shape=tuple(spec["shape"]), dtype=spec["dtype"],
                    device="meta")  # fmt: skip
    return make(b.python_variable_methods.Tensor, decode_array(spec), device=spec.get("device", "cpu"))


def _add(b: Any, case: dict[str, Any]) -> Any:
    x, y = _tensor(b, case["self"]), _tensor(b, case["other"])
    if case.get("via") == "method":
        return x.add(y, alpha=case["alpha"])
    return b.python_torch_functions.add(x, y, alpha=case["alpha"])


# ---- the observers --------------------------------------------------------------------------------


def patched_yaml(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """patch_ops_yaml's text, and whether the after build uses the learner's add."""
    patch = getattr(learner, "patch_ops_yaml", None)
    if not callable(patch):
        return {"missing": "patch_ops_yaml"}
    ok, value = attempt(learner, lambda: patch(default_yaml()))
    if not ok:
        return {"raised": value}
    observation: dict[str, Any] = {"type": type(value).__name__}
    if isinstance(value, str):
        observation["text"] = value[:MAX_YAML]
        observation["truncated"] = len(value) > MAX_YAML
    after, failure = _after(learner)
    if failure is not None:
        observation["build_error"] = failure
    else:
        observation["add_is_yours"] = after.functions.add is getattr(learner, "add", None)
        observation["dispatch_path"] = hasattr(after.functions, "__dispatch_add")
    return observation


def results(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """torch.add in the after build on each planned case: the result, and how often it entered the dispatcher."""
    from labsupport.grade.instruments import observing

    after, failure = _after(learner)
    if failure is not None:
        return {"build_error": failure}
    out = []
    for case in inputs["cases"]:
        with observing() as log:
            ok, value = attempt(learner, lambda case=case: _add(after, case))
        calls = sum(1 for name, _, _, redispatch in log.events if name.startswith("aten::add") and not redispatch)
        out.append({"result": tensor(value), "dispatched": calls} if ok else {"raised": value, "dispatched": calls})
    return {"results": out}


def profile(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """Test A: the operators the profiler saw during one torch.add on CPU tensors in the after build."""
    from labsupport.grade.instruments import op_counts

    after, failure = _after(learner)
    if failure is not None:
        return {"build_error": failure}
    x, y = _tensor(after, inputs["self"]), _tensor(after, inputs["other"])
    ok, value = attempt(learner, lambda: op_counts(lambda: after.python_torch_functions.add(x, y)))
    if not ok:
        return {"raised": value}
    counts, instrument = value
    return {"counts": {text(k, 80): int(v) for k, v in counts.items()}, "instrument": instrument}


def instructions(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """Test B: bytecode instructions of one torch.add call on CPU tensors in the after build."""
    from labsupport.grade.instruments import instructions_per_call

    after, failure = _after(learner)
    if failure is not None:
        return {"build_error": failure}
    x, y = _tensor(after, inputs["self"]), _tensor(after, inputs["other"])
    add = after.python_torch_functions.add
    ok, value = attempt(learner, lambda: instructions_per_call(lambda: add(x, y)))
    if not ok:
        return {"raised": value}
    count, instrument = value
    return {"count": int(count), "instrument": instrument}
