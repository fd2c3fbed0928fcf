"""What the interpreter does with the fine-grained tracing APIs (``xcompile.graph_break``,
``allow_in_graph``, ``disallow_in_graph``, ``forbid_in_graph``, ``nonstrict_trace``,
``disable``, ``error_on_graph_break``) and with already-compiled callables.

One registry, one row per marked object::

    rule            when the traced code calls it
    graph_break     graph break "Call to `xcompile.graph_break()`"
    allow           one graph node calling the real function (its body is not traced)
    nonstrict       the same, and non-input tensors it reads are constants (not guarded)
    disallow        graph break; the call runs eagerly
    forbid          ForbiddenInGraph (an error, even with fullgraph=False)
    disable         graph break; the call runs eagerly with compilation off inside
    skip            graph break; the frame runs eagerly, the frames it calls are compiled
    constant        run at trace time on constant arguments; the result is a constant
                    (``assume_constant_result``, or torch's ``_dynamo_marked_constant`` mark)
    mark_*          (the marking functions themselves, called inside traced code)

The interpreter reaches these rules through two hooks: ``wrap_special`` (called first by
``wrap``: marked objects, compiled functions/modules, ``error_on_graph_break`` contexts) and
``before_inline`` (called first by ``Tracer.inline_call``: marked Python functions reached
as methods or through other paths that do not wrap the function object itself).

``error_on_graph_break`` while tracing: the tracer keeps a stack of flags (``eogb_stack``);
entering an ``error_on_graph_break(flag)`` context pushes, leaving it pops, and a graph break
raised while the innermost flag is True is an error (``graph_break.py`` decides).
"""
from __future__ import annotations

import itertools
import logging
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree
import torch.utils.checkpoint
from torch.utils.checkpoint import CheckpointPolicy, noop_context_fn

from .. import _C
from .._torch_compat import AUTOGRAD_FUNCTION_APPLY, autograd_function_of_apply
from ..guards.sources import AttrSource
from . import control_flow, hub, marks, rules
from .autograd_function import apply_target, check_function_class
from .calls import register_caller, register_context_value
from .exc import Unsupported
from .marks import mark, rule_of, torch_disabled, unmark  # noqa: F401  (tracing_rules.mark/unmark: the API)
from .values import (
    BoundMethodValue,
    ConstantValue,
    ContextExitValue,
    DictValue,
    FunctionValue,
    GradModeValue,
    ListValue,
    TupleValue,
    Value,
    real_object,
    register_real_object_field,
)

if TYPE_CHECKING:
    import contextlib

    from .tracer import Tracer


class ForbiddenInGraph(AssertionError):
    """A function marked with ``forbid_in_graph`` was reached while tracing."""


# type -> function(tx, obj, source, covered) -> Value | None: objects with a special meaning to
# the tracer (the function installs the guards it needs).
SPECIAL_TYPES: dict[type, Callable[[Tracer, Any, Any, bool], Value | None]] = {}

GRAPH_BREAK_REASON = "Call to `xcompile.graph_break()`"


@dataclass(eq=False)
class TracingApiValue(Value):
    """A callable the tracer treats by rule (see the module docstring), not by its body."""

    obj: Any
    rule: str
    source: Any = None
    covered: bool = False

    def python_type(self) -> type:
        return type(self.obj)

    def describe(self) -> str:
        return f"{self.rule} callable {_name(self.obj)}"


@dataclass(eq=False)
class ErrorOnGraphBreakValue(Value):
    """An ``error_on_graph_break(flag)`` context; ``obj`` is the real object when there is one."""

    flag: bool
    obj: Any = None
    source: Any = None
    covered: bool = False

    def describe(self) -> str:
        return f"error_on_graph_break({self.flag}) context"


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)


