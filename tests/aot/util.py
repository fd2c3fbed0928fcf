"""Compile-vs-eager comparison helpers for the AOT tests."""
from __future__ import annotations

import copy

import torch

from xcompile.backends.aot_eager import aot_eager

from .models import MODELS, trace

TOL = {torch.float32: dict(atol=2e-5, rtol=2e-4), torch.float64: dict(atol=1e-10, rtol=1e-8)}


def make_pair(name: str, dtype=torch.float32, seed=0, partition="min_cut", train=True):
    """(eager model, compiled fn, its model, input shape): same weights on both sides."""
    ctor, shape = MODELS[name]
    torch.manual_seed(seed)
    eager = ctor().to(dtype).train(train)
    twin = copy.deepcopy(eager)
    example = make_input(name, shape, dtype, seed + 1000)
    fn = aot_eager(trace(twin), [example], partition=partition)
    return eager, fn, twin, shape


def make_input(name, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(shape, dtype=dtype, generator=g)
    if name == "inplace_input":            # a non-leaf that requires grad, written in place
        leaf = x0.requires_grad_(True)
        return leaf * 1.0
    return x0.requires_grad_(True)


def storage_of(t):
    return t.untyped_storage().data_ptr()


def run_both(eager, fn, name, shape, dtype, seed, rng_seed=None):
    """Run eager and compiled on the same fresh input; return both sides' results."""
    sides = []
    for run in (eager, fn):
        g = torch.Generator().manual_seed(seed)
        leaf = torch.randn(shape, dtype=dtype, generator=g).requires_grad_(True)
        x = leaf * 1.0 if name == "inplace_input" else leaf
        if rng_seed is not None:
            torch.manual_seed(rng_seed)
        outs = run(x)
        sides.append((leaf, x, tuple(outs)))
    return sides


def loss_of(outs, seed):
    g = torch.Generator().manual_seed(seed)
    total = 0
    for o in outs:
        if o.requires_grad:
            total = total + (o * torch.randn(o.shape, dtype=o.dtype, generator=g)).sum()
    return total


def assert_same_outputs(e_side, c_side, tol):
    (_, ex, eo), (_, cx, co) = e_side, c_side
    assert len(eo) == len(co)
    for a, b in zip(eo, co):
        assert a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
        assert a.requires_grad == b.requires_grad
        torch.testing.assert_close(b, a, **tol)
    # aliasing: an output shares storage with the input / another output exactly as in eager
    for i, (a, b) in enumerate(zip(eo, co)):
        assert (storage_of(a) == storage_of(ex)) == (storage_of(b) == storage_of(cx)), f"output {i} vs input"
        for j in range(i):
            assert (storage_of(a) == storage_of(eo[j])) == (storage_of(b) == storage_of(co[j])), (i, j)
    torch.testing.assert_close(cx, ex, **tol)      # inputs written in place match too


def assert_same_state(eager, twin, tol, grads=True):
    for (name, p), q in zip(eager.named_parameters(), twin.parameters()):
        if grads:
            assert (p.grad is None) == (q.grad is None), name
            if p.grad is not None:
                torch.testing.assert_close(q.grad, p.grad, **tol, msg=lambda m: f"grad of {name}: {m}")
    for (name, b), c in zip(eager.named_buffers(), twin.buffers()):
        torch.testing.assert_close(c, b, **tol, msg=lambda m: f"buffer {name}: {m}")
