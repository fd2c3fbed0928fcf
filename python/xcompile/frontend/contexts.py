"""``with`` blocks on context managers beyond the grad modes (which stay in handlers/control.py and calls.py).

    user class with __enter__/__exit__   both inlined; __exit__ gets (type, exc, tb) on an
                                         exception and its result decides suppression
    @contextlib.contextmanager           the generator's frame runs to its ``yield`` on enter and
                                         on from there on exit; an exception is thrown in at the
                                         ``yield`` (its try/except/finally run)
    torch.autocast(...)                  graph nodes torch.amp._enter_autocast / _exit_autocast
                                         around the block; ops in it are traced under autocast

``enter_context(tx, ctx) -> (active ctx, value of `as`)`` is called by BEFORE_WITH;
``exit_context(tx, ctx, args) -> value`` by the exit call (normal exit: three Nones).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from ..guards.sources import AttrSource
from . import hub
from .attrs import AttrMissing, load_attr
from .exc import PythonError, Unsupported
from .generators import resume as _resume
from .values import (
    AutocastValue,
    ConstantValue,
    DictValue,
    GeneratorContextValue,
    UserContextValue,
    Value,
    real_object,
)

if TYPE_CHECKING:
    from .tracer import Tracer


class ContextValue(Value):
    """Base of context values with their own enter/exit (``register_context``): their ``with``
    hands out what ``enter`` returns, and ``exit`` gets the exit call's three arguments."""


_CONTEXTS: dict[type, tuple[Callable[..., Value], Callable[..., Value]]] = {}


def register_context(value_cls: type, enter: Callable[..., Value], exit_: Callable[..., Value]) -> None:
    """``enter(tx, ctx) -> value of `as``` and ``exit_(tx, ctx, args) -> __exit__'s result`` for
    a ``ContextValue`` subclass."""
    assert issubclass(value_cls, ContextValue), value_cls
    _CONTEXTS[value_cls] = (enter, exit_)


def _call(tx: "Tracer", fn: Value, args: list[Value]) -> Value:
    return hub.call_value(tx, fn, args, {})


# -- entering -----------------------------------------------------------------------------------------------
def enter_context(tx: "Tracer", ctx: Value) -> tuple[Value, Value]:
    if isinstance(ctx, AutocastValue):
        return ctx, enter_autocast(tx, ctx)
    if isinstance(ctx, GeneratorContextValue):
        return ctx, _enter_generator(tx, ctx)
    if isinstance(ctx, ContextValue):
        return ctx, _CONTEXTS[type(ctx)][0](tx, ctx)
    if isinstance(real_object(ctx), torch.amp.autocast_mode.autocast):    # @torch.autocast(...)'s
        autocast = _real_autocast(tx, ctx)                               # instance, entered
        return autocast, enter_autocast(tx, autocast)
    try:
        enter = load_attr(tx, ctx, "__enter__")
        exit_fn = load_attr(tx, ctx, "__exit__")
    except AttrMissing:
        raise Unsupported(f"`with` on {ctx.describe()}, which is not a context manager",
                          "The same code raises TypeError in eager mode.") from None
    except Unsupported as e:
        raise Unsupported(f"`with` on {ctx.describe()}: {e.reason}",
                          "Context managers whose __enter__/__exit__ are Python code are supported.") from e
    return UserContextValue(ctx, exit_fn), _call(tx, enter, [])


def exit_context(tx: "Tracer", ctx: Value, args: list[Value]) -> Value:
    if isinstance(ctx, AutocastValue):
        exit_autocast(tx, ctx)
        return ConstantValue(None)
    if isinstance(ctx, GeneratorContextValue):
        return _exit_generator(tx, ctx, args)
    if isinstance(ctx, ContextValue):
        return _CONTEXTS[type(ctx)][1](tx, ctx, list(args))
    if isinstance(ctx, UserContextValue):
        return _call(tx, ctx.exit_fn, list(args))
    raise AssertionError(ctx)


CONTEXT_CLASSES = (UserContextValue, GeneratorContextValue, AutocastValue, ContextValue)


