"""The real PyTorch side by side: run gdb or callgrind on an installed PyTorch and read the results.

Used by notebook 09 (the optional track). Everything here runs PyTorch in a *subprocess* with a time
limit, so the lab never needs PyTorch itself, and a missing tool gives a plain message
(:class:`ToolMissing`) instead of a traceback.

* :func:`gdb_backtrace` stops in ``at::native::structured_ufunc_add_CPU::impl`` (this works on the
  release wheel: its symbols are exported) and returns the C++ frames, the real Exercise 0 of seed 001.
* :func:`callgrind_instructions` counts machine instructions per call with PyTorch's own
  ``torch.utils.benchmark.Timer.collect_callgrind`` (Test B of seed 000).
* :func:`align_frames` lines the lab's traced frames up with the real ones.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from labsupport.tools.bench import ToolMissing

TORCH_ADD_SCRIPT = """\
import torch
a = torch.tensor([1., 1.])
b = torch.tensor([1., 1.])
c = torch.add(a, b)
"""
IMPL_BREAKPOINT = "at::native::structured_ufunc_add_CPU::impl"

INSTALL_HINTS = {
    "torch": "pip install torch==2.13.0  (or: make torch)",
    "gdb": "apt-get install gdb  (conda: conda install -c conda-forge gdb)",
    "valgrind": "apt-get install valgrind  (conda: conda install -c conda-forge valgrind)",
}


def torch_version() -> str | None:
    """The installed PyTorch's version, found without importing it into this process."""
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # any failure means "not installed"
        return None


def status() -> dict[str, str | None]:
    """What the real-PyTorch track can use here: PyTorch's version and the gdb/valgrind programs."""
    return {"torch": torch_version(), "gdb": shutil.which("gdb"), "valgrind": shutil.which("valgrind")}


def require(*tools: str) -> None:
    """Raise :class:`ToolMissing` naming the first missing tool and how to install it."""
    found = status()
    for tool in tools:
        if not found.get(tool):
            raise ToolMissing(
                f"{tool} is not installed, so this comparison is skipped. Install it with: {INSTALL_HINTS[tool]}"
            )


# ---------------------------------------------------------------- gdb


@dataclass(frozen=True)
class NativeFrame:
    """One line of gdb's ``bt``: its number, the full C++ function and a short, comparable name."""

    index: int
    function: str
    library: str | None

    @property
    def name(self) -> str:
        """``at::(anonymous namespace)::wrapper_CPU_add_Tensor``: the function without template arguments or
        ``@plt``. Anonymous namespaces stay, as in the lab's trace names."""
        protected = self.function.replace("(anonymous namespace)", "\0")
        depth, out = 0, []
        for ch in protected:
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
            elif depth == 0:
                out.append(ch)
        return "".join(out).replace("\0", "(anonymous namespace)").removesuffix("@plt")

    @property
    def is_pytorch(self) -> bool:
        return self.name.startswith(("at::", "c10::", "torch::"))


_FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-fA-F]+ in )?(.*)$")


def _function_name(rest: str) -> str:
    """The function part of a gdb frame line: up to the '(' that opens the argument list."""
    protected = rest.replace("(anonymous namespace)", "\0")
    depth = 0
    for i, ch in enumerate(protected):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return protected[:i].replace("\0", "(anonymous namespace)").strip()
    return protected.replace("\0", "(anonymous namespace)").split(" ")[0]


def parse_gdb_backtrace(text: str) -> list[NativeFrame]:
    """Parse the output of gdb's ``bt`` into frames (innermost first, as gdb prints them)."""
    frames = []
    for line in text.splitlines():
        match = _FRAME.match(line.strip())
        if not match:
            continue
        rest = match.group(2)
        library = rest.rsplit(" from ", 1)[1].strip() if " from " in rest else None
        frames.append(NativeFrame(int(match.group(1)), _function_name(rest), library))
    return frames


def gdb_backtrace(
    script: str = TORCH_ADD_SCRIPT, breakpoint: str = IMPL_BREAKPOINT, *, timeout: float = 180
) -> list[NativeFrame]:
    """Run ``script`` under gdb, stop at ``breakpoint``, and return the backtrace's frames."""
    require("torch", "gdb")
    command = [
        "gdb", "-q", "-batch", "-nx",
        "-ex", "set breakpoint pending on",
        "-ex", "set pagination off",
        "-ex", f"break {breakpoint}",
        "-ex", "run",
        "-ex", "bt",
        "-ex", "kill",
        "--args", sys.executable, "-c", script,
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ToolMissing(f"gdb did not finish within {timeout:.0f} s") from None
    frames = parse_gdb_backtrace(done.stdout)
    if not frames:
        raise RuntimeError(f"gdb printed no backtrace (did the breakpoint {breakpoint} hit?):\n{done.stdout[-2000:]}")
    return frames


def pytorch_frames(frames: list[NativeFrame]) -> list[NativeFrame]:
    """The frames a learner compares with the lab: PyTorch's own, without the template glue
    (``c10::impl::wrap_kernel_functor_unboxed_...``) that only forwards the call."""
    keep = []
    for frame in frames:
        if not frame.is_pytorch or frame.name.startswith("c10::impl::"):
            continue
        if keep and keep[-1].name == frame.name:
            continue
        keep.append(frame)
    return keep


def align_frames(lab_torch_names: list[str], native: list[NativeFrame]) -> list[tuple[str, int | None]]:
    """For each lab frame (outermost first), the index of the real frame with the same name, if any."""
    by_name = {f.name: f.index for f in native}
    return [(name, by_name.get(name)) for name in lab_torch_names]


# ---------------------------------------------------------------- callgrind


def callgrind_instructions(
    stmt: str = "torch.add(a, b)",
    setup: str = "a = torch.tensor([1., 1.]); b = torch.tensor([1., 1.])",
    *,
    number: int = 100,
    timeout: float = 600,
) -> int:
    """Machine instructions per run of ``stmt``, from ``torch.utils.benchmark.Timer.collect_callgrind``.

    PyTorch's Timer runs valgrind on a fresh ``python``; the subprocess below puts this interpreter's
    folder first on PATH so that ``python`` is the one with PyTorch installed.
    """
    require("torch", "valgrind")
    code = textwrap.dedent(
        f"""
        import torch
        from torch.utils.benchmark import Timer
        stats = Timer({stmt!r}, setup={setup!r}).collect_callgrind(number={number}, collect_baseline=False)
        print("COUNT", stats.counts(denoise=True))
        """
    )
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise ToolMissing(f"callgrind did not finish within {timeout:.0f} s") from None
    match = re.search(r"^COUNT (\d+)$", done.stdout, re.M)
    if match is None:
        raise RuntimeError(f"collect_callgrind failed:\n{done.stderr[-2000:]}")
    return int(match.group(1)) // number


def key_set_of(tensor: Any) -> str:
    """``str(torch._C._dispatch_keys(t))`` for a real PyTorch tensor."""
    import torch

    return str(torch._C._dispatch_keys(tensor))
