"""Generators called in the traced code run lazily, like Python's: each ``next`` resumes the
generator's frontend frame until its next ``yield`` (or its end).  So a generator that is only
partly consumed does only that part of its work (and its side effects), and an endless one is
fine as long as the consumer stops.

    iter_next(tx, it)      the next item of any ITERATORS value, or None at the end
    drain(tx, it)          every remaining item (list(), sum(), unpacking...), at most MAX_ITEMS
    lazy(what, pull)       enumerate/zip/map/filter over a generator stay lazy too
    resume(tx, frame)      run a generator frame to its next yield (also used by contexts.py)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .exc import Unsupported
from .values import GeneratorValue, IteratorValue, LazyIterValue, Value

if TYPE_CHECKING:
    from .tracer import Frame, Tracer

MAX_ITEMS = 100_000          # draining more than this is taken for an endless generator

ITERATORS = (IteratorValue, GeneratorValue, LazyIterValue)   # what GET_ITER produces


def resume(tx: "Tracer", frame: "Frame") -> None:
    """Run a generator frame until its next yield or its end."""
    n = len(frame.yields)
    tx.depth += 1
    try:
        while not frame.done and len(frame.yields) == n:
            frame.step()
    except Unsupported as e:
        e.user_stack.insert(0, frame.user_frame())
        raise
    finally:
        tx.depth -= 1


def gen_next(tx: "Tracer", g: GeneratorValue) -> Value | None:
    if g.exhausted:
        return None
    resume(tx, g.frame)
    if g.frame.done:
        g.exhausted, g.result = True, g.frame.result
        return None
    return tx.resolve(g.frame.yields.pop())


def iter_next(tx: "Tracer", it: Value) -> Value | None:
    """The next item, or None when the iterator is exhausted."""
    if isinstance(it, GeneratorValue):
        return gen_next(tx, it)
    if isinstance(it, LazyIterValue):
        return it.pull(tx)
    if isinstance(it, IteratorValue):
        if it.pos >= len(it.items):
            return None
        it.pos += 1
        return tx.resolve(it.items[it.pos - 1])
    raise Unsupported(f"next() on {it.describe()}")


def is_lazy(v: Value) -> bool:
    return isinstance(v, (GeneratorValue, LazyIterValue))


def lazy(what: str, pull) -> LazyIterValue:
    return LazyIterValue(pull, what)


def drain(tx: "Tracer", g: Value) -> list[Value]:
    out: list[Value] = []
    while (v := iter_next(tx, g)) is not None:
        out.append(v)
        if len(out) > MAX_ITEMS:
            raise Unsupported(f"{g.describe()} yields more than {MAX_ITEMS} items (endless?)",
                              "Consume a bounded part of it (zip with a finite sequence, islice).")
    return out
