"""`with` blocks a runner enters again are exited once, whatever raises (issue #19).

A frame that breaks inside a `with` block is run by a runner that enters the block's context
again and hands its exit to the resume function. Found by the interrupt probe
(tests/reliability/test_fault_probes.py): a KeyboardInterrupt held back during the resume
function's own compile was raised from the call, before the resume frame began, so the block's
exit never ran and grad mode stayed off in the caller. These tests make the same failure
deterministic: a backend that raises while the resume function compiles, a context whose exits
are counted, and ``_C.ContextExit`` itself.
"""
from __future__ import annotations

import pytest
import torch

import xcompile
from xcompile import _C

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _grad_on():
    yield
    torch.set_grad_enabled(True)


def _no_grad_break(x):
    y = x.sin()
    with torch.no_grad():
        z = y.cos()
        if z.sum() > -1e9:                 # a break inside the block
            z = z * 2
    return y + z


class _Interrupting:
    """A backend that raises ``exc`` from its n-th compile (counting from 1)."""

    def __init__(self, inner: str, n: int, exc: BaseException):
        self.inner, self.n, self.exc, self.calls = inner, n, exc, 0

    def __call__(self, gm, example_inputs):
        self.calls += 1
        if self.calls == self.n:
            raise self.exc
        if self.inner == "eager":
            return gm.forward
        from xcompile.backends.registry import lookup_backend
        return lookup_backend(self.inner)(gm, example_inputs)


@pytest.mark.parametrize("inner", BACKENDS)
def test_interrupt_while_a_resume_function_compiles_leaves_grad_mode_on(inner):
    """An interrupt from each compile in turn: the frame's prefix, the resume function inside
    the block (called after the runner entered no_grad again), and the rest."""
    counting = _Interrupting(inner, 0, KeyboardInterrupt())
    x = torch.randn(5, requires_grad=True)
    xcompile.compile(_no_grad_break, backend=counting)(x)
    xcompile.reset()
    assert counting.calls >= 2, "the frame no longer breaks inside the block"
    for n in range(1, counting.calls + 1):
        backend = _Interrupting(inner, n, KeyboardInterrupt())
        f = xcompile.compile(_no_grad_break, backend=backend)
        with pytest.raises(KeyboardInterrupt):
            f(x)
        assert torch.is_grad_enabled(), f"grad mode left off by an interrupt in compile {n}"
        out = f(x)                                    # usable afterwards, eager's answer
        torch.testing.assert_close(out, _no_grad_break(x))
        assert out.requires_grad
        assert torch.is_grad_enabled()
        xcompile.reset()


@pytest.mark.parametrize("grad", [True, False])
def test_backend_error_inside_the_block_restores_the_callers_mode(grad):
    backend = _Interrupting("eager", 2, RuntimeError("backend broke"))
    f = xcompile.compile(_no_grad_break, backend=backend)
    with torch.set_grad_enabled(grad):
        with pytest.raises(Exception, match="backend broke"):
            f(torch.randn(4))
        assert torch.is_grad_enabled() is grad


class Counting:
    """A context manager that counts its enters and exits (and what each exit saw)."""

    def __init__(self):
        self.enters, self.exits = 0, []

    def __enter__(self):
        self.enters += 1
        return self

    def __exit__(self, t, v, tb):
        self.exits.append(t)
        return False


def _user_block_then_raise(x, cm, where):
    with cm:
        y = x * 2
        print("", end="")                  # a break inside the block
        if where == "inside":
            raise ValueError("inside")
        y = y + 1
    if where == "after":
        raise ValueError("after")
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["inside", "after", "none"])
def test_user_context_exits_once(backend, where):
    f = xcompile.compile(_user_block_then_raise, backend=backend)
    for _ in range(2):                                # the compiling call and a cached one
        cm, ref = Counting(), Counting()
        x = torch.randn(3)
        try:
            out = f(x, cm, where)
        except ValueError as e:
            out = e.args
        try:
            expect = _user_block_then_raise(x, ref, where)
        except ValueError as e:
            expect = e.args
        if isinstance(expect, torch.Tensor):
            torch.testing.assert_close(out, expect)
        else:
            assert out == expect
        assert (cm.enters, cm.exits) == (ref.enters, ref.exits)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_block_exited_once_when_the_frame_raises_after_it(backend):
    """The resume function leaves the no_grad block in its graph, then sets grad mode off by a
    plain call and raises: eager leaves grad mode off; the runner must not exit the block again
    (which would turn it back on)."""
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("", end="")
            y = y + 1
        torch.set_grad_enabled(False)
        raise ValueError(y.sum().item())

    cf = xcompile.compile(f, backend=backend)
    for _ in range(2):
        torch.set_grad_enabled(True)
        with pytest.raises(ValueError):
            f(torch.ones(2))
        eager_mode = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        with pytest.raises(ValueError):
            cf(torch.ones(2))
        assert torch.is_grad_enabled() is eager_mode is False


def test_context_exit_runs_its_exit_once():
    e = _C.ContextExit()
    assert not e.active and e.fn is None
    assert e(None, None, None) is None                # nothing held: nothing to do
    torch.set_grad_enabled(True)
    assert e.enter(torch.no_grad()) is None
    assert e.active and not torch.is_grad_enabled()
    assert e(None, None, None) is None
    assert torch.is_grad_enabled() and not e.active
    torch.set_grad_enabled(False)
    e(None, None, None)                               # a second call does not exit again
    assert not torch.is_grad_enabled()


def test_context_exit_enter_failure_holds_nothing():
    class Bad:
        def __enter__(self):
            raise OSError("no")

        def __exit__(self, *a):
            raise AssertionError("exit of a context never entered")

    e = _C.ContextExit()
    with pytest.raises(OSError):
        e.enter(Bad())
    assert not e.active
    e(None, None, None)
    with pytest.raises(TypeError, match="context manager protocol"):
        e.enter(3)
    with pytest.raises(TypeError):
        _C.ContextExit(1)


def test_context_exit_hold_and_discard():
    seen = []
    e = _C.ContextExit()
    e.hold(lambda *a: seen.append(a) or True)
    assert e(ValueError, None, None) is True          # the exit's result is passed on
    assert seen == [(ValueError, None, None)]
    e.hold(lambda *a: seen.append(a))
    e.discard()
    e(None, None, None)
    assert len(seen) == 1
    with pytest.raises(TypeError, match="not callable"):
        e.hold(3)
