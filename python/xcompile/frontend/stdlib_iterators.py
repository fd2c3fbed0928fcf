"""Iterator objects of the builtins and ``itertools`` beyond the finite lists of builtins_more.py:

    itertools.count      endless: advanced one item at a time (zip, next, a loop with a break)
    itertools.repeat     without ``times``: endless, the same object each time
    itertools.groupby    (key, group) pairs, the groups sharing the source as in CPython: a group
                         left behind when the outer iterator advances is empty from then on

and how an iterator made in the frame outlives it.  Eager returns the iterator object itself
(``return map(f, xs)``): the trace has computed its items already, so after the graph an
iterator of the same type over the remaining items is rebuilt (``REBUILD``, through
``rebuild_table``): ``map(identity, items)``, ``zip(*columns)``, ``itertools.count(next, step)``...
An iterator kind with no rebuild here (``itertools.product``, a group of groupby) is a graph break
when it would outlive the frame.
"""
from __future__ import annotations

import collections
import itertools
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from . import hub
from .builtins_table import BUILTINS
from .exc import Unsupported
from .iteration import items_of, register_iterable
from .pyops import binary_op, truth
from .rebuild_table import register_rebuilt
from .stdlib_deque import DequeValue
from .values import (
    ConstantValue,
    DictValue,
    DictViewValue,
    IteratorValue,
    LazyIterValue,
    ListValue,
    SetValue,
    TensorValue,
    TupleValue,
    Value,
)

if TYPE_CHECKING:
    from .tracer import Tracer

_LIST_ITERATOR: type = type(iter([]))
_TUPLE_ITERATOR = type(iter(()))
_RANGE_ITERATOR = type(iter(range(0)))
_DICT_KEY_ITERATOR: type = type(iter({}))
_DICT_VALUE_ITERATOR: type = type(iter({}.values()))
_DICT_ITEM_ITERATOR: type = type(iter({}.items()))
_GROUPER = type(next(itertools.groupby([0]))[1])


# -- rebuilding an iterator of the same type over the remaining items (run after the graph) --------------
def _identity(x):
    return x


def _always(x):
    return True


def _never(x):
    return False


def _second(a, b):
    return b


def _zip_rows(rows):
    return zip(*[list(c) for c in zip(*rows)]) if rows else zip()


def _enumerate_rows(rows):
    return enumerate([v for _, v in rows], rows[0][0]) if rows else enumerate(())


def _range_items(items):
    if not items:
        return iter(range(0))
    step = items[1] - items[0] if len(items) > 1 else 1
    return iter(range(items[0], items[-1] + step, step))


def _repeat_items(items):
    return itertools.repeat(items[0], len(items)) if items else itertools.repeat(None, 0)


def _zip_longest_rows(rows):
    return itertools.zip_longest(*[list(c) for c in zip(*rows)]) if rows else itertools.zip_longest()


# eager iterator type -> function(remaining items as a list) -> an iterator of that type
REBUILD: dict[type, Callable[[list], Any]] = {
    _LIST_ITERATOR: iter,
    _TUPLE_ITERATOR: lambda items: iter(tuple(items)),
    _RANGE_ITERATOR: _range_items,
    _DICT_KEY_ITERATOR: lambda items: iter(dict.fromkeys(items)),
    _DICT_VALUE_ITERATOR: lambda items: iter(dict(enumerate(items)).values()),
    _DICT_ITEM_ITERATOR: lambda items: iter(dict(items).items()),
    type(iter(collections.deque())): lambda items: iter(collections.deque(items)),
    type(iter(b"")): lambda items: iter(bytes(items)),
    type(reversed([])): lambda items: reversed(items[::-1]),
    reversed: lambda items: reversed(tuple(items[::-1])),
    map: lambda items: map(_identity, items),
    zip: _zip_rows,
    filter: lambda items: filter(_always, items),
    enumerate: _enumerate_rows,
    itertools.chain: lambda items: itertools.chain(items),
    itertools.islice: lambda items: itertools.islice(items, None),
    itertools.accumulate: lambda items: itertools.accumulate(items, _second),
    itertools.starmap: lambda items: itertools.starmap(_identity, [(x,) for x in items]),
    itertools.takewhile: lambda items: itertools.takewhile(_always, items),
    itertools.dropwhile: lambda items: itertools.dropwhile(_never, items),
    itertools.filterfalse: lambda items: itertools.filterfalse(_never, items),
    itertools.compress: lambda items: itertools.compress(items, [True] * len(items)),
    itertools.repeat: _repeat_items,
    itertools.zip_longest: _zip_longest_rows,
}


