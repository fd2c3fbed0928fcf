"""The registry of marked objects: which tracing rule applies to a callable (the table of rules
is in ``tracing_rules.py``). ``xcompile.allow_in_graph``, ``disallow_in_graph``,
``forbid_in_graph``, ``nonstrict_trace``, ``graph_break`` and the frame hooks mark objects here;
``rule_of`` also reads the marks torch and the ``disable`` decorators leave on functions."""
from __future__ import annotations

import types
from typing import Any

import torch
import torch._higher_order_ops

from .. import _C
from ..code_states import NONRECURSIVE_SKIPS, SKIP, SKIP_ALL

# id(obj) -> (obj, rule); the object is kept alive by the entry.
_RULES: dict[int, tuple[Any, str]] = {}


def mark(obj: Any, rule: str) -> None:
    _RULES[id(obj)] = (obj, rule)


def unmark(obj: Any) -> None:
    _RULES.pop(id(obj), None)


def rule_of(obj: Any) -> str | None:
    entry = _RULES.get(id(obj))
    if entry is not None and entry[0] is obj:
        return entry[1]
    if isinstance(obj, types.FunctionType):
        if obj.__dict__.get("_xcompile_disable"):
            return "disable"
        if obj.__dict__.get("_torchdynamo_disable"):      # @torch.compiler.disable in model code
            if _torch_compiled_optimizer_method(obj):
                return "torch_compile_unwrap"
            _skip_torch_disabled(obj)
            return "disable"
        if obj.__code__ in NONRECURSIVE_SKIPS:
            return "skip"
        if obj.__dict__.get("_dynamo_marked_constant"):  # assume_constant_result (ours or torch's)
            return "constant"
        if obj.__code__ is TORCH_DISABLE_DYNAMO_CODE:   # @torch._disable_dynamo (Optimizer.zero_grad)
            return "disable"
        if (obj.__module__ or "").startswith("torch._dynamo") and obj.__name__ != "is_compiling":
            return _torch_dynamo_rule(obj)
    return None


def _torch_compiled_optimizer_method(fn: types.FunctionType) -> bool:
    """An optimizer's ``_init_group`` that torch.compile wrapped (once it compiled a step of that
    class: torch._dynamo runs it eagerly at trace time, and puts a disabled wrapper on the class
    for good), or a ``torch.optim.<opt>._fused_<opt>`` that torch._dynamo disabled in every
    optimizer module the first time torch.compile ran in the process ("don't trace into fused
    optimizer"). Not the user's mark: traced as the function it wraps."""
    orig = fn.__dict__.get("_torchdynamo_orig_callable")
    return isinstance(orig, types.FunctionType) and \
        (orig.__name__ == "_init_group" or orig.__name__.startswith("_fused_")) and \
        (orig.__module__ or "").startswith("torch.optim.")


def _torch_dynamo_rule(fn: types.FunctionType) -> str:
    """torch._dynamo's own functions called in traced code (torch.optim's step calls
    ``torch._dynamo.graph_break()``; model code calls ``mark_dynamic`` and friends): its
    ``graph_break`` is a graph break, as under torch.compile; anything else runs eagerly at a
    graph break (``tracing_rules._torch_dynamo``). They were graph nodes calling the function: a
    graph_break() that did not break, torch._dynamo.reset() inside a graph."""
    return "torch_dynamo"


# torch's higher-order ops: run eagerly (at a graph break) they compile their branches with
# torch.compile, importing and running torch's compile stack; no frame of that may be ours.
_HOP_ENTRIES = tuple(f for f in (getattr(torch, "cond", None),
                                 *(getattr(torch._higher_order_ops, n, None)
                                   for n in ("while_loop", "map", "scan", "associative_scan")))
                     if f is not None)


def _skip_all_hops() -> None:
    """Run eagerly (a frame that falls back, a graph break), a higher-order op compiles its
    functions with torch.compile: its frames, and every frame below them, are never xcompile's
    (the eval-frame hook then leaves the thread's callback unset: code state SKIP_ALL)."""
    codes = [f.__code__ for f in _HOP_ENTRIES]
    for name in ("cond", "while_loop"):
        op = getattr(torch.ops.higher_order, name, None)
        call = getattr(type(op), "__call__", None)
        if isinstance(call, types.FunctionType):
            codes.append(call.__code__)
    for code in codes:
        _C.set_code_state(code, SKIP_ALL)


def torch_disabled(obj: Any) -> bool:
    """A function torch runs with compilation off for all it calls (``torch._disable_dynamo``,
    ``torch.compiler.disable`` with recursive=True, a higher-order op run eagerly)."""
    if not isinstance(obj, types.FunctionType):
        return False
    if obj.__code__ is TORCH_DISABLE_DYNAMO_CODE or any(obj is f for f in _HOP_ENTRIES):
        return True
    return bool(obj.__dict__.get("_torchdynamo_disable")) and \
        obj.__dict__.get("_torchdynamo_disable_recursive", True) is not False


def _skip_torch_disabled(fn) -> None:
    """The function under torch.compiler.disable runs eagerly at its graph break; its own frame
    is then not compiled either (at the break, the frames it calls are not compiled either:
    graph_break.py calls it through _C.untraced, unless torch marked it non-recursive)."""
    orig = getattr(fn, "_torchdynamo_orig_callable", None)
    code = getattr(getattr(orig, "__func__", orig), "__code__", None)
    if isinstance(code, types.CodeType):
        _C.set_code_state(code, SKIP)


# The wrapper torch._disable_dynamo puts around torch's own functions (no torch._dynamo import).
TORCH_DISABLE_DYNAMO_CODE = torch._disable_dynamo(lambda: None).__code__




def entry_of(obj: Any) -> tuple[Any, str] | None:
    """The (object, rule) row under ``id(obj)`` (it may belong to a dead object whose id was
    reused: compare the object)."""
    return _RULES.get(id(obj))


_skip_all_hops()
