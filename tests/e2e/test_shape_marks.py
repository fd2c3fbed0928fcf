"""mark_dynamic / maybe_mark_dynamic / mark_static: arguments checked and marks recorded (their
effect on compiles: test_dynamic_shapes.py); is_compiling()."""
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


def test_marks_are_recorded_on_the_tensor():
    from xcompile import shape_state
    x = torch.randn(3, 4, 5)
    xcompile.mark_dynamic(x, [0, 2], min=2, max=64)
    xcompile.maybe_mark_dynamic(x, 1)
    xcompile.mark_static(x, 1)
    assert shape_state.marks(x, shape_state.DYNAMIC_DIMS) == {0, 2}
    assert shape_state.marks(x, shape_state.MAYBE_DYNAMIC_DIMS) == {1}
    assert shape_state.marks(x, shape_state.STATIC_DIMS) == {1}
    assert shape_state.dim_range(x, 2) == (2, 64) and shape_state.dim_range(x, 1) == (None, None)


def test_mark_static_of_a_module_changes_nothing():
    def f(x):
        return x + 1

    cnt = CompileCounter()
    x = torch.randn(3)
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
    (lambda: xcompile.mark_dynamic(torch.ones(2), 0, min=1.5), TypeError),
    (lambda: xcompile.mark_static_address([1]), TypeError),
])
def test_bad_marks_raise(call, err):
    with pytest.raises(err):
        call()


def test_is_compiling_is_true_only_while_traced():
    def f(x):
        return x + 1 if xcompile.is_compiling() else x - 1

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x - 1)
    torch.testing.assert_close(xcompile.compile(f, backend="eager", fullgraph=True)(x), x + 1)
