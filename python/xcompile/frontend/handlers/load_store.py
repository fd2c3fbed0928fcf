"""Opcode handlers: loads, stores, cells and the plain stack shuffles."""
from __future__ import annotations

import sys

from ...bytecode.instructions import Instr
from ...bytecode.versions import facts_for
from ..attrs import AttrMissing, load_attr, super_attr
from ..exc import PythonError, Unsupported
from ..side_effects import DELETED
from ..tracer import NULL, Frame, handler
from ..user_objects import delete_attribute, store_attribute
from ..values import CellValue, ClassValue, ConstantValue, LazyValue, NullValue, SuperValue

_FACTS = facts_for(sys.version_info[:2])


@handler("NOP", "RESUME", "PRECALL", "COPY_FREE_VARS")
def nop(f: Frame, inst: Instr) -> None:
    pass


@handler("POP_TOP")
def pop_top(f: Frame, inst: Instr) -> None:
    f.pop()


@handler("PUSH_NULL")
def push_null(f: Frame, inst: Instr) -> None:
    f.push(NULL)


@handler("COPY")
def copy(f: Frame, inst: Instr) -> None:
    f.push(f.peek(inst.oparg))


@handler("SWAP")
def swap(f: Frame, inst: Instr) -> None:
    s, i = f.stack, inst.oparg
    s[-1], s[-i] = s[-i], s[-1]


@handler("LOAD_CONST")
def load_const(f: Frame, inst: Instr) -> None:
    f.push(ConstantValue(inst.argval))


# -- locals -------------------------------------------------------------------------------------
def _read_local(f: Frame, name: str):
    v = f.locals.get(name)
    if v is None or isinstance(v, NullValue):
        raise Unsupported(f"local variable {name!r} referenced before assignment",
                          "The same code raises UnboundLocalError in eager mode.")
    if isinstance(v, LazyValue):
        v = f.tx.resolve(v)
        f.locals[name] = v
    return v


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(f: Frame, inst: Instr) -> None:
    name = inst.argval
    if _FACTS.closure_by_load_fast and name in f.cells and isinstance(f.locals.get(name, NULL), NullValue):
        f.stack.append(f.cells[name])        # 3.13: LOAD_FAST of a cell variable loads the cell
        return
    f.push(_read_local(f, name))


@handler("LOAD_FAST_AND_CLEAR")
def load_fast_and_clear(f: Frame, inst: Instr) -> None:
    """3.12 inlined comprehensions: save the outer binding (NULL if unbound) and unbind it."""
    v = f.locals.pop(inst.argval, None)
    f.push(NULL if v is None else v)


@handler("STORE_FAST")
def store_fast(f: Frame, inst: Instr) -> None:
    v = f.pop()
    if isinstance(v, NullValue):
        f.locals.pop(inst.argval, None)
    else:
        f.locals[inst.argval] = v


@handler("DELETE_FAST")
def delete_fast(f: Frame, inst: Instr) -> None:
    _read_local(f, inst.argval)
    del f.locals[inst.argval]


# -- cells ----------------------------------------------------------------------------------------
@handler("MAKE_CELL")
def make_cell(f: Frame, inst: Instr) -> None:
    name = inst.argval
    f.cells[name] = CellValue(f.locals.pop(name, None))


@handler("LOAD_CLOSURE")
def load_closure(f: Frame, inst: Instr) -> None:
    f.stack.append(f.cells[inst.argval])


@handler("LOAD_DEREF")
def load_deref(f: Frame, inst: Instr) -> None:
    cell = f.cells.get(inst.argval)
    if cell is None or cell.contents is None:
        raise Unsupported(f"free variable {inst.argval!r} referenced before assignment")
    if isinstance(cell.contents, LazyValue):
        cell.contents = f.tx.resolve(cell.contents)
    f.push(cell.contents)


@handler("STORE_DEREF")
def store_deref(f: Frame, inst: Instr) -> None:
    cell = f.cells[inst.argval]
    cell.contents = f.pop()
    if cell.external:                        # a cell of a function outside the trace
        _record_cell(f, cell, inst.argval)


