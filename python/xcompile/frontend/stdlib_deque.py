"""``collections.deque`` made in the compiled frame: a value kind of its own (``DequeValue``).

Its items are values (tensors too); ``maxlen`` is a constant.  Modelled like a list: append /
appendleft / pop / popleft / extend / extendleft / insert / remove / rotate / reverse / clear /
copy / count / index, ``len``, truth, ``in``, iteration, indexing and item assignment.  A deque
that outlives the frame (returned, stored on an object) is rebuilt after the graph as
``collections.deque(items, maxlen)`` (rebuild_table.py).  A deque from outside the frame is an
object read with guards (its type, length and maxlen), and its changes are replayed after the
graph (the real deque cleared and refilled).
"""
from __future__ import annotations

import collections
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..guards.sources import AttrSource, ItemSource, Source
from . import attrs, calls, hub, wrap
from .builtins_table import builtin
from .builtins_table import consts as _consts
from .exc import PythonError, Unsupported
from .iteration import items_of, register_iterable
from .pyops import binary_op, register_binary_rule, register_value_kind
from .rebuild_table import register_rebuilt
from .values import BuiltinValue, ConstantValue, LazyValue, ListValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer


@dataclass(eq=False)
class DequeValue(Value):
    """A deque: made in the frame, or from outside (``source``: its type, length and ``maxlen``
    guarded, its items read lazily through ``ItemSource``; a change is recorded as a side effect
    that clears and refills the real deque after the graph)."""

    items: list[Value] = field(default_factory=list)
    maxlen: int | None = None
    source: Source | None = None
    covered: bool = False
    effect_kind = "deque"                     # (side_effects.SideEffects.mutated)

    def python_type(self) -> type:
        return collections.deque

    def describe(self) -> str:
        return "collections.deque"


@dataclass(eq=False)
class DequeMethodValue(Value):
    """``d.append`` and the other methods of a deque made in the frame, not called yet."""

    deque: DequeValue
    name: str

    def python_type(self) -> type:
        return type([].append)

    def describe(self) -> str:
        return f"method deque.{self.name}"


def _trim(d: DequeValue, left: bool) -> None:
    """Drop items past ``maxlen`` from the other end than the one just added to."""
    while d.maxlen is not None and len(d.items) > d.maxlen:
        d.items.pop(0 if not left else -1)


@builtin(collections.deque)
def _deque(tx: "Tracer", args, kwargs):
    if len(args) > 2 or set(kwargs) - {"iterable", "maxlen"}:
        raise Unsupported("collections.deque() with unexpected arguments")
    src = args[0] if args else kwargs.get("iterable")
    ml = args[1] if len(args) > 1 else kwargs.get("maxlen")
    maxlen = None if ml is None else _consts([ml], "deque maxlen")[0]
    if maxlen is not None and (not isinstance(maxlen, int) or isinstance(maxlen, bool)):
        raise PythonError.of(TypeError("an integer is required"))
    if maxlen is not None and maxlen < 0:
        raise PythonError.of(ValueError("maxlen must be non-negative"))
    d = DequeValue([], maxlen)
    if src is not None and not (isinstance(src, ConstantValue) and src.value is None):
        d.items = list(items_of(tx, src))
        _trim(d, left=False)
    return d


def _index_of(tx: "Tracer", d: DequeValue, key: Value) -> int:
    ok, k = hub.as_constant(key, specialize=True)
    if not ok:
        raise Unsupported(f"indexing a deque with {key.describe()}")
    if not isinstance(k, int):
        raise PythonError.of(TypeError(f"sequence index must be integer, not '{type(k).__name__}'"))
    n = len(d.items)
    if not -n <= k < n:
        raise PythonError.of(IndexError("deque index out of range"))
    return k % n


def _find(tx: "Tracer", items: list[Value], x: Value) -> int:
    for i, item in enumerate(items):
        if hub.contains(tx, x, ListValue([item])):
            return i
    return -1


def _not_in_deque(x: Value) -> Exception:
    ok, c = hub.as_constant(x)
    if not ok:
        return Unsupported(f"a ValueError naming {x.describe()} (not in the deque)",
                           "The message holds the repr of the missing item, which is not known while tracing.")
    return PythonError.of(ValueError(f"{c!r} is not in deque"))


def _method(tx: "Tracer", m: DequeMethodValue, args: list[Value], kwargs: dict) -> Value:
    d, name = m.deque, m.name
    if kwargs:
        raise PythonError.of(TypeError(f"deque.{name}() takes no keyword arguments"))
    items = d.items
    none = ConstantValue(None)
    if name in _MUTATORS:
        hub.note_mutation(tx, d)                   # a deque from outside: a side effect
    if name == "append":
        items.append(args[0])
        _trim(d, left=False)
        return none
    if name == "appendleft":
        items.insert(0, args[0])
        _trim(d, left=True)
        return none
    if name in ("pop", "popleft"):
        if args:
            raise PythonError.of(TypeError(f"deque.{name}() takes no arguments ({len(args)} given)"))
        if not items:
            raise PythonError.of(IndexError(f"{name} from an empty deque"))
        return tx.resolve(items.pop(-1 if name == "pop" else 0))
    if name == "extend":
        for x in items_of(tx, args[0]):
            items.append(x)
            _trim(d, left=False)
        return none
    if name == "extendleft":
        for x in items_of(tx, args[0]):
            items.insert(0, x)
            _trim(d, left=True)
        return none
    if name == "clear":
        items.clear()
        return none
    if name == "copy":
        return DequeValue(list(items), d.maxlen)
    if name == "reverse":
        items.reverse()
        return none
    if name == "rotate":
        n = _consts(args, "deque.rotate")[0] if args else 1
        if not isinstance(n, int):
            raise PythonError.of(TypeError("an integer is required"))
        if items:
            n %= len(items)
            items[:] = items[len(items) - n:] + items[:len(items) - n]
        return none
    if name == "insert":
        i = _consts([args[0]], "deque.insert")[0]
        if d.maxlen is not None and len(items) >= d.maxlen:
            raise PythonError.of(IndexError("deque already at its maximum size"))
        items.insert(i, args[1])
        return none
    if name == "remove":
        i = _find(tx, items, args[0])
        if i < 0:
            raise _not_in_deque(args[0])
        del items[i]
        return none
    if name == "index":
        bounds = _consts(args[1:], "deque.index")
        lo = bounds[0] if bounds else 0
        hi = bounds[1] if len(bounds) > 1 else len(items)
        start = slice(lo, hi).indices(len(items))[0]
        i = _find(tx, items[slice(lo, hi)], args[0])
        if i < 0:
            raise _not_in_deque(args[0])
        return ConstantValue(start + i)
    if name == "count":
        return ConstantValue(sum(1 for x in items if hub.contains(tx, args[0], ListValue([x]))))
    raise Unsupported(f"method deque.{name}")


