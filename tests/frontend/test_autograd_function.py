"""``torch.autograd.Function`` subclasses inside compiled code (issue #12): one graph with their
neighbours, the custom backward honoured on every backend (the backwards here are deliberately
not the true derivative, so only the user's backward can match eager), values and gradients
equal to eager's, graph counts equal to torch.compile's. A Function whose code has outside
effects is a graph break and runs eagerly, effects and all."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as TorchCounter
from torch.autograd.function import once_differentiable

import xcompile
from xcompile.testing import CompileCounter

BACKENDS = ("eager", "aot_eager", "inductor")


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x.sin() * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * ctx.scale * 3, None          # 3x the true derivative


class TwoOut(torch.autograd.Function):
    """setup_context style, two outputs, one not differentiable, needs_input_grad."""

    @staticmethod
    def forward(x, w):
        return x @ w, (x > 0).sum(-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x, w)
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, g, _):
        x, w = ctx.saved_tensors
        gx = g @ w.t() * 2 if ctx.needs_input_grad[0] else None
        gw = x.t() @ g if ctx.needs_input_grad[1] else None
        return gx, gw


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp() + 1.0


CALLS: list = []


class Noisy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        CALLS.append(1)                                   # an outside effect, per call in eager
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def f_scaled(x):
    return Scaled.apply(x.relu() + 1, 0.5).sum() * 2


def f_two(x, w):
    y, n = TwoOut.apply(x * 1.5, w)
    return y.tanh().sum() + n.sum()


def f_once(x):
    return Once.apply(x).mean()


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _check(fn, make, backend):
    cnt = CompileCounter()
    compiled = xcompile.compile(fn, backend=cnt if backend == "eager" else backend)
    tcnt = TorchCounter()
    tc = torch.compile(fn, backend=tcnt)
    for seed in range(2):
        torch.manual_seed(seed)
        args = make()
        mine = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        theirs = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        want = fn(*args)
        want.backward()
        got = compiled(*mine)
        got.backward()
        tc(*theirs)
        torch.testing.assert_close(got, want)
        for a, m in zip(args, mine):
            if a.requires_grad:
                torch.testing.assert_close(m.grad, a.grad)
    if backend == "eager":
        assert cnt.frame_count == tcnt.frame_count == 1, (cnt.frame_count, tcnt.frame_count)


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_backward_in_one_graph(backend):
    _check(f_scaled, lambda: [torch.randn(5, 3, requires_grad=True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_setup_context_two_outputs_needs_input_grad(backend):
    _check(f_two, lambda: [torch.randn(4, 3, requires_grad=True), torch.randn(3, 2, requires_grad=True)],
           backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_once_differentiable(backend):
    _check(f_once, lambda: [torch.randn(6, requires_grad=True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_call(backend):
    compiled = xcompile.compile(f_scaled, backend=backend)
    with torch.no_grad():
        x = torch.randn(5, 3)
        torch.testing.assert_close(compiled(x), f_scaled(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_outside_effects_break_and_happen_every_call(backend):
    def f(x):
        return Noisy.apply(x + 1).sum()
    compiled = xcompile.compile(f, backend=backend)
    CALLS.clear()
    for _ in range(3):
        x = torch.randn(3, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        f(x).backward()
        compiled(x2).backward()
        torch.testing.assert_close(x2.grad, x.grad)
    assert len(CALLS) == 6                               # 3 eager + 3 compiled calls


def test_outside_effects_are_named_under_fullgraph():
    def f(x):
        return Noisy.apply(x)
    with pytest.raises(Exception, match="Noisy.forward reads the global 'CALLS'"):
        xcompile.compile(f, fullgraph=True)(torch.randn(3))
