"""Generators called in the traced code run lazily, like Python's: each ``next`` resumes the
generator's frontend frame until its next ``yield`` (or its end).  So a generator that is only
partly consumed does only that part of its work (and its side effects), and an endless one is
fine as long as the consumer stops.

    iter_next(tx, it)      the next item of any ITERATORS value, or None at the end
    drain(tx, it)          every remaining item (list(), sum(), unpacking...), at most MAX_ITEMS
    lazy(what, pull)       enumerate/zip/map/filter over a generator stay lazy too
    resume(tx, frame)      run a generator frame to its next yield (also used by contexts.py)

The generator protocol on generators made in the frame (``g.send(v)``, ``g.throw(e)``,
``g.close()``, ``g.__next__()``) follows CPython's ``genobject.c``:

    send(v)    the suspended ``yield`` evaluates to ``v`` (the placeholder YIELD_VALUE left on the
               stack is replaced); a generator suspended in ``yield from`` hands ``v`` on to its
               sub-generator first.  A finished generator raises StopIteration(return value).
    throw(e)   raises ``e`` at the suspended ``yield`` (through the sub-generator of a
               ``yield from`` first); caught there, the generator runs on to its next yield.
    close()    throw(GeneratorExit): finally blocks run; yielding again is a RuntimeError.

A generator object that came from outside the frame (an argument, a global) is a graph break
(``wrap.py``): its suspended Python frame cannot be traced from the middle.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import attrs, hub
from .exc import PythonError, Unsupported
from .iteration import register_iterable
from .values import (
    ConstantValue,
    GeneratorValue,
    IteratorValue,
    LazyIterValue,
    ObjectMethodValue,
    UserObjectValue,
    Value,
    is_constant,
)

if TYPE_CHECKING:
    from .tracer import Frame, Tracer

MAX_ITEMS = 100_000          # draining more than this is taken for an endless generator

ITERATORS = (IteratorValue, GeneratorValue, LazyIterValue)   # what GET_ITER produces


class OutsideGeneratorValue(UserObjectValue):
    """A generator object that came from outside the frame (``wrap.py``): it may be passed
    around, but using it (next, send, iteration, attributes) is a graph break."""

    def describe(self) -> str:
        where = f" ({self.source.name()})" if self.source is not None else ""
        return f"generator {self.obj.__qualname__} from outside the compiled frame{where}"

    def unsupported(self, what: str) -> Unsupported:
        return Unsupported(f"{what} {self.describe()}",
                           "Only generators created inside the compiled function are traced (next, send, "
                           "throw, close): create it inside, or consume it before the call (list(gen)).",
                           "A generator that is already running lives in a suspended Python frame that the "
                           "interpreter cannot enter from the middle; it runs in the normal interpreter.")


def resume(tx: "Tracer", frame: "Frame") -> None:
    """Run a generator frame until its next yield or its end."""
    assert frame.yields is not None             # a generator's frame
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
    """The next item, or None once the generator has finished (its return value in ``g.result``)."""
    if g.exhausted:
        return None
    if _delegate(g) is not None:                # suspended in `yield from`: same path as send(None)
        return _send(tx, g, ConstantValue(None))
    return _run(tx, g)


def _run(tx: "Tracer", g: GeneratorValue) -> Value | None:
    """Resume ``g``'s frame to its next yield (the item) or its end (None).  An exception leaving
    the frame finishes the generator; a StopIteration leaving it becomes RuntimeError (PEP 479)."""
    try:
        resume(tx, g.frame)
    except PythonError as e:
        g.exhausted = True
        if isinstance(hub.real_exception(e.value), StopIteration):
            raise PythonError.of(RuntimeError("generator raised StopIteration")) from None
        raise
    if g.frame.done:
        g.exhausted, g.result = True, g.frame.result
        return None
    return tx.resolve(g.frame.yields.pop())


def _started(g: GeneratorValue) -> bool:
    return g.frame.ip > 0


def _delegate(g: GeneratorValue) -> Value | None:
    """The sub-iterator of the ``yield from`` the generator is suspended in, or None.  (CPython's
    ``_PyGen_yf``: the instruction after the YIELD_VALUE is a RESUME with arg & 3 >= 2.)"""
    f = g.frame
    if g.exhausted or not _started(g) or f.done or f.ip >= len(f.instrs):
        return None
    nxt = f.instrs[f.ip]
    # (the low two bits say where the RESUME is; 3.13 adds an except-depth bit above them)
    if nxt.opname != "RESUME" or (nxt.arg or 0) & 3 < 2 or len(f.stack) < 2:
        return None
    return f.stack[-2]


def _stop(tx: "Tracer", g: GeneratorValue) -> PythonError:
    """StopIteration carrying the finished generator's return value."""
    r = tx.resolve(g.result) if g.result is not None else ConstantValue(None)
    g.result = None                             # delivered once: a later send raises a bare StopIteration
    if not isinstance(r, ConstantValue) or not is_constant(r.value):
        raise Unsupported(f"{g.describe()} returns {r.describe()} through StopIteration",
                          "Return a constant from the generator, or consume it with a for loop / next().")
    return PythonError.of(StopIteration() if r.value is None else StopIteration(r.value))


def _finish_or_item(tx: "Tracer", g: GeneratorValue, item: Value | None) -> Value:
    if item is None:
        raise _stop(tx, g)
    return item


