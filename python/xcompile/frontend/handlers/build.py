"""Opcode handlers: building containers, strings and slices; unpacking; subscripts."""
from __future__ import annotations

from typing import Any, cast

from ...bytecode.instructions import Instr
from .. import hub
from ..dict_keys import dict_key
from ..exc import PythonError, Unsupported
from ..iteration import items_of
from ..pyops import as_constant, delitem, fold, getitem, set_add, setitem
from ..scalars import SymSliceValue, is_sym
from ..tracer import Frame, handler
from ..values import ConstantValue, DictValue, ListValue, SetValue, TupleValue, Value


@handler("BUILD_TUPLE")
def build_tuple(f: Frame, inst: Instr) -> None:
    f.push(TupleValue(f.popn(inst.oparg)))


@handler("BUILD_LIST")
def build_list(f: Frame, inst: Instr) -> None:
    f.push(ListValue(f.popn(inst.oparg)))


@handler("BUILD_SET")
def build_set(f: Frame, inst: Instr) -> None:
    s = SetValue([])
    for v in f.popn(inst.oparg):
        set_add(s, v)
    f.push(s)


def _key(v: Value):
    return dict_key(v)            # a constant, or a tensor / module (by identity)


@handler("BUILD_MAP")
def build_map(f: Frame, inst: Instr) -> None:
    flat = f.popn(2 * inst.oparg)
    f.push(DictValue({_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}))


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(f: Frame, inst: Instr) -> None:
    keys = f.pop()
    vals = f.popn(inst.oparg)
    f.push(DictValue(dict(zip(_key(keys), vals))))


@handler("BUILD_STRING")
def build_string(f: Frame, inst: Instr) -> None:
    parts = cast(list[ConstantValue], f.popn(inst.oparg))   # constants and FORMAT_VALUE's results
    f.push(ConstantValue("".join(str(p.value) for p in parts)))


@handler("FORMAT_VALUE")
def format_value(f: Frame, inst: Instr) -> None:
    conv, has_spec = inst.argval
    spec = cast(ConstantValue, f.pop()).value if has_spec else ""
    v = f.pop()
    c = _formattable(v)
    if conv is not None:
        c = conv(c)
    f.push(fold(format, c, spec, what="format"))


def _formattable(v: Value) -> Any:
    ok, c = as_constant(v, specialize=True)
    if not ok:
        raise Unsupported(f"f-string formatting of {v.describe()}",
                          "Only constants can be formatted inside a compiled region.")
    return c


@handler("CONVERT_VALUE")
def convert_value(f: Frame, inst: Instr) -> None:
    """3.13: ``!s`` / ``!r`` / ``!a`` of an f-string field (``argval``: str, repr or ascii)."""
    f.push(fold(inst.argval, _formattable(f.pop()), what="format"))


@handler("FORMAT_SIMPLE")
def format_simple(f: Frame, inst: Instr) -> None:
    f.push(fold(format, _formattable(f.pop()), "", what="format"))


@handler("FORMAT_WITH_SPEC")
def format_with_spec(f: Frame, inst: Instr) -> None:
    spec = cast(ConstantValue, f.pop()).value
    f.push(fold(format, _formattable(f.pop()), spec, what="format"))


@handler("BUILD_SLICE")
def build_slice(f: Frame, inst: Instr) -> None:
    parts = f.popn(inst.oparg)
    if any(is_sym(p) for p in parts):          # a symbolic size as a bound: a graph argument
        f.push(SymSliceValue(parts))
        return
    vals = []
    for p in parts:
        ok, c = as_constant(p)
        if not ok:
            raise Unsupported(f"slice bound {p.describe()}", "Slice bounds must be Python ints.")
        vals.append(c)
    f.push(ConstantValue(slice(*vals)))


@handler("LIST_APPEND")
def list_append(f: Frame, inst: Instr) -> None:
    v = f.pop()
    cast(ListValue, f.peek(inst.oparg)).items.append(v)


