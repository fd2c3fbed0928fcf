"""The generator protocol on generators made in the frame: send / throw / close / __next__,
through ``yield from`` as well; finally blocks and StopIteration after exhaustion."""

from .harness import CaseTable, rn

T = CaseTable("generator_protocol")


def _running_sum(x):
    total = x * 0
    while True:
        v = yield total
        if v is None:
            return 3
        total = total + v


@T.case(rn(3, 4))
def send_accumulates(a):
    g = _running_sum(a)
    next(g)
    g.send(a)
    g.send(a.sin())
    return g.send(a * 2)


@T.case(rn(5))
def send_after_exhaustion_stop_iteration(a):
    g = _running_sum(a)
    next(g)
    g.send(a)
    try:
        g.send(None)
    except StopIteration as e:
        a = a * e.value
    try:
        g.send(a)
    except StopIteration as e:
        a = a + (e.value is None)
    return a


def _scaled(a):
    scale = 1.0
    while True:
        try:
            a = a * scale
            yield a
        except ValueError:
            scale = -scale
        except KeyError:
            return


@T.case(rn(4))
def throw_caught_changes_state(a):
    g = _scaled(a)
    first = next(g)
    second = g.throw(ValueError("flip"))
    third = g.throw(ValueError)
    try:
        g.throw(KeyError("stop"))
    except StopIteration:
        first = first + 1
    return first, second, third


def _with_finally(a, log):
    try:
        yield a
        yield a + 1
    finally:
        log.append(a.shape[0])


@T.case(rn(6))
def close_runs_finally(a):
    log = []
    g = _with_finally(a, log)
    r = next(g)
    g.close()
    g.close()
    return r * len(log), log, list(g)


@T.case(rn(3))
def throw_propagates_through_finally(a):
    log = []
    g = _with_finally(a, log)
    next(g)
    try:
        g.throw(IndexError("out"))
    except IndexError:
        a = a * 2
    return a, log


def _inner(a):
    got = yield a
    got2 = yield a * got
    return got2 + 1


def _outer(a):
    r = yield from _inner(a)
    yield a * r


@T.case(rn(2, 3))
def yield_from_send_and_return_value(a):
    g = _outer(a)
    x = next(g)
    y = g.send(2.0)
    z = g.send(4.0)
    return x, y, z


def _inner_catch(a):
    try:
        yield a
    except ValueError:
        yield a.cos()


def _outer_catch(a, log):
    try:
        yield from _inner_catch(a)
    except KeyError:
        yield a.sin()
    finally:
        log.append("outer")


@T.case(rn(4))
def yield_from_throw_inner_then_outer(a):
    log = []
    g = _outer_catch(a, log)
    next(g)
    p = g.throw(ValueError())
    q = g.throw(KeyError())
    g.close()
    return p, q, log


@T.case(rn(4))
def yield_from_close_inner_first(a):
    log = []

    def inner():
        try:
            yield a
        finally:
            log.append("inner")

    def outer():
        try:
            yield from inner()
        finally:
            log.append("outer")
    g = outer()
    r = next(g) * 2
    g.close()
    return r, log


@T.case(rn(3))
def dunder_next_and_partial_consumption(a):
    g = (a * i for i in range(10))
    first = g.__next__()
    second = next(g)
    g.close()
    return first + second, list(g)
