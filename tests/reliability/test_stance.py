"""xcompile.set_stance: every stance, as a function, a context manager and a decorator, with
torch.compiler.set_stance's meanings (checked against it where torch's behaviour is the spec)."""
import pytest
import torch

import xcompile
from xcompile.exc import RecompileError
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    xcompile.set_stance("default")
    yield
    xcompile.set_stance("default")
    xcompile.reset()


def fn(x):
    return x.sin() + 1


def test_force_eager_runs_the_original_and_compiles_nothing():
    runs = []

    def counting(gm, example_inputs):
        def run(*args):
            runs.append(1)
            return gm(*args)
        return run

    f = xcompile.compile(fn, backend=counting)
    x = torch.randn(3)
    f(x)
    assert runs == [1]
    with xcompile.set_stance("force_eager"):
        torch.testing.assert_close(f(x), fn(x))
        torch.testing.assert_close(f(torch.ones(5, 2)), fn(torch.ones(5, 2)))   # new shape: no compile
        assert xcompile._C.get_force_eager()
    assert runs == [1]                     # neither the cached graph nor a new one ran
    f(x)
    assert runs == [1, 1]                  # back to the cached graph
    assert not xcompile._C.get_force_eager()


def test_eager_on_recompile_uses_what_is_cached():
    cnt = CompileCounter()
    f = xcompile.compile(fn, backend=cnt, dynamic=False)
    f(torch.randn(3))
    xcompile.set_stance("eager_on_recompile")
    torch.testing.assert_close(f(torch.ones(4)), fn(torch.ones(4)))     # would recompile: eager
    f(torch.randn(3))                                                       # cached: used
    assert cnt.frame_count == 1


def test_fail_on_recompile_names_the_guard():
    f = xcompile.compile(fn, backend="eager", dynamic=False)
    f(torch.randn(3))
    with xcompile.set_stance("fail_on_recompile"):
        f(torch.randn(3))                                                   # a hit: fine
        with pytest.raises(RecompileError, match="fail_on_recompile.*function name: 'fn'(.|\n)*size"):
            f(torch.randn(4))
    f(torch.randn(4))                                                       # default again: compiles


def test_fail_on_recompile_also_refuses_a_first_compile_like_torch():
    with xcompile.set_stance("fail_on_recompile"):
        with pytest.raises(RecompileError):
            xcompile.compile(fn, backend="eager")(torch.randn(3))
    torch._dynamo.reset()
    with torch.compiler.set_stance("fail_on_recompile"):
        with pytest.raises(Exception, match="fail_on_recompile"):
            torch.compile(fn, backend="eager")(torch.randn(3))
    torch._dynamo.reset()


def test_eager_then_compile():
    cnt = CompileCounter()
    f = xcompile.compile(fn, backend=cnt)
    with xcompile.set_stance("eager_then_compile"):
        f(torch.randn(3))
        assert cnt.frame_count == 0
        f(torch.randn(3))
        assert cnt.frame_count == 1


def test_aot_eager_then_compile():
    cnt = CompileCounter()
    f = xcompile.compile(fn, backend=cnt)
    with xcompile.set_stance("aot_eager_then_compile"):
        x = torch.randn(3)
        torch.testing.assert_close(f(x), fn(x))
        assert cnt.frame_count == 0          # the first call compiled with aot_eager
        f(torch.randn(3))
        assert cnt.frame_count == 1


def test_force_backend_and_decorator_form():
    cnt = CompileCounter()
    f = xcompile.compile(fn, backend="inductor")

    @xcompile.set_stance(force_backend=cnt)
    def run(x):
        return f(x)

    assert xcompile.stance.current().backend is None        # a decorator: not in force yet
    x = torch.randn(3)
    torch.testing.assert_close(run(x), fn(x))
    torch.testing.assert_close(run(x), fn(x))
    assert cnt.frame_count == 1                               # compiled once with the forced backend
    assert xcompile.stance.current().backend is None

    @xcompile.set_stance("force_eager")
    def eager(x):
        return f(x)

    eager(torch.ones(7))
    assert not xcompile._C.get_force_eager()


def test_bad_stances_are_clear_errors():
    with pytest.raises(RuntimeError, match="invalid torch.compile stance 'fast'"):
        xcompile.set_stance("fast")
    with pytest.raises(RuntimeError, match="non-default stance cannot have force_backend"):
        xcompile.set_stance("force_eager", force_backend="eager")
    assert xcompile.stance.current().stance == "default"
