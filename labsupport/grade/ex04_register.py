"""Checks of exercise 04: myadd with a CPU kernel and an autograd kernel, on a fresh dispatcher.

Every check calls the learner's ``register_myadd`` on a new ``lab.Dispatcher`` and closes the
returned libraries afterwards, so checks cannot disturb each other. Which kernels ran, and with
which key set, is seen through a dispatcher observer (the hook the profiler uses).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import numpy as np

from labsupport.grade.checking import CheckFailed, Context, Exercise, freeze_message
from labsupport.grade.instruments import observing
from labsupport.grade.tensors import FLOAT_DTYPES, describe, make, random_array, random_shape, short

EXERCISE = Exercise(
    id="ex04",
    number=4,
    title="Register myadd: CPU and Autograd kernels",
    filename="ex04_register.py",
    notebook="04 (registering operators)",
)

NAME = "myops::myadd"
SCHEMA = "myops::myadd(Tensor self, Tensor other) -> Tensor"


@contextmanager
def registered(ctx: Context):  # type: ignore[no-untyped-def]
    """``(dispatcher, libraries, op)`` with the learner's registrations; closed afterwards."""
    import labsupport as lab

    dispatcher = lab.Dispatcher("grade-ex04")
    libraries = ctx.function("register_myadd")(dispatcher)
    try:
        if not isinstance(libraries, (list, tuple)) or not all(isinstance(lib, lab.Library) for lib in libraries):
            raise CheckFailed(
                f"register_myadd returned {type(libraries).__name__}, not a list of lab.Library objects",
                f"return every Library you created, e.g. [defs, cpu, autograd] ({ctx.where('register_myadd')})",
            )
        strangers = [lib for lib in libraries if lib.dispatcher is not dispatcher]
        if strangers:
            raise CheckFailed(
                f"{strangers[0]!r} registers on dispatcher {strangers[0].dispatcher.name!r}, not the one "
                "register_myadd was given",
                "pass dispatcher=dispatcher to every lab.Library(...)",
            )
        op = dispatcher.find_op(NAME)
        if op is None or op.schema is None:
            raise CheckFailed(
                f"after register_myadd, the dispatcher has no operator {NAME}",
                f'lab.Library("myops", "DEF", dispatcher=dispatcher).define("{SCHEMA.split("::", 1)[1]}")',
            )
        yield dispatcher, libraries, op
    except BaseException as error:
        freeze_message(error)  # before the libraries are closed below
        raise
    finally:
        if isinstance(libraries, (list, tuple)):
            for lib in reversed(libraries):
                close = getattr(lib, "close", None)
                if close is not None:
                    close()


def torch_module() -> Any:
    import labsupport.torch as torch

    return torch


