"""Parent side of ex04b, "fill the table": random registration sets over runtime and alias keys; the
learner gives the kernel and label of each asked runtime key.

The expected table comes from the lab's own ``OperatorEntry`` (the copy of
``OperatorEntry::computeDispatchTableEntryWithDebug``): the parent registers a dummy kernel
``fn_<Key>`` per registration and the scenario's backend fallbacks on a private ``lab.Dispatcher``,
and reads the slots back. Wrong cells are sorted into the misunderstandings they reveal, and the
hint names the most frequent one.
"""

from __future__ import annotations

from typing import Any

from labsupport.grade.checking import Exercise, Verdict
from labsupport.grade.deciding import most_common

EXERCISE = Exercise(
    id="ex04b",
    number="4b",
    title="Fill the dispatch table",
    filename="ex04b_fill_table.py",
    notebook="04 (registering operators), section 10",
    observer="labsupport.grade.ex04b_fill_table.observe",
)

CIA, CEA, CEANF = "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"
ALIASES = [CIA, CEA, CEANF, "Autograd"]
RUNTIME_REGISTRATIONS = [
    "CPU", "CUDA", "XLA", "Lazy", "Meta", "FPGA", "QuantizedCPU", "SparseCPU",
    "AutogradCPU", "AutogradCUDA", "AutogradXLA", "AutogradOther",
]  # fmt: skip
ASKABLE = [
    "Undefined", "CPU", "CUDA", "XLA", "Lazy", "Meta", "FPGA", "QuantizedCPU", "SparseCPU", "ADInplaceOrView",
    "AutogradOther", "AutogradCPU", "AutogradCUDA", "AutogradXLA", "AutogradLazy", "AutogradMeta", "AutocastCPU",
]  # fmt: skip
AUTOGRAD_KEYS = {k for k in ASKABLE if k.startswith("Autograd")}
LABELS = {
    "kernel", "default backend kernel", "math kernel", "autograd kernel", "ambiguous autogradother",
    "backend fallback", "missing",
}  # fmt: skip
SCENARIOS = 10
SECTION = "notebook 04, section 10 (alias keys and table precedence)"


# ----------------------------------------------------------------------------------------- plan
def _slot_order() -> dict[str, int]:
    from labsupport.c10.dispatch_key_set import SLOT_KEYS

    return {k.name: i for i, k in enumerate(SLOT_KEYS)}


def _fallback_kinds() -> dict[str, str]:
    from labsupport.c10.backend_fallbacks import BACKEND_FALLBACKS

    return {key: "fallthrough" if kind == "fallthrough" else "fallback" for key, _, kind in BACKEND_FALLBACKS}


def plan_tables(rng: Any) -> dict[str, Any]:
    """``SCENARIOS`` random registration sets, the fallbacks of their dispatcher and the keys asked."""
    order, kinds = _slot_order(), _fallback_kinds()
    scenarios = []
    for _ in range(SCENARIOS):
        aliases = [a for a, p in zip(ALIASES, (0.6, 0.45, 0.25, 0.4)) if rng.random() < p]
        runtime = [str(k) for k in rng.choice(RUNTIME_REGISTRATIONS, size=int(rng.integers(0, 4)), replace=False)]
        registrations = [str(k) for k in rng.permutation(aliases + runtime)]
        if not registrations:
            registrations = [str(rng.choice(ALIASES))]
        keys = set(str(k) for k in rng.choice(ASKABLE, size=9, replace=False))
        keys |= {"AutogradOther"} if rng.random() < 0.6 else set()
        keys |= {f"Autograd{k}" for k in registrations if f"Autograd{k}" in ASKABLE and rng.random() < 0.7}
        asked = sorted(keys, key=order.__getitem__)
        # the dispatcher's global fallbacks for the asked keys (PyTorch's CPU build), some left out
        fallbacks = {k: kinds[k] for k in asked if k in kinds and rng.random() > 0.15}
        scenarios.append({"registrations": registrations, "fallbacks": fallbacks, "keys": asked})
    return {"scenarios": scenarios}


