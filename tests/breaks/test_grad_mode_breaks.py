"""Grad mode across graph breaks (issue #19 item 1): a break inside ``with torch.no_grad():`` or
``with torch.set_grad_enabled(flag):`` must leave grad mode as eager leaves it, on every backend,
on normal and exceptional exits, and the outputs and gradients must be eager's."""
from __future__ import annotations

import pytest
import torch

import xcompile

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()
    torch.set_grad_enabled(True)


def _item_break(x):
    with torch.no_grad():
        k = x.sum().item()                 # a graph break inside the block
        y = x * k
    return x * 2, y


def _branch_break(x, flag):
    with torch.set_grad_enabled(flag):
        if x.sum() > 0:                    # data-dependent branch: a break
            y = x * 2
        else:
            y = x * 3
    return x * 2 + y, y


def _helper(x):
    print("", end="")                      # a break inside the helper
    return x * 4


def _nested(x):
    with torch.set_grad_enabled(False):
        k = x.sum().item()
    with torch.no_grad():
        z = _helper(x)
    return x * k, z


def _compare(fn, backend, *extra):
    x = torch.randn(4).abs().requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    ref = fn(x, *extra)
    out = xcompile.compile(fn, backend=backend)(x2, *extra)
    assert torch.is_grad_enabled(), "grad mode left off in the caller"
    for r, o in zip(ref, out):
        assert o.requires_grad == r.requires_grad
        torch.testing.assert_close(o, r)
    ref[0].sum().backward()
    out[0].sum().backward()
    torch.testing.assert_close(x2.grad, x.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_no_grad(backend):
    _compare(_item_break, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("flag", [False, True])
def test_break_inside_set_grad_enabled(backend, flag):
    _compare(_branch_break, backend, flag)


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_in_set_grad_enabled_then_no_grad_helper(backend):
    _compare(_nested, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_grad_enabled_called_as_a_function_persists(backend):
    def f(x):
        y = x * 2
        torch.set_grad_enabled(False)       # the caller's mode changes, as in eager
        return y

    x = torch.randn(3, requires_grad=True)
    out = xcompile.compile(f, backend=backend)(x)
    assert not torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    assert out.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_after_a_break_restores_grad_mode(backend):
    def f(x):
        with torch.no_grad():
            k = x.sum().item()
            y = x.view(-1, 5)               # raises: 4 elements into rows of 5
        return y * k

    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError):
        xcompile.compile(f, backend=backend)(x)
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_called_under_no_grad_with_enable_grad_inside(backend):
    def f(x):
        with torch.enable_grad():
            y = x * 2
            k = y.sum().item()
        return y * k

    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        ref = f(x)
        out = xcompile.compile(f, backend=backend)(x)
        assert not torch.is_grad_enabled()
    assert out.requires_grad == ref.requires_grad
    torch.testing.assert_close(out, ref)
