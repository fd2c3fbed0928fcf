"""A fused kernel that reduces a value and then recomputes it in a later loop (max's backward
compares ``sin(x)`` with ``sin(x).max()``) must compute the same bits both times: a libmvec
vector ``sinf`` in one loop and the scalar ``sinf`` in the other differ in the last ulp, no
element matched the maximum, and the gradient was 0/0 = NaN (fuzz seed inductor 4337)."""
from __future__ import annotations

import pytest
import torch

import xcompile


@pytest.mark.parametrize("n", [12, 37, 1000])
@pytest.mark.parametrize("fn", [torch.sin, torch.expm1, torch.log1p, torch.atan], ids=lambda f: f.__name__)
def test_max_of_a_transcendental_has_eager_gradients(fn, n):
    def f(x):
        return fn(x.abs()).max()

    xcompile.reset()
    cf = xcompile.compile(f, backend="inductor")
    for seed in range(5):
        torch.manual_seed(seed)
        x = torch.randn(n, requires_grad=True)
        cf(x).backward()
        xe = x.detach().clone().requires_grad_()
        f(xe).backward()
        assert not x.grad.isnan().any()
        torch.testing.assert_close(x.grad, xe.grad)
    xcompile.reset()


def test_a_mask_against_the_maximum_matches_somewhere():
    def f(x):
        s = x.sin()
        return (s == s.max()).sum()

    xcompile.reset()
    cf = xcompile.compile(f, backend="inductor")
    for seed in range(10):
        torch.manual_seed(seed)
        x = torch.randn(3, 4)
        assert cf(x).item() >= 1
    xcompile.reset()
