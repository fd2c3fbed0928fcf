"""Gradients through compiled graphs as eager gives them (issue #19, items 4 and 11): an input
the loss does not reach keeps ``.grad`` None (not zeros: AdamW decays and moves a parameter
whose grad is zeros), and in-place ops on intermediates across a break train as in eager."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import xcompile

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _grads(f, make, backend=None, seed=0):
    fn = f if backend is None else xcompile.compile(f, backend=backend)
    torch.manual_seed(seed)
    args = make()
    out = fn(*args)
    (out if isinstance(out, torch.Tensor) else sum(o.sum() for o in out)).sum().backward()
    return out, [a.grad for a in args]


def _same_grads(f, make, backend):
    for seed in range(2):
        out_e, g_e = _grads(f, make, None, seed)
        out_c, g_c = _grads(f, make, backend, seed)
        torch.testing.assert_close(out_c, out_e)
        for k, (c, e) in enumerate(zip(g_c, g_e)):
            assert (c is None) == (e is None), f"input {k}: grad {'None' if c is None else 'a tensor'}, " \
                f"eager's {'None' if e is None else 'a tensor'}"
            if e is not None:
                torch.testing.assert_close(c, e)


def _two():
    return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_used_only_by_a_break_leaves_grad_none(backend):
    def f(x, y):
        v1 = x * 2
        v3 = y.abs()
        if float(v1.sum()) > 1.0:            # v1 leaves the first graph only for this test
            pass
        return v3

    _same_grads(f, _two, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_output_of_one_graph_leaves_grad_none(backend):
    def f(x, y):
        return x.sin(), y.cos()

    def g(x, y):
        return f(x, y)[1]

    _same_grads(g, _two, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_written_input_not_reached_by_the_loss(backend):
    def f(a, b):
        a.mul_(2)
        return (b * b).sum()

    def make():
        w = torch.randn(2, 3, requires_grad=True)
        return w, torch.randn(3, requires_grad=True)

    def wrapped(w, b):
        return f(w * 1.0, b)

    _same_grads(wrapped, make, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_adamw_leaves_an_unreached_parameter_alone(backend):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(3, 3)
            self.aux = nn.Linear(3, 3)

        def forward(self, x):
            h = self.aux(x)
            y = self.used(x)                  # in the same graph as h
            if float(h.sum()) > 1e9:          # a break; h (from aux) reaches no loss
                pass
            return y

    params = []
    for compiled in (False, True):
        torch.manual_seed(0)
        m = M()
        opt = torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.5)
        fn = xcompile.compile(m, backend=backend) if compiled else m
        for _ in range(2):
            opt.zero_grad()
            fn(torch.randn(4, 3)).sum().backward()
            opt.step()
        params.append({k: v.detach().clone() for k, v in m.named_parameters()})
    for k in params[0]:
        torch.testing.assert_close(params[1][k], params[0][k], msg=lambda m: f"{k}: {m}")


def _helper(v1, x):
    if x.sum() > -1e9:                        # data-dependent: a break in the callee
        v1.relu_()
    return v1


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_on_an_intermediate_in_a_callee_across_a_break(backend):
    def f(x):
        v1 = x.mean(0, keepdim=True)
        v1 = _helper(v1, x)
        return v1 @ x.t()

    _same_grads(f, lambda: (torch.randn(3, 4, requires_grad=True),), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_on_an_intermediate_after_a_break(backend):
    def f(x, w):
        v1 = x * w
        v2 = v1 * 3
        if x.sum() > -1e9:
            v1.relu_()
        return (v1 @ x.t()).sin() + v2.sum()

    _same_grads(f, lambda: (torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)),
                backend)
