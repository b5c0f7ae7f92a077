"""``OpOverload`` and ``OpOverloadPacket``: operators as Python objects (stands for torch/_ops.py).

``__torch_dispatch__`` receives one of these as ``func``: ``aten.add.Tensor`` is the ``add`` operator's
``Tensor`` overload, and calling it goes back through the dispatcher. The lab's object wraps the
dispatcher's ``OperatorEntry`` (the operator handle); PyTorch's wraps a ``c10::OperatorHandle``. Names
print as PyTorch 2.13 prints them::

    str(func)          aten.add.Tensor          repr(func)   <OpOverload(op='aten.add', overload='Tensor')>
    func.name()        aten::add.Tensor         func.__name__   add.Tensor
    func.overloadpacket   aten.add              func._schema    aten::add.Tensor(Tensor self, ...) -> Tensor

``ops.aten.add.Tensor`` (``torch.ops.aten.add.Tensor``) returns the same object each time, so
``func is ops.aten.add.Tensor`` holds inside a handler, as in PyTorch.
"""

from __future__ import annotations

import weakref
from typing import Any

from labsupport.c10.dispatcher import Dispatcher, dispatcher
from labsupport.c10.operator_entry import OperatorEntry


class OpOverloadPacket:
    """Every overload of one operator name (``torch._ops.OpOverloadPacket``): ``aten.sum``."""

    def __init__(self, qualified_name: str, disp: Dispatcher) -> None:
        self._qualified_op_name = qualified_name  # "aten::sum"
        self._dispatcher = disp
        ns, _, name = qualified_name.partition("::")
        self.namespace, self.__name__ = ns, name
        self._overload_cache: dict[str, OpOverload] = {}

    def __str__(self) -> str:
        return f"{self.namespace}.{self.__name__}"

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self}')>"

    def overloads(self) -> list[str]:
        """The overload names, ``default`` for the one without a name (registration order)."""
        return [
            op.overload_name or "default"
            for op in self._dispatcher.operators.values()
            if op.name == self._qualified_op_name and op.schema is not None
        ]

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        name = "" if overload == "default" else overload
        op = self._dispatcher.find_op(self._qualified_op_name, name)
        if op is None or op.schema is None:
            raise AttributeError(f"The underlying op of '{self}' has no overload name '{overload}'")
        return OpOverload.of(op)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the overload the arguments pick: the lab tries the default one, else the only one."""
        names = self.overloads()
        if "default" in names or len(names) == 1:
            return getattr(self, "default" if "default" in names else names[0])(*args, **kwargs)
        raise RuntimeError(f"{self} has several overloads {names}; pick one, e.g. {self}.{names[0]}")


class OpOverload:
    """One overload of an operator (``torch._ops.OpOverload``); ``func`` in ``__torch_dispatch__``."""

    def __init__(self, op: OperatorEntry, packet: OpOverloadPacket) -> None:
        self._op = op  # the dispatcher's handle (c10::OperatorHandle)
        self._schema = op.schema
        self._overloadname = op.overload_name or "default"
        self.overloadpacket = packet
        self.namespace = packet.namespace
        self.__name__ = f"{packet.__name__}.{self._overloadname}"
        self.__qualname__ = self._name = op.full_name
        self.__module__ = f"torch._ops.{packet.namespace}"
        schema_args = op.schema.arguments if op.schema is not None else ()
        # Tensor parameters a Python number may be given for (a handler sees ``add_(x, 1)``'s 1 as an int)
        self._tensor_params = tuple(i for i, a in enumerate(schema_args) if str(a.type) == "Tensor")

    _cache: weakref.WeakKeyDictionary[OperatorEntry, OpOverload] = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, op: OperatorEntry) -> OpOverload:
        """The one OpOverload of a dispatcher operator (made on first use)."""
        found = cls._cache.get(op)
        if found is None:
            packet = _packet(op.name, op.dispatcher)
            found = cls._cache[op] = cls(op, packet)
        return found

    def name(self) -> str:
        """``aten::add.Tensor`` (``aten::sum`` for a default overload)."""
        return self._name

    def __str__(self) -> str:
        return f"{self.overloadpacket}.{self._overloadname}"

    def __repr__(self) -> str:
        return f"<OpOverload(op='{self.overloadpacket}', overload='{self._overloadname}')>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``OpOverload.__call__``: bind the arguments to the schema and call through the dispatcher.

        A Python number given for a Tensor parameter becomes a wrapped-number tensor, as PyTorch's
        argument parser makes it (``__torch_dispatch__`` handlers receive such scalars as numbers)."""
        op = self._op
        bound = op.bind(args, kwargs)
        for i in self._tensor_params:
            value = bound[i]
            if isinstance(value, (bool, int, float)):
                bound = _with_wrapped_number(bound, i)
        return op.dispatcher.call(op, op.dispatch_key_set_of(bound), *bound)

    def redispatch(self, ks: Any, *args: Any, **kwargs: Any) -> Any:
        """``OpOverload.redispatch``: call with a key set the caller computed."""
        return self._op.redispatch(ks, *self._op.bind(args, kwargs))


def _with_wrapped_number(bound: tuple[Any, ...], index: int) -> tuple[Any, ...]:
    from labsupport.aten.scalar_tensor import wrapped_scalar_tensor
    from labsupport.aten.tensor import TensorBase

    tensor_cls = next((type(v) for v in bound if isinstance(v, TensorBase)), TensorBase)
    return (*bound[:index], wrapped_scalar_tensor(bound[index], tensor_cls), *bound[index + 1 :])


_packets: dict[tuple[int, str], OpOverloadPacket] = {}


def _packet(qualified_name: str, disp: Dispatcher) -> OpOverloadPacket:
    key = (id(disp), qualified_name)
    packet = _packets.get(key)
    if packet is None or packet._dispatcher is not disp:
        packet = _packets[key] = OpOverloadPacket(qualified_name, disp)
    return packet


class _OpNamespace:
    """``torch.ops.aten``: packets by name."""

    def __init__(self, ns: str, disp: Dispatcher) -> None:
        self.name, self._dispatcher = ns, disp

    def __getattr__(self, op_name: str) -> OpOverloadPacket:
        if op_name.startswith("__"):
            raise AttributeError(op_name)
        qualified = f"{self.name}::{op_name}"
        if not any(op.name == qualified and op.schema is not None for op in self._dispatcher.operators.values()):
            raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{op_name}'")
        return _packet(qualified, self._dispatcher)


class _Ops:
    """``torch.ops``: ``ops.aten.add.Tensor`` is the OpOverload of ``aten::add.Tensor``."""

    def __init__(self, disp: Dispatcher) -> None:
        self._dispatcher = disp

    def __getattr__(self, ns: str) -> _OpNamespace:
        if ns.startswith("__"):
            raise AttributeError(ns)
        return _OpNamespace(ns, self._dispatcher)


ops = _Ops(dispatcher)

__all__ = ["OpOverload", "OpOverloadPacket", "ops"]