# -- hooks called by the interpreter -------------------------------------------------------------------
def wrap_special(tx: Tracer, obj: Any, source, covered: bool) -> Value | None:
    """A value for ``obj`` when it has a special meaning to the tracer, else None."""
    entry = marks.entry_of(obj)
    if entry is not None and entry[0] is obj:
        if source is not None and not covered:
            tx.guards.identity(source, obj)
        return TracingApiValue(obj, entry[1], source=source, covered=True)
    make = SPECIAL_TYPES.get(type(obj))
    if make is not None:
        return make(tx, obj, source, covered)
    return None


def before_inline(tx: Tracer, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value | None:
    """Called before a Python function is inlined: a result when a rule replaces inlining."""
    if not isinstance(fn, FunctionValue):
        return None
    f = fn.fn
    rule = rule_of(f)
    if rule is None:
        if f in _CONTEXT_METHODS:
            e = Unsupported(f"calling {_name(f)} of a context entered outside the traced code",
                            "The call runs eagerly.")
            e.never_an_error = True     # leaving an error_on_graph_break(True) region is not in it
            raise e
        return None
    return call_rule(tx, f, rule, args, kwargs)


def call_rule(tx: Tracer, obj: Any, rule: str, args: list[Value], kwargs: dict[str, Value]) -> Value:
    handler = RULE_CALLS.get(rule)
    if handler is None:
        raise Unsupported(f"calling {_name(obj)} ({rule})")
    return handler(tx, obj, args, kwargs)


# -- one function per rule --------------------------------------------------------------------------------
def _graph_break(tx, obj, args, kwargs) -> Value:
    msg = None
    if args and isinstance(args[0], ConstantValue):
        msg = args[0].value
    elif "msg" in kwargs and isinstance(kwargs["msg"], ConstantValue):
        msg = kwargs["msg"].value
    raise Unsupported(GRAPH_BREAK_REASON, "Remove the `xcompile.graph_break()` call.",
                      f"User-inserted graph break. Message: {msg or None}")


def _graph_node(nonstrict: bool):
    """One graph node calling the real function; its outputs (a pytree of tensors and
    constants) come back as the node's flat leaves and are rebuilt as values here."""
    def call(tx, obj, args, kwargs) -> Value:
        what = f"{_name(obj)} ({'nonstrict_trace' if nonstrict else 'allow_in_graph'})"
        spec: list = []

        def flat_call(*a, **k):
            leaves, tree = pytree.tree_flatten(obj(*a, **k))
            spec[:] = [tree]
            return tuple(leaves)

        flat_call.__name__ = flat_call.__qualname__ = f"{'nonstrict' if nonstrict else 'allowed'}_{_ident(obj)}"
        fm = tx.gb.fake_mode
        old = fm.allow_non_fake_inputs
        fm.allow_non_fake_inputs = True       # tensors the function reads besides its inputs
        try:
            flat = tx.gb.call("call_function", flat_call, args, kwargs, what=what)
        finally:
            fm.allow_non_fake_inputs = old
        leaves: list[Value] | None = list(flat.items) if isinstance(flat, TupleValue) else \
            [ConstantValue(c) for c in flat.value] if isinstance(flat, ConstantValue) else None
        if leaves is None or not spec:
            raise Unsupported(f"{what} returned something that is not a pytree of tensors and constants")
        return _unflatten(pytree.tree_unflatten(list(range(len(leaves))), spec[0]), leaves, what)
    return call


def _ident(obj: Any) -> str:
    return "".join(c if c.isalnum() else "_" for c in getattr(obj, "__name__", "fn"))


def _unflatten(struct: Any, leaves: list[Value], what: str) -> Value:
    if type(struct) is int:
        return leaves[struct]
    if type(struct) is list:
        return ListValue([_unflatten(s, leaves, what) for s in struct])
    if isinstance(struct, tuple):
        cls = type(struct) if hasattr(type(struct), "_fields") else tuple
        return TupleValue([_unflatten(s, leaves, what) for s in struct], cls=cls)
    if type(struct) is dict:
        return DictValue({k: _unflatten(s, leaves, what) for k, s in struct.items()})
    if struct is None:
        return ConstantValue(None)
    raise Unsupported(f"{what} returned a {type(struct).__name__}",
                      "Return tensors, constants, and lists/tuples/dicts of these.")


def _assume_constant(tx, obj, args, kwargs) -> Value:
    """``assume_constant_result``: the function runs at trace time (on constant arguments) and
    its result is a constant of the graph (transformers marks ``is_torch_available`` so)."""
    consts = [hub.as_constant(a) for a in [*args, *kwargs.values()]]
    if not all(ok for ok, _ in consts):
        raise Unsupported(f"{_name(obj)} is marked assume_constant_result but is called with "
                          "non-constant arguments")
    vals = [c for _, c in consts]
    result = obj(*vals[:len(args)], **dict(zip(kwargs, vals[len(args):])))
    if isinstance(result, torch.Tensor):
        raise Unsupported(f"{_name(obj)} is marked assume_constant_result but returned a tensor")
    return tx.wrap(result, None)


def _logging(tx, obj, args, kwargs) -> Value:
    raise Unsupported(f"call to logging function {obj.__module__}.{_name(obj)}",
                      "Log outside the compiled region, or accept the graph break.")


def _disallow(tx, obj, args, kwargs) -> Value:
    raise Unsupported(f"call to {_name(obj)}, marked with disallow_in_graph",
                      "Remove the disallow_in_graph mark to trace it.",
                      "The function is excluded from graphs: the call runs eagerly.")


def _torch_dynamo(tx, obj, args, kwargs) -> Value:
    """A function of torch._dynamo called in traced code (``marks._torch_dynamo_rule``)."""
    if obj.__name__ == "graph_break":
        raise Unsupported("Call to `torch._dynamo.graph_break()`", "Remove the call to trace through.",
                          "User-inserted graph break.")
    raise Unsupported(f"call to torch._dynamo.{obj.__name__} inside a compiled region",
                      "Call it before the compiled region.", "torch._dynamo's functions run eagerly.")


def _torch_compile_unwrap(tx, obj, args, kwargs) -> Value:
    """A function torch.compile wrapped for its own use (``marks._torch_compiled_optimizer_method``):
    the function it wraps, traced."""
    return hub.call_value(tx, tx.wrap(obj._torchdynamo_orig_callable, None, True), list(args), dict(kwargs))


def _forbid(tx, obj, args, kwargs) -> Value:
    raise ForbiddenInGraph(f"{_name(obj)} is marked with xcompile.forbid_in_graph and was reached while "
                           "tracing; call it outside the compiled region")


def _disable(tx, obj, args, kwargs) -> Value:
    if getattr(obj, "__code__", None) is marks.TORCH_DISABLE_DYNAMO_CODE:
        raise Unsupported(f"Skip calling {_name(obj)}, which torch marks with torch._disable_dynamo",
                          "It runs eagerly; call it outside the compiled region to avoid the graph break.",
                          "torch excludes this function from compilation.")
    if getattr(obj, "__dict__", {}).get("_torchdynamo_disable"):
        raise Unsupported(f"Skip calling `torch.compiler.disable()`d function {_name(obj)}",
                          "Remove the `torch.compiler.disable()` decorator to compile it.",
                          "The function runs eagerly; the functions it calls are still compiled.")
    raise Unsupported(f"Skip calling `xcompile.disable()`d function {_name(obj)}",
                      "Remove the `xcompile.disable()` call to compile it.",
                      "The function runs eagerly, and so does everything it calls.")


# checkpoint's own keywords (the rest go to the checkpointed function).
_CHECKPOINT_KWARGS = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop",
                      "preserve_rng_state")