@handler("LIST_EXTEND")
def list_extend(f: Frame, inst: Instr) -> None:
    v = f.pop()
    cast(ListValue, f.peek(inst.oparg)).items.extend(items_of(f.tx, v))


@handler("SET_ADD")
def set_add_op(f: Frame, inst: Instr) -> None:
    v = f.pop()
    set_add(cast(SetValue, f.peek(inst.oparg)), v)


@handler("SET_UPDATE")
def set_update_op(f: Frame, inst: Instr) -> None:
    v = f.pop()
    for item in items_of(f.tx, v):
        set_add(cast(SetValue, f.peek(inst.oparg)), item)


@handler("MAP_ADD")
def map_add(f: Frame, inst: Instr) -> None:
    v, k = f.pop(), f.pop()
    cast(DictValue, f.peek(inst.oparg)).items[_key(k)] = v


@handler("DICT_UPDATE", "DICT_MERGE")
def dict_update(f: Frame, inst: Instr) -> None:
    other = hub.mapping_source(f.tx, f.tx.resolve(f.pop()))  # a dict subclass: its storage / keys()
    target = cast(DictValue, f.peek(inst.oparg))
    if not isinstance(other, DictValue):
        raise Unsupported(f"** unpacking of {other.describe()}")
    if inst.opname == "DICT_MERGE":
        dup = set(target.items) & set(other.items)
        if dup:
            raise Unsupported(f"got multiple values for keyword argument {sorted(dup)[0]!r}")
    target.items.update(other.items)


@handler("LIST_TO_TUPLE")
def list_to_tuple(f: Frame, inst: Instr) -> None:
    f.push(TupleValue(list(cast(ListValue, f.pop()).items)))


@handler("UNPACK_SEQUENCE")
def unpack_sequence(f: Frame, inst: Instr) -> None:
    items = items_of(f.tx, f.pop())
    n = inst.oparg
    if len(items) != n:
        what = "too many values" if len(items) > n else f"not enough values (expected {n})"
        raise PythonError.of(ValueError(f"{what} to unpack (got {len(items)})"))
    for v in reversed(items):
        f.push(v)


@handler("UNPACK_EX")
def unpack_ex(f: Frame, inst: Instr) -> None:
    before, after = inst.oparg & 0xFF, inst.oparg >> 8
    items = items_of(f.tx, f.pop())
    if len(items) < before + after:
        raise Unsupported(f"not enough values to unpack (expected at least {before + after})")
    middle = ListValue(items[before:len(items) - after])
    for v in reversed(items[:before] + [middle] + items[len(items) - after:]):
        f.push(v)


# -- subscripts ------------------------------------------------------------------------------------------
@handler("BINARY_SUBSCR")
def binary_subscr(f: Frame, inst: Instr) -> None:
    key = f.pop()
    f.push(getitem(f.tx, f.pop(), key))


@handler("STORE_SUBSCR")
def store_subscr(f: Frame, inst: Instr) -> None:
    key, container, value = f.pop(), f.pop(), f.pop()
    setitem(f.tx, container, key, value)


@handler("DELETE_SUBSCR")
def delete_subscr(f: Frame, inst: Instr) -> None:
    key, container = f.pop(), f.pop()
    delitem(f.tx, container, key)


def _slice_of(start: Value, stop: Value) -> Value:
    if is_sym(start) or is_sym(stop):
        return SymSliceValue([start, stop])
    ok1, a = as_constant(start)
    ok2, b = as_constant(stop)
    if not (ok1 and ok2):
        raise Unsupported("slice bound that is not a Python int")
    return ConstantValue(slice(a, b))


@handler("BINARY_SLICE")
def binary_slice(f: Frame, inst: Instr) -> None:
    stop, start, container = f.pop(), f.pop(), f.pop()
    f.push(getitem(f.tx, container, _slice_of(start, stop)))


@handler("STORE_SLICE")
def store_slice(f: Frame, inst: Instr) -> None:
    stop, start, container, value = f.pop(), f.pop(), f.pop(), f.pop()
    setitem(f.tx, container, _slice_of(start, stop), value)
