"""Dispatch keys and backend components, numbered exactly as in PyTorch 2.13.

Stands for ``c10/core/DispatchKey.h``. A dispatch key names one *functionality* an operator can
have a kernel for (autograd, autocast, a backend, ...). Since early 2022 (before PyTorch 2.0) a key
set stores two kinds of bits: one bit per functionality and one bit per backend component. Six
functionalities are "per-backend" (Dense, Quantized, Sparse, SparseCsr, NestedTensor,
AutogradFunctionality): the runtime key ``AutogradCPU`` is the pair (AutogradFunctionality, CPUBit),
``CPU`` is (Dense, CPUBit).

The enum values below are PyTorch's own, so ``DispatchKey.CPU.value == 49`` as in C++.
"""

from __future__ import annotations

import enum

# c10::BackendComponent, lowest priority first. A backend's bit in a key set is its enum value - 1.
BACKENDS: tuple[str, ...] = (
    "CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU",
    "VE", "Lazy", "MTIA", "MAIA", "PrivateUse1", "PrivateUse2", "PrivateUse3", "Meta",
)  # fmt: skip
NUM_BACKENDS = len(BACKENDS)

# Functionality keys 1..46 in priority order (lowest first); value 0 is Undefined, 47 the end marker.
FUNCTIONALITIES: tuple[str, ...] = (
    "Dense", "FPGA", "Vulkan", "Metal", "Quantized", "CustomRNGKeyId", "MkldnnCPU", "Sparse",
    "SparseCsr", "NestedTensor", "BackendSelect", "Fake", "Python", "FuncTorchDynamicLayerBackMode",
    "Functionalize", "Conjugate", "Negative", "ZeroTensor", "ADInplaceOrView", "AutogradOther",
    "AutogradFunctionality", "AutogradNestedTensor", "Tracer", "AutocastCPU", "AutocastMTIA",
    "AutocastMAIA", "AutocastXPU", "AutocastIPU", "AutocastHPU", "AutocastXLA", "AutocastMPS",
    "AutocastCUDA", "AutocastPrivateUse1", "FuncTorchBatched", "BatchedNestedTensor",
    "FuncTorchVmapMode", "Batched", "VmapMode", "FuncTorchGradWrapper", "DeferredInit",
    "PythonTLSSnapshot", "FuncTorchDynamicLayerFrontMode", "TESTING_ONLY_GenericWrapper",
    "TESTING_ONLY_GenericMode", "PreDispatch", "PythonDispatcher",
)  # fmt: skip
NUM_FUNCTIONALITY_KEYS = len(FUNCTIONALITIES)  # 46 real ones (+ Undefined = 47 in C++'s count)

# The per-backend functionalities and the prefix their runtime keys carry ("" for Dense: CPU, CUDA...).
PER_BACKEND_PREFIX: dict[str, str] = {
    "Dense": "",
    "Quantized": "Quantized",
    "Sparse": "Sparse",
    "SparseCsr": "SparseCsr",
    "NestedTensor": "NestedTensor",
    "AutogradFunctionality": "Autograd",
}

ALIAS_KEYS: tuple[str, ...] = (
    "Autograd",
    "CompositeImplicitAutograd",
    "FuncTorchBatchedDecomposition",
    "CompositeImplicitAutogradNestedTensor",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)


def _members() -> dict[str, int]:
    """Build name -> value in C++ declaration order (canonical names before their synonyms)."""
    members: dict[str, int] = {"Undefined": 0}
    for value, name in enumerate(FUNCTIONALITIES, start=1):
        members[name] = value
    members["EndOfFunctionalityKeys"] = len(FUNCTIONALITIES) + 1  # 47
    value = members["EndOfFunctionalityKeys"]
    for functionality, prefix in PER_BACKEND_PREFIX.items():
        value += 1
        members[f"StartOf{functionality}Backends"] = value
        for backend in BACKENDS:
            value += 1
            members[prefix + backend] = value
    for alias in ALIAS_KEYS:
        value += 1
        members[alias] = value
    # Synonyms kept by c10 for old code; an Enum makes them aliases of the canonical member.
    members.update(
        CatchAll=0,
        EndOfRuntimeBackendKeys=members["AutogradMeta"],
        StartOfAliasKeys=members["Autograd"],
        EndOfAliasKeys=members["CompositeExplicitAutogradNonFunctional"],
        CPUTensorId=members["CPU"],
        CUDATensorId=members["CUDA"],
        DefaultBackend=members["CompositeExplicitAutograd"],
        PrivateUse1_PreAutograd=members["AutogradPrivateUse1"],
        PrivateUse2_PreAutograd=members["AutogradPrivateUse2"],
        PrivateUse3_PreAutograd=members["AutogradPrivateUse3"],
        Autocast=members["AutocastCUDA"],
    )
    return members