def _checkpoint(tx, obj, args, kwargs) -> Value:
    """``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)``: ``fn(*args)`` traced
    inline, as torch.compile traces it, its ops tagged ``meta["recompute"]``: the AOT partitioner
    saves the region's inputs and recomputes the rest in the backward, as eager's checkpoint
    does (values and gradients do not change). Run eagerly at a graph break, torch's wrapper let the frames it calls be
    compiled, and the forward's compiled ``fn`` saved other tensors than its eager
    recomputation in the backward (CheckpointError). The reentrant form (its recomputation
    does not compare saved tensors) and a custom ``context_fn`` or ``debug`` still break: the call
    runs eagerly."""


    def const(name, default):
        v = kwargs.get(name)
        return default if v is None else real_object(tx.resolve(v))

    if (args and const("use_reentrant", None) is False and const("debug", False) is False
            and const("context_fn", noop_context_fn) is noop_context_fn):
        fn_kwargs = {k: v for k, v in kwargs.items() if k not in _CHECKPOINT_KWARGS}
        graph = tx.gb.graph
        before = set(graph.nodes)
        out = hub.call_value(tx, args[0], list(args[1:]), fn_kwargs)
        region = next(_CHECKPOINT_REGIONS)
        for n in graph.nodes:       # the region's ops: the AOT partitioner recomputes them in the backward
            if n not in before and n.op in ("call_function", "call_method", "call_module"):
                n.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
                n.meta["ac_graph_id"] = region
        return out
    return _disable(tx, obj, args, kwargs)


