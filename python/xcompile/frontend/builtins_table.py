"""The table of Python builtins and stdlib callables the interpreter runs over symbolic values.

``BUILTINS[fn]`` is ``handler(tx, args, kwargs) -> Value``; rows are added with ``@builtin(fn, ...)``
by ``builtins_rules.py`` (the builtins), ``builtins_more.py`` (itertools, collections, operator,
setattr...) and ``introspection.py`` (inspect); ``builtins_rules`` imports the other two, so
importing it fills the whole table.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .exc import Unsupported
from .pyops import as_constant
from .values import Value

if TYPE_CHECKING:
    from .tracer import Tracer

Handler = Callable[["Tracer", list, dict], Value]
BUILTINS: dict[Any, Handler] = {}


def builtin(*fns: Any) -> Callable[[Handler], Handler]:
    def deco(h: Handler) -> Handler:
        for fn in fns:
            BUILTINS[fn] = h
        return h
    return deco


def consts(args: list[Value], what: str) -> list[Any]:
    """The Python constants ``args`` stand for; Unsupported naming ``what`` if one is not constant."""
    out = []
    for a in args:
        ok, c = as_constant(a, specialize=True)
        if not ok:
            raise Unsupported(f"{what} on {a.describe()}")
        out.append(c)
    return out


__all__ = ["BUILTINS", "Handler", "builtin", "consts"]
