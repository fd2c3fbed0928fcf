"""Opcode handlers: calls and function creation."""
from __future__ import annotations

import sys
from typing import cast

from ...bytecode.instructions import Instr
from ...bytecode.versions import facts_for
from ..calls import call_value, split_callable
from ..exc import Unsupported
from ..iteration import items_of
from ..tracer import Frame, handler
from ..values import (
    BuiltinValue,
    CellValue,
    ClassValue,
    ConstantValue,
    ContextExitValue,
    DictValue,
    NestedFunctionValue,
    NullValue,
    SuperValue,
    TupleValue,
    Value,
)

_FACTS = facts_for(sys.version_info[:2])


def _call(f: Frame, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> None:
    if isinstance(fn, ClassValue) and fn.cls is super:
        f.push(_super(f, args))
        return
    if isinstance(fn, BuiltinValue) and fn.fn is locals and not args and not kwargs:
        f.push(_locals(f))
        return
    if isinstance(fn, ContextExitValue) and fn.ctx in f.ctx_stack:
        f.ctx_stack.remove(fn.ctx)               # leaving the `with` block
    f.push(call_value(f.tx, fn, args, kwargs))


def _locals(f: Frame) -> Value:
    """``locals()`` in a function: a new dict of the bound local and cell variables, by the
    user's names (run at a graph break it would see the runner's own locals instead)."""
    items: dict[str, Value] = {}
    code = f.code
    for name in (*code.co_varnames, *code.co_cellvars, *code.co_freevars):
        if name in items or name.startswith(("___", "__xc", "__stack")):   # resume-code slots
            continue
        v = f.locals.get(name)
        if v is None and name in f.cells:
            v = f.cells[name].contents
        if v is not None and not isinstance(v, NullValue):
            items[name] = v
    return DictValue(items)


def _super(f: Frame, args: list[Value]) -> Value:
    if len(args) == 2:
        if not isinstance(args[0], ClassValue):
            raise Unsupported("super() with a non-class first argument")
        return SuperValue(args[0].cls, args[1])
    if args:
        raise Unsupported("super() with one argument")
    cell = f.cells.get("__class__")
    if cell is None or cell.contents is None:
        raise Unsupported("super(): no __class__ cell", "The same code raises RuntimeError in eager mode.")
    cls_v = f.tx.resolve(cell.contents)
    first = f.code.co_varnames[0] if f.code.co_argcount else None
    self_v = f.locals.get(first) if first else None
    if self_v is None and first in f.cells:
        self_v = f.cells[first].contents
    if self_v is None or not isinstance(cls_v, ClassValue):
        raise Unsupported("super(): cannot find the class or the first argument")
    return SuperValue(cls_v.cls, f.tx.resolve(self_v))


@handler("KW_NAMES")
def kw_names(f: Frame, inst: Instr) -> None:
    f.kw_names = tuple(inst.argval)


@handler("CALL")
def call(f: Frame, inst: Instr) -> None:
    argc = inst.oparg
    args = f.popn(argc)
    kw = f.kw_names
    f.kw_names = ()
    _call_popped(f, args, kw)


@handler("CALL_KW")
def call_kw(f: Frame, inst: Instr) -> None:
    """3.13: [callable, self_or_null, *args, kwnames]; the last len(kwnames) args are keywords."""
    names = f.pop()
    if not isinstance(names, ConstantValue):
        raise Unsupported("CALL_KW without a constant tuple of keyword names")
    _call_popped(f, f.popn(inst.oparg), tuple(names.value))


def _call_popped(f: Frame, args: list[Value], kw: tuple) -> None:
    a, b = f.pop(), f.pop()
    fn, args = split_callable(b, a, args)
    kwargs = {}
    if kw:
        kwargs = dict(zip(kw, args[-len(kw):]))
        args = args[:-len(kw)]
    _call(f, fn, args, kwargs)


@handler("CALL_FUNCTION_EX")
def call_function_ex(f: Frame, inst: Instr) -> None:
    kwargs_v = f.pop() if inst.oparg & 1 else None
    args_v = f.pop()
    fn = f.pop()
    if _FACTS.null_above_callable:               # 3.13: [callable, NULL, args, kwargs?]
        if isinstance(fn, NullValue):
            fn = f.pop()
    elif f.stack and isinstance(f.peek(), NullValue):
        f.pop()
    args = items_of(f.tx, args_v)
    kwargs: dict[str, Value] = {}
    if kwargs_v is not None:
        if not isinstance(kwargs_v, DictValue):
            raise Unsupported(f"**kwargs from {kwargs_v.describe()}")
        kwargs = {k: f.tx.resolve(v) for k, v in kwargs_v.items.items()}
    _call(f, fn, args, kwargs)


@handler("MAKE_FUNCTION")
def make_function(f: Frame, inst: Instr) -> None:
    flags = inst.oparg if _FACTS.make_function_flags else 0   # 3.13: SET_FUNCTION_ATTRIBUTE
    code_v = f.pop()
    closure: tuple[CellValue, ...] = ()
    kwdefaults: dict[str, Value] = {}
    defaults: tuple[Value, ...] = ()
    if flags & 0x08:
        closure = _closure(f.pop())
    if flags & 0x04:
        f.pop()                                 # annotations: unused
    if flags & 0x02:
        kwdefaults = _kwdefaults(f, f.pop())
    if flags & 0x01:
        defaults = tuple(items_of(f.tx, f.pop()))
    if not isinstance(code_v, ConstantValue):
        raise Unsupported("MAKE_FUNCTION without a code constant")
    f.push(NestedFunctionValue(code_v.value, f.globals, defaults, kwdefaults, closure))


def _closure(cells: Value) -> tuple[CellValue, ...]:
    return tuple(cast(list[CellValue], cells.items)) if isinstance(cells, TupleValue) else ()  # LOAD_CLOSUREs


def _kwdefaults(f: Frame, kd: Value) -> dict[str, Value]:
    return {k: f.tx.resolve(v) for k, v in kd.items.items()} if isinstance(kd, DictValue) else {}


@handler("SET_FUNCTION_ATTRIBUTE")
def set_function_attribute(f: Frame, inst: Instr) -> None:
    """3.13: [value, function] -> [function] with one of MAKE_FUNCTION's former flag values set."""
    fn = f.pop()
    value = f.pop()
    if not isinstance(fn, NestedFunctionValue):
        raise Unsupported(f"SET_FUNCTION_ATTRIBUTE on {fn.describe()}")
    flag = inst.oparg
    if flag == 0x08:
        fn.closure = _closure(value)            # (the value MAKE_FUNCTION made just before)
    elif flag == 0x02:
        fn.kwdefaults = _kwdefaults(f, value)
    elif flag == 0x01:
        fn.defaults = tuple(items_of(f.tx, value))
    elif flag not in (0x04, 0x10):              # annotations, 3.13's annotate: unused
        raise Unsupported(f"SET_FUNCTION_ATTRIBUTE {flag}")
    f.push(fn)
