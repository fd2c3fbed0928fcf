"""User list / tuple subclass instances from outside the frame (an argument ``Batch([x, y])``, a
global): a ``UserObjectValue`` whose contents are in ``storage``, like a dict subclass from
outside (``wrap._dict_subclass``).

    tuple subclass   storage: a TupleValue of the items, guarded like a tuple's (type, length)
    list subclass    storage: a ListValue from outside, blind until read (like a plain list's:
                     appends are recorded without looking, the first read guards the length);
                     writes are replayed on the real object after the graph

Its class may have its own ``__new__`` / ``__init__`` (the object exists already); its own Python
methods and properties are inlined on the object; builtin list / tuple
methods and operators work on the storage (``seq_subclasses.py``). Classes that override how the
contents are read or written (``__getitem__``, ``__len__``, ``__iter__``, ``__setitem__``,
``extend``, ``clear``...) are left to the generic object path: the guards and the replayed writes
would run that code.
"""
from __future__ import annotations

import abc
import types
from typing import TYPE_CHECKING, Any

from . import rules
from .side_effects import BlindList
from .values import ListValue, TupleValue, Value
from .wrap import _lazy_items, _user_object, register_row

if TYPE_CHECKING:
    from .tracer import Tracer

# What the guards (length, items) and the replayed writes (slice assignment, extend, clear) call.
GUARDED_CONTENT_METHODS = ("__getitem__", "__len__", "__iter__", "__setitem__", "__delitem__", "extend",
                           "clear", "__contains__", "__eq__", "__hash__")


def _overrides_contents(cls: type, base: type) -> bool:
    for k in cls.__mro__:
        if k is base:
            return False
        if any(n in k.__dict__ for n in GUARDED_CONTENT_METHODS):
            return True
    return False


def _input_base(cls: type) -> type | None:
    """list or tuple for a user subclass of exactly one of them (its own ``__new__`` / ``__init__``
    do not matter: the object exists already), else None."""
    if type(cls) not in (type, abc.ABCMeta) or rules.is_trusted_module_name(cls.__module__):
        return None
    builtin_bases = [k for k in cls.__mro__ if k.__module__ == "builtins" and k is not object]
    if builtin_bases not in ([list], [tuple]) or hasattr(cls, "_fields") or hasattr(cls, "n_fields") \
            or any("__slots__" in k.__dict__ for k in cls.__mro__[:-2]):
        return None
    base = builtin_bases[0]
    if cls.__getattribute__ is not base.__getattribute__ or "__getattr__" in dir(cls) or \
            (cls.__setattr__ is not object.__setattr__ and not isinstance(cls.__setattr__, types.FunctionType)):
        return None
    return base


def is_seq_subclass_input(obj: Any) -> bool:
    base = _input_base(type(obj))
    return base is not None and not _overrides_contents(type(obj), base)


def wrap_seq_subclass(tx: "Tracer", obj: Any, source, covered: bool) -> Value:
    known = tx.memo.get(id(obj))              # one value per object (wrap's memo, which rows skip)
    if known is not None:
        v = known[1]
        if source is not None and v.source is not None and source != v.source:
            tx.guards.same_object(v.source, source)
        return v
    v = _user_object(tx, obj, source, covered)
    tx.memo[id(obj)] = (obj, v)
    if isinstance(obj, tuple):
        if source is not None:
            tx.guards.sequence(source, obj, type_known=True)
        v.storage = TupleValue(_lazy_items(obj, source, covered), source=source, covered=True)
    elif source is None:
        v.storage = ListValue(_lazy_items(obj, source, False))
        tx.side_effects.unreachable(v.storage)
    else:
        v.storage = ListValue([], source=source, covered=True, blind=BlindList(tx, obj, source))
    return v


register_row(is_seq_subclass_input, wrap_seq_subclass)


__all__ = ["is_seq_subclass_input", "wrap_seq_subclass"]
