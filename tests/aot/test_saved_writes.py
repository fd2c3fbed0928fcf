"""A tensor the compiled forward saved is written in place afterwards (after a graph break, or
by the caller): the compiled graph is one autograd node for all its outputs, where eager has one
per op. Eager raises "modified by an inplace operation" only when the loss reaches an op that
saved the tensor; so do we (fuzz seed aot_eager 5240; torch.compile raises in both cases)."""
from __future__ import annotations

import pytest
import torch

import xcompile
from xcompile.aot.saved_use import saved_needed

BACKENDS = ["aot_eager", "inductor"]


def broken_then_written(a1):
    v2 = torch.atan(a1)
    v3 = v2.narrow(0, 0, 1)
    v5 = v2 * v2                                  # saves v2; v5 is dropped when the branch runs
    if v3.max().item() > -10.0:
        v2[0] += 1
        v5 = torch.nn.functional.silu(v2)
    return (v5, )


def written_and_needed(a1):
    v2 = torch.atan(a1)
    v5 = v2 * v2                                  # saves v2, and the loss goes through v5
    if v2.sum().item() > -100.0:
        v2[0] += 1
    return v5, v2


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_written_saved_tensor_the_loss_does_not_need_trains_as_eager(backend):
    cf = xcompile.compile(broken_then_written, backend=backend)
    for seed in range(3):
        torch.manual_seed(seed)
        leaf = torch.randn(3, 4, requires_grad=True)
        out = cf(leaf * 1)
        out[0].sum().backward()
        ref_leaf = leaf.detach().clone().requires_grad_()
        ref = broken_then_written(ref_leaf * 1)
        ref[0].sum().backward()
        torch.testing.assert_close(out[0], ref[0])
        torch.testing.assert_close(leaf.grad, ref_leaf.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_written_saved_tensor_the_loss_needs_raises_as_eager(backend):
    ref_leaf = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        written_and_needed(ref_leaf * 1)[0].sum().backward()
    cf = xcompile.compile(written_and_needed, backend=backend)
    leaf = ref_leaf.detach().clone().requires_grad_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        cf(leaf * 1)[0].sum().backward()


def test_the_caller_writes_an_output_whose_saved_value_only_an_unused_output_needs():
    def f(x):
        y = x.exp()
        return y, y * y                           # y saved for (y * y)'s gradient
    cf = xcompile.compile(f, backend="aot_eager")
    x = torch.randn(4, requires_grad=True)
    y, z = cf(x)
    y.add_(1)                                     # eager allows this: ExpBackward saved its result...
    xe = x.detach().clone().requires_grad_()
    ye, ze = f(xe)
    ye.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ye.sum().backward()                       # ...but reading it raises there too
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def _graph(fn, n_saved, n_tangents):
    g = torch.fx.Graph()
    tracer = torch.fx.proxy.GraphAppendingTracer(g)
    saved = [torch.fx.Proxy(g.placeholder(f"s{i}"), tracer) for i in range(n_saved)]
    tangents = [torch.fx.Proxy(g.placeholder(f"t{i}"), tracer) for i in range(n_tangents)]
    g.output(tuple(p.node for p in fn(saved, tangents)))
    return torch.fx.GraphModule(torch.nn.Module(), g)


aten = torch.ops.aten


def test_terms_square_a_sum_pairwise():
    # (s + t0) * (s + t0) has a term s * t0: the saved tensor meets tangent 0
    gm = _graph(lambda s, t: (aten.mul.Tensor(aten.add.Tensor(s[0], t[0]), aten.add.Tensor(s[0], t[0])),),
                1, 2)
    assert saved_needed(gm, 1, 0, frozenset({0}))
    # the same node used twice
    g = torch.fx.Graph()
    s0, t0 = g.placeholder("s0"), g.placeholder("t0")
    a = g.call_function(aten.add.Tensor, (s0, t0))
    g.output((g.call_function(aten.mul.Tensor, (a, a)),))
    assert saved_needed(torch.fx.GraphModule(torch.nn.Module(), g), 1, 0, frozenset({0}))


def test_terms_keep_sums_apart_and_products_together():
    # t1 + s * t0: s meets t0 only
    gm = _graph(lambda s, t: (aten.add.Tensor(t[1], aten.mul.Tensor(s[0], t[0])),), 1, 2)
    assert saved_needed(gm, 1, 0, frozenset({0}))
    assert not saved_needed(gm, 1, 0, frozenset({1}))
    # (t1 + s * t0) / s: nonlinear in s, linear in the gradient
    gm = _graph(lambda s, t: (aten.div.Tensor(aten.add.Tensor(t[1], aten.mul.Tensor(s[0], t[0])), s[1]),), 2, 2)
    assert not saved_needed(gm, 2, 0, frozenset({1}))
    assert saved_needed(gm, 2, 1, frozenset({1}))            # the divisor meets every tangent
    # an unknown op merges its inputs: conservative
    gm = _graph(lambda s, t: (aten.atan2.default(aten.add.Tensor(t[1], aten.mul.Tensor(s[0], t[0])), t[1]),),
                1, 2)
    assert saved_needed(gm, 1, 0, frozenset({1}))