_CHECKPOINT_REGIONS = itertools.count()


def _skip(tx, obj, args, kwargs) -> Value:
    raise Unsupported(f"Skip calling {_name(obj)}, marked with `xcompile.disable(recursive=False)`",
                      "Remove the mark to inline it.",
                      "Its own frame runs eagerly; the frames it calls are compiled.")


def _mark_call(rule: str):
    """``allow_in_graph(fn)`` / ``nonstrict_trace(fn)`` called inside traced code: the marked
    callable for this call site only (no global registration at trace time)."""
    def call(tx, obj, args, kwargs) -> Value:
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{_name(obj)} with {len(args)} arguments inside a compiled region")
        target = args[0]
        real = getattr(target, "fn", None) if isinstance(target, FunctionValue) else None
        if real is None:
            real = real_object(target)
        if real is None or not callable(real):
            raise Unsupported(f"{_name(obj)} of {target.describe()} inside a compiled region")
        return TracingApiValue(real, rule)
    return call


def _autograd_function(tx, obj, args, kwargs) -> Value:
    """``MyFunction.apply(*args)``: one graph node calling it (autograd_function.py)."""
    cls = check_function_class(real_object(tx.resolve(args[0])) if args else None)
    return _apply_node(tx, cls, args[1:], kwargs)


def _autograd_function_bound(tx, obj, args, kwargs) -> Value:
    """The same where ``apply`` is C code (torch 2.14): ``obj`` is bound to the class."""
    return _apply_node(tx, check_function_class(obj.__self__), args, kwargs)


def _apply_node(tx, cls, args, kwargs) -> Value:
    return tx.gb.call("call_function", apply_target(cls), [tx.resolve(a) for a in args],
                      {k: tx.resolve(v) for k, v in kwargs.items()}, what=f"{cls.__name__}.apply")


def _builtin_method(tx, obj, source, covered) -> Value | None:
    """``MyFunction.apply`` where ``apply`` is C code (torch 2.14): a new bound method at each
    attribute read, so it is guarded through the class it is bound to, not by identity."""
    cls = autograd_function_of_apply(obj)
    if cls is None:
        return None
    if source is not None and not covered:
        tx.guards.identity(AttrSource(source, "__self__"), cls)
    return TracingApiValue(obj, "autograd_function_bound", source=source, covered=True)


def _eogb_factory(tx, obj, args, kwargs) -> Value:
    flag = args[0] if args else kwargs.get("error_on_graph_break")
    if not isinstance(flag, ConstantValue):
        raise Unsupported("error_on_graph_break() with a non-constant flag")
    return ErrorOnGraphBreakValue(bool(flag.value))