# ------------------------------------------------------------------------------------ reference
def reference_table(registrations: list[str], fallbacks: dict[str, str], keys: list[str]) -> dict[str, list[str]]:
    """What the lab's dispatcher computes: ``{key: [kernel, label]}``."""
    import labsupport as lab
    from labsupport.c10.dispatch_key import DispatchKey
    from labsupport.c10.kernel_function import KernelFunction

    dispatcher = lab.Dispatcher("ex04b reference", install_fallbacks=False)
    libraries = [lab.Library("ex04b", "DEF", dispatcher=dispatcher)]
    libraries[0].define("foo(Tensor x) -> Tensor")

    def boxed_fallback(op: Any, stack: list[Any]) -> None:
        pass

    try:
        wildcard = lab.Library("_", "IMPL", dispatcher=dispatcher)
        libraries.append(wildcard)
        for key, kind in fallbacks.items():
            wildcard.fallback(lab.fallthrough_kernel if kind == "fallthrough" else boxed_fallback, key)
        impl = lab.Library("ex04b", "IMPL", dispatcher=dispatcher)
        libraries.append(impl)
        for key in registrations:

            def kernel(x: Any) -> Any:
                return x

            impl.impl("foo", KernelFunction.from_unboxed(kernel, debug=f"fn_{key}"), key)
        op = dispatcher.find_schema_or_throw("ex04b::foo")
        answer = {}
        for key in keys:
            registration, label = op.compute_entry(DispatchKey[key])
            if label == "ambiguous autogradother":
                kernel_name = "ambiguous_autogradother"
            elif label == "missing":
                kernel_name = ""
            elif label == "backend fallback":
                kernel_name = "fallthrough" if registration.kernel.is_fallthrough else "fallback"
            else:
                kernel_name = registration.debug
            answer[key] = [kernel_name, label]
        return answer
    finally:
        for library in reversed(libraries):
            library.close()


# --------------------------------------------------------------------------------------- decide
HINTS: dict[str, tuple[str, ...]] = {
    "direct": (
        f"a kernel registered to a runtime key itself always fills that key's slot ({SECTION}, rule 1)",
        "rule 1 comes before every alias: if the registrations list the key you are filling, the entry is "
        "fn_<that key> [kernel], whatever aliases are registered too",
    ),
    "cea_over_cia": (
        f"you let the math kernel (CompositeImplicitAutograd) beat a default backend kernel ({SECTION}, rule 2 "
        "before rule 3)",
        "CompositeExplicitAutograd (and CEANF) are checked before CompositeImplicitAutograd: on a backend key "
        "covered by both, the entry is the default backend kernel",
    ),
    "cea_autograd": (
        f"you used a CompositeExplicitAutograd/CEANF kernel on an autograd key ({SECTION}: which runtime keys "
        "each alias covers)",
        "CompositeExplicitAutograd covers backend keys only, never Autograd* keys: those fall to the Autograd "
        "alias or to the backend fallback. CEA also counts as a backend kernel, which stops the math kernel "
        "on every autograd key",
    ),
    "ceanf": (
        f"you mixed up CompositeExplicitAutogradNonFunctional and CompositeExplicitAutograd ({SECTION}, rule 2)",
        "CEANF is checked before CEA, but it does not cover the sparse keys, XLA or Lazy: there CEA (or the "
        "next rule) applies",
    ),
    "backend_blocks_math": (
        f"you gave an autograd key the math kernel although its backend has a kernel of its own ({SECTION}, rule 3)",
        "on Autograd<B> the CompositeImplicitAutograd kernel applies only if B has no kernel (a direct B "
        "kernel, or a CEA kernel, counts): otherwise the Autograd alias or the autograd fallback handles it, "
        "and the call then reaches B's kernel",
    ),
    "math_autograd": (
        f"you did not give the math kernel to an autograd key it covers ({SECTION}, rule 3)",
        "CompositeImplicitAutograd covers the autograd keys too: when the backend behind Autograd<B> has no "
        "kernel of its own, the math kernel fills Autograd<B>, and it comes before the Autograd alias",
    ),
    "ambiguity": (
        f"you missed the AutogradOther ambiguity ({SECTION}, rule 3, and the FPGA example)",
        "AutogradOther serves many backends (FPGA, Quantized*, Sparse*, ...). With a CompositeImplicitAutograd "
        "kernel and a kernel for any one of those backends, the entry is ambiguous_autogradother "
        "[ambiguous autogradother]",
    ),
    "autograd_alias": (
        f"you skipped the Autograd alias kernel ({SECTION}, rule 4)",
        "a kernel registered to Autograd fills every Autograd* slot that no earlier rule filled, before the "
        "backend fallback",
    ),
    "undefined": (
        f"the Undefined slot takes default backend and math kernels but never an autograd kernel ({SECTION})",
        "Undefined is in no alias set, but the table builder gives it a CEANF, CEA or CIA kernel; otherwise it "
        "is missing (there is no fallback for it)",
    ),
    "fallback": (
        f"backend fallbacks: only keys listed in `fallbacks` have one ({SECTION}, rules 5 and 6)",
        "when no kernel applies, the entry is the dispatcher's fallback for that key, named 'fallback' or "
        "'fallthrough' as `fallbacks` says, with label 'backend fallback'; a key without a fallback is "
        "['', 'missing']",
    ),
    "format": (
        "return a dict {key: (kernel, label)} with an entry for every asked key; labels are the ones "
        "lab.dispatcher.dump_table prints, plus 'missing' (see the docstring of fill_table)",
    ),
}


