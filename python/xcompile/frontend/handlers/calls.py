"""Opcode handlers: calls and function creation."""
from __future__ import annotations

from typing import cast

from ...bytecode.instructions import Instr
from ..calls import call_value
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
    a, b = f.pop(), f.pop()                   # stack: [b, a, *args]
    if isinstance(b, NullValue):
        fn = a
    else:
        fn, args = b, [a, *args]
    kw = f.kw_names
    f.kw_names = ()
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
    if f.stack and isinstance(f.peek(), NullValue):
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
    flags = inst.oparg
    code_v = f.pop()
    closure: tuple[CellValue, ...] = ()
    kwdefaults: dict[str, Value] = {}
    defaults: tuple[Value, ...] = ()
    if flags & 0x08:
        cells = f.pop()
        closure = tuple(cast(list[CellValue], cells.items)) if isinstance(cells, TupleValue) else ()  # LOAD_CLOSUREs
    if flags & 0x04:
        f.pop()                                 # annotations: unused
    if flags & 0x02:
        kd = f.pop()
        kwdefaults = {k: f.tx.resolve(v) for k, v in kd.items.items()} if isinstance(kd, DictValue) else {}
    if flags & 0x01:
        d = f.pop()
        defaults = tuple(items_of(f.tx, d))
    if not isinstance(code_v, ConstantValue):
        raise Unsupported("MAKE_FUNCTION without a code constant")
    f.push(NestedFunctionValue(code_v.value, f.globals, defaults, kwdefaults, closure))
