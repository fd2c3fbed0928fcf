"""User subclasses of ``list`` and ``tuple`` made in the frame (``class Batch(list): ...``).

Like a dict subclass (``calls.dict_base``), the object is a ``NewObjectValue``: its attributes in
``attrs``, its contents in ``storage``, a ``ListValue`` / ``TupleValue`` that the builtin
container operations (subscript, ``len``, iteration, ``append``, ``super().__init__(...)``...)
work on. The class's own Python methods are inlined on the object; a builtin method of the base
(``list.append``) is bound to the storage (``storage_method``).

Supported: classes whose only builtin base is ``list`` (or ``tuple``), with no ``__new__`` of their
own (a tuple subclass gets its items from ``tuple.__new__``'s argument) and no ``__slots__``.
Namedtuples and structseqs are ``TupleValue`` classes of their own (``TupleValue.cls``).
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from . import hub
from .builtins_table import builtin
from .exc import PythonError, Unsupported
from .pyops import binary_op, register_binary_rule
from .values import (
    BuiltinValue,
    ConstantValue,
    ListValue,
    NewObjectValue,
    ObjectMethodValue,
    PartialValue,
    TupleValue,
    UserObjectValue,
    Value,
)

if TYPE_CHECKING:
    from .tracer import Tracer

SEQ_BASES = (list, tuple)


def seq_base(cls: type) -> type | None:
    """list or tuple for a user subclass of exactly one of them, else None."""
    if not isinstance(cls, type) or cls in SEQ_BASES or not issubclass(cls, SEQ_BASES):
        return None
    builtin_bases = [k for k in cls.__mro__ if k.__module__ == "builtins" and k is not object]
    if len(builtin_bases) != 1 or hasattr(cls, "_fields") or "__slots__" in cls.__dict__:
        return None                             # namedtuples, structseqs, other builtin bases
    base = builtin_bases[0]
    if base not in SEQ_BASES or cls.__new__ is not base.__new__:
        return None
    return base


def new_storage(tx: "Tracer", base: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """The contents ``base.__new__(cls, *args)`` gives the object: empty for a list (its
    ``__init__`` fills it), the items of the argument for a tuple."""
    if base is list:
        return ListValue([])
    if kwargs or len(args) > 1:
        raise PythonError.of(TypeError(f"tuple expected at most 1 argument, got {len(args) + len(kwargs)}"))
    return TupleValue(hub.items_of(tx, args[0]) if args else [])


def list_init(tx: "Tracer", storage: ListValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``list.__init__(self, iterable=())``: the contents become the iterable's items."""
    if kwargs or len(args) > 1:
        raise PythonError.of(TypeError(f"list expected at most 1 argument, got {len(args) + len(kwargs)}"))
    items = hub.items_of(tx, args[0]) if args else []
    storage.items[:] = items
    return ConstantValue(None)


_OPS = {"__getitem__": operator.getitem, "__setitem__": operator.setitem, "__delitem__": operator.delitem,
        "__len__": len, "__iter__": iter, "__contains__": operator.contains}


def storage_method(storage: Value, name: str) -> Value:
    """A builtin list / tuple method bound to the storage of a subclass instance made in the frame
    (``self.append(x)``, ``super().__getitem__(i)``, ``list.__init__(self, items)``)."""
    if name in _OPS:
        return PartialValue(BuiltinValue(_OPS[name]), [storage], {})
    if name == "__init__" and isinstance(storage, ListValue):
        return PartialValue(BuiltinValue(list.__init__), [storage], {})
    if name.startswith("__"):
        raise Unsupported(f"calling builtin method {name} of a list or tuple subclass")
    return ObjectMethodValue(storage, name)


@builtin(list.__init__)
def _list_init(tx: "Tracer", args: list, kwargs: dict) -> Value:
    storage = args[0]
    if _storage_of(storage) is not None:               # list.__init__(self, items) on the object
        storage = _storage_of(storage)
    if not isinstance(storage, ListValue) or storage.source is not None:
        raise Unsupported(f"list.__init__ on {storage.describe()}")
    return list_init(tx, storage, args[1:], kwargs)


def _storage_of(v: Value) -> Value | None:
    if isinstance(v, (NewObjectValue, UserObjectValue)) and isinstance(v.storage, (ListValue, TupleValue)):
        return v.storage
    return None


def _binary_rule(tx: "Tracer", op, a: Value, b: Value) -> Value | None:
    """Operators of a list / tuple subclass without its own Python dunder (those ran in the user
    rule before): the builtin base's, on the storage. ``l += x`` / ``l *= n`` on a list subclass
    change it in place and give the object back; everything else gives a plain list / tuple."""
    sa, sb = _storage_of(a), _storage_of(b)
    if sa is None and sb is None:
        return None
    if isinstance(sa, ListValue) and op in (operator.iadd, operator.imul):
        hub.note_mutation(tx, sa)
        if op is operator.iadd:
            sa.items.extend(hub.items_of(tx, b))
        else:
            ok, n = hub.as_constant(b)
            if not ok or not isinstance(n, int):
                raise Unsupported(f"list *= {b.describe()}")
            sa.items[:] = sa.items * n
        return a
    return binary_op(tx, op, sa if sa is not None else a, sb if sb is not None else b)


register_binary_rule("seq_subclass", _binary_rule, before="tensor")


__all__ = ["SEQ_BASES", "list_init", "new_storage", "seq_base", "storage_method"]
