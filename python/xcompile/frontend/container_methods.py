"""Methods of the containers the interpreter models itself: list, dict (and OrderedDict /
defaultdict), tuple / namedtuple, set, generators made in the frame (``send``/``throw``/``close``,
in ``generators.py``) and methods of constants (``'a'.join``...).

``call_object_method(tx, ObjectMethodValue, args, kwargs)`` dispatches on the container's value
class; a mutation of a container that came from outside the frame is recorded as a side effect
(``pyops.note_mutation``) before the container's own view changes.
"""
from __future__ import annotations

import functools
from typing import Any, cast

from . import hub
from .builtins_rules import dict_builtin, sort_values
from .builtins_table import consts as _consts
from .dict_keys import dict_key, key_value
from .exc import PythonError, Unsupported
from .iteration import items_of
from .pyops import as_constant, fold
from .values import (
    ConstantValue,
    DictValue,
    DictViewValue,
    GeneratorValue,
    ListValue,
    ObjectMethodValue,
    SetValue,
    TupleValue,
    Value,
)


def _find(tx, items: list[Value], x: Value) -> int:
    """The index of the first item equal to ``x`` (identity first, like list.index), or -1."""
    for i, item in enumerate(items):
        if hub.contains(tx, x, ListValue([item])):
            return i
    return -1


_LIST_MUTATORS = ("append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort")


_BLIND_MUTATORS = ("append", "extend", "clear")       # need nothing of the list's contents


def _list_method(tx, lst: ListValue, name: str, args, kwargs) -> Value:
    new = items_of(tx, args[0]) if name == "extend" else None      # (may read lst itself)
    if lst.blind is not None and name in _BLIND_MUTATORS:
        hub.note_mutation(tx, lst)                    # a list from outside, unread: record blindly
        if name == "append":
            lst.blind.tail.append(args[0])
        elif name == "extend":
            lst.blind.tail.extend(new)
        else:
            lst.blind.cleared, lst.blind.tail = True, []
        return ConstantValue(None)
    if name in _LIST_MUTATORS:
        hub.note_mutation(tx, lst)
    items = lst.items
    if name == "append":
        items.append(args[0])
    elif name == "extend":
        assert new is not None                  # read above for extend
        items.extend(new)
    elif name == "insert":
        items.insert(_consts([args[0]], "insert")[0], args[1])
    elif name == "pop":
        if not items:
            raise PythonError.of(IndexError("pop from empty list"))
        try:
            return tx.resolve(items.pop(*_consts(args, "pop")))
        except IndexError as e:
            raise PythonError.of(e) from None
    elif name == "remove":
        i = _find(tx, items, args[0])
        if i < 0:
            raise PythonError.of(ValueError("list.remove(x): x not in list"))
        del items[i]
    elif name == "clear":
        items.clear()
    elif name == "reverse":
        items.reverse()
    elif name == "sort":
        rev = _consts([kwargs.get("reverse", ConstantValue(False))], "list.sort")[0]
        items[:] = sort_values(tx, [tx.resolve(i) for i in items], kwargs.get("key"), rev)
    elif name == "copy":
        return ListValue(list(items))
    elif name == "index":
        i = _find(tx, items, args[0])
        if i < 0:
            raise PythonError.of(ValueError("x not in list"))
        return ConstantValue(i)
    elif name == "count":
        return ConstantValue(sum(1 for item in items if _find(tx, [item], args[0]) == 0))
    else:
        raise Unsupported(f"list.{name}")
    return ConstantValue(None)


_DICT_MUTATORS = ("update", "pop", "setdefault", "clear", "popitem", "move_to_end")


def _dict_key(args, what) -> Any:
    return dict_key(args[0], f"{what} with key")


def _dict_method(tx, d: DictValue, name: str, args, kwargs) -> Value:
    if name in ("keys", "values", "items"):
        return DictViewValue(d, name)
    if name == "get":
        k = _dict_key(args, "dict.get")
        if k in d.items:
            d.items[k] = tx.resolve(d.items[k])
            return d.items[k]
        return args[1] if len(args) > 1 else ConstantValue(None)
    if name == "copy":
        return DictValue(dict(d.items), cls=d.cls, default_factory=d.default_factory)
    if name == "__contains__":
        return ConstantValue(_dict_key(args, "dict.__contains__") in d.items)
    if name not in _DICT_MUTATORS:
        raise Unsupported(f"dict.{name}")
    hub.note_mutation(tx, d)
    if name == "update":
        other = cast(DictValue, dict_builtin(tx, args, kwargs))   # dict(...) makes a DictValue
        d.items.update(other.items)
        return ConstantValue(None)
    if name == "pop":
        k = _dict_key(args, "dict.pop")
        if k in d.items:
            return tx.resolve(d.items.pop(k))
        if len(args) > 1:
            return args[1]
        raise PythonError.of(KeyError(k))
    if name == "setdefault":
        k = _dict_key(args, "dict.setdefault")
        if k not in d.items:
            d.items[k] = args[1] if len(args) > 1 else ConstantValue(None)
        return tx.resolve(d.items[k])
    if name == "clear":
        d.items.clear()
        return ConstantValue(None)
    if name == "popitem":
        if not d.items:
            raise PythonError.of(KeyError("popitem(): dictionary is empty"))
        last = _consts([args[0] if args else kwargs.get("last", ConstantValue(True))], "popitem")[0]
        k = next(reversed(d.items)) if last else next(iter(d.items))
        return TupleValue([key_value(k), tx.resolve(d.items.pop(k))])
    if name == "move_to_end":                 # OrderedDict
        k = _dict_key(args, "move_to_end")
        last = _consts([args[1] if len(args) > 1 else kwargs.get("last", ConstantValue(True))], "move_to_end")[0]
        if k not in d.items:
            raise PythonError.of(KeyError(k))
        v = d.items.pop(k)
        if last:
            d.items[k] = v
        else:
            d.items = {k: v, **d.items}
        return ConstantValue(None)
    raise AssertionError(name)