# -- torch.autocast -----------------------------------------------------------------------------------------
def make_autocast(device_type, dtype, enabled, cache_enabled) -> AutocastValue:
    if not isinstance(device_type, str):
        raise Unsupported(f"torch.autocast with device_type {device_type!r}")
    if dtype is None:
        dtype = torch.get_autocast_dtype(device_type)
    return AutocastValue(device_type, dtype, bool(enabled), cache_enabled)


_AUTOCAST_FIELDS = ("device", "fast_dtype", "_enabled", "_cache_enabled")


def _real_autocast(tx: "Tracer", v: Value) -> AutocastValue:
    """A torch.autocast object made outside the frame (the decorator's, in its wrapper's closure):
    entered like one made inside, from its fields (guarded)."""
    obj = real_object(v)
    values = [getattr(obj, f, None) for f in _AUTOCAST_FIELDS]
    device, dtype, enabled, cache_enabled = values
    if not isinstance(device, str) or not isinstance(dtype, torch.dtype) or not isinstance(enabled, bool):
        raise Unsupported(f"entering {type(obj).__name__} object with unexpected fields")
    if v.source is not None:
        for f, x in zip(_AUTOCAST_FIELDS, values):
            tx.guards.constant(AttrSource(v.source, f), x)
    return AutocastValue(device, dtype, enabled, cache_enabled)


def enter_autocast(tx: "Tracer", ctx: AutocastValue) -> Value:
    gb = tx.gb
    ctx.node = gb.graph.call_function(torch.amp._enter_autocast,
                                      (ctx.device_type, ctx.dtype, ctx.enabled, ctx.cache_enabled))
    gb.autocast_modes.append((ctx.device_type, ctx.dtype, ctx.enabled, ctx.cache_enabled))
    return ctx


def exit_autocast(tx: "Tracer", ctx: AutocastValue) -> None:
    gb = tx.gb
    gb.graph.call_function(torch.amp._exit_autocast, (ctx.node,))
    gb.autocast_modes.pop()


# -- @contextlib.contextmanager ------------------------------------------------------------------------------
def make_generator_context(tx: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``contextlib._GeneratorContextManager(func, args, kwds)`` (what the decorator's helper makes)."""
    func, a, kw = args
    if not isinstance(kw, DictValue):
        raise Unsupported("@contextmanager with non-dict keyword arguments")
    return GeneratorContextValue(func, hub.items_of(tx, a), {k: tx.resolve(v) for k, v in kw.items.items()})


def _enter_generator(tx: "Tracer", ctx: GeneratorContextValue) -> Value:
    frame = tx.call_frame(None, ctx.func, ctx.args, ctx.kwargs)
    if frame.yields is None:
        raise Unsupported(f"@contextmanager on {ctx.func.describe()}, which is not a generator")
    _resume(tx, frame)
    if frame.done:
        raise PythonError.of(RuntimeError("generator didn't yield"))
    ctx.frame, ctx.yield_index = frame, frame.ip - 1
    return tx.resolve(frame.yields[-1])


def _exit_generator(tx: "Tracer", ctx: GeneratorContextValue, args: list[Value]) -> Value:
    frame = ctx.frame
    exc = args[1] if len(args) > 1 else ConstantValue(None)
    if hub.real_exception(exc) is None:                      # normal exit: run to the end
        _resume(tx, frame)
        if not frame.done:
            raise PythonError.of(RuntimeError("generator didn't stop"))
        return ConstantValue(False)
    err = PythonError(exc)                               # throw it in at the yield
    if not hub.handle_exception(frame, frame.instrs[ctx.yield_index], err):
        return ConstantValue(False)                      # not caught there: the with re-raises it
    try:
        _resume(tx, frame)
    except PythonError as e:
        if e.value is exc or hub.real_exception(e.value) is hub.real_exception(exc):
            return ConstantValue(False)                  # re-raised: not suppressed
        raise
    if not frame.done:
        raise PythonError.of(RuntimeError("generator didn't stop after throw()"))
    return ConstantValue(True)                           # caught in the generator: suppressed

hub.register(
    CONTEXT_CLASSES=CONTEXT_CLASSES, enter_context=enter_context, exit_context=exit_context,
    make_autocast=make_autocast, make_generator_context=make_generator_context,
)
