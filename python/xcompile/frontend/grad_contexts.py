"""Autograd and profiler state switched inside the traced code, as torch.compile traces it.

    torch._C._set_grad_enabled(b)          the grad mode switches at the call (as torch.set_grad_enabled(b)
                                           called as a function); the frame leaves it as eager does
    torch.inference_mode(mode)             graph nodes torch.autograd.grad_mode._enter_inference_mode /
    (a `with` block or a decorator)        _exit_inference_mode around the block; ops in it are traced
                                           under the mode (grad off inside inference_mode(True), on
                                           inside inference_mode(False), as c10::InferenceMode sets it)
    torch.profiler.profile(...),           ignored, as torch.compile ignores them: the block's ops are
    torch.autograd.profiler.profile(...)   traced; the object (``as p``) cannot be used in the region
    disable_saved_tensors_hooks(msg)       graph nodes switch the flag off and back around the block
    torch.cpu.amp.autocast(...) (and cuda) autocast blocks (contexts.py)
    ctx(fn) inside the frame               torch.no_grad()(f), torch.autocast(...)(f): each call runs f
                                           in a fresh copy of the context
    @torch.set_grad_enabled(b) functions,  graph breaks with torch.compile's reasons (it does not
    saved_tensors_hooks, save_on_cpu,      trace them either)
    emit_nvtx
"""
from __future__ import annotations

import contextlib
import functools
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..guards.sources import AttrSource
from . import hub
from .builtins_table import builtin
from .calls import register_caller, register_context_value, register_torch_op_rule
from .codegen import _CONTEXT_REMAKERS
from .contexts import ContextValue, enter_autocast, exit_autocast, register_context
from .exc import PythonError, Unsupported
from .values import (
    AutocastValue,
    BoundMethodValue,
    ConstantValue,
    FunctionValue,
    GradModeValue,
    NestedFunctionValue,
    PartialValue,
    Value,
    real_object,
)

if TYPE_CHECKING:
    from .tracer import Tracer


def _skipped(what: str, hint: str | None = None, verb: str = "call") -> Unsupported:
    """A callable torch.compile refuses to trace, refused with its words."""
    return Unsupported(f"Attempted to {verb} function marked as skipped: {what}",
                       hint or f"Avoid calling `{what}` inside the compiled region, or accept the graph break.",
                       f"torch.compile intentionally does not trace `{what}` either.")


# -- torch._C._set_grad_enabled ----------------------------------------------------------------------------
def _c_set_grad_enabled(tx: "Tracer", args, kwargs) -> Value | None:
    if kwargs or len(args) != 1:
        return None                                            # eager's TypeError (FORBIDDEN breaks)
    ok, enabled = hub.as_constant(args[0])
    if not ok or not isinstance(enabled, bool):
        raise Unsupported("torch._C._set_grad_enabled with a non-constant argument",
                          "Pass True or False.")
    hub.switch_grad_mode(tx, enabled)
    return ConstantValue(None)


register_torch_op_rule(torch._C._set_grad_enabled, _c_set_grad_enabled)


# -- torch.inference_mode -----------------------------------------------------------------------------------
@dataclass(eq=False)
class InferenceModeValue(Value):
    """``torch.inference_mode(mode)``: the graph enters and leaves the mode around the block."""

    mode: bool
    node: Any = None                         # the enter node while active (None: a no-op block)
    saved: tuple | None = None               # (grad mode, inference mode) of the trace before it

    def python_type(self) -> type:
        return torch.inference_mode

    def describe(self) -> str:
        return f"torch.inference_mode({self.mode})"


