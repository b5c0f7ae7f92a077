"""Claims the course makes about real PyTorch, each checked against an installed PyTorch 2.13.

A notebook's markdown marks a sentence about PyTorch with an HTML comment right after it::

    BackendSelect is in the default TLS include set. <!-- claim: nb02.backendselect_default_include -->

and a test in ``tests/test_claims_nb02.py`` carries the same id::

    @claim("nb02.backendselect_default_include")
    def test_backendselect_default_include(torch_ref):
        assert torch_ref._C._dispatch_tls_local_include_set().has(torch_ref._C.DispatchKey.BackendSelect)

``tests/test_claims_index.py`` fails when a marked claim has no test, or a test names a claim that no
notebook makes any more, so an author who edits one sees the other. The comment is invisible in the
rendered notebook.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., object])

CLAIM_ID = r"nb\d\d\.[a-z0-9_]+"
MARKER = re.compile(r"<!--\s*claim:\s*(" + CLAIM_ID + r")\s*-->")
DECORATOR = re.compile(r"""@claim\(\s*["'](""" + CLAIM_ID + r""")["']\s*\)""")


def claim(claim_id: str) -> Callable[[F], F]:
    """Mark a test as the check of one notebook claim (the id in the notebook's ``<!-- claim: ... -->``)."""
    if not re.fullmatch(CLAIM_ID, claim_id):
        raise ValueError(f"claim ids look like 'nb02.some_name', not {claim_id!r}")

    def mark(fn: F) -> F:
        fn.claim_id = claim_id  # type: ignore[attr-defined]
        return fn

    return mark


def warnings_in_fresh_python(code: str) -> str:
    """The text of every warning ``code`` raises, run in a new interpreter.

    Many PyTorch warnings are ``TORCH_WARN_ONCE``: once per process, so an earlier test in the same
    pytest worker may already have used them up. A claim about such a warning asks a fresh process."""
    script = "import warnings\nwarnings.simplefilter('always')\nwith warnings.catch_warnings(record=True) as _caught:\n"
    script += textwrap.indent(textwrap.dedent(code), "    ")
    script += "\nprint('\\n'.join(str(w.message) for w in _caught))\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout


def torch_213() -> Any:
    """The installed PyTorch if it is the 2.13 the course's claims are about, else a skip."""
    torch = pytest.importorskip("torch")
    if not torch.__version__.startswith("2.13."):
        pytest.skip(f"the course's claims are about PyTorch 2.13, this is {torch.__version__}")
    return torch


def table_rows(torch_ref: Any, op: str) -> dict[str, str]:
    """``_dispatch_dump_table`` as {key: rest of the line}, with the build path prefix removed."""
    rows = {}
    for line in torch_ref._C._dispatch_dump_table(op).splitlines():
        key, _, rest = line.partition(": ")
        rows[key] = re.sub(r"/\S*?/pytorch/pytorch/", "", rest)
    return rows
