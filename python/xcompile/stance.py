"""``xcompile.set_stance``: what compiled functions do now, as ``torch.compiler.set_stance``.

    "default"                 compile as usual (``force_backend``: with that backend instead)
    "force_eager"             run every compiled function's original code: no entry is run,
                              none is made (a C++ flag read once per call, _C.set_force_eager)
    "eager_on_recompile"      run the entries compiled so far; a call that would compile runs
                              eagerly instead (torch's "run" mode: also a first compile)
    "fail_on_recompile"       a call that would compile raises RecompileError naming the code
                              and the guard that failed
    "eager_then_compile"      a code's first call runs eagerly, later calls compile
    "aot_eager_then_compile"  a code's first call compiles with aot_eager, later ones as usual

It is a function (sets the stance now), a context manager (sets it for the block, then puts
the previous one back) and a decorator (sets it while the function runs). The stance is
process-wide, as torch's. ``skip_guard_eval_unsafe`` is accepted and ignored: guards are
always evaluated (cheap here, and never unsafe).
"""
from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import _C
from .exc import RecompileError

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
           "aot_eager_then_compile")


@dataclass(frozen=True)
class Stance:
    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: Any = None


_current = Stance()
_seen_once: dict[types.CodeType, int] = {}           # eager_then_compile: codes that ran eagerly once
_forced: dict[tuple, Any] = {}                        # (backend, options) -> ConvertFrame


def current() -> Stance:
    return _current


def _set(s: Stance) -> Stance:
    global _current
    prev, _current = _current, s
    _C.set_force_eager(s.stance == "force_eager")
    return prev


class set_stance:   # (torch's name; a class: a context manager and a decorator too)
    """Set the compiler's stance; see the module docstring."""

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend: str | Callable | None = None) -> None:
        if stance not in STANCES:
            raise RuntimeError(f"invalid torch.compile stance {stance!r}: expected one of {', '.join(STANCES)}")
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        self.stance = Stance(stance, skip_guard_eval_unsafe, force_backend)
        self.prev = _set(self.stance)

    def __call__(self, fn: Callable) -> Callable:
        _set(self.prev)                              # a decorator: not in force until fn runs

        @functools.wraps(fn)
        def with_stance(*args: Any, **kwargs: Any) -> Any:
            prev = _set(self.stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _set(prev)
        return with_stance

    def __enter__(self) -> None:
        _set(self.stance)

    def __exit__(self, *exc: Any) -> None:
        _set(self.prev)


def intercept(convert, code, f_locals, f_globals, f_builtins, closure) -> tuple[bool, Any]:
    """Called by ConvertFrame on a cache miss: (True, answer) when the stance decides the call
    (None: run the frame eagerly), else (False, None) to compile as usual."""
    s = _current.stance
    if s == "default":
        if _current.backend is None:
            return False, None
        cb = _forced_callback(convert)
        # its entries belong to the forced backend: the C++ lookup (the caller's backend) skips them
        hit = cb._added_meanwhile(code, 0, f_locals, f_globals, f_builtins, closure)
        return True, hit if hit is not None else cb(code, f_locals, f_globals, f_builtins, closure)
    if s == "eager_on_recompile":
        return True, None
    if s == "fail_on_recompile":
        if not any(isinstance(v, torch.Tensor) for v in f_locals.values()):
            return True, None
        message = ("Detected recompile when torch.compile stance is 'fail_on_recompile'. "
                   f"filename: '{code.co_filename}', function name: '{code.co_name}', "
                   f"line number: {code.co_firstlineno}")
        entries = [e for e in _C.cache_entries(code) if convert._owns(e)]
        reason = entries[0].guard.last_failure() if entries else None
        if reason:
            message += f"\n    triggered by the following guard failure(s):\n    - {reason}"
        raise RecompileError(message)
    if s in ("eager_then_compile", "aot_eager_then_compile"):
        n = _seen_once.get(code, 0)
        _seen_once[code] = n + 1
        if n == 0:
            if s == "eager_then_compile":
                return True, None
            first = type(convert)("aot_eager", fullgraph=convert.fullgraph, dynamic=convert.dynamic)
            first.ignores_stance = True
            return True, first(code, f_locals, f_globals, f_builtins, closure)
        return False, None
    return True, None                                    # force_eager (the C++ flag already ran it)


def _forced_callback(convert) -> Any:
    key = (_current.backend, convert.fullgraph, convert.dynamic)
    cb = _forced.get(key)
    if cb is None:
        cb = _forced[key] = type(convert)(_current.backend, fullgraph=convert.fullgraph, dynamic=convert.dynamic)
        cb.ignores_stance = True
    return cb


def reset() -> None:
    _seen_once.clear()
    _forced.clear()


__all__ = ["RecompileError", "STANCES", "set_stance"]