def make_inference_mode(tx: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    named = dict(zip(("mode",), args)) | kwargs
    if len(args) > 1 or set(named) - {"mode"}:
        raise Unsupported("torch.inference_mode with unexpected arguments")
    ok, mode = hub.as_constant(named.get("mode", ConstantValue(True)))
    if not ok or not isinstance(mode, bool):
        raise Unsupported("torch.inference_mode with a non-constant mode", "Pass True or False.")
    return InferenceModeValue(mode)


@contextlib.contextmanager
def _fake_inference(gb, mode: bool):
    """What the fake run of an op inside the block runs under: the mode, then the grad mode the
    trace is in (a no_grad/enable_grad inside the block switches it after the mode did)."""
    with torch.inference_mode(mode), torch.set_grad_enabled(gb.grad_enabled):
        yield


def _enter_inference(tx: "Tracer", ctx: InferenceModeValue) -> None:
    gb = tx.gb
    ctx.saved = (gb.grad_enabled, tx.inference_mode)
    if tx.inference_mode == ctx.mode and gb.grad_enabled == (not ctx.mode):
        return                                              # already so: nothing changes
    if not ctx.mode and torch.is_inference_mode_enabled():
        raise Unsupported("torch.inference_mode(False) inside a function called under inference mode",
                          "Call the compiled function outside torch.inference_mode(), or keep the "
                          "inference_mode(False) block out of the compiled region.",
                          "An AOT backend compiles such a call for inference (no autograd graph).")
    ctx.node = gb.graph.call_function(torch.autograd.grad_mode._enter_inference_mode, (ctx.mode,))
    if not ctx.mode and not gb.grad_enabled:
        # grad turns on inside (as set_grad_enabled(True) would): said in the graph too, so that
        # a call under no_grad compiles the autograd path (convert_frame._starts_grad_off)
        gb.graph.call_function(torch._C._set_grad_enabled, (True,))
    gb.autocast_modes.append(functools.partial(_fake_inference, gb, ctx.mode))
    gb.grad_enabled = not ctx.mode                          # c10::InferenceMode sets grad mode so
    tx.inference_mode = ctx.mode


def _exit_inference(tx: "Tracer", ctx: InferenceModeValue) -> None:
    assert ctx.saved is not None
    if ctx.node is not None:
        gb = tx.gb
        gb.graph.call_function(torch.autograd.grad_mode._exit_inference_mode, (ctx.node,))
        gb.autocast_modes.pop()
        ctx.node = None
        gb.grad_enabled, tx.inference_mode = ctx.saved      # the exit restores both


register_context_value(InferenceModeValue, _enter_inference, _exit_inference)


def _inference_mode_clone(tx: "Tracer", args, kwargs) -> Value | None:
    """``ctx_factory()`` of a function decorated with ``@torch.inference_mode(mode)``
    (torch.utils._contextlib): a fresh context with the decorator object's mode."""
    if len(args) != 1 or kwargs:
        return None
    obj = real_object(args[0])
    mode = getattr(obj, "mode", None)
    if not isinstance(obj, torch.inference_mode) or not isinstance(mode, bool):
        return None
    if args[0].source is not None:
        tx.guards.constant(AttrSource(args[0].source, "mode"), mode)
    return InferenceModeValue(mode)


register_torch_op_rule(torch.inference_mode.clone, _inference_mode_clone)


def _set_grad_enabled_clone(tx: "Tracer", args, kwargs) -> Value:
    raise _skipped("set_grad_enabled.clone",
                   "torch.set_grad_enabled(mode) used as a decorator is not traced; use "
                   "`with torch.set_grad_enabled(mode):` inside the function, or @torch.no_grad() / "
                   "@torch.enable_grad().")


register_torch_op_rule(torch.set_grad_enabled.clone, _set_grad_enabled_clone)


# -- a context manager applied as a decorator inside the frame: torch.no_grad()(fn) ------------------------------
@dataclass(eq=False)
class ContextDecoratedValue(Value):
    """``ctx(fn)`` made in the frame (``torch.no_grad()(f)``, ``torch.autocast(...)(f)``): each call
    runs ``fn`` inside a fresh copy of ``ctx``, as the decorators of torch.utils._contextlib and
    torch.autocast do."""

    ctx: Value
    fn: Value

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"{self.fn.describe()} decorated with {self.ctx.describe()}"


def _grad_enter(tx: "Tracer", ctx: GradModeValue) -> None:
    ctx.exit_to = tx.gb.grad_enabled
    hub.switch_grad_mode(tx, ctx.enabled)


def _grad_exit(tx: "Tracer", ctx: GradModeValue) -> None:
    assert ctx.exit_to is not None
    hub.switch_grad_mode(tx, ctx.exit_to)


# context value class -> (a fresh copy, enter(tx, ctx), exit(tx, ctx))
_DECORATING: dict[type, tuple[Callable[[Any], Value], Callable[..., Any], Callable[..., Any]]] = {
    GradModeValue: (lambda c: GradModeValue(c.enabled), _grad_enter, _grad_exit),
    InferenceModeValue: (lambda c: InferenceModeValue(c.mode), _enter_inference, _exit_inference),
    AutocastValue: (lambda c: AutocastValue(c.device_type, c.dtype, c.enabled, c.cache_enabled),
                    enter_autocast, lambda tx, c: exit_autocast(tx, c)),
}
_DECORATABLE = (FunctionValue, NestedFunctionValue, BoundMethodValue, PartialValue)


def _decorate(tx: "Tracer", ctx: Value, args, kwargs) -> Value:
    if isinstance(ctx, GradModeValue) and ctx.prev is not None:
        raise _skipped("set_grad_enabled.clone", "torch.set_grad_enabled(mode) used as a decorator is not "
                       "traced; use `with torch.set_grad_enabled(mode):` inside the function.")
    if kwargs or len(args) != 1 or not isinstance(args[0], _DECORATABLE):
        raise Unsupported(f"calling {ctx.describe()}",
                          "A context manager called inside the region must decorate one function.")
    return ContextDecoratedValue(ctx, args[0])


def _call_decorated(tx: "Tracer", v: ContextDecoratedValue, args, kwargs) -> Value:
    fresh, enter, exit_ = _DECORATING[type(v.ctx)]
    ctx = fresh(v.ctx)
    enter(tx, ctx)
    try:
        result = hub.call_value(tx, v.fn, list(args), dict(kwargs))
    except PythonError:                       # the decorator's `with` exits on the way out
        exit_(tx, ctx)
        raise
    exit_(tx, ctx)
    return result


for _value_cls in _DECORATING:
    register_caller(_value_cls, _decorate)
register_caller(ContextDecoratedValue, _call_decorated)


# -- torch.cpu.amp.autocast / torch.cuda.amp.autocast (deprecated spellings of torch.autocast) -------------------
def _device_autocast(device: str, default_dtype: torch.dtype):
    def make(tx: "Tracer", args, kwargs) -> Value:
        named = dict(zip(("enabled", "dtype", "cache_enabled"), args)) | kwargs
        if len(args) > 3 or set(named) - {"enabled", "dtype", "cache_enabled"}:
            raise Unsupported(f"torch.{device}.amp.autocast with unexpected arguments")
        vals = {k: hub.as_constant(v) for k, v in named.items()}
        if not all(ok for ok, _ in vals.values()):
            raise Unsupported(f"torch.{device}.amp.autocast with non-constant arguments")
        get = {k: c for k, (_, c) in vals.items()}
        return hub.make_autocast(device, get.get("dtype", default_dtype), get.get("enabled", True),
                                 get.get("cache_enabled", True))
    return make


builtin(torch.cpu.amp.autocast)(_device_autocast("cpu", torch.bfloat16))
builtin(torch.cuda.amp.autocast)(_device_autocast("cuda", torch.float16))


# -- profilers ----------------------------------------------------------------------------------------------
@dataclass(eq=False)
class ProfilerValue(ContextValue):
    """``torch.profiler.profile(...)`` / ``torch.autograd.profiler.profile(...)``: ignored (its
    ``__enter__`` returns the profiler itself, which the region cannot use)."""

    what: str

    def python_type(self) -> type:
        return torch.profiler.profile

    def describe(self) -> str:
        return f"{self.what} object (ignored inside the compiled region)"


_PROFILERS = {torch.profiler.profile: "torch.profiler.profile",
              torch.autograd.profiler.profile: "torch.autograd.profiler.profile"}


def _make_profiler(what: str):
    def make(tx: "Tracer", args, kwargs) -> Value:
        return ProfilerValue(what)             # its arguments are ignored with it
    return make


for _cls, _what in _PROFILERS.items():
    builtin(_cls)(_make_profiler(_what))
register_context(ProfilerValue, lambda tx, ctx: ctx, lambda tx, ctx, args: ConstantValue(None))
_CONTEXT_REMAKERS[ProfilerValue] = lambda b, v: b.assign(b.const(contextlib.nullcontext) + "()", "ctx")


# -- torch.autograd.graph.disable_saved_tensors_hooks(message) ------------------------------------------------
@dataclass(eq=False)
class SavedHooksDisabledValue(ContextValue):
    """``disable_saved_tensors_hooks(message)``: graph nodes switch the flag off and back around the
    block, as in torch.compile's graph (registering hooks inside the region breaks anyway)."""

    message: str
    node: Any = None

    def describe(self) -> str:
        return f"torch.autograd.graph.disable_saved_tensors_hooks({self.message!r})"


def disable_saved_hooks(message: str) -> str | None:
    """The graph's enter node: the previous state (its message, None when enabled)."""
    prev = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()
    torch._C._autograd._saved_tensors_hooks_disable(message)
    return prev


def restore_saved_hooks(prev: str | None) -> None:
    """The graph's exit node (the contextmanager's finally)."""
    if prev is None:
        torch._C._autograd._saved_tensors_hooks_enable()
    else:
        torch._C._autograd._saved_tensors_hooks_disable(prev)


def _disable_saved_hooks_call(tx: "Tracer", args, kwargs) -> Value:
    named = dict(zip(("error_message",), args)) | kwargs
    ok, message = hub.as_constant(named.get("error_message", ConstantValue(None)))
    if len(args) > 1 or set(named) != {"error_message"} or not ok or not isinstance(message, str):
        raise Unsupported("disable_saved_tensors_hooks with a non-constant message")
    return SavedHooksDisabledValue(message)


def _enter_saved_hooks(tx: "Tracer", ctx: SavedHooksDisabledValue) -> Value:
    ctx.node = tx.gb.graph.call_function(disable_saved_hooks, (ctx.message,))
    # what the block's calls see while tracing (_saved_tensors_hooks_is_enabled() folds so)
    tx.gb.autocast_modes.append(functools.partial(torch.autograd.graph.disable_saved_tensors_hooks, ctx.message))
    return ConstantValue(None)


def _exit_saved_hooks(tx: "Tracer", ctx: SavedHooksDisabledValue, args) -> Value:
    tx.gb.graph.call_function(restore_saved_hooks, (ctx.node,))
    tx.gb.autocast_modes.pop()
    return ConstantValue(False)


register_torch_op_rule(torch.autograd.graph.disable_saved_tensors_hooks, _disable_saved_hooks_call)
register_context(SavedHooksDisabledValue, _enter_saved_hooks, _exit_saved_hooks)


# -- refused as torch.compile refuses them ------------------------------------------------------------------
def _refuse(what: str, hint: str):
    def call(tx: "Tracer", args, kwargs) -> Value:
        raise _skipped(what, hint, "inline")
    return call


_HOOKS_HINT = ("Register saved-tensor hooks outside the compiled region (the compiled graph's saved "
               "tensors then go through them), or accept the graph break.")
builtin(torch.autograd.graph.saved_tensors_hooks)(_refuse("saved_tensors_hooks.__init__", _HOOKS_HINT))
builtin(torch.autograd.graph.save_on_cpu)(_refuse("save_on_cpu.__init__", _HOOKS_HINT))
builtin(torch.autograd.profiler.emit_nvtx)(_refuse("emit_nvtx.__init__", "Use emit_nvtx outside the "
                                                   "compiled region."))

hub.register(make_inference_mode=make_inference_mode)

__all__ = ["InferenceModeValue", "ProfilerValue", "make_inference_mode"]
