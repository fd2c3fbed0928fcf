"""Plain-Python functions that exercise the bytecode shapes a resume point can land in.

``CASES`` lists ``(function, make_args)``; ``make_args()`` returns fresh ``(args, kwargs)``
so that functions that mutate their inputs can be run several times. Every function is
deterministic and returns plain data (closures are called before returning).
"""
from __future__ import annotations

import functools

SCALE = 3


def straight(a, b):
    c = a * 2 + b
    d = c - a
    e = (c, d, a + b + c + d)
    return e


def loop_break_continue(n):
    total = 0
    seen = []
    for i in range(n):
        if i % 3 == 0:
            continue
        if i > 7:
            break
        total += i * SCALE
        seen.append(i)
    else:
        seen.append(-1)
    return total, seen


def while_branches(n):
    i, out = 0, []
    while i < n:
        if i % 2:
            out.append("odd")
        elif i % 3 == 0:
            out.append("three")
        else:
            out.append(str(i))
        i += 1
    return out


def nested_loops(m, n):
    grid = []
    for i in range(m):
        row = []
        for j in range(n):
            if (i + j) % 4 == 3:
                break
            row.append(i * j)
        grid.append(row)
    return grid


def try_except(xs):
    out = []
    for x in xs:
        try:
            out.append(10 // x)
        except ZeroDivisionError as e:
            out.append(type(e).__name__)
        except TypeError:
            out.append("type")
        else:
            out.append("else")
        finally:
            out.append("fin")
    return out


def try_finally_return(x):
    log = []
    try:
        log.append("body")
        if x > 0:
            return log, x
        log.append("after")
    finally:
        log.append("finally")
    return log, -x


class Recorder:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def __enter__(self):
        self.log.append(("enter", self.name))
        return self.name.upper()

    def __exit__(self, *exc):
        self.log.append(("exit", self.name, exc[0].__name__ if exc[0] else None))
        return exc[0] is KeyError


def with_blocks(n):
    log = []
    with Recorder(log, "a") as a:
        log.append(a)
        with Recorder(log, "b") as b:
            log.append(b * n)
    with Recorder(log, "c"):
        if n > 1:
            raise KeyError("swallowed")
        log.append("not reached")
    for i in range(n):
        with Recorder(log, f"loop{i}"):
            if i == 1:
                break
    return log


def closures(a):
    b = a + 1

    def inner(x):
        return x + a + b

    b = b * 10          # after the closure exists: the cell must be shared
    first = inner(1)
    b = -b
    return first, inner(2)


def nonlocal_counter(n):
    count = 0

    def bump(k):
        nonlocal count
        count += k
        return count

    for i in range(n):
        bump(i)
    return count, bump(100)


def make_adder(k):
    def adder(xs):
        total = k
        for x in xs:
            total += x * k
        return total
    return adder


closure_fn = make_adder(5)


def comprehensions(xs):
    sq = [x * x for x in xs if x % 2]
    d = {x: [y for y in range(x)] for x in xs[:3]}
    s = {x % 3 for x in xs}
    g = sum(x for x in xs)
    fs = [lambda: x for x in xs[:3]]
    return sq, d, sorted(s), g, [f() for f in fs]


def varargs(a, *args, scale=2, **kwargs):
    total = a
    for v in args:
        total += v * scale
    keys = sorted(kwargs)
    return total, keys, args, [kwargs[k] for k in keys]


def posonly_kwonly(a, b=2, /, c=3, *, d, e=5):
    return [a, b, c, d, e, a * d + e]


def method_calls(words):
    out = []
    for w in words:
        out.append(w.upper().replace("A", "4"))
    joined = "-".join(sorted(out, key=len, reverse=True))
    return joined.split("-"), len(joined)


def nested_calls(a, b):
    return max(a, min(b, abs(a - b)), key=lambda v: (v % 5, v)), divmod(a * b + 7, max(b, 1))


def star_calls(xs, kw):
    def f(*a, **k):
        return a, sorted(k.items())
    return f(*xs, **kw), f(1, *xs, z=3, **kw)


def chained_compare(xs):
    out = []
    for x in xs:
        out.append(0 < x < 10 and x != 5 or x == -1)
        out.append(x if x > 3 else -x)
    return out


def fstrings(name, n):
    return f"{name!r}:{n:>5}|{n * 2:x}|{name.upper()}"


def unpacking(seq):
    a, *rest, z = seq
    (p, q), r = (a, z), len(rest)
    first, second = rest[:2] if len(rest) >= 2 else (None, None)
    return a, rest, z, p, q, r, first, second


def deletes(flag):
    x = 1
    y = 2
    del x
    if flag:
        x = 3
    return x + y    # UnboundLocalError when not flag


def raises_late(n):
    total = sum(range(n))
    if total > 5:
        raise ValueError(f"too big: {total}")
    return total


def match_stmt(values):
    out = []
    for v in values:
        match v:
            case [x, y, *rest]:
                out.append(("seq", x, y, len(rest)))
            case {"k": k}:
                out.append(("map", k))
            case int(n) if n > 2:
                out.append(("int", n))
            case _:
                out.append(("other", repr(v)))
    return out


def asserts(x):
    assert x >= 0, f"negative {x}"
    y = x * 2
    assert y != 4, "four"
    return y


def boolean_ops(a, b, c):
    r1 = a and b or c
    r2 = (a or b) and not c
    r3 = a if b else c
    return r1, r2, r3, [v for v in (a, b, c) if v]


def loop_with_try_break(xs):
    found = None
    for x in xs:
        try:
            if x < 0:
                found = x
                break
            found = 1 / x
        except ZeroDivisionError:
            continue
        finally:
            found = (found, "f")
    return found


def global_reads(n):
    return [SCALE * i for i in range(n)] + [functools.reduce(lambda p, q: p + q, range(n), 0)]


class Base:
    def describe(self, tag):
        return f"base:{tag}"


class Child(Base):
    def describe(self, tag):
        prefix = tag * 2
        head = super().describe(prefix)
        parts = [head, tag]
        return "/".join(parts) + str(len(super().describe("x")))


def super_method(tag):
    return Child().describe(tag)


def make_nested(k):
    def middle(xs):
        acc = []

        def push(v):
            acc.append(v * k)

        for x in xs:
            push(x)
        return acc, k
    return middle


nested_closure = make_nested(3)


def big_source(n_locals: int = 300, n_branch: int = 120) -> str:
    """A function big enough for EXTENDED_ARG: many locals and constants, long jumps, and a
    try block whose exception-table rows need multi-byte varints."""
    lines = ["def big(flag, xs):"]
    lines += [f"    v{i} = {i} * 1.5 + len(xs)" for i in range(n_locals)]
    lines.append("    total = 0")
    lines.append("    for x in xs:")
    lines.append("        try:")
    lines.append("            if flag:")
    lines += [f"                total += x * v{i} - {i + 1000}" for i in range(n_branch)]
    lines.append("            else:")
    lines.append("                total -= x")
    lines.append("            total += 1 / x")
    lines.append("        except ZeroDivisionError:")
    lines.append("            total += 0.25")
    lines.append(f"    return total + v{n_locals - 1} + v0")
    return "\n".join(lines)


def make_big_function(n_locals: int = 300, n_branch: int = 120):
    ns: dict = {}
    exec(compile(big_source(n_locals, n_branch), "<big>", "exec"), ns)  # noqa: S102  (a program made by the test)
    return ns["big"]


CASES = [
    (straight, lambda: ((3, 4), {})),
    (loop_break_continue, lambda: ((12,), {})),
    (while_branches, lambda: ((7,), {})),
    (nested_loops, lambda: ((4, 5), {})),
    (try_except, lambda: (([5, 0, "s", 2],), {})),
    (try_finally_return, lambda: ((3,), {})),
    (try_finally_return, lambda: ((-2,), {})),
    (with_blocks, lambda: ((2,), {})),
    (closures, lambda: ((4,), {})),
    (nonlocal_counter, lambda: ((5,), {})),
    (closure_fn, lambda: (([1, 2, 3],), {})),
    (comprehensions, lambda: (([1, 2, 3, 4, 5],), {})),
    (varargs, lambda: ((1, 2, 3), {"scale": 3, "q": 1, "p": 2})),
    (posonly_kwonly, lambda: ((1,), {"d": 4})),
    (method_calls, lambda: ((["abc", "banana", "x"],), {})),
    (nested_calls, lambda: ((17, 5), {})),
    (star_calls, lambda: (((1, 2), {"a": 1}), {})),
    (chained_compare, lambda: (([1, 5, 12, -1, 4],), {})),
    (fstrings, lambda: (("bob", 21), {})),
    (unpacking, lambda: (([1, 2, 3, 4, 5],), {})),
    (deletes, lambda: ((True,), {})),
    (deletes, lambda: ((False,), {})),
    (raises_late, lambda: ((5,), {})),
    (match_stmt, lambda: (([[1, 2, 3], {"k": 9}, 5, 1, "s"],), {})),
    (asserts, lambda: ((3,), {})),
    (asserts, lambda: ((2,), {})),
    (boolean_ops, lambda: ((0, 2, 3), {})),
    (boolean_ops, lambda: ((1, 0, 0), {})),
    (loop_with_try_break, lambda: (([2, 0, 4, -3, 5],), {})),
    (global_reads, lambda: ((4,), {})),
    (Child.describe, lambda: ((Child(), "t"), {})),
    (super_method, lambda: (("q",), {})),
    (nested_closure, lambda: (([1, 2],), {})),
]


def gen_squares(n):
    for i in range(n):
        try:
            yield i * i
        finally:
            pass
    yield from range(2)
    return "done"


def gen_with_send():
    total = 0
    while True:
        got = yield total
        if got is None:
            return total
        total += got


async def _coro_inner(x):
    return x * 2


async def coro(xs):
    out = []
    for x in xs:
        out.append(await _coro_inner(x))
    return out
