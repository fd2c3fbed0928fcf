"""mark_dynamic / maybe_mark_dynamic / mark_static and dynamic=True: shapes stay static, and the
user is told so once instead of the marks being silently ignored; is_compiling()."""
import warnings

import pytest
import torch

import xcompile
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(m.message) for m in w]


def test_mark_dynamic_warns_once_and_results_match():
    def f(x):
        return x.sum(0) * 2

    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    x = torch.randn(5, 3)
    xcompile.mark_dynamic(x, 0)
    out, msgs = _warnings_of(lambda: cf(x))
    torch.testing.assert_close(out, f(x))
    assert len(msgs) == 1 and "marked dynamic" in msgs[0] and "dim 0 = 5" in msgs[0] and "L['x']" in msgs[0]
    y = torch.randn(7, 3)
    xcompile.mark_dynamic(y, 0)
    out, msgs = _warnings_of(lambda: cf(y))          # recompiles (static shapes), no second warning
    torch.testing.assert_close(out, f(y))
    assert msgs == [] and cnt.frame_count == 2


def test_mark_static_and_maybe_mark_dynamic_change_nothing():
    def f(x):
        return x + 1

    cnt = CompileCounter()
    x = torch.randn(3)
    xcompile.mark_static(x)
    xcompile.maybe_mark_dynamic(x, 0)
    xcompile.mark_static(torch.nn.Linear(2, 2))
    out, msgs = _warnings_of(lambda: xcompile.compile(f, backend=cnt)(x))
    torch.testing.assert_close(out, f(x))
    assert msgs == [] and cnt.frame_count == 1


@pytest.mark.parametrize("call, err", [
    (lambda: xcompile.mark_dynamic([1, 2], 0), TypeError),
    (lambda: xcompile.mark_dynamic(torch.ones(2), 3), IndexError),
    (lambda: xcompile.mark_dynamic(torch.ones(2), "0"), TypeError),
    (lambda: xcompile.mark_dynamic(torch.ones(2), 0, min=5, max=2), ValueError),
    (lambda: xcompile.mark_static(3), TypeError),
])
def test_bad_marks_raise(call, err):
    with pytest.raises(err):
        call()


def test_dynamic_true_warns_about_static_shapes():
    import xcompile.api as api
    api._warned_dynamic = False
    _, msgs = _warnings_of(lambda: xcompile.compile(lambda x: x, dynamic=True))
    assert any("static shapes" in m for m in msgs)


def test_is_compiling_is_true_only_while_traced():
    def f(x):
        return x + 1 if xcompile.is_compiling() else x - 1

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x - 1)
    torch.testing.assert_close(xcompile.compile(f, backend="eager", fullgraph=True)(x), x + 1)
