"""The pass-through tensor subclass the Python-key tests share, written once against either library.

``wrapper_subclass(torch, tree_map)`` builds, for ``labsupport.torch`` or a real ``torch``, a class whose
instances hold a plain tensor in ``elem``; its ``__torch_dispatch__`` logs ``str(func)`` in ``cls.log``,
unwraps, runs ``func`` and wraps every plain tensor of the result again. With ``carries_data`` the
instances are made by ``_make_subclass`` (they share ``elem``'s data), otherwise by
``_make_wrapper_subclass`` (no data of their own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def wrapper_subclass(torch: Any, tree_map: Callable[..., Any], *, carries_data: bool = False,
                     name: str = "Wrapper") -> type:  # fmt: skip
    class Wrapper(torch.Tensor):  # type: ignore[misc, name-defined]
        log: list[str] = []

        @staticmethod
        def __new__(cls, elem):
            if carries_data:
                return torch.Tensor._make_subclass(cls, elem, elem.requires_grad)
            return torch.Tensor._make_wrapper_subclass(
                cls, elem.shape, dtype=elem.dtype, device=elem.device, requires_grad=elem.requires_grad
            )

        def __init__(self, elem):
            self.elem = elem

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            cls.log.append(str(func))

            def unwrap(x):
                return x.elem if isinstance(x, cls) else x

            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
            return tree_map(lambda x: cls(x) if isinstance(x, torch.Tensor) and not isinstance(x, cls) else x, out)

    Wrapper.__name__ = Wrapper.__qualname__ = name
    return Wrapper
