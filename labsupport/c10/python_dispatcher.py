"""``PythonDispatcher``: register dummy kernels to a few keys and print the computed table.

Stands for ``torch/_python_dispatcher.py`` and prints the same text. It works on a test operator
``__test__::foo(Tensor x) -> Tensor`` in a private dispatcher, so creating several is harmless.
Its eight runtime keys stand for the three kinds of backend:

* CPU / AutogradCPU   -- in-tree backends with their own autograd key (CUDA is the same)
* FPGA / AutogradOther -- in-tree backends that share the AutogradOther autograd kernel
* XLA / AutogradXLA, Lazy / AutogradLazy -- out-of-tree backends that bring their own kernels
"""

from __future__ import annotations

import re
from typing import Any

from labsupport.c10.dispatcher import Dispatcher
from labsupport.c10.kernel_function import KernelFunction
from labsupport.c10.library import Library


def _dummy_kernel(name: str) -> KernelFunction:
    def kernel(x: Any) -> Any:
        return x

    kernel.__name__ = kernel.__qualname__ = name
    return KernelFunction.from_unboxed(kernel, debug=name)


class PythonDispatcher:
    """Same interface and output as ``torch._python_dispatcher.PythonDispatcher``."""

    namespace = "__test__"
    name = "foo"
    runtime_keys = ["CPU", "AutogradCPU", "FPGA", "AutogradOther", "XLA", "AutogradXLA", "Lazy", "AutogradLazy"]
    alias_keys = ["CompositeExplicitAutograd", "Autograd", "CompositeImplicitAutograd"]
    supported_keys = runtime_keys + alias_keys

    def __init__(self) -> None:
        self.dispatcher = Dispatcher("PythonDispatcher")
        self.ref = Library(self.namespace, "FRAGMENT", dispatcher=self.dispatcher)
        self.ref.define("foo(Tensor x) -> Tensor")
        # PyTorch defines the test op through torch._C._dispatch_library, whose registrations carry no
        # source location; its dump says so in these words.
        self.dispatcher.find_op("__test__::foo").schema_debug = "registered at /dev/null:0"

    def keys(self) -> list[str]:
        """The keys you may register kernels to."""
        return self.supported_keys

    def register(self, dispatchKeys: list[str]) -> None:  # noqa: N803 -- PyTorch's parameter name
        """Register a kernel named ``fn_<key>`` to each key in ``dispatchKeys``."""
        if len(set(dispatchKeys)) != len(dispatchKeys):
            raise RuntimeError(f"Overridden is not allowed but found duplicates in {dispatchKeys}.")
        if "CompositeImplicitAutograd" in dispatchKeys and "CompositeExplicitAutograd" in dispatchKeys:
            raise RuntimeError(
                "Registration to both CompositeImplicitAutograd and CompositeExplicitAutograd is not allowed."
            )
        for key in dispatchKeys:
            if key not in self.supported_keys:
                raise RuntimeError(f"{key} is not supported, please select a dispatch key in {self.supported_keys}.")
            self.ref.impl("foo", _dummy_kernel("fn_" + key), key)

    @staticmethod
    def _format_line(key: str, kernel: str) -> str:
        return f"{key:<15} {kernel}\n"

    def _format_header(self, header: str) -> str:
        return f"\n{header}\n" + self._format_line("key", "kernel") + "---------------------------\n"

    def rawRegistrations(self) -> str:  # noqa: N802
        """Every registration, as ``_dispatch_dump`` prints it."""
        return self.dispatcher.dump(f"{self.namespace}::{self.name}")

    def rawDispatchTable(self) -> str:  # noqa: N802
        """The whole computed table, as ``_dispatch_dump_table`` prints it."""
        return self.dispatcher.dump_table(f"{self.namespace}::{self.name}")

    def registrations(self) -> str:
        """The registered kernels, alias keys included."""
        output = self._format_header("Registered Kernels")
        for line in self.rawRegistrations().split("\n"):
            first = line.split(":")[0]
            if any(first.startswith(k) for k in self.supported_keys):
                kernel = line.split("::")[0].split(" ")[1]
                output += self._format_line(first, kernel)
        return output

    def dispatchTable(self) -> str:  # noqa: N802
        """The computed table for the eight runtime keys (alias registrations resolved)."""
        output = self._format_header("Computed Dispatch Table")
        fallback_site = re.compile(r"registered at .*FallbackKernel\.cpp.*(\[)")
        for line in self.rawDispatchTable().split("\n"):
            key = line.split(":")[0]
            if key in self.runtime_keys:
                output += self._format_line(key, fallback_site.sub("[", line).split(": ")[1])
        return output