def _iterator_parts(v: IteratorValue):
    kind = v.kind if v.kind is not None else _LIST_ITERATOR
    make = REBUILD.get(kind)
    if make is None:
        raise Unsupported(f"a {getattr(kind, '__qualname__', kind)} iterator made in the compiled frame outlives it",
                          "Consume it inside the compiled function (list(...)), or return a list.")
    return make, [ListValue(list(v.items[v.pos:]))]


register_rebuilt(IteratorValue, _iterator_parts)


def _kinded(handler, kind_of: Callable[[list], Any]):
    """A handler whose IteratorValue result records the eager iterator's type."""
    def h(tx, args, kwargs):
        r = handler(tx, args, kwargs)
        if isinstance(r, IteratorValue) and r.kind is None:
            r.kind = kind_of(args)
        return r
    return h


class UnknownIterator:
    """The type of an iterator whose eager type the trace does not know (``iter()`` of a user object,
    of a set...): it is an iterator, and one that outlives the frame is a graph break."""

    def __iter__(self):  # pragma: no cover  (a type for isinstance only)
        return self

    def __next__(self):  # pragma: no cover
        raise StopIteration


def _iter_kind(args) -> Any:
    if len(args) != 1:
        return UnknownIterator
    v = args[0]
    if isinstance(v, ListValue):
        return None                                     # a list iterator
    if isinstance(v, (TupleValue, TensorValue)):        # (namedtuples, torch.Size; a tensor's rows)
        return _TUPLE_ITERATOR
    if isinstance(v, ConstantValue) and type(v.value) in (range, tuple, str, bytes, frozenset):
        return type(iter(v.value))
    if isinstance(v, DictValue):
        return type(iter(v.cls()))
    if isinstance(v, DictViewValue):
        return type(iter(getattr(v.dict_value.cls(), v.kind)()))
    if isinstance(v, SetValue):
        return type(iter(set()))
    if isinstance(v, DequeValue):
        return type(iter(collections.deque()))
    return UnknownIterator


def _reversed_kind(args) -> Any:
    return type(reversed([])) if isinstance(args[0], ListValue) else reversed


for _fn, _kind in ((map, lambda args: map), (zip, lambda args: zip), (filter, lambda args: filter),
                   (enumerate, lambda args: enumerate), (reversed, _reversed_kind), (iter, _iter_kind)):
    BUILTINS[_fn] = _kinded(BUILTINS[_fn], _kind)


# -- endless iterators -------------------------------------------------------------------------------------
@dataclass(eq=False)
class CountValue(LazyIterValue):
    """``itertools.count(start, step)``: ``current`` is the next item."""

    current: Value | None = None
    step: Value | None = None

    def python_type(self) -> type:
        return itertools.count

    def describe(self) -> str:
        return "itertools.count"


def _count_pull(v: CountValue):
    def pull(tx: "Tracer") -> Value:
        item, step = v.current, v.step
        assert item is not None and step is not None
        v.current = binary_op(tx, operator.add, item, step)
        return item
    return pull


def _count(tx, args, kwargs):
    if len(args) > 2 or set(kwargs) - {"start", "step"}:
        raise Unsupported("itertools.count() with unexpected arguments")
    start = args[0] if args else kwargs.get("start", ConstantValue(0))
    step = args[1] if len(args) > 1 else kwargs.get("step", ConstantValue(1))
    for a in (start, step):
        ok, c = hub.as_constant(a)
        if not ok or not isinstance(c, (int, float)):
            raise Unsupported(f"itertools.count() over {a.describe()}",
                              "Only int and float starts and steps are supported.")
    v = CountValue(None, "itertools.count", start, step)
    v.pull = _count_pull(v)
    return v


