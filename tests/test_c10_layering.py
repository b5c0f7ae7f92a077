"""c10 stays at the bottom: no module in labsupport/c10 imports aten, autograd, codegen or tools.

PyTorch's c10 depends on nothing above it (grad mode and inference mode live in c10/core's
AutogradState.h and InferenceMode.h; the autograd fallback is registered from the autograd layer).
The check is static: every ``import`` / ``from ... import`` in every c10 module, including imports
inside functions and ``TYPE_CHECKING`` blocks, and ``importlib.import_module("...")`` with a literal.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

C10 = pathlib.Path(__file__).resolve().parent.parent / "labsupport" / "c10"
ABOVE = ("aten", "autograd", "codegen", "tools", "grade", "torch")


def imported_modules(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in the file, wherever it is written."""
    package = "labsupport.c10"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against labsupport.c10
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def violations(path: pathlib.Path) -> list[str]:
    bad: list[tuple[int, str]] = []
    for line, module in imported_modules(path):
        parts = module.split(".")
        if len(parts) >= 2 and parts[0] == "labsupport" and parts[1] in ABOVE:
            bad.append((line, f"{path.name}:{line} imports {module}"))
    return [text for _, text in sorted(bad)]


C10_MODULES = sorted(C10.glob("*.py"))


@pytest.mark.parametrize("path", C10_MODULES, ids=lambda p: p.name)
def test_c10_module_imports_nothing_above_c10(path):
    assert violations(path) == []


def test_the_check_sees_function_local_relative_and_dynamic_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import labsupport.c10.tls\n"
        "def f():\n"
        "    from labsupport.autograd.grad_mode import no_grad\n"
        "    from ..tools import keyset_view\n"
        "    import importlib; importlib.import_module('labsupport.aten.tensor')\n"
        "from labsupport import codegen\n"
    )
    assert violations(sample) == [
        "sample.py:3 imports labsupport.autograd.grad_mode",
        "sample.py:3 imports labsupport.autograd.grad_mode.no_grad",
        "sample.py:4 imports labsupport.tools",
        "sample.py:4 imports labsupport.tools.keyset_view",
        "sample.py:5 imports labsupport.aten.tensor",
        "sample.py:6 imports labsupport.codegen",
    ]


def test_c10_imports_and_works_without_the_layers_above():
    """Importing c10 alone pulls in no layer above it, and a dispatcher still dispatches."""
    code = (
        "import sys\n"
        "import labsupport.c10.dispatcher as d, labsupport.c10.library, labsupport.c10.inference_mode\n"
        "import labsupport.c10.dispatch_trace, labsupport.c10.python_dispatcher\n"
        "above = sorted(m for m in sys.modules if m.split('.')[:2] in "
        f"[['labsupport', n] for n in {ABOVE!r}])\n"
        "print(above)\n"
        "lib = labsupport.c10.library.Library('solo', 'DEF')\n"
        "lib.define('f(Tensor x) -> Tensor')\n"
        "print(d.dispatcher.dump('solo::f').splitlines()[1])\n"
    )
    # labsupport/__init__ imports every layer, so run c10 with the package's __init__ bypassed
    bootstrap = (
        "import importlib.util, sys, types, pathlib\n"
        f"root = pathlib.Path({str(C10.parent)!r})\n"
        "pkg = types.ModuleType('labsupport'); pkg.__path__ = [str(root)]; sys.modules['labsupport'] = pkg\n"
    )
    run = subprocess.run([sys.executable, "-c", bootstrap + code], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines() == ["[]", "schema: solo::f(Tensor x) -> Tensor"]
