"""Cache entries belong to the backend (and options) they were compiled for, as in torch.compile:
the same code compiled with another backend compiles again; the same backend shares entries,
whatever ``fullgraph`` says; ``run()`` uses the entries of any backend."""
import pytest
import torch

import xcompile
from xcompile import _C
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()     # every test's f shares one code object
    yield
    xcompile.reset()


def _fresh():
    def f(x):
        return torch.sin(x) + 1
    return f


def test_second_backend_compiles_its_own_entry():
    f = _fresh()
    c1, c2 = CompileCounter(), CompileCounter()
    f1, f2 = xcompile.compile(f, backend=c1), xcompile.compile(f, backend=c2)
    x = torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(f1(x), f(x))
        torch.testing.assert_close(f2(x), f(x))
    assert (c1.frame_count, c2.frame_count) == (1, 1)
    owners = {e.owner for e in _C.cache_entries(f.__code__)}
    k1, k2 = f1._xcompile_callback._xc_backend_key, f2._xcompile_callback._xc_backend_key
    assert owners == {k1, k2}
    for e in _C.cache_entries(f.__code__):     # the one ownership rule, as the C++ cache applies it
        assert e.usable_by(e.owner) and e.usable_by(None)
        assert not e.usable_by(k2 if e.owner is k1 else k1)


def test_backend_that_returns_something_else_is_not_reused():
    # The entry of a backend that adds 100 must never serve a call under the plain backend.
    f = _fresh()

    def plus100(gm, example_inputs):
        return lambda *a: [o + 100 for o in gm(*a)] if isinstance(gm(*a), (list, tuple)) else gm(*a) + 100

    x = torch.randn(4)
    bad = xcompile.compile(f, backend=plus100)(x)
    torch.testing.assert_close(bad, f(x) + 100)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(x), f(x))


def test_same_backend_shares_entries_across_compile_calls_and_fullgraph():
    f = _fresh()
    cnt = CompileCounter()
    x = torch.randn(4)
    xcompile.compile(f, backend=cnt)(x)
    xcompile.compile(f, backend=cnt)(x)
    xcompile.compile(f, backend=cnt, fullgraph=True)(x)
    assert cnt.frame_count == 1
    xcompile.compile(f, backend="eager")(x)
    xcompile.compile(f, backend="eager")(x)
    assert len(_C.cache_entries(f.__code__)) == 2


def test_different_options_are_different_keys():
    f = _fresh()
    x = torch.randn(4)
    xcompile.compile(f, backend="eager")(x)
    xcompile.compile(f, backend="eager", options={"some_knob": 1})(x)
    assert len(_C.cache_entries(f.__code__)) == 2


def test_run_uses_entries_of_any_backend():
    f = _fresh()
    cnt = CompileCounter()
    x = torch.randn(4)
    xcompile.compile(f, backend=cnt)(x)
    torch.testing.assert_close(xcompile.run(f)(x), f(x))
    assert cnt.frame_count == 1 and _C.cache_entries(f.__code__)[0].hits >= 1


def test_inner_function_compiled_once_per_backend():
    def inner(x):
        return x * 2

    def outer_a(x):
        xcompile.graph_break()
        return inner(x) + 1

    def outer_b(x):
        xcompile.graph_break()
        return inner(x) - 1

    c1, c2 = CompileCounter(), CompileCounter()
    a, b = xcompile.compile(outer_a, backend=c1), xcompile.compile(outer_b, backend=c2)
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(a(x), outer_a(x))
        torch.testing.assert_close(b(x), outer_b(x))
    n1, n2 = c1.frame_count, c2.frame_count
    a(x), b(x)
    assert (c1.frame_count, c2.frame_count) == (n1, n2)     # no recompiles after warm-up
    assert n1 >= 1 and n2 >= 1


def test_recompile_log_names_the_backend_change():
    f = _fresh()
    x = torch.randn(4)
    xcompile.compile(f, backend="eager")(x)
    with xcompile.testing.captured_logs("recompiles") as logs:
        xcompile.compile(f, backend=CompileCounter())(x)
    text = "\n".join(logs) if isinstance(logs, list) else str(logs)
    assert "compiled for backend='eager'" in text, text
