"""Python exceptions raised and caught inside the traced frames.

The traced code raises a ``PythonError`` (``frontend/exc.py``) wherever eager would raise: a
``raise`` statement, a failing constant operation, a missing key or attribute.  ``Frame.step``
hands it to ``handle_exception``, which does what CPython's unwinder does with the code's
exception table: find the handler covering the raising instruction, cut the value stack to the
handler's depth, push the offset (``lasti`` rows) and the exception, and jump.  No handler: the
error leaves the frame (an inlined callee's error is then raised at the caller's CALL, which may
have a handler of its own).

The opcodes that only run while an exception is handled live here too:

    PUSH_EXC_INFO      save the exception being handled, make this one current
    POP_EXCEPT         restore the saved one
    CHECK_EXC_MATCH    ``except SomeError:``
    RERAISE            re-raise the exception on the stack (end of ``finally`` / unmatched except)
    WITH_EXCEPT_START  call the ``with`` block's exit with the exception (it may suppress it)
    RAISE_VARARGS      ``raise``, ``raise exc``, ``raise exc from cause``

Exceptions are ``UserObjectValue``s around real exception objects made at trace time (their
arguments must be constants); ``isinstance``, ``e.args``, ``str(e)`` read the real object.
"""
from __future__ import annotations

import bisect
import functools
import types
from typing import TYPE_CHECKING

from ..bytecode.instr import parse_exception_table
from ..bytecode.instructions import Instr
from ..release import clear_on_reset
from . import hub
from .exc import PythonError, Unsupported
from .tracer import Frame, handler
from .values import ClassValue, ConstantValue, ContextExitValue, TupleValue, UserObjectValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer


# -- the exception table ----------------------------------------------------------------------------
@clear_on_reset
@functools.lru_cache(maxsize=1024)
def _table(code: types.CodeType) -> tuple[list[int], list[tuple[int, int, int, int, bool]]]:
    rows = sorted(parse_exception_table(code))
    return [r[0] for r in rows], rows


def _handler_for(code: types.CodeType, offset: int) -> tuple[int, int, bool] | None:
    """(target offset, stack depth, push lasti) of the entry covering ``offset``, or None."""
    starts, rows = _table(code)
    i = bisect.bisect_right(starts, offset) - 1
    if i >= 0:
        start, end, target, depth, lasti = rows[i]
        if start <= offset < end:
            return target, depth, lasti
    return None


def _index_at(f: Frame, offset: int) -> int:
    for ins in f.instrs:                       # handlers are rare: a scan is fine
        if ins.offset >= offset:
            return ins.index
    raise AssertionError(f"no instruction at offset {offset}")


def handle_exception(f: Frame, inst: Instr, err: PythonError) -> bool:
    """Unwind ``f`` to the handler covering ``inst``; False when there is none."""
    entry = _handler_for(f.code, inst.offset)
    if entry is None:
        return False
    target, depth, lasti = entry
    if depth > len(f.stack):                   # pragma: no cover - the table and our stack disagree
        raise Unsupported(f"exception table expects {depth} stack values, the trace has {len(f.stack)}")
    del f.stack[depth:]
    if lasti:
        f.stack.append(ConstantValue(inst.offset))
    f.stack.append(err.value)
    f.jump(_index_at(f, target))
    return True


# -- making and matching exception values -------------------------------------------------------------
def exception_class(v: Value) -> type | None:
    cls = getattr(v, "cls", None) if isinstance(v, ClassValue) else None
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


def real_exception(v: Value) -> BaseException | None:
    obj = v.obj if isinstance(v, UserObjectValue) else None
    return obj if isinstance(obj, BaseException) else None


def make_exception(tx: "Tracer", v: Value) -> Value:
    """The value ``raise v`` raises: an instance, or a class called with no arguments."""
    if real_exception(v) is not None:
        return v
    cls = exception_class(v)
    if cls is not None:
        inst = hub.call_value(tx, v, [], {})
        if real_exception(inst) is not None:
            return inst
    raise Unsupported(f"raise of {v.describe()}", "exceptions must derive from BaseException")


def _classes(v: Value) -> tuple[type, ...]:
    cls = exception_class(v)
    if cls is not None:
        return (cls,)
    if isinstance(v, TupleValue):
        return tuple(c for item in v.items for c in _classes(item))
    raise Unsupported(f"except clause with {v.describe()}",
                      "catching classes that do not inherit from BaseException is not allowed")


def _current(tx: "Tracer") -> Value:
    return getattr(tx, "handled_exception", None) or ConstantValue(None)


# -- opcodes ----------------------------------------------------------------------------------------------
@handler("RAISE_VARARGS")
def raise_varargs(f: Frame, inst: Instr) -> None:
    if inst.arg == 0:
        cur = _current(f.tx)
        if real_exception(cur) is None:
            raise Unsupported("bare `raise` with no exception being handled",
                              "The same code raises RuntimeError in eager mode.")
        raise PythonError(cur)
    cause = f.pop() if inst.arg == 2 else None
    exc = make_exception(f.tx, f.pop())
    if cause is not None:
        real = real_exception(exc)
        assert real is not None                 # make_exception returns an exception or raises
        if isinstance(cause, ConstantValue) and cause.value is None:
            real.__cause__ = None
            real.__suppress_context__ = True
        else:
            c = make_exception(f.tx, cause)
            real.__cause__ = real_exception(c)
            real.__suppress_context__ = True
    raise PythonError(exc)


@handler("PUSH_EXC_INFO")
def push_exc_info(f: Frame, inst: Instr) -> None:
    value = f.pop()
    f.stack.append(_current(f.tx))
    f.tx.handled_exception = value
    f.stack.append(value)


@handler("POP_EXCEPT")
def pop_except(f: Frame, inst: Instr) -> None:
    prev = f.pop()
    f.tx.handled_exception = None if isinstance(prev, ConstantValue) and prev.value is None else prev


@handler("CHECK_EXC_MATCH")
def check_exc_match(f: Frame, inst: Instr) -> None:
    classes = _classes(f.pop())
    exc = real_exception(f.peek())
    f.push(ConstantValue(exc is not None and isinstance(exc, classes)))


@handler("RERAISE")
def reraise(f: Frame, inst: Instr) -> None:
    exc = f.pop()
    if real_exception(exc) is None:
        raise Unsupported(f"re-raising {exc.describe()}")
    raise PythonError(exc)


@handler("WITH_EXCEPT_START")
def with_except_start(f: Frame, inst: Instr) -> None:
    """Stack: [..., exit, lasti, prev_exc, exc] -> [..., exit, lasti, prev_exc, exc, exit(type, exc, tb)]."""
    exc = f.peek(1)
    exit_fn = f.peek(4)
    if isinstance(exit_fn, ContextExitValue) and exit_fn.ctx in f.ctx_stack:
        f.ctx_stack.remove(exit_fn.ctx)        # leaving the `with` block
    real = real_exception(exc)
    args = [ClassValue(type(real)) if real is not None else ConstantValue(None), exc, ConstantValue(None)]
    f.push(hub.call_value(f.tx, exit_fn, args, {}))

hub.register(
    handle_exception=handle_exception, make_exception=make_exception, real_exception=real_exception,
)