RULE_CALLS: dict[str, Callable[..., Value]] = {
    "graph_break": _graph_break,
    "constant": _assume_constant,
    "allow": _graph_node(nonstrict=False),
    "nonstrict": _graph_node(nonstrict=True),
    "disallow": _disallow,
    "torch_dynamo": _torch_dynamo,
    "torch_compile_unwrap": _torch_compile_unwrap,
    "logging": _logging,
    "forbid": _forbid,
    "disable": _disable,
    "checkpoint": _checkpoint,
    "autograd_function": _autograd_function,
    "autograd_function_bound": _autograd_function_bound,
    "cond": control_flow.cond,
    "while_loop": control_flow.while_loop,
    "skip": _skip,
    "mark_allow": _mark_call("allow"),
    "mark_nonstrict": _mark_call("nonstrict"),
    "eogb_factory": _eogb_factory,
}

# __enter__/__exit__ of context classes whose trace-time meaning is handled by value (entering
# or leaving one that was entered outside the trace is a graph break: it runs eagerly).
_CONTEXT_METHODS: set = set()


# -- error_on_graph_break while tracing --------------------------------------------------------------------
def eogb_stack(tx: Tracer) -> list[bool]:
    return tx.eogb_stack


def error_on_graph_break_now(tx: Tracer) -> bool:
    return eogb_stack(tx)[-1]


def _enter_eogb(tx, v: ErrorOnGraphBreakValue) -> None:
    eogb_stack(tx).append(v.flag)


def _exit_eogb(tx, v: ErrorOnGraphBreakValue) -> None:
    stack = eogb_stack(tx)
    if len(stack) > 1:
        stack.pop()


def _call_tracing_value(tx, v: TracingApiValue, args, kwargs) -> Value:
    return call_rule(tx, v.obj, v.rule, list(args), dict(kwargs))


def _call_eogb_value(tx, v: ErrorOnGraphBreakValue, args, kwargs) -> Value:
    raise Unsupported("using error_on_graph_break(...) as a decorator inside a compiled region",
                      "Decorate the function outside the compiled region.")


def _identity(make):
    def row(tx, obj, source, covered):
        if source is not None and not covered:
            tx.guards.identity(source, obj)
        return make(tx, obj, source)
    return row


def _bound_method(tx, m: types.MethodType, source, covered) -> ContextExitValue | None:
    """``no_grad().__exit__`` (and friends) of a context entered before this frame started, as
    the stack value a resume function receives inside a `with` block: leaving it is traced."""
    if m.__func__ not in _GRAD_EXITS:
        return None
    ctx = m.__self__
    prev = getattr(ctx, "prev", None)
    if not isinstance(prev, bool):
        return None
    if source is not None:
        tx.guards.identity(AttrSource(source, "__func__"), m.__func__)
        tx.guards.constant(AttrSource(AttrSource(source, "__self__"), "prev"), prev)
    enabled = torch.is_grad_enabled()
    v = ContextExitValue(GradModeValue(enabled, exit_to=prev))
    v.source = source          # a real, entered context: replacement code reloads it, never re-enters
    return v


def _held_exit(tx, holder, source, covered) -> Value | None:
    """A ``_C.ContextExit`` a runner hands to a resume function: the grad-mode exit it holds is
    traced like the bound method itself; leaving the block in the graph drops it from the holder
    (``Tracer.exited_holders``), so the runners' handlers do not exit the block a second time."""
    fn = holder.fn
    fn_src = AttrSource(source, "fn") if source is not None else None
    if source is not None:
        tx.guards.object_type(source, holder)
    if isinstance(fn, types.MethodType):
        v = _bound_method(tx, fn, fn_src, covered)
        if v is not None:
            v.source = source
            v.holder = True
            return v
    return tx.wrap(fn, fn_src)


_GRAD_EXITS = {torch.no_grad.__exit__, torch.enable_grad.__exit__, torch.set_grad_enabled.__exit__}


