"""Values made in the frame that Python code after the graph rebuilds by calling a function on
their parts: an iterator returned from the frame (``map`` / ``zip`` / ``itertools`` objects over
its remaining items), a ``collections.deque``...

``register_rebuilt(value_cls, parts)``: ``parts(v) -> (make, [part values])`` says how; the
object is ``make(*parts)`` with each part rebuilt first (a list of the items, usually).  The
output plan (``output.py``), the side-effect specs (``side_effects.SpecBuilder``, ``CallOf`` in
effects.py) and the replacement code of a graph break (``codegen.py``) all read this table.
"""
from __future__ import annotations

from typing import Any, Callable

from . import codegen
from .values import Value

_REBUILT: dict[type, Callable[[Any], tuple[Callable, list[Value]]]] = {}


def register_rebuilt(value_cls: type, parts: Callable[[Any], tuple[Callable, list[Value]]]) -> None:
    _REBUILT[value_cls] = parts

    def maker(b, v) -> str:
        make, items = parts(v)
        return b.assign(f"{b.const(make)}({', '.join(b.expr(p) for p in items)})")
    codegen.register_value_maker(value_cls, maker)


def is_rebuilt(v: Value) -> bool:
    return type(v) in _REBUILT


def rebuilt_parts(v: Value) -> tuple[Callable, list[Value]] | None:
    """``(make, parts)`` for a value rebuilt by a call (None: not such a value)."""
    row = _REBUILT.get(type(v))
    return None if row is None else row(v)


__all__ = ["is_rebuilt", "rebuilt_parts", "register_rebuilt"]
