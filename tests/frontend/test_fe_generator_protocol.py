"""Generator objects made in the compiled frame: send / throw / close / __next__, through
``yield from`` too, compared with eager (results, the exception the program sees, and the
order in which finally/except blocks run).  Generators from outside the frame break."""
from __future__ import annotations

import pytest
import torch

import xcompile
from xcompile.testing import CompileCounter

LOG: list = []


def _check(fn, *args, graphs=1):
    """Eager vs compiled (fullgraph when one graph is expected): same result, same LOG."""
    xcompile.reset()
    LOG.clear()
    expected = fn(*args)
    log_e = list(LOG)
    LOG.clear()
    cnt = CompileCounter()
    actual = xcompile.compile(fn, backend=cnt, fullgraph=graphs == 1)(*args)
    assert LOG == log_e
    torch.testing.assert_close(actual, expected)
    assert cnt.frame_count == graphs
    return cnt


# -- generators used by the programs -------------------------------------------------------------------
def accumulate(x):
    total = x * 0
    while True:
        v = yield total
        if v is None:
            break
        total = total + v
    return 7


def with_finally(x):
    try:
        yield x
        yield x * 2
    finally:
        LOG.append("finally")


def catcher(x):
    while True:
        try:
            yield x
        except ValueError:
            LOG.append("caught")
            x = x * 10


def sub(x):
    v = yield x
    w = yield x * v
    return w


def outer(x):
    r = yield from sub(x)
    yield r * 2


def sub_catches_value_error(x):
    try:
        yield x
    except ValueError:
        yield x * 5


def outer_catches_key_error(x):
    try:
        yield from sub_catches_value_error(x)
        yield x * 7
    except KeyError:
        yield x * 11


def sub_finally(x):
    try:
        yield x
    finally:
        LOG.append("sub finally")


def outer_finally(x):
    try:
        yield from sub_finally(x)
    finally:
        LOG.append("outer finally")


def ignores_exit(x):
    try:
        yield x
    except GeneratorExit:
        LOG.append("ignored")
    yield x * 2                               # (closed again when collected: GeneratorExit leaves)


def raises_stop_iteration(x):
    yield x
    raise StopIteration  # PEP 479: becomes RuntimeError


# -- programs ------------------------------------------------------------------------------------------
def test_send_values_into_a_running_generator():
    def f(x):
        g = accumulate(x)
        next(g)
        g.send(x)
        g.send(x * 2)
        return g.send(x + 1)
    cnt = _check(f, torch.randn(4))
    assert cnt.op_count >= 3


def test_send_to_the_yield_expression_value():
    def gen(x):
        y = yield x
        while True:
            y = yield x * y
    def f(x):
        g = gen(x)
        a = next(g)
        return a + g.send(2) + g.send(3)
    _check(f, torch.randn(3))


def test_send_after_exhaustion_raises_stop_iteration_with_return_value_once():
    def f(x):
        g = accumulate(x)
        next(g)
        try:
            g.send(None)                      # the generator returns 7
        except StopIteration as e:
            x = x + e.value
        try:
            g.send(1)                         # finished: a bare StopIteration
        except StopIteration as e:
            x = x + 100 * (e.value is None)
        return x
    _check(f, torch.randn(3))


def test_send_non_none_to_a_just_started_generator_is_a_type_error():
    def f(x):
        g = accumulate(x)
        try:
            g.send(1)
        except TypeError:
            x = x + 1
        return x + next(g)
    _check(f, torch.randn(3))


def test_close_runs_finally_once():
    def f(x):
        g = with_finally(x)
        a = next(g)
        g.close()
        g.close()                             # closing a closed generator does nothing
        return a + 1, list(g)
    _check(f, torch.randn(3))
    assert LOG == ["finally"]


def test_close_before_start_and_after_end():
    def f(x):
        g = with_finally(x)
        g.close()                             # never started: no finally
        h = with_finally(x)
        items = list(h)                       # ran to the end: finally already ran
        h.close()
        return items, list(g)
    _check(f, torch.randn(3))
    assert LOG == ["finally"]


