"""Forward hooks registered and removed inside the traced code (output-capturing decorators).

    h = module.register_forward_hook(fn)        # or register_forward_pre_hook
    out = module(x)                             # fn runs around forward, inlined
    h.remove()

The registration is kept by the tracer (``Tracer.frame_hooks``, per module, in order), never
written to the real module: calls of the module later in the trace run the real hooks first and
then these, as ``Module._call_impl`` would, and ``h.remove()`` drops it again.  Nothing reaches
the real module, so there is nothing to guard or replay, and the next call traces nothing new
(a hook made in the frame is a new function object every call).

A hook still registered where the trace ends (a graph break, or the frame returns with it
installed) must be registered for real: the trace then stops at the top-frame instruction
that registered it (``pending_stop``), which runs eagerly, and the hook lives on in the module
as in eager.  ``RemovableHandle.next_id`` does not advance for a hook kept by the tracer.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.utils.hooks import RemovableHandle

from . import attrs, builtins_rules, hub, marks, tracing_rules
from .exc import Unsupported
from .values import BuiltinValue, ConstantValue, ModuleValue, PartialValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer

_IDS = itertools.count(1)


@dataclass
class FrameHook:
    hook: Value
    pre: bool
    with_kwargs: bool
    where: tuple[int, int] | None            # (steps, index) of the top frame at registration
    hid: int = field(default_factory=lambda: next(_IDS))


@dataclass(eq=False)
class HookHandleValue(Value):
    """The RemovableHandle of a hook the tracer keeps."""

    module: Any
    entry: FrameHook

    def python_type(self) -> type:
        return RemovableHandle

    def describe(self) -> str:
        return "hook handle made in the compiled frame"


def hooks_of(tx: "Tracer", m: torch.nn.Module, pre: bool) -> list[FrameHook]:
    return [h for h in tx.frame_hooks.get(id(m), ()) if h.pre == pre]


def has_frame_hooks(tx: "Tracer", m: torch.nn.Module) -> bool:
    return bool(tx.frame_hooks.get(id(m)))


def _register(pre: bool):
    def call(tx: "Tracer", obj, args: list[Value], kwargs: dict[str, Value]) -> Value:
        if len(args) != 2 or not isinstance(args[0], ModuleValue):
            raise Unsupported("register_forward_hook with unexpected arguments")
        opts = {}
        for k, v in kwargs.items():
            if not isinstance(v, ConstantValue):
                raise Unsupported(f"register_forward_hook({k}=...) with a non-constant value")
            opts[k] = v.value
        if opts.get("prepend") or opts.get("always_call"):
            raise Unsupported("register_forward_hook(prepend=True / always_call=True) inside a compiled region")
        unknown = set(opts) - {"prepend", "with_kwargs", "always_call"}
        if unknown:
            raise Unsupported(f"register_forward_hook with options {sorted(unknown)}")
        m = args[0].module
        entry = FrameHook(args[1], pre, bool(opts.get("with_kwargs")), tx.top_step)
        tx.frame_hooks.setdefault(id(m), []).append(entry)
        tx.frame_hook_modules[id(m)] = m           # kept alive while the trace runs
        return HookHandleValue(m, entry)
    return call


def _remove(tx: "Tracer", args: list[Value], kwargs: dict[str, Value]) -> Value:
    h = cast(HookHandleValue, args[0])            # bound by handle_attr
    lst = tx.frame_hooks.get(id(h.module), [])
    if h.entry in lst:
        lst.remove(h.entry)
    return ConstantValue(None)


def handle_attr(tx: "Tracer", v: HookHandleValue, name: str) -> Value:
    if name == "remove":
        return PartialValue(BuiltinValue(_remove), [v], {})
    if name == "id":
        return ConstantValue(v.entry.hid)
    raise Unsupported(f"attribute {name!r} of a hook handle made in the compiled frame")


def pending_stop(tx: "Tracer") -> tuple[int, int] | None:
    """Where to stop the trace instead, when a hook the tracer keeps is still registered."""
    pending = [h for hs in tx.frame_hooks.values() for h in hs]
    if not pending:
        return None
    where = [h.where for h in pending if h.where is not None]
    return min(where) if where else (0, 0)


def _install() -> None:
    attrs.register_reader(HookHandleValue, handle_attr)
    builtins_rules.BUILTINS[_remove] = _remove
    tracing_rules.RULE_CALLS["frame_hook"] = _register(pre=False)
    tracing_rules.RULE_CALLS["frame_pre_hook"] = _register(pre=True)
    marks.mark(torch.nn.Module.register_forward_hook, "frame_hook")
    marks.mark(torch.nn.Module.register_forward_pre_hook, "frame_pre_hook")


_install()

__all__ = ["HookHandleValue", "has_frame_hooks", "hooks_of", "pending_stop"]

hub.register(
    has_frame_hooks=has_frame_hooks, hooks_of=hooks_of,
)