def _deque_attr(tx: "Tracer", d: DequeValue, name: str) -> Value:
    if name == "maxlen":
        return ConstantValue(d.maxlen)
    if callable(getattr(collections.deque, name, None)) and not name.startswith("__"):
        return DequeMethodValue(d, name)
    if name in ("__len__", "__iter__", "__getitem__", "__contains__"):
        return DequeMethodValue(d, name)
    raise attrs.AttrMissing(f"'collections.deque' object has no attribute {name!r}")


def _getitem(tx: "Tracer", d: DequeValue, key: Value, subclass: Value) -> Value:
    return tx.resolve(d.items[_index_of(tx, d, key)])


def _setitem(tx: "Tracer", d: DequeValue, key: Value, value: Value) -> None:
    i = _index_of(tx, d, key)
    hub.note_mutation(tx, d)
    d.items[i] = value


_MUTATORS = ("append", "appendleft", "pop", "popleft", "extend", "extendleft", "clear", "reverse",
             "rotate", "insert", "remove")


def _wrap_deque(tx: "Tracer", obj: collections.deque, source, covered) -> Value:
    """A deque from outside the frame (an argument, a module attribute, a global)."""
    if source is None:
        raise Unsupported("a collections.deque reached through library code",
                          "Only deques reached from the frame's arguments, globals and closures, or made "
                          "in the frame, can be used inside a compiled region.")
    memo = tx.memo.get(id(obj))
    if memo is not None:                                  # one object, one value (f(d, d))
        v = memo[1]
        if v.source is not None and source != v.source:
            tx.guards.same_object(v.source, source)
        return v
    tx.guards.sequence(source, obj)                       # its type and length
    tx.guards.constant(AttrSource(source, "maxlen"), obj.maxlen)
    items: list[Value] = [LazyValue(x, ItemSource(source, i)) for i, x in enumerate(obj)]
    v = DequeValue(items, obj.maxlen, source=source, covered=covered)
    tx.memo[id(obj)] = (obj, v)
    return v


def _deque_binary(tx: "Tracer", op, a: Value, b: Value) -> Value | None:
    """``d == other`` / ``d != other`` (a deque equals only a deque), ``d + d2``, ``d * n``."""
    if not (isinstance(a, DequeValue) or isinstance(b, DequeValue)):
        return None
    if op in (operator.eq, operator.ne):
        if not (isinstance(a, DequeValue) and isinstance(b, DequeValue)):
            return ConstantValue(op is operator.ne)
        eq = binary_op(tx, operator.eq, ListValue([tx.resolve(i) for i in a.items]),
                       ListValue([tx.resolve(i) for i in b.items]))
        return eq if op is operator.eq else ConstantValue(not hub.as_constant(eq)[1])
    if op in (operator.add, operator.iadd) and isinstance(a, DequeValue):
        if op is operator.iadd:
            _method(tx, DequeMethodValue(a, "extend"), [b], {})
            return a
        if not isinstance(b, DequeValue):
            raise PythonError.of(TypeError(f"can only concatenate deque (not \"{b.describe()}\") to deque"))
        r = DequeValue(list(a.items), a.maxlen)
        _method(tx, DequeMethodValue(r, "extend"), [b], {})
        return r
    return None


def _call_dunder_method(tx: "Tracer", m: DequeMethodValue, args, kwargs) -> Value:
    d = m.deque
    if m.name == "__len__":
        return ConstantValue(len(d.items))
    if m.name == "__iter__":
        return hub.call_value(tx, BuiltinValue(iter), [d], {})
    if m.name == "__getitem__":
        return _getitem(tx, d, args[0], d)
    if m.name == "__contains__":
        return ConstantValue(hub.contains(tx, args[0], d))
    return _method(tx, m, args, kwargs)


def _register() -> None:
    attrs.register_reader(DequeValue, _deque_attr)
    calls.register_caller(DequeMethodValue, _call_dunder_method)
    register_iterable(DequeValue, lambda tx, d: [tx.resolve(x) for x in d.items], lambda tx, d: len(d.items))
    register_value_kind(DequeValue, truth=lambda tx, d: bool(d.items), getitem=_getitem, setitem=_setitem)
    register_binary_rule("deque", _deque_binary, before="fold")
    wrap.register_row(lambda o: type(o) is collections.deque, _wrap_deque)
    register_rebuilt(DequeValue, lambda d: (collections.deque, [ListValue(list(d.items)), ConstantValue(d.maxlen)]))
    register_rebuilt(DequeMethodValue, lambda m: (getattr, [m.deque, ConstantValue(m.name)]))


_register()

__all__ = ["DequeValue"]