def test_throw_caught_inside_yields_the_next_item():
    def f(x):
        g = catcher(x)
        next(g)
        r = g.throw(ValueError("boom"))
        return r + g.throw(ValueError)       # a class is instantiated, like eager
    _check(f, torch.randn(3))
    assert LOG == ["caught", "caught"]


def test_throw_not_caught_propagates_and_finishes_the_generator():
    def f(x):
        g = with_finally(x)
        next(g)
        try:
            g.throw(KeyError("k"))
        except KeyError:
            x = x - 1
        try:
            next(g)
        except StopIteration:
            x = x * 3
        return x
    _check(f, torch.randn(3))
    assert LOG == ["finally"]


def test_throw_into_unstarted_generator_raises_without_running_it():
    def f(x):
        g = with_finally(x)
        try:
            g.throw(ValueError())
        except ValueError:
            x = x + 1
        return x, list(g)
    _check(f, torch.randn(3))
    assert LOG == []


def test_close_on_a_generator_that_ignores_generator_exit_is_a_runtime_error():
    def f(x):
        g = ignores_exit(x)
        next(g)
        try:
            g.close()
        except RuntimeError:
            return x + 1
        return x
    _check(f, torch.randn(3))
    assert LOG == ["ignored"]


def test_stop_iteration_raised_in_a_generator_becomes_runtime_error():
    def f(x):
        g = raises_stop_iteration(x)
        next(g)
        try:
            next(g)
        except RuntimeError:
            return x + 2
        return x
    _check(f, torch.randn(3))


def test_dunder_next_and_iter():
    def f(x):
        g = accumulate(x)
        assert iter(g) is g
        return g.__next__() + x
    _check(f, torch.randn(3))


def test_yield_from_forwards_send_and_returns_the_sub_generator_value():
    def f(x):
        g = outer(x)
        a = next(g)
        b = g.send(3)
        c = g.send(x)                          # sub returns x: outer yields x * 2
        return a, b, c
    _check(f, torch.randn(3))


def test_yield_from_forwards_throw_caught_in_sub_then_in_outer():
    def f(x):
        g = outer_catches_key_error(x)
        next(g)
        a = g.throw(ValueError())               # caught in the sub-generator
        b = g.throw(KeyError())                 # leaves the sub-generator, caught by the outer one
        return a, b
    _check(f, torch.randn(3))


def test_yield_from_close_runs_both_finally_blocks_inner_first():
    def f(x):
        g = outer_finally(x)
        next(g)
        g.close()
        return x + 1
    _check(f, torch.randn(3))
    assert LOG == ["sub finally", "outer finally"]


def test_generator_side_effect_before_the_graph_output():
    state = {"n": 0}

    def counting(x):
        for i in range(3):
            state["n"] += 1
            yield x * i

    def f(x):
        g = counting(x)
        a = next(g)
        b = g.send(None)
        g.close()
        return a + b
    _check(f, torch.randn(3))


# -- generators from outside the frame ----------------------------------------------------------------
def _outside(x):
    y = yield x
    while True:
        y = yield x * (1 if y is None else y)


@pytest.mark.parametrize("use", ["send", "next", "for"])
def test_generator_from_outside_the_frame_is_a_graph_break_with_a_clear_reason(use):
    def f(g, x):
        y = x * 2
        if use == "send":
            return g.send(3) + y
        if use == "next":
            return next(g) + y
        return [v + y for v in g]
    x = torch.randn(3)

    def fresh():
        g = _outside(x)
        next(g)
        return g
    xcompile.reset()
    expl = xcompile.explain(f)(fresh(), x) if use != "for" else None
    if expl is not None:
        reason = expl.break_reasons[0].reason
        assert "generator _outside from outside the compiled frame" in reason
        assert "L['g']" in reason
        assert "created inside the compiled function" in str(expl.break_reasons[0].hint)
    xcompile.reset()
    if use == "for":                              # an endless generator: only check the break
        return
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(fresh(), x), f(fresh(), x))


def test_generator_from_outside_fullgraph_error_names_it():
    def f(g, x):
        return next(g) + x
    x = torch.randn(3)
    g = _outside(x)
    next(g)
    with pytest.raises(Exception, match="generator _outside from outside the compiled frame"):
        xcompile.compile(f, fullgraph=True, backend="eager")(g, x)
    xcompile.reset()
