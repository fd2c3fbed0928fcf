"""``MyFunction.apply(...)`` of a ``torch.autograd.Function`` subclass inside traced code: one
graph node calling ``MyFunction.apply`` itself.

Its example value comes from running ``apply`` on the trace's fake tensors (the user's
``forward`` runs on fakes); the eager backend then calls ``apply`` as eager does, and the AOT
backends trace through it with ``make_fx``: the forward's ops land in the forward graph, and
the user's ``backward`` (called by autograd during the joint trace) in the backward graph. So
a custom backward is honoured in ``aot_eager`` and ``inductor``, in one graph with its
neighbours, as torch.compile compiles it.

That is right only when ``forward``, ``setup_context`` and ``backward`` compute on their
arguments and nothing else: they run once at trace time, not per call. A Function whose code
may touch outside state (a global or closed-over list, dict or object, ``print``, an attribute
stored on anything but ``ctx``) or writes its inputs (``ctx.mark_dirty``) is a graph break with
that reason, and runs eagerly.
"""
from __future__ import annotations

import builtins
import os
import re
import types
from typing import Any

import torch

from ..bytecode.instructions import decode
from .exc import Unsupported

# names whose call or use means outside effects
_EFFECT_NAMES = frozenset(("print", "open", "input", "exec", "eval", "setattr", "delattr", "globals",
                           "mark_dirty", "breakpoint", "__import__"))
_PURE_KINDS = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, int, float, bool,
               str, bytes, type(None), torch.dtype, torch.device, types.MethodType, staticmethod,
               classmethod, property)


def effects_of(cls: type) -> str | None:
    """Why ``cls``'s forward/setup_context/backward may have effects a one-time trace would not
    repeat (None: it computes on its arguments only)."""
    for name in ("forward", "setup_context", "backward", "jvp", "vmap"):
        fn = cls.__dict__.get(name)
        if fn is None:
            for base in cls.__mro__[1:]:
                if base is torch.autograd.Function or base.__module__.startswith("torch."):
                    break
                fn = base.__dict__.get(name)
                if fn is not None:
                    break
        fn = getattr(fn, "__func__", fn)
        while isinstance(fn, types.FunctionType) and _torch_code(fn) and hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__                    # torch's decorators (once_differentiable): the user's code
        if fn is None or not isinstance(fn, types.FunctionType) or _torch_code(fn):
            continue
        why = _code_effects(fn)
        if why is not None:
            return f"{cls.__name__}.{name} {why}"
    return None


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _torch_code(fn: types.FunctionType) -> bool:
    return fn.__code__.co_filename.startswith(_TORCH_DIR)


def _code_effects(fn: types.FunctionType) -> str | None:
    code = fn.__code__
    ctx = code.co_varnames[0] if code.co_argcount else None
    instrs = decode(code)     # (3.13's LOAD_FAST_LOAD_FAST read as two LOAD_FASTs)
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    for i, ins in enumerate(instrs):
        op = ins.opname
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF", "IMPORT_NAME"):
            return f"uses {op} {ins.argval}"
        if op in ("STORE_ATTR", "DELETE_ATTR"):
            prev = instrs[i - 1] if i else None
            if not (prev is not None and prev.opname == "LOAD_FAST" and prev.argval == ctx):
                return f"stores attribute {ins.argval!r} on something other than ctx"
        if op in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD") and ins.argval in _EFFECT_NAMES:
            return f"calls {ins.argval}"
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            glob = fn.__globals__.get(ins.argval, getattr(builtins, str(ins.argval), None))
            if not isinstance(glob, _PURE_KINDS):
                return f"reads the global {ins.argval!r} ({type(glob).__name__}), which may change between calls"
        if op in ("LOAD_DEREF", "LOAD_CLOSURE") and ins.argval in cells:
            try:
                cell: Any = cells[ins.argval].cell_contents
            except ValueError:
                continue
            if not isinstance(cell, _PURE_KINDS):
                return f"reads the closed-over {ins.argval!r} ({type(cell).__name__}), which may change"
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            return "defines a nested function"
    return None


def check_function_class(cls: Any) -> type:
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        raise Unsupported(f"torch.autograd.Function.apply on {cls!r}")
    why = effects_of(cls)
    if why is not None:
        raise Unsupported(f"torch.autograd.Function {why}",
                          "Keep forward/backward free of outside effects to compile them in the graph.",
                          "The call runs eagerly, with its effects, each time.")
    return cls


def apply_target(cls: type) -> Any:
    """A graph node's target calling ``cls.apply`` (FX names a function by its own name; a bound
    classmethod would print as ``torch.autograd.function.apply``)."""
    def apply(*args, **kwargs):
        return cls.apply(*args, **kwargs)
    name = re.sub(r"\W+", "_", f"{cls.__name__}_apply")
    apply.__name__ = apply.__qualname__ = name
    return apply
