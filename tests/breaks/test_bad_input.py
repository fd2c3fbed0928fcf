"""Bad input gets a clear error or a clean eager fallback (README, "Bad input")."""
from __future__ import annotations

import asyncio
import math
import warnings

import pytest
import torch

import xcompile
import xcompile.testing
from xcompile.exc import BackendCompilerFailed


def _f(x):
    return x + 1


def _broken(x):
    y = x + 1
    xcompile.graph_break()
    return y * 2


def _raising_backend(gm, example_inputs):
    raise ValueError("backend exploded")


@pytest.mark.parametrize("fn", [_f, _broken])
def test_backend_that_raises(fn):
    with pytest.raises(BackendCompilerFailed) as info:
        xcompile.compile(fn, backend=_raising_backend)(torch.randn(3))
    msg = str(info.value)
    assert "backend='_raising_backend'" in msg and "ValueError: backend exploded" in msg
    assert fn.__name__ in msg and "suppress_errors" in msg
    assert isinstance(info.value.inner, ValueError)


def test_backend_that_raises_with_suppress_errors_runs_the_graph_eagerly():
    x = torch.randn(3)
    with xcompile.config.patch(suppress_errors=True), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = xcompile.compile(_broken, backend=_raising_backend)(x)
    torch.testing.assert_close(out, _broken(x))
    assert any("failed on '_broken'" in str(m.message) for m in w)


def test_backend_that_returns_a_non_callable():
    with pytest.raises(BackendCompilerFailed, match="returned int, which is not callable"):
        xcompile.compile(_f, backend=lambda gm, ex: 42)(torch.randn(3))


def test_backend_that_is_not_a_backend():
    with pytest.raises((TypeError, ValueError)):
        xcompile.compile(_f, backend=42)(torch.randn(3))
    with pytest.raises(ValueError, match="unknown backend"):
        xcompile.compile(_f, backend="no_such_backend")


def test_builtin_function_runs_eagerly():
    assert xcompile.compile(math.sqrt)(9.0) == 3.0
    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(torch.sin)(x), torch.sin(x))
    assert xcompile.compile(len)([1, 2]) == 2


def test_callable_object_runs_eagerly_and_its_frames_compile():
    cnt = xcompile.testing.CompileCounter()

    class Scale:
        def __call__(self, x):
            return x * 3

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(Scale(), backend=cnt)(x), x * 3)
    assert cnt.frame_count == 1


def test_generator_function_runs_eagerly():
    def gen(x):
        for i in range(3):
            yield x + i

    x = torch.randn(2)
    out = list(xcompile.compile(gen)(x))
    assert len(out) == 3 and all(torch.equal(o, x + i) for i, o in enumerate(out))
    # the frontend refuses a generator frame: an error with fullgraph, else the frame runs eagerly
    import builtins

    from xcompile.frontend import graph_break
    from xcompile.frontend.capture import FrameState
    frame = FrameState(gen.__code__, {"x": x}, globals(), builtins.__dict__, None)
    with pytest.raises(xcompile.exc.Unsupported, match="generator"):
        graph_break.capture(frame, fullgraph=True)
    assert isinstance(graph_break.capture(frame), graph_break.EagerFrame)


def test_coroutine_function_runs_eagerly():
    async def co(x):
        return x * 2

    x = torch.randn(2)
    torch.testing.assert_close(asyncio.run(xcompile.compile(co)(x)), x * 2)


def test_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="expects a callable"):
        xcompile.compile(42)
    with pytest.raises(TypeError):
        xcompile.allow_in_graph(42)
    with pytest.raises(TypeError):
        xcompile.disable(42)