@handler("DELETE_DEREF")
def delete_deref(f: Frame, inst: Instr) -> None:
    cell = f.cells[inst.argval]
    if cell.contents is None:
        raise PythonError.of(NameError(f"free variable {inst.argval!r} referenced before assignment"))
    cell.contents = None
    if cell.external:
        _record_cell(f, cell, inst.argval)


def _record_cell(f: Frame, cell: CellValue, name: str) -> None:
    where = cell.cell_source if cell.cell_source is not None else cell.real_cell
    if where is None:
        raise Unsupported(f"assignment to closure variable {name!r} of a function outside the trace")
    f.tx.side_effects.store_cell(cell, where)


# -- globals, attributes ------------------------------------------------------------------------------
@handler("LOAD_GLOBAL")
def load_global(f: Frame, inst: Instr) -> None:
    value = f.globals.load(f.tx, inst.argval)
    _push_callable(f, value, inst.push_null)


def _push_callable(f: Frame, value, with_null: bool) -> None:
    """A load for a call: the NULL below the callable (3.11, 3.12) or above it (3.13). For a
    method load [NULL, bound method] calls the same as [method, self] (or [bound method, NULL]
    the same as [method, self] on 3.13)."""
    if with_null and not _FACTS.null_above_callable:
        f.push(NULL)
    f.push(value)
    if with_null and _FACTS.null_above_callable:
        f.push(NULL)


@handler("STORE_GLOBAL")
def store_global(f: Frame, inst: Instr) -> None:
    f.tx.side_effects.store_global(f.globals.f_globals, inst.argval, f.pop())


@handler("DELETE_GLOBAL")
def delete_global(f: Frame, inst: Instr) -> None:
    f.globals.load(f.tx, inst.argval)        # NameError when it does not exist
    if inst.argval not in f.globals.f_globals and f.tx.side_effects.global_(f.globals.f_globals,
                                                                            inst.argval) is None:
        raise PythonError.of(NameError(f"name {inst.argval!r} is not defined"))
    f.tx.side_effects.store_global(f.globals.f_globals, inst.argval, DELETED)


@handler("LOAD_ATTR")
def load_attr_op(f: Frame, inst: Instr) -> None:
    obj = f.pop()
    attr = load_attr(f.tx, obj, inst.argval)
    _push_callable(f, attr, inst.push_null)


@handler("LOAD_SUPER_ATTR")
def load_super_attr(f: Frame, inst: Instr) -> None:
    self_v, cls_v, _super = f.pop(), f.pop(), f.pop()
    if not isinstance(cls_v, ClassValue):
        raise Unsupported("super() with a non-class first argument")
    attr = super_attr(f.tx, SuperValue(cls_v.cls, self_v), inst.argval)
    _push_callable(f, attr, inst.push_null)


@handler("STORE_ATTR")
def store_attr(f: Frame, inst: Instr) -> None:
    obj = f.pop()
    value = f.pop()
    store_attribute(f.tx, obj, inst.argval, value)


@handler("DELETE_ATTR")
def delete_attr(f: Frame, inst: Instr) -> None:
    delete_attribute(f.tx, f.pop(), inst.argval)


# -- imports ---------------------------------------------------------------------------------------------
@handler("IMPORT_NAME")
def import_name(f: Frame, inst: Instr) -> None:
    fromlist, level = f.pop(), f.pop()
    if not (isinstance(level, ConstantValue) and isinstance(fromlist, ConstantValue)):
        raise Unsupported("import with non-constant arguments")
    try:
        mod = __import__(inst.argval, f.globals.f_globals, None, fromlist.value, level.value)
    except ImportError as e:                 # `try: import x / except ImportError:` in model code
        raise PythonError.of(e) from None
    f.push(f.tx.wrap(mod, None))             # imports are deterministic: no guard


@handler("IMPORT_FROM")
def import_from(f: Frame, inst: Instr) -> None:
    mod = f.peek()
    try:
        v = load_attr(f.tx, mod, inst.argval)
    except AttrMissing:                      # `from m import missing` raises ImportError
        name = getattr(getattr(mod, "module", None), "__name__", "?")
        raise PythonError.of(ImportError(f"cannot import name {inst.argval!r} from {name!r}")) from None
    f.push(v)


@handler("LOAD_ASSERTION_ERROR")
def load_assertion_error(f: Frame, inst: Instr) -> None:
    f.push(ClassValue(AssertionError))