def _nested_function(tx, fn: types.FunctionType, source, covered) -> Value | None:
    """A function made inside another function (a closure, a lambda): a new object on every call
    of its maker, e.g. each time a broken frame hands it to its resume function. Guarded on its
    code, not its identity; its defaults and cells are guarded where they are read."""
    if fn.__closure__ is None and "<locals>" not in fn.__qualname__:
        return None
    if fn in rules.FOLD_AT_TRACE or fn in rules.FORBIDDEN or rules.is_torch_op(fn):
        return None
    if source is not None and not covered:
        tx.guards.object_type(source, fn)
        tx.guards.identity(AttrSource(source, "__code__"), fn.__code__)
    return FunctionValue(fn, source=source)


def _compiled_function(tx, cf, source) -> Value:
    """A function compiled with xcompile.compile, called inside a trace: its body is inlined
    (the outer trace's fullgraph/backend apply)."""
    fn_src = AttrSource(source, "fn") if source is not None else None
    fn_v = tx.wrap(cf.fn, fn_src)
    if cf.bound_self is not None:
        self_src = AttrSource(source, "bound_self") if source is not None else None
        fn_v = BoundMethodValue(fn_v, tx.wrap(cf.bound_self, self_src))
    return _rebuilt_as(fn_v, cf, source)


def _optimized_module(tx, om, source) -> Value:
    src = AttrSource(source, "_orig_mod") if source is not None else None
    return _rebuilt_as(tx.wrap(om._orig_mod, src), om, source)


def _rebuilt_as(v: Value, obj: Any, source) -> Value:
    """After a graph break the replacement code hands out ``obj`` itself (the compiled
    function, with its own settings), not the inner function the trace inlined."""
    v.rebuild_as = (obj, source)
    return v


def _register_interpreter_rows() -> None:
    register_caller(TracingApiValue, _call_tracing_value)
    register_caller(ErrorOnGraphBreakValue, _call_eogb_value)
    register_real_object_field(TracingApiValue, "obj")
    register_context_value(ErrorOnGraphBreakValue, _enter_eogb, _exit_eogb)
    SPECIAL_TYPES[_C.CompiledFunction] = _identity(_compiled_function)
    SPECIAL_TYPES[types.MethodType] = _bound_method
    SPECIAL_TYPES[types.FunctionType] = _nested_function
    SPECIAL_TYPES[_C.ContextExit] = _held_exit
    if AUTOGRAD_FUNCTION_APPLY is None:
        SPECIAL_TYPES[types.BuiltinMethodType] = _builtin_method


def register_optimized_module_class(cls: type) -> None:
    """``xcompile.compile(module)``'s result (api.OptimizedModule): traced as the module it wraps."""
    SPECIAL_TYPES[cls] = _identity(_optimized_module)


def register_eogb_class(cls: type[contextlib.AbstractContextManager]) -> None:
    """``error_on_graph_break(flag)`` objects: a context value when traced."""
    SPECIAL_TYPES[cls] = _identity(lambda tx, obj, source: ErrorOnGraphBreakValue(bool(obj.flag), obj,
                                                                               source=source))
    _CONTEXT_METHODS.update({cls.__enter__, cls.__exit__})


def _register_logging() -> None:
    names = ("debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log")
    for name in names:
        for owner in (logging.Logger, logging.LoggerAdapter, logging):
            fn = getattr(owner, name, None)
            if fn is not None:
                mark(fn, "logging")


_register_interpreter_rows()
_register_logging()
mark(torch.utils.checkpoint.checkpoint, "checkpoint")
if AUTOGRAD_FUNCTION_APPLY is not None:       # torch <= 2.13 (2.14: wrap_special finds it)
    mark(AUTOGRAD_FUNCTION_APPLY, "autograd_function")
mark(torch.cond, "cond")
if hasattr(torch, "while_loop"):
    mark(torch.while_loop, "while_loop")

__all__ = [
    "ErrorOnGraphBreakValue",
    "ForbiddenInGraph",
    "TracingApiValue",
    "before_inline",
    "eogb_stack",
    "error_on_graph_break_now",
    "mark",
    "rule_of",
    "unmark",
    "wrap_special",
]
