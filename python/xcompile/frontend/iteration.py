"""Iterating symbolic values: everything iterable here is finite and known at trace time."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable

from . import hub
from .dict_keys import key_value
from .exc import Unsupported
from .values import (
    ConstantValue,
    DictValue,
    DictViewValue,
    GeneratorValue,
    IteratorValue,
    LazyIterValue,
    ListValue,
    SetValue,
    TensorValue,
    TupleValue,
    Value,
    dict_storage,
)

if TYPE_CHECKING:
    from .tracer import Tracer


def _dict_view(tx: "Tracer", v: DictViewValue) -> list[Value]:
    d = v.dict_value.items
    if v.kind == "keys":
        return [key_value(k) for k in d]
    if v.kind == "values":
        return [tx.resolve(x) for x in d.values()]
    return [TupleValue([key_value(k), tx.resolve(x)]) for k, x in d.items()]


def _tensor_rows(tx: "Tracer", v: TensorValue) -> list[Value]:
    if v.fake.dim() == 0:
        raise Unsupported("iteration over a 0-d tensor", "The same code raises TypeError in eager mode.")
    return [tx.gb.call("call_function", operator.getitem, (v, ConstantValue(i)))
            for i in range(v.fake.shape[0])]


# The iteration table: value class -> what iter(v) yields / len(v), each a function of (tx, v).
# Looked up along the value's class MRO; the value kinds of other modules add their rows
# (generators.py: generators; modules.py: container modules) through register_iterable.
_ITEMS: dict[type, Callable[["Tracer", Any], list[Value]]] = {}
_LENGTH: dict[type, Callable[["Tracer", Any], int]] = {}


def register_iterable(value_cls: type, items: Callable | None = None, length: Callable | None = None) -> None:
    """Rows of the iteration table for ``value_cls``: ``items(tx, v)`` -> the values ``iter(v)``
    yields (all resolved), ``length(tx, v)`` -> ``len(v)``."""
    if items is not None:
        _ITEMS[value_cls] = items
    if length is not None:
        _LENGTH[value_cls] = length


def row_of(table: dict, v: Value):
    """The row of a per-value-class table for ``v``, looked up along its class MRO (or None)."""
    for cls in type(v).__mro__:
        fn = table.get(cls)
        if fn is not None:
            return fn
    return None


def items_of(tx: "Tracer", v: Value) -> list[Value]:
    """The values that ``iter(v)`` would produce, all resolved."""
    row = row_of(_ITEMS, v)
    if row is not None:
        return row(tx, v)
    it = hub.call_dunder(tx, v, "__iter__", [])            # user classes: __iter__ (often a generator)
    if it is not hub.NOT_DEFINED:
        return items_of(tx, it)
    if dict_storage(v) is not v:                       # a dict subclass made in the frame
        return items_of(tx, dict_storage(v))
    raise Unsupported(f"iterating over {v.describe()}")


def get_iter(tx: "Tracer", v: Value) -> Value:
    if isinstance(v, (IteratorValue, GeneratorValue, LazyIterValue)):
        return v
    return IteratorValue(items_of(tx, v))


def length_of(tx: "Tracer", v: Value) -> int:
    row = row_of(_LENGTH, v)
    if row is not None:
        return row(tx, v)
    n = hub.call_dunder(tx, v, "__len__", [])
    if n is not hub.NOT_DEFINED:
        ok, c = hub.as_constant(n, specialize=True)
        if ok and isinstance(c, int):
            return c
    elif isinstance(storage := dict_storage(v), (DictValue, ListValue, TupleValue)) and storage is not v:
        return len(storage.items)
    raise Unsupported(f"len() of {v.describe()}")


# -- the rows for the built-in value kinds ----------------------------------------------------------
def _sequence_items(tx: "Tracer", v) -> list[Value]:
    return [tx.resolve(x) for x in v.items]


def _set_items(tx: "Tracer", v: SetValue) -> list[Value]:
    consts = [hub.as_constant(x) for x in v.items]
    if all(ok for ok, _ in consts):          # iterate in Python's own set order
        return [ConstantValue(c) for c in set(c for _, c in consts)]
    raise Unsupported("iterating over a set of non-constants (the order depends on object ids)")


def _iterator_items(tx: "Tracer", v: IteratorValue) -> list[Value]:
    rest = v.items[v.pos:]
    v.pos = len(v.items)
    return [tx.resolve(x) for x in rest]


def _constant_items(tx: "Tracer", v: ConstantValue) -> list[Value]:
    try:
        return [ConstantValue(x) for x in iter(v.value)]
    except TypeError:
        raise Unsupported(f"{v.describe()} is not iterable") from None


def _constant_len(tx: "Tracer", v: ConstantValue) -> int:
    try:
        return len(v.value)
    except TypeError:
        raise Unsupported(f"len() of {v.describe()}") from None


def _tensor_len(tx: "Tracer", v: TensorValue) -> int:
    if v.fake.dim() == 0:
        raise Unsupported("len() of a 0-d tensor", "The same code raises TypeError in eager mode.")
    return int(v.fake.shape[0])


def _items_len(tx: "Tracer", v) -> int:
    return len(v.items)


for _cls in (TupleValue, ListValue):
    register_iterable(_cls, _sequence_items, _items_len)
register_iterable(SetValue, _set_items, _items_len)
register_iterable(DictValue, lambda tx, v: [key_value(k) for k in v.items], _items_len)
register_iterable(DictViewValue, _dict_view, lambda tx, v: len(v.dict_value.items))
register_iterable(IteratorValue, _iterator_items)
register_iterable(ConstantValue, _constant_items, _constant_len)
register_iterable(TensorValue, _tensor_rows, _tensor_len)

hub.register(
    items_of=items_of, length_of=length_of,
)
