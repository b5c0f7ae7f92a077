"""Per-arity instantiations of the dispatcher's call paths (labsupport/c10/instantiate.py)."""

from __future__ import annotations

from typing import Any

import pytest

import labsupport.torch as torch
from labsupport.c10.dispatcher import Dispatcher, dispatcher
from labsupport.c10.instantiate import instantiate


class Toy:
    def call(self, op: Any, *args: Any) -> Any:
        """Hand the arguments on, and show them as the tuple ``args``."""
        return op(*args), args


@pytest.mark.parametrize("arity", [0, 1, 3])
def test_instantiation_behaves_like_the_template(arity: int) -> None:
    values = tuple(range(arity))
    fixed = instantiate(Toy.call, arity)
    assert fixed(Toy(), lambda *a: sum(a), *values) == Toy().call(lambda *a: sum(a), *values)
    with pytest.raises(TypeError):
        fixed(Toy(), print, *values, "one too many")


def test_instantiation_keeps_file_line_and_qualname() -> None:
    call, redispatch = dispatcher.typed(3)
    for fixed, template in ((call, Dispatcher.call), (redispatch, Dispatcher.redispatch)):
        assert fixed.__code__.co_filename == template.__code__.co_filename
        assert fixed.__code__.co_firstlineno == template.__code__.co_firstlineno
        assert fixed.__qualname__ == template.__qualname__
        assert "*args" not in fixed.__code__.co_varnames and fixed.__code__.co_argcount == 3 + 3


def test_generated_handles_use_the_instantiations() -> None:
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    with_template = dispatcher.call(dispatcher.find_schema_or_throw("aten::add", "Tensor"), a._ks | b._ks, a, b, 1)
    assert torch.add(a, b).tolist() == with_template.tolist() == [4.0, 6.0]


SEEN: list[int] = []


class Counting(Dispatcher):
    def call(self, op: Any, tensor_ks: int, *args: Any) -> Any:
        SEEN.append(len(args))
        return Dispatcher.call(self, op, tensor_ks, *args)


def test_a_subclass_gets_instantiations_of_its_own_methods() -> None:
    counting = Counting("counting", install_fallbacks=False)
    call, _ = counting.typed(3)
    assert call.__func__.__qualname__.endswith("Counting.call")
    assert counting.typed(3)[0].__func__ is call.__func__  # instantiated once per (class, arity)
    a, b = torch.tensor([1.0]), torch.tensor([2.0])
    op = dispatcher.find_schema_or_throw("aten::add", "Tensor")
    assert call(op, a._ks | b._ks, a, b, 1).tolist() == [3.0]
    assert SEEN == [3]


def test_a_closure_is_refused_with_a_reason() -> None:
    class Closure(Dispatcher):
        def call(self, op: Any, tensor_ks: int, *args: Any) -> Any:
            return super().call(op, tensor_ks, *args)

    with pytest.raises(ValueError, match="enclosing scope"):
        Closure("closure", install_fallbacks=False).typed(1)


def test_a_template_without_star_args_is_refused() -> None:
    def plain(self: Any, x: int) -> int:
        return x

    with pytest.raises(ValueError, match="no \\*args"):
        instantiate(plain, 1)
