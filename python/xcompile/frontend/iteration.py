"""Iterating symbolic values: everything iterable here is finite and known at trace time."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from . import hub
from .exc import Unsupported
from .values import (
    ConstantValue,
    DictValue,
    DictViewValue,
    GeneratorValue,
    IteratorValue,
    LazyIterValue,
    ListValue,
    ModuleValue,
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
        return [ConstantValue(k) for k in d]
    if v.kind == "values":
        return [tx.resolve(x) for x in d.values()]
    return [TupleValue([ConstantValue(k), tx.resolve(x)]) for k, x in d.items()]


def _tensor_rows(tx: "Tracer", v: TensorValue) -> list[Value]:
    if v.fake.dim() == 0:
        raise Unsupported("iteration over a 0-d tensor", "The same code raises TypeError in eager mode.")
    return [tx.gb.call("call_function", operator.getitem, (v, ConstantValue(i)))
            for i in range(v.fake.shape[0])]


def items_of(tx: "Tracer", v: Value) -> list[Value]:
    """The values that ``iter(v)`` would produce, all resolved."""
    if isinstance(v, (TupleValue, ListValue)):
        return [tx.resolve(x) for x in v.items]
    if isinstance(v, SetValue):
        consts = [hub.as_constant(x) for x in v.items]
        if all(ok for ok, _ in consts):          # iterate in Python's own set order
            return [ConstantValue(c) for c in set(c for _, c in consts)]
        raise Unsupported("iterating over a set of non-constants (the order depends on object ids)")
    if isinstance(v, IteratorValue):
        rest = v.items[v.pos:]
        v.pos = len(v.items)
        return [tx.resolve(x) for x in rest]
    if isinstance(v, (GeneratorValue, LazyIterValue)):
        return hub.drain(tx, v)
    if isinstance(v, DictValue):
        return [ConstantValue(k) for k in v.items]
    if isinstance(v, DictViewValue):
        return _dict_view(tx, v)
    if isinstance(v, ConstantValue):
        try:
            return [ConstantValue(x) for x in iter(v.value)]
        except TypeError:
            raise Unsupported(f"{v.describe()} is not iterable") from None
    if isinstance(v, ModuleValue):
        return hub.module_items(tx, v)
    if isinstance(v, TensorValue):
        return _tensor_rows(tx, v)
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
    if isinstance(v, (TupleValue, ListValue)):
        return len(v.items)
    if isinstance(v, (DictValue, SetValue)):
        return len(v.items)
    if isinstance(v, DictViewValue):
        return len(v.dict_value.items)
    if isinstance(v, ConstantValue):
        try:
            return len(v.value)
        except TypeError:
            raise Unsupported(f"len() of {v.describe()}") from None
    if isinstance(v, ModuleValue):
        return hub.module_len(v)
    if isinstance(v, TensorValue):
        if v.fake.dim() == 0:
            raise Unsupported("len() of a 0-d tensor", "The same code raises TypeError in eager mode.")
        return int(v.fake.shape[0])
    n = hub.call_dunder(tx, v, "__len__", [])
    if n is not hub.NOT_DEFINED:
        ok, c = hub.as_constant(n)
        if ok and isinstance(c, int):
            return c
    elif dict_storage(v) is not v:
        return len(dict_storage(v).items)
    raise Unsupported(f"len() of {v.describe()}")

hub.register(
    items_of=items_of, length_of=length_of,
)
