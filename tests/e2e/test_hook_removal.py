"""The eval-frame hook is installed only while a thread is inside a compiled region, and removed
on every path out: normal return, exception, KeyboardInterrupt, backend failure, Unsupported."""
import threading

import pytest
import torch


def _ext():
    """xcompile._C, imported on use: collecting this file must not load the extension."""
    from xcompile import _C
    return _C


def _state():
    return _ext().hook_installed(), _ext().get_callback()


@pytest.fixture(autouse=True)
def outside_is_clean(xc):
    assert _state() == (False, None), "the hook is installed before the test starts"
    yield
    assert _state() == (False, None), "the hook is still installed after the test"


class Probe:
    """Records the hook state from inside a region; the call to _C is not capturable, so the
    frame that makes it runs eagerly (with the callback set, as for any graph break)."""

    def __init__(self):
        self.seen = []

    def __call__(self, x):
        self.seen.append(_state())
        return x


PATHS = {
    "return": None,
    "exception": ValueError("from user code"),
    "keyboard_interrupt": KeyboardInterrupt(),
}


def _region(probe, exc):
    def user_fn(x):
        y = probe(x * 2)
        if exc is not None:
            raise exc
        return y + 1
    return user_fn


@pytest.mark.parametrize("path", list(PATHS))
def test_compiled_function_paths_out(xc, path):
    probe, exc = Probe(), PATHS[path]
    f = xc.compile(_region(probe, exc), backend=xc.testing.CompileCounter())
    x = torch.randn(3)
    if exc is None:
        torch.testing.assert_close(f(x), x * 2 + 1)
    else:
        with pytest.raises(type(exc)) as info:
            f(x)
        assert info.value is exc
    assert probe.seen and all(installed and cb is not None for installed, cb in probe.seen), probe.seen
    assert _state() == (False, None)


@pytest.mark.parametrize("path", list(PATHS))
def test_optimize_context_paths_out(xc, path):
    exc = PATHS[path]
    cnt = xc.testing.CompileCounter()

    def body():
        with xc.optimize(cnt):
            assert _state()[0] is True and _state()[1] is not None
            out = (lambda t: t.cos() + 1)(torch.randn(2))
            if exc is not None:
                raise exc
            return out

    if exc is None:
        body()
    else:
        with pytest.raises(type(exc)):
            body()
    assert _state() == (False, None)


@pytest.mark.parametrize("path", list(PATHS))
def test_optimize_decorator_paths_out(xc, path):
    probe, exc = Probe(), PATHS[path]
    f = xc.optimize(xc.testing.CompileCounter())(_region(probe, exc))
    if exc is None:
        f(torch.randn(2))
    else:
        with pytest.raises(type(exc)):
            f(torch.randn(2))
    assert _state() == (False, None)


def test_keyboard_interrupt_from_backend(xc):
    def backend(gm, example_inputs):
        raise KeyboardInterrupt

    f = xc.compile(lambda x: x + 1, backend=backend, fullgraph=True)
    with pytest.raises(KeyboardInterrupt):
        f(torch.randn(2))
    assert _state() == (False, None)


def test_backend_failure(xc):
    def backend(gm, example_inputs):
        raise ValueError("backend bug")

    f = xc.compile(lambda x: x + 1, backend=backend, fullgraph=True)
    with pytest.raises(xc.exc.BackendCompilerFailed, match="backend bug"):
        f(torch.randn(2))
    assert _state() == (False, None)


def test_unsupported_under_fullgraph(xc):
    def f(x):
        return _ext().hook_installed(), x + 1

    g = xc.compile(f, backend=xc.testing.CompileCounter(), fullgraph=True)
    with pytest.raises(xc.exc.Unsupported):
        g(torch.randn(2))
    assert _state() == (False, None)


def test_disable_inside_region_restores_callback(xc):
    seen = []

    @xc.disable
    def helper(x):
        seen.append(("helper", _ext().get_callback()))
        return x * 3

    probe = Probe()

    def user_fn(x):
        probe(x)
        y = helper(x)
        probe(x)
        return y

    f = xc.compile(user_fn, backend=xc.testing.CompileCounter())
    x = torch.randn(2)
    torch.testing.assert_close(f(x), x * 3)
    assert seen == [("helper", None)], "disable() runs with no callback"
    assert len(probe.seen) == 2 and probe.seen[0] == probe.seen[1] and probe.seen[1][1] is not None
    assert _state() == (False, None)


def test_callback_is_per_thread(xc):
    other = []

    def look_from_other_thread(x):
        t = threading.Thread(target=lambda: other.append(_ext().get_callback()))
        t.start()
        t.join()
        return x

    f = xc.compile(look_from_other_thread, backend=xc.testing.CompileCounter())
    f(torch.randn(2))
    assert other == [None], "another thread must not see this thread's callback"
    assert _state() == (False, None)


def test_nested_regions_restore_outer_callback(xc):
    outer_probe, inner_probe, after_inner = Probe(), Probe(), Probe()
    inner = xc.compile(lambda x: inner_probe(x) + 1, backend=xc.testing.CompileCounter())

    def outer_fn(x):
        outer_probe(x)
        y = inner(x)
        after_inner(x)
        return y

    f = xc.compile(outer_fn, backend=xc.testing.CompileCounter())
    f(torch.randn(2))
    assert outer_probe.seen == after_inner.seen, "the outer callback is back after the inner region"
    assert _state() == (False, None)


def test_hook_removed_after_many_exceptions(xc):
    exc = RuntimeError("again")
    f = xc.compile(_region(lambda t: t, exc), backend=xc.testing.CompileCounter())
    for _ in range(50):
        with pytest.raises(RuntimeError):
            f(torch.randn(2))
    assert _state() == (False, None)