class _DispatchKeyBase(enum.Enum):
    """Methods of DispatchKey; the members are created from the tables above (see below)."""

    def __or__(self, other: object):  # type: ignore[no-untyped-def]
        from labsupport.c10.dispatch_key_set import DispatchKeySet

        return DispatchKeySet(self) | other

    __ror__ = __or__

    def __repr__(self) -> str:
        return f"DispatchKey.{self.name}"

    def __str__(self) -> str:
        return self.name

    # ---- classification helpers (c10/core/DispatchKey.h) ----
    @property
    def is_alias(self) -> bool:
        """True for alias keys such as Autograd or CompositeImplicitAutograd."""
        return self.value >= _ALIAS_START

    @property
    def is_per_backend_functionality(self) -> bool:
        """True for the six building-block functionalities (Dense, ..., AutogradFunctionality)."""
        return self.name in PER_BACKEND_PREFIX

    @property
    def is_runtime(self) -> bool:
        """A key that owns a slot in an operator's dispatch table (Undefined included)."""
        return self in RUNTIME_KEYS or self.value == 0


DispatchKey = _DispatchKeyBase("DispatchKey", list(_members().items()), module=__name__)
DispatchKey.__doc__ = "``c10::DispatchKey``. ``DispatchKey.CPU | DispatchKey.AutogradCPU`` builds a DispatchKeySet."
DispatchKey.__qualname__ = "DispatchKey"

_ALIAS_START = DispatchKey.Autograd.value


class BackendComponent(enum.IntEnum):
    """``c10::BackendComponent``: InvalidBit = 0, CPUBit = 1, ..., MetaBit = 16."""

    InvalidBit = 0
    CPUBit = 1
    CUDABit = 2
    HIPBit = 3
    XLABit = 4
    MPSBit = 5
    IPUBit = 6
    XPUBit = 7
    HPUBit = 8
    VEBit = 9
    LazyBit = 10
    MTIABit = 11
    MAIABit = 12
    PrivateUse1Bit = 13
    PrivateUse2Bit = 14
    PrivateUse3Bit = 15
    MetaBit = 16


# --- decompositions of runtime keys: key -> (functionality key, backend index 0..15 or None) ---

def _runtime_split() -> dict[DispatchKey, tuple[DispatchKey, int | None]]:
    split: dict[DispatchKey, tuple[DispatchKey, int | None]] = {}
    for name in FUNCTIONALITIES:
        if name not in PER_BACKEND_PREFIX:
            key = DispatchKey[name]
            split[key] = (key, None)
    for functionality, prefix in PER_BACKEND_PREFIX.items():
        for index, backend in enumerate(BACKENDS):
            split[DispatchKey[prefix + backend]] = (DispatchKey[functionality], index)
    return split


RUNTIME_SPLIT: dict[DispatchKey, tuple[DispatchKey, int | None]] = _runtime_split()
RUNTIME_KEYS: frozenset[DispatchKey] = frozenset(RUNTIME_SPLIT)


def to_functionality_key(key: DispatchKey) -> DispatchKey:
    """``toFunctionalityKey``: AutogradCPU -> AutogradFunctionality; non-per-backend keys map to themselves."""
    pair = RUNTIME_SPLIT.get(key)
    return pair[0] if pair else key


def to_backend_component(key: DispatchKey) -> BackendComponent:
    """``toBackendComponent``: the backend of a per-backend runtime key, else InvalidBit."""
    pair = RUNTIME_SPLIT.get(key)
    if pair is None or pair[1] is None:
        return BackendComponent.InvalidBit
    return BackendComponent(pair[1] + 1)


def parse_dispatch_key(name: str | DispatchKey) -> DispatchKey:
    """Turn a name such as ``"AutogradCPU"`` into a DispatchKey, with a helpful error for typos."""
    if isinstance(name, DispatchKey):
        return name
    try:
        return DispatchKey[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(str(name), DispatchKey.__members__, n=3)
        hint = f" (lab) Did you mean {', '.join(close)}?" if close else " (lab) Not a dispatch key name."
        raise DispatchKeyParseError(f"could not parse dispatch key: {name}.{hint}") from None


class DispatchKeyParseError(RuntimeError, ValueError):
    """``c10::parseDispatchKey``'s error: PyTorch raises RuntimeError "could not parse dispatch key: X".

    It is also a ValueError, so code written against the lab's earlier error keeps working.
    """