def _classify(key: str, expected: list[str], given: list[str], registrations: list[str]) -> str:
    ek, el = expected
    gk, gl = given
    if gl not in LABELS:
        return "format"
    if el == "ambiguous autogradother":
        return "ambiguity"
    if el == "kernel":
        return "direct"
    if key == "Undefined":
        return (
            "undefined"
            if gl in ("autograd kernel", "backend fallback")
            else "fallback"
            if el == "missing"
            else ("cea_over_cia" if el == "default backend kernel" else "ceanf")
        )
    if gk in (f"fn_{CEA}", f"fn_{CEANF}") and key in AUTOGRAD_KEYS:
        return "cea_autograd"
    if el == "default backend kernel":
        if gl == "math kernel":
            return "cea_over_cia"
        if gl == "default backend kernel" or CEANF in registrations:
            return "ceanf"
        return "cea_over_cia"
    if gk == f"fn_{CEANF}" or (gk == f"fn_{CEA}" and el != "default backend kernel"):
        return "ceanf" if key not in AUTOGRAD_KEYS else "cea_autograd"
    if el == "math kernel":
        if gl == "math kernel" and key in AUTOGRAD_KEYS and gk == expected[0]:
            return "format"
        return "math_autograd" if key in AUTOGRAD_KEYS else "cea_over_cia"
    if gl == "math kernel" and key in AUTOGRAD_KEYS:
        return "backend_blocks_math"
    if el == "autograd kernel":
        return "autograd_alias"
    if gl == "ambiguous autogradother":
        return "ambiguity"
    return "fallback"


def _valid_answer(answer: Any, keys: list[str]) -> dict[str, list[str]] | None:
    if not isinstance(answer, dict):
        return None
    result = {}
    for key in keys:
        cell = answer.get(key)
        if isinstance(cell, list) and len(cell) == 2 and all(isinstance(c, (str, type(None))) for c in cell):
            kernel, label = (c or "" for c in cell)
            label = label.strip().strip("[]")  # "[math kernel]" is accepted as "math kernel"
            result[key] = ["" if kernel == "missing" else kernel, label]
        else:
            result[key] = ["<none>", "<none>"]
    return result


def decide_tables(inputs: Any, observed: Any) -> Verdict:
    scenarios = inputs["scenarios"]
    if not isinstance(observed, list) or len(observed) != len(scenarios):
        return Verdict(False, "fill_table did not return one answer per table", HINTS["format"])
    wrong: list[tuple[str, dict[str, Any], str, list[str], list[str]]] = []
    total = 0
    for scenario, answer in zip(scenarios, observed):
        keys = scenario["keys"]
        given = _valid_answer(answer, keys)
        if given is None:
            return Verdict(
                False, f"fill_table returned {str(answer)[:60]!r}, not a dict {{key: (kernel, label)}}", HINTS["format"]
            )
        expected = reference_table(scenario["registrations"], scenario["fallbacks"], keys)
        for key in keys:
            total += 1
            if given[key] != expected[key]:
                reason = _classify(key, expected[key], given[key], scenario["registrations"])
                wrong.append((reason, scenario, key, given[key], expected[key]))
    if not wrong:
        return Verdict(True, f"all {total} entries of {len(scenarios)} random tables are right")
    reason, scenario, key, given, expected = most_common(wrong)
    shown = "missing" if given == ["<none>", "<none>"] else f"{given[0]} [{given[1]}]"
    message = (
        f"{len(wrong)} of {total} entries wrong. For example, registrations {scenario['registrations']}, "
        f"fallbacks {scenario['fallbacks']}: you gave {key} -> {shown}; the dispatcher computes "
        f"{expected[0] or '(nothing)'} [{expected[1]}]"
    )
    return Verdict(False, message, HINTS[reason])


EXERCISE.add_check(
    "4b.1", "kernel and label of every asked key, random registration sets", 10,
    plan=plan_tables, observe="fill_tables", decide=decide_tables,
)  # fmt: skip