def _tuple_method(tx, t: TupleValue, name: str, args, kwargs) -> Value:
    if name in ("index", "count"):
        return fold(getattr(tuple(_consts(t.items, name)), name), *_consts(args, name))
    if name == "_asdict":
        return DictValue(dict(zip(t.cls._fields, t.items)))  # type: ignore[attr-defined]  # a namedtuple class
    if name == "_replace":
        fields = t.cls._fields  # type: ignore[attr-defined]  # a namedtuple class
        vals = dict(zip(fields, t.items))
        vals.update(kwargs)
        return TupleValue([vals[f] for f in fields], cls=t.cls)
    raise Unsupported(f"tuple.{name}")


_BLIND_SET_MUTATORS = ("add", "discard", "update", "clear")   # need nothing of the set's contents


def _set_method(tx, s: SetValue, name: str, args, kwargs) -> Value:
    if s.blind is not None and name in _BLIND_SET_MUTATORS:
        new = [x for a in args for x in items_of(tx, a)] if name == "update" else args[:1]
        for x in new:
            if not _hashable_value(x):
                raise PythonError.of(TypeError(f"unhashable type: {x.python_type().__name__!r}"))
        hub.note_mutation(tx, s)                       # a set from outside: recorded, never read
        if name == "clear":
            s.blind.ops = [("clear", None)]
        else:
            s.blind.ops.extend(("discard" if name == "discard" else "add", x) for x in new)
        return ConstantValue(None)
    if name == "add":
        hub.set_add(s, args[0])
    elif name == "update":
        for a in args:
            for item in items_of(tx, a):
                hub.set_add(s, item)
    elif name in ("discard", "remove"):
        keep = [x for x in s.items if not hub.set_member([x], args[0])]
        if name == "remove" and len(keep) == len(s.items):
            raise PythonError.of(KeyError(as_constant(args[0])[1]))
        s.items[:] = keep
    elif name == "copy":
        return SetValue(list(s.items))
    elif name == "__contains__":
        return ConstantValue(hub.set_member(s.items, args[0]))
    elif name == "clear":
        s.items.clear()
    elif name == "pop":
        if not s.items:
            raise PythonError.of(KeyError("pop from an empty set"))
        if not all(as_constant(x)[0] for x in s.items):
            return s.items.pop(0)
        first = items_of(tx, s)[0]                      # Python's own set order
        s.items[:] = [x for x in s.items if not hub.set_member([first], x)]
        return first
    elif name in _SET_OPS:
        r = s
        for a in args:
            r = hub.set_operation(tx, _SET_OPS[name], r, a)
        return r
    elif name in ("issubset", "issuperset", "isdisjoint"):
        other = items_of(tx, args[0])
        mine = s.items
        if name == "issubset":
            return ConstantValue(all(hub.set_member(other, x) for x in mine))
        if name == "issuperset":
            return ConstantValue(all(hub.set_member(mine, x) for x in other))
        return ConstantValue(not any(hub.set_member(other, x) for x in mine))
    elif name.endswith("_update") and name[:-len("_update")] in _SET_OPS:
        r = hub.set_operation(tx, _SET_OPS[name[:-len("_update")]], s, args[0])
        s.items[:] = r.items
    else:
        raise Unsupported(f"set.{name}")
    return ConstantValue(None)


_SET_OPS = {"union": "|", "intersection": "&", "difference": "-", "symmetric_difference": "^"}


def call_object_method(tx, m: ObjectMethodValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    obj = m.obj
    if isinstance(obj, ListValue):
        return _list_method(tx, obj, m.name, args, kwargs)
    if isinstance(obj, DictValue):
        return _dict_method(tx, obj, m.name, args, kwargs)
    if isinstance(obj, TupleValue):
        return _tuple_method(tx, obj, m.name, args, kwargs)
    if isinstance(obj, SetValue):
        return _set_method(tx, obj, m.name, args, kwargs)
    if isinstance(obj, GeneratorValue):
        return hub.call_generator_method(tx, obj, m.name, args, kwargs)
    if isinstance(obj, ConstantValue):             # immutable: the real method is safe to run
        cargs = _consts(args, m.name)
        ckw = dict(zip(kwargs, _consts(list(kwargs.values()), m.name)))
        return fold(functools.partial(getattr(obj.value, m.name), **ckw), *cargs, what=m.name)
    raise Unsupported(f"method {m.name} of {obj.describe()}")


def _hashable_value(v: Value) -> bool:
    """May ``v`` go into a set (as the real object it stands for)?"""
    if isinstance(v, (ListValue, DictValue, SetValue)):
        return False
    ok, c = as_constant(v)
    if ok:
        try:
            hash(c)
        except TypeError:
            return False
    return True

hub.register(
    call_object_method=call_object_method,
)