BUILTINS[itertools.count] = _count


@dataclass(eq=False)
class RepeatValue(LazyIterValue):
    """``itertools.repeat(obj)`` without ``times``: ``obj`` forever."""

    obj: Value | None = None

    def python_type(self) -> type:
        return itertools.repeat

    def describe(self) -> str:
        return "itertools.repeat"


def _repeat(tx, args, kwargs):
    times = args[1] if len(args) > 1 else kwargs.get("times")
    obj = args[0] if args else kwargs.get("object")
    if obj is None:
        raise Unsupported("itertools.repeat() without an object")
    if times is None:
        v = RepeatValue(None, "itertools.repeat", obj)
        v.pull = lambda tx: v.obj
        return v
    n = hub.as_constant(times, specialize=True)
    if not n[0] or not isinstance(n[1], int):
        raise Unsupported(f"itertools.repeat() {times.describe()} times")
    return IteratorValue([obj] * max(n[1], 0), kind=itertools.repeat)


BUILTINS[itertools.repeat] = _repeat


def _endless(tx, v) -> list[Value]:
    raise Unsupported(f"consuming all of an endless {v.describe()}",
                      "The same code never ends in eager mode; consume a bounded part (zip with a "
                      "finite sequence, itertools.islice, a loop with a break).")


register_iterable(CountValue, _endless)
register_iterable(RepeatValue, _endless)
register_rebuilt(CountValue, lambda v: (itertools.count, [v.current, v.step]))
register_rebuilt(RepeatValue, lambda v: (itertools.repeat, [v.obj]))


# -- groupby -----------------------------------------------------------------------------------------------
@dataclass(eq=False)
class GroupbyValue(LazyIterValue):
    """``itertools.groupby(iterable, key)``: ``items`` / ``keys`` of the source, ``pos`` the next
    item not yet grouped, ``group`` the last group handed out (emptied when the outer advances)."""

    items: list | None = None
    keys: list | None = None
    pos: int = 0
    group: IteratorValue | None = None

    def python_type(self) -> type:
        return itertools.groupby

    def describe(self) -> str:
        return "itertools.groupby"


def _groupby_pull(v: GroupbyValue):
    def pull(tx: "Tracer") -> Value | None:
        if v.group is not None:                  # the shared source moved on: the old group is empty
            v.group.pos = len(v.group.items)
        items, keys = v.items, v.keys
        assert items is not None and keys is not None
        if v.pos >= len(items):
            return None
        start, key = v.pos, keys[v.pos]
        v.pos += 1
        while v.pos < len(items) and truth(tx, binary_op(tx, operator.eq, keys[v.pos], key)):
            v.pos += 1
        v.group = IteratorValue(items[start:v.pos], kind=_GROUPER)
        return TupleValue([key, v.group])
    return pull


def _groupby(tx, args, kwargs):
    if len(args) > 2 or set(kwargs) - {"iterable", "key"}:
        raise Unsupported("itertools.groupby() with unexpected arguments")
    src = args[0] if args else kwargs.get("iterable")
    if src is None:
        raise Unsupported("itertools.groupby() without an iterable")
    key = args[1] if len(args) > 1 else kwargs.get("key")
    items = items_of(tx, src)
    if key is None or (isinstance(key, ConstantValue) and key.value is None):
        keys = list(items)
    else:
        keys = [hub.call_value(tx, key, [i], {}) for i in items]
    v = GroupbyValue(None, "itertools.groupby", items, keys)
    v.pull = _groupby_pull(v)
    return v


BUILTINS[itertools.groupby] = _groupby


__all__ = ["REBUILD", "CountValue", "GroupbyValue", "RepeatValue", "UnknownIterator"]
