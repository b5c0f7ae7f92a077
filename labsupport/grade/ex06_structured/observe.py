"""Exercise 06, worker side: build a front end around the learner's sqdiff kernels, call it, report.

The yaml entries (exercises/ex06_sqdiff.yaml) are appended to the lab's ops.yaml in a temporary file;
``load_build(..., kernels=[learner module])`` generates the functional / in-place / out= wrappers
around the learner's ``structured_sqdiff_Tensor`` (meta) and ``structured_sqdiff_out`` (impl).
Observations are tensor records (``jsonable.tensor``: sizes, dtype, device, the storage's own dtype
and values) and whether a result *is* the tensor it should be and kept its storage.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from labsupport.grade.jsonable import attempt, build_once, decode_array, tensor

FRAGMENT = "ex06_sqdiff.yaml"


def fragment_text(graded_folder: Path | None = None) -> str:
    """The yaml entries of sqdiff: the lab's own copy (learners do not edit it), else the graded folder's."""
    from labsupport.grade.registry import REPO_ROOT

    for folder in (REPO_ROOT / "exercises", graded_folder):
        if folder is not None and (folder / FRAGMENT).exists():
            return (folder / FRAGMENT).read_text()
    raise FileNotFoundError(f"{FRAGMENT} not found in the lab's exercises/ folder")


def ops_yaml_with_sqdiff(fragment: str) -> str:
    """The lab's ops.yaml with the sqdiff entries appended to native_functions."""
    from labsupport.codegen.build import DEFAULT_OPS_YAML

    text = DEFAULT_OPS_YAML.read_text()
    at = text.index("\nderivatives:")
    at = text.rfind("\n\n", 0, at) + 1  # before the comment block that introduces derivatives
    return text[:at] + "\n" + fragment.rstrip() + "\n\n" + text[at:]


def sqdiff_build(kernels: ModuleType, out_dir: str | Path | None = None, name: str = "sqdiff") -> ModuleType:
    """Build a front end with sqdiff whose kernels come from ``kernels`` (usable from notebook 06 too)."""
    import labsupport as lab
    from labsupport.codegen import load_build
    from labsupport.grade.tensors import scratch_dir

    folder = Path(out_dir) if out_dir is not None else scratch_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    yaml_path = folder / "ops_with_sqdiff.yaml"
    yaml_path.write_text(ops_yaml_with_sqdiff(fragment_text(Path(kernels.__file__).parent)))
    return load_build(yaml_path, name, kernels=[kernels], out_dir=folder / "build", dispatcher=lab.Dispatcher(name))


def _build(learner: ModuleType) -> tuple[Any, dict[str, Any] | None]:
    """This learner module's build, made once per worker; or the record of why it failed."""
    return build_once("ex06", learner, lambda name: sqdiff_build(learner, name=name))


def _tensor(b: Any, spec: dict[str, Any]) -> Any:
    from labsupport.grade.tensors import make

    device = spec.get("device", "cpu")
    if device == "meta":
        shape = tuple(spec["shape"])
        return make(b.python_variable_methods.Tensor, None, shape=shape, dtype=spec["dtype"], device="meta")
    return make(b.python_variable_methods.Tensor, decode_array(spec), device=device)


def _outcome(learner: ModuleType, fn: Any) -> dict[str, Any]:
    ok, value = attempt(learner, fn)
    return {"result": tensor(value), "value": value} if ok else {"raised": value}


def _run(learner: ModuleType, body: Any) -> dict[str, Any]:
    b, failure = _build(learner)
    if failure is not None:
        return {"build_error": failure}
    missing = [n for n in ("structured_sqdiff_Tensor", "structured_sqdiff_out") if not hasattr(learner, n)]
    if missing:
        return {"missing": missing}
    return {"cases": body(b)}


def _strip(outcome: dict[str, Any]) -> dict[str, Any]:
    outcome.pop("value", None)
    return outcome


# ---- the observers --------------------------------------------------------------------------------


def functional(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """``torch.sqdiff(x, y)`` (or ``x.sqdiff(y)``) on each planned pair."""

    def body(b: Any) -> list[dict[str, Any]]:
        out = []
        for case in inputs["cases"]:
            x, y = _tensor(b, case["self"]), _tensor(b, case["other"])
            if case.get("wrapped"):
                y = b.python_variable_methods.scalar_to_tensor(float(case["wrapped"]))
            if case.get("via") == "method":
                outcome = _outcome(learner, lambda x=x, y=y: x.sqdiff(y))
            elif case.get("via") == "at::cpu":
                outcome = _outcome(learner, lambda x=x, y=y: b.cpu_functions.sqdiff(x, y))
            else:
                outcome = _outcome(learner, lambda x=x, y=y: b.python_torch_functions.sqdiff(x, y))
            out.append(_strip(outcome))
        return out

    return _run(learner, body)


def inplace(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """``x.sqdiff_(y)``: is the result x, did x keep its storage, what does it hold."""

    def body(b: Any) -> list[dict[str, Any]]:
        out = []
        for case in inputs["cases"]:
            x, y = _tensor(b, case["self"]), _tensor(b, case["other"])
            storage = x._data
            outcome = _outcome(learner, lambda x=x, y=y: x.sqdiff_(y))
            value = outcome.pop("value", None)
            if "result" in outcome:
                outcome.update(is_self=value is x, same_storage=x._data is storage, self=tensor(x))
            out.append(outcome)
        return out

    return _run(learner, body)


def out_variant(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """``torch.sqdiff(x, y, out=o)``: is the result o, does o keep its storage (when no resize is needed)."""

    def body(b: Any) -> list[dict[str, Any]]:
        out = []
        for case in inputs["cases"]:
            x, y, o = _tensor(b, case["self"]), _tensor(b, case["other"]), _tensor(b, case["out"])
            storage = o._data
            outcome = _outcome(learner, lambda x=x, y=y, o=o: b.python_torch_functions.sqdiff(x, y, out=o))
            value = outcome.pop("value", None)
            if "result" in outcome:
                outcome.update(is_out=value is o, same_storage=o._data is storage, out=tensor(o))
            out.append(outcome)
        return out

    return _run(learner, body)


def dispatch_table(learner: ModuleType, inputs: Any) -> dict[str, Any]:
    """The dispatch table of aten::sqdiff.Tensor in the learner's build."""
    b, failure = _build(learner)
    if failure is not None:
        return {"build_error": failure}
    table = b.dispatcher.dump_table("aten::sqdiff.Tensor")
    return {"table": table, **functional(learner, inputs)}  # and at::cpu::sqdiff, without the dispatcher