def _send(tx: "Tracer", g: GeneratorValue, v: Value) -> Value | None:
    """send(v) without the StopIteration: the next item, or None when the generator finished."""
    if g.exhausted:
        return None
    none = isinstance(v, ConstantValue) and v.value is None
    if not _started(g):
        if not none:
            raise PythonError.of(TypeError("can't send non-None value to a just-started generator"))
        return _run(tx, g)
    sub = _delegate(g)
    if sub is not None:
        if isinstance(sub, GeneratorValue):
            try:
                item = _send(tx, sub, v)
            except PythonError as e:
                return _raise_in(tx, g, e, at_send=True)
            if item is not None:
                return item                     # the sub-generator's item passes straight through
        elif none:
            item = iter_next(tx, sub)
            if item is not None:
                return item
        else:
            raise Unsupported(f"send() through yield from {sub.describe()}")
        # the sub-iterator is finished: the frame's SEND sees that and pushes its return value
        g.frame.stack[-1] = ConstantValue(None)
        return _run(tx, g)
    g.frame.stack[-1] = v                       # what the suspended `yield` evaluates to
    return _run(tx, g)


def _raise_in(tx: "Tracer", g: GeneratorValue, err: PythonError, at_send: bool = False) -> Value | None:
    """Raise ``err`` inside the suspended generator at its ``yield`` (or at the SEND of its
    ``yield from``); caught there, run on to the next yield.  Uncaught, it leaves the generator."""
    f = g.frame
    inst = f.instrs[f.ip - 2] if at_send else f.instrs[f.ip - 1]
    if at_send:
        del f.stack[-2:]                        # the sub-iterator and the placeholder
    if not hub.handle_exception(f, inst, err):
        g.exhausted = True
        f.done = True
        raise err
    return _run(tx, g)


def gen_throw(tx: "Tracer", g: GeneratorValue, exc: Value) -> Value | None:
    """throw(exc) without the StopIteration: the next item, or None when the generator finished."""
    err = PythonError(exc)
    if g.exhausted or not _started(g):
        g.exhausted = True
        raise err
    sub = _delegate(g)
    if sub is not None:
        cls = exc_cls(exc)
        if isinstance(cls, type) and issubclass(cls, GeneratorExit):
            try:                                # close the sub-generator, then raise in this one
                gen_close(tx, sub) if isinstance(sub, GeneratorValue) else None
            except PythonError as e:
                err = e
            return _raise_in(tx, g, err, at_send=True)
        if not isinstance(sub, GeneratorValue):
            return _raise_in(tx, g, err, at_send=True)   # a plain iterator has no throw()
        try:
            item = gen_throw(tx, sub, exc)
        except PythonError as e:
            return _raise_in(tx, g, e, at_send=True)
        if item is not None:
            return item
        g.frame.stack[-1] = ConstantValue(None)  # the sub-generator returned: SEND takes its value
        return _run(tx, g)
    return _raise_in(tx, g, err)


def exc_cls(v: Value) -> type | None:
    e = hub.real_exception(v)
    return None if e is None else type(e)


def gen_close(tx: "Tracer", g: GeneratorValue) -> None:
    if g.exhausted or not _started(g):
        g.exhausted = True
        return
    try:
        item = gen_throw(tx, g, PythonError.of(GeneratorExit()).value)
    except PythonError as e:
        cls = exc_cls(e.value)
        if isinstance(cls, type) and issubclass(cls, (GeneratorExit, StopIteration)):
            return
        raise
    if item is not None:
        raise PythonError.of(RuntimeError("generator ignored GeneratorExit"))


# -- g.send / g.throw / g.close / g.__next__ --------------------------------------------------------------
GENERATOR_METHODS = ("send", "throw", "close", "__next__", "__iter__")


def generator_attr(tx: "Tracer", g: GeneratorValue, name: str) -> Value:
    if name in GENERATOR_METHODS:
        return ObjectMethodValue(g, name)
    raise Unsupported(f"reading attribute {name!r} of {g.describe()}",
                      "Only send/throw/close/__next__ of a generator made in the frame are traced.")


def call_generator_method(tx: "Tracer", g: GeneratorValue, name: str, args: list[Value],
                          kwargs: dict[str, Value]) -> Value:
    if kwargs:
        raise PythonError.of(TypeError(f"generator.{name}() takes no keyword arguments"))
    if name == "send":
        if len(args) != 1:
            raise PythonError.of(TypeError(f"send() takes exactly one argument ({len(args)} given)"))
        return _finish_or_item(tx, g, _send(tx, g, args[0]))
    if name == "__next__":
        return _finish_or_item(tx, g, gen_next(tx, g))
    if name == "__iter__":
        return g
    if name == "close":
        gen_close(tx, g)
        return ConstantValue(None)
    if name == "throw":
        if not 1 <= len(args) <= 3:
            raise PythonError.of(TypeError("throw expected at least 1 argument"))
        exc = hub.make_exception(tx, args[0])
        if len(args) > 1 and not (isinstance(args[1], ConstantValue) and args[1].value is None):
            raise Unsupported("generator.throw(type, value): pass the exception instance")
        return _finish_or_item(tx, g, gen_throw(tx, g, exc))
    raise Unsupported(f"generator.{name}")


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
    if isinstance(it, OutsideGeneratorValue):
        raise it.unsupported("next() on")
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


def _register() -> None:
    """Attribute reads on generator values (``g.send``): a row of attrs.py's reader table."""
    attrs.register_reader(GeneratorValue, generator_attr)
    attrs.register_reader(OutsideGeneratorValue, _outside_attr)


def _outside_attr(tx: "Tracer", g: OutsideGeneratorValue, name: str) -> Value:
    raise g.unsupported(f"reading attribute {name!r} of")


_register()

hub.register(
    OutsideGeneratorValue=OutsideGeneratorValue, call_generator_method=call_generator_method,
    is_lazy=is_lazy, iter_next=iter_next, lazy=lazy,
)

for _cls in (GeneratorValue, LazyIterValue):
    register_iterable(_cls, drain)