def tensor(array: np.ndarray, requires_grad: bool = False) -> Any:
    t = make(torch_module().Tensor, array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def data_of(t: Any, what: str) -> np.ndarray:
    data = getattr(t, "_data", None)
    if not isinstance(data, np.ndarray):
        raise CheckFailed(
            f"{what} is {type(t).__name__}, not a lab tensor with numpy data",
            "return type(self)._make(data, self._sizes, self._dtype, self._device)",
        )
    return data




# ---- the checks -----------------------------------------------------------------------------------


@EXERCISE.check("4.1", "defines myops::myadd with CPU and Autograd kernels", 1)
def defines(ctx: Context) -> str:
    with registered(ctx) as (_, libraries, op):
        if str(op.schema) != SCHEMA:
            ctx.fail(f"the schema is {op.schema}, expected {SCHEMA}", "define exactly the SCHEMA string of the stub")
        keys = {key.name for key in op.kernels}
        if "CPU" not in keys:
            ctx.fail(
                f"no kernel registered for CPU (kernels for: {sorted(keys) or 'nothing'})",
                'lab.Library("myops", "IMPL", "CPU", dispatcher=dispatcher).impl("myadd", myadd_cpu)',
            )
        if not keys & {"Autograd", "AutogradCPU"}:
            ctx.fail(
                f"no kernel registered for Autograd (kernels for: {sorted(keys)})",
                'register the autograd kernel with lab.Library("myops", "IMPL", "Autograd", dispatcher=...)',
            )
        return f"{SCHEMA}; kernels for {', '.join(sorted(keys))}; {len(libraries)} libraries returned"


@EXERCISE.check("4.2", "CPU kernel: values on random inputs", 2)
def values(ctx: Context) -> str:
    rng = ctx.rng()
    with registered(ctx) as (_, _, op):
        for n in range(1, 21):
            shape = random_shape(rng, min_dims=1, max_dims=3)
            dtype = FLOAT_DTYPES[int(rng.integers(2))]
            a, b = random_array(rng, shape, dtype), random_array(rng, shape, dtype)
            x, y = tensor(a), tensor(b)
            result = op(x, y)
            got = data_of(result, "myadd's result")
            expected = a + b
            if tuple(result._sizes) != shape or got.shape != shape:
                ctx.fail(
                    f"case {n}: myadd({describe(x)}, {describe(y)}) has sizes {list(result._sizes)}, "
                    f"expected {list(shape)}",
                    f"the result keeps self's sizes ({ctx.where('myadd_cpu')})",
                )
            if result._dtype is not x._dtype:
                ctx.fail(
                    f"case {n}: the result's dtype is {result._dtype}, expected {x._dtype}",
                    f"keep self's dtype ({ctx.where('myadd_cpu')})",
                )
            if not np.array_equal(got, expected):
                ctx.fail(
                    f"case {n}: myadd({short(a)}, {short(b)})\n  expected {short(expected)}\n  got      {short(got)}",
                    f"add the numpy data elementwise ({ctx.where('myadd_cpu')})",
                )
            if not (np.array_equal(x._data, a) and np.array_equal(y._data, b)):
                ctx.fail(f"case {n}: myadd modified its inputs", "write the sum into a new array, not into self._data")
    return "20 random same-shape float32/float64 inputs give self + other"


@EXERCISE.check("4.3", "different shapes: a clear error", 1)
def shape_error(ctx: Context) -> str:
    rng = ctx.rng()
    rows, cols = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    pairs = [((rows, cols), (1, cols)), ((rows, 1), (1, cols)), ((rows, cols), (cols,))]
    with registered(ctx) as (_, _, op):
        for sa, sb in pairs:  # numpy would broadcast all of these: the kernel must refuse them itself
            x, y = tensor(random_array(rng, sa, "float32")), tensor(random_array(rng, sb, "float32"))
            try:
                op(x, y)
            except NotImplementedError:
                raise
            except Exception as error:
                text = str(error)
                if type(error).__name__ == "DispatchRecursionError":
                    raise
                if "shape" not in text.lower() and "size" not in text.lower():
                    ctx.fail(
                        f"myadd({describe(x)}, {describe(y)}) raised {type(error).__name__}: {text}\n"
                        "but the message does not say the shapes differ",
                        f"raise RuntimeError naming both shapes ({ctx.where('myadd_cpu')})",
                    )
                continue
            ctx.fail(
                f"myadd({describe(x)}, {describe(y)}) returned a result: numpy broadcast the shapes",
                f"check self._sizes == other._sizes first and raise RuntimeError ({ctx.where('myadd_cpu')})",
            )
    return "inputs of different shapes raise an error that names the shapes"


@EXERCISE.check("4.4", "the Autograd kernel runs first, the CPU kernel below autograd", 2)
def order(ctx: Context) -> str:
    import labsupport as lab
    from labsupport.c10.dispatch_key_set import DispatchKeySet

    autograd_bits = int(lab.autograd_dispatch_keyset)
    rng = ctx.rng()
    with registered(ctx) as (_, _, op):
        for requires_grad in (False, True):
            shape = random_shape(rng, min_dims=1)
            x = tensor(random_array(rng, shape, "float32"), requires_grad)
            y = tensor(random_array(rng, shape, "float32"))
            before = (int(lab.tls_include_set()), int(lab.tls_exclude_set()))
            with observing() as log:
                op(x, y)
            after = (int(lab.tls_include_set()), int(lab.tls_exclude_set()))
            mine = [(key, ks) for name, key, ks, _ in log.events if name == NAME]
            keys = [key.name for key, _ in mine]
            if not keys or keys[0] not in ("AutogradCPU",):
                ctx.fail(
                    f"the first kernel myadd ran was {keys[0] if keys else 'none'}, expected AutogradCPU "
                    f"(kernels run, in order: {keys})",
                    "register the autograd kernel for 'Autograd': every CPU tensor carries AutogradCPU, "
                    "which outranks CPU",
                )
            cpu = [(key, ks) for key, ks in mine if key.name == "CPU"]
            if not cpu:
                ctx.fail(
                    f"the CPU kernel never ran (kernels run, in order: {keys})",
                    "the autograd kernel must call myadd again below autograd (op.call or op.redispatch)",
                )
            ks = cpu[0][1]
            if ks & autograd_bits:
                ctx.fail(
                    f"the CPU kernel ran with key set {DispatchKeySet.from_raw(ks)}: autograd keys still in it",
                    "exclude autograd before calling again: AutoDispatchBelowADInplaceOrView(), or "
                    "ks & lab.after_autograd_keyset",
                )
            if keys.count("AutogradCPU") != 1 or len(keys) != 2:
                ctx.fail(
                    f"one myadd call ran these kernels: {keys}; expected exactly [AutogradCPU, CPU]",
                    "the autograd kernel should call myadd once, below autograd",
                )
            if after != before:
                ctx.fail(
                    "after myadd returned, the thread-local include/exclude sets were not restored",
                    "use the guard as a context manager: `with lab.AutoDispatchBelowADInplaceOrView(): ...`",
                )
    return "kernels ran as [AutogradCPU, CPU], the CPU one with autograd excluded; TLS restored afterwards"


@EXERCISE.check("4.5", "gradients: grad_fn and backward()", 3)
def gradients(ctx: Context) -> str:
    torch = torch_module()
    rng = ctx.rng()
    with registered(ctx) as (_, _, op):
        for n in range(1, 6):
            shape = random_shape(rng, min_dims=1)
            dtype = FLOAT_DTYPES[n % 2]
            x = tensor(random_array(rng, shape, dtype), True)
            y = tensor(random_array(rng, shape, dtype), n % 3 != 0)  # sometimes only x needs a gradient
            z = op(x, y)
            if getattr(z, "grad_fn", None) is None or not z.requires_grad:
                ctx.fail(
                    f"case {n}: myadd's result has no grad_fn although its inputs require grad",
                    "in the autograd kernel: grad_fn.next_functions = collect_next_edges(self, other); "
                    "set_history(result, grad_fn)",
                )
            seed = random_array(rng, shape, dtype)
            z.backward(tensor(seed))
            for name, t in (("self", x), ("other", y)):
                if not t.requires_grad:
                    if t.grad is not None:
                        ctx.fail(f"case {n}: {name} does not require grad but got a .grad", "")
                    continue
                if t.grad is None:
                    ctx.fail(
                        f"case {n}: after backward(), {name}.grad is None",
                        f"MyAddBackward.apply must return one gradient per input ({ctx.where('MyAddBackward')})",
                    )
                if not np.allclose(t.grad._data, seed):
                    ctx.fail(
                        f"case {n}: {name}.grad is {short(t.grad._data)}, expected the incoming gradient {short(seed)}",
                        f"d(self + other)/d{name} = 1: return [grad, grad] ({ctx.where('MyAddBackward')})",
                    )
        with torch.no_grad():
            shape = random_shape(rng, min_dims=1)
            z = op(tensor(random_array(rng, shape, "float32"), True), tensor(random_array(rng, shape, "float32")))
        if z.grad_fn is not None:
            ctx.fail(
                "under no_grad(), myadd still recorded a grad_fn",
                "record the graph only if compute_requires_grad(self, other)",
            )
    return "grad_fn recorded; backward() gives both inputs the incoming gradient; nothing recorded under no_grad"


@EXERCISE.check("4.6", "closing the returned libraries undoes every registration", 1)
def closing(ctx: Context) -> str:
    import labsupport as lab

    dispatcher = lab.Dispatcher("grade-ex04-close")
    register = ctx.function("register_myadd")
    for attempt in (1, 2):
        libraries = register(dispatcher)
        if not isinstance(libraries, (list, tuple)):
            ctx.fail(
                f"register_myadd returned {type(libraries).__name__}, not a list of Library objects",
                "return every Library you created",
            )
        for lib in libraries:
            lib.close()
        op = dispatcher.find_op(NAME)
        if op is not None and (op.schema is not None or op.kernels):
            ctx.fail(
                f"after closing the {len(libraries)} returned libraries (call {attempt}), "
                f"{NAME} still has registrations:\n{dispatcher.dump(NAME)}",
                "return every Library you created, including the DEF one",
            )
    return "after close() nothing is left, and register_myadd can run again (re-runnable notebook cell)"
