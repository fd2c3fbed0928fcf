"""Properties whose getter, setter or deleter is not a Python function (``property(attrgetter(
"_x"))``, a ``functools.partial`` setter): called like any callable, never a crash (mypy found
that the interpreter read ``__code__`` from them)."""
import functools
import operator

import torch

import xcompile


class Holder:
    def __init__(self):
        self._x = 3.0

    x = property(operator.attrgetter("_x"))


def _store(obj, value, *, name):
    setattr(obj, name, value)


class Settable:
    def __init__(self):
        self._y = 1.0

    y = property(operator.attrgetter("_y"), functools.partial(_store, name="_y"))


def test_property_with_a_builtin_getter():
    h = Holder()

    def f(t):
        return t * h.x

    t = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(t), f(t))


def test_property_with_a_partial_setter():
    def f(t, s):
        s.y = 5.0
        return t + s.y

    t = torch.randn(3)
    s_eager, s_comp = Settable(), Settable()
    expected = f(t, s_eager)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(t, s_comp), expected)
    assert s_comp._y == s_eager._y == 5.0
