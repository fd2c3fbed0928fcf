"""Runtime behaviour of compiled regions inside eager autograd: the corners of issue 4."""
import operator

import pytest
import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

import xcompile
from xcompile.backends.aot_eager import aot_eager

from .models import trace

TOL = dict(atol=1e-10, rtol=1e-8)
D = torch.float64


def compile_fn(fn, *example):
    """Compile a plain function of tensors through a frontend-like graph."""
    return aot_eager(trace(fn), list(example))


def rand(*shape, grad=False):
    return torch.randn(*shape, dtype=D).requires_grad_(grad)


def test_retain_graph_backward_twice():
    def f(x, w):
        return (torch.tanh(x @ w).sum(-1),)
    x, w = rand(4, 5, grad=True), rand(5, 3, grad=True)
    cf = compile_fn(f, x, w)
    out = cf(x, w)[0].sum()
    out.backward(retain_graph=True)
    out.backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    f(x, w)[0].sum().backward()
    torch.testing.assert_close(gx, 2 * x.grad, **TOL)
    torch.testing.assert_close(gw, 2 * w.grad, **TOL)


def test_double_backward_raises_clear_error_first_order_create_graph_works():
    def f(x):
        return (torch.sin(x) * x,)
    x = rand(6, grad=True)
    cf = compile_fn(f, x)
    (g,) = torch.autograd.grad(cf(x)[0].sum(), x, create_graph=True)
    (ref,) = torch.autograd.grad(f(x)[0].sum(), x)
    torch.testing.assert_close(g, ref, **TOL)
    with pytest.raises(RuntimeError, match="double backward"):
        g.sum().backward()


def test_inputs_without_grad_and_flags_changing_between_calls():
    def f(x, w):
        return (F.gelu(x @ w),)
    x, w = rand(4, 5), rand(5, 3, grad=True)
    cf = compile_fn(f, x, w)
    cf(x, w)[0].sum().backward()
    assert x.grad is None
    gw = w.grad.clone()
    w.grad = None
    f(x, w)[0].sum().backward()
    torch.testing.assert_close(gw, w.grad, **TOL)
    # now the input requires grad and the weight does not: a second variant is traced
    x2, w2 = x.detach().requires_grad_(True), w.detach()
    cf(x2, w2)[0].sum().backward()
    assert w2.grad is None and x2.grad is not None
    x3 = x.detach().requires_grad_(True)
    f(x3, w2)[0].sum().backward()
    torch.testing.assert_close(x2.grad, x3.grad, **TOL)


def test_outputs_aliasing_each_other_stay_views_of_one_another():
    def f(x):
        y = x * 2 + 1
        return (y, y.view(-1), y.t())
    x = rand(3, 4, grad=True)
    cf = compile_fn(f, x)
    eo, co = f(x), cf(x)
    for a, b in zip(eo, co):
        torch.testing.assert_close(b, a, **TOL)
        assert b.stride() == a.stride()
    assert co[1].untyped_storage().data_ptr() == co[0].untyped_storage().data_ptr()
    # writing through one view is seen by the others and by autograd, as in eager
    for outs in (eo, co):
        outs[1].mul_(3)
    torch.testing.assert_close(co[2], eo[2], **TOL)
    (ge,) = torch.autograd.grad(eo[2].sum(), x)
    (gc,) = torch.autograd.grad(co[2].sum(), x)
    torch.testing.assert_close(gc, ge, **TOL)


def test_inplace_on_returned_view_of_hidden_intermediate():
    def f(x):
        return ((x * 2).view(-1),)
    x = rand(3, 4, grad=True)
    cf = compile_fn(f, x)
    grads = []
    for fn in (f, cf):
        (out,) = fn(x)
        out.mul_(3)                         # allowed in eager: the base is not visible
        grads.append(torch.autograd.grad((out * out).sum(), x)[0])
    torch.testing.assert_close(grads[1], grads[0], **TOL)


def test_input_mutated_with_a_value_that_requires_grad():
    def f(x, w):
        x.add_(w)
        return (x * 3,)
    w = rand(4, grad=True)
    xe, xc = rand(2, 4), None
    xc = xe.clone()
    cf = compile_fn(f, xc.clone(), w)
    (oe,), (oc,) = f(xe, w), cf(xc, w)
    torch.testing.assert_close(oc, oe, **TOL)
    torch.testing.assert_close(xc, xe, **TOL)
    assert xc.requires_grad and xe.requires_grad
    (ge,) = torch.autograd.grad((oe * oe).sum() + xe.sum(), w)
    (gc,) = torch.autograd.grad((oc * oc).sum() + xc.sum(), w)
    torch.testing.assert_close(gc, ge, **TOL)


def test_value_mutated_after_use_keeps_the_forward_value_for_backward():
    def f(x, w):
        h = torch.exp(x) * w
        x.add_(1)
        return (h * h,)
    w = rand(5, grad=True)
    xe = rand(3, 5)
    xc = xe.clone()
    for partition in ("min_cut", "save_all"):
        cf = aot_eager(trace(f), [xc.clone(), w], partition=partition)
        xe2, xc2 = xe.clone(), xc.clone()
        (ge,) = torch.autograd.grad(f(xe2, w)[0].sum(), w)
        (gc,) = torch.autograd.grad(cf(xc2, w)[0].sum(), w)
        torch.testing.assert_close(gc, ge, **TOL)
        torch.testing.assert_close(xc2, xe2, **TOL)


def test_grad_mode_switches_inside_the_graph():
    """A hand-built graph in the frontend's conventions: get_attr params, grad-mode calls."""
    root = nn.Module()
    root.w = nn.Parameter(torch.randn(4, 4, dtype=D))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    h = g.call_function(torch.matmul, (x, w))
    g.call_function(torch._C._set_grad_enabled, (False,))
    stat = g.call_method("mean", (h,))
    g.call_function(torch._C._set_grad_enabled, (True,))
    out = g.call_function(operator.mul, (h, stat))
    g.output((out, stat))
    gm = torch.fx.GraphModule(root, g)
    xv = rand(2, 4, grad=True)
    cf = aot_eager(gm, [xv])
    eo, co = gm(xv), cf(xv)
    assert co[1].requires_grad is False and co[0].requires_grad
    for a, b in zip(eo, co):
        torch.testing.assert_close(b, a, **TOL)
    ge = torch.autograd.grad(eo[0].sum(), (xv, root.w))
    gc = torch.autograd.grad(co[0].sum(), (xv, root.w))
    for a, b in zip(ge, gc):
        torch.testing.assert_close(b, a, **TOL)


def test_tied_weights_are_one_input():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(6, 6, bias=False).to(D)
            self.out = nn.Linear(6, 6, bias=False).to(D)
            self.out.weight = self.emb.weight

        def forward(self, x):
            return (self.out(torch.relu(self.emb(x))),)
    m = Tied()
    cf = aot_eager(trace(m), [rand(3, 6)])
    assert len(cf.state) == 1
    x = rand(3, 6)
    (ge,) = torch.autograd.grad(m(x)[0].sum(), m.emb.weight)
    (gc,) = torch.autograd.grad(cf(x)[0].sum(), m.emb.weight)
    torch.testing.assert_close(gc, ge, **TOL)


def test_parameters_are_read_at_call_time():
    lin = nn.Linear(4, 4).to(D)
    cf = aot_eager(trace(lin), [rand(2, 4)])
    with torch.no_grad():
        lin.weight.mul_(0.5)
        lin.bias.add_(1)
    x = rand(2, 4)
    torch.testing.assert_close(cf(x)[0], lin(x), **TOL)


def test_dropout_has_eager_distribution_without_fallback_random():
    def f(x):
        return (F.dropout(x, 0.3, training=True),)
    x = torch.ones(200_000, requires_grad=True)
    with xcompile.config.patch(fallback_random=False):
        cf = compile_fn(f, x)
        (out,) = cf(x)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.01
    torch.testing.assert_close(out[kept], torch.full_like(out[kept], 1 / 0.7))
    out.sum().backward()
    torch.testing.assert_close(x.grad, out.detach())       # d(x*mask/(1-p))/dx = mask/(1-p)


def test_dropout_bit_identical_with_fallback_random():
    def f(x):
        return (F.dropout(torch.sin(x), 0.5, training=True) * 2,)
    x = torch.randn(64, 64, requires_grad=True)
    with xcompile.config.patch(fallback_random=True):
        cf = compile_fn(f, x)
        assert cf(x)[0].requires_grad
        torch.manual_seed(123)
        (a,) = f(x)
        torch.manual_seed(123)
        (b,) = cf(x)
    assert torch.equal(a, b)


def test_disabled_dropout_returns_its_input_as_in_eager():
    def f(a, b):
        return (F.dropout(a, p=0.5, training=False) + b, F.dropout(b, p=0.0), F.dropout(a, 0.2, False))
    a, b = rand(3, 4, grad=True), rand(3, 4, grad=True)
    cf = compile_fn(f, a, b)
    eo, co = f(a, b), cf(a, b)
    assert eo[1] is b and co[1] is b
    assert co[2] is a
    torch.testing.assert_close(co[0], eo[0], **TOL)


def test_mutated_input_sharing_memory_with_another_runs_eagerly():
    """Compiled for the aliased call, run on it and on an unaliased one: eager's answers."""
    def f(a, b):
        a.add_(1)
        return (a + b,)
    x = rand(4, 4)
    cf = compile_fn(f, x, x[0])
    for aliased in (True, False, True):
        xe, xc = rand(4, 4), None
        xc = xe.clone()
        args_e = (xe, xe[0]) if aliased else (xe, xe[0].clone())
        args_c = (xc, xc[0]) if aliased else (xc, xc[0].clone())
        torch.testing.assert_close(cf(*args_c)[0], f(*args_e)[0])
        torch.testing.assert_close(xc, xe)


def test_view_of_input_with_other_strides_is_refused_not_wrong():
    from xcompile.aot.schema import AotUnsupported

    def f(x):
        return (x[0], x.sum())
    cf = compile_fn(f, rand(3, 4))
    x = rand(3, 4)
    assert cf(x)[0].data_ptr() == x[0].data_ptr()
    with pytest.raises(AotUnsupported, match="strides"):
        cf(rand(4, 3).t())


def test_parameter_written_under_no_grad_inside_the_graph():
    """``with torch.no_grad(): w.clamp_(-0.1, 0.1)`` then ``x @ w``: a frontend-style graph."""
    root = nn.Module()
    root.w = nn.Parameter(torch.randn(4, 4, dtype=D))
    ref_w = nn.Parameter(root.w.detach().clone())
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("w")
    g.call_function(torch._C._set_grad_enabled, (False,))
    g.call_method("clamp_", (w, -0.1, 0.1))
    g.call_function(torch._C._set_grad_enabled, (True,))
    out = g.call_function(torch.tanh, (g.call_function(torch.matmul, (x, w)),))
    g.output((out,))
    gm = torch.fx.GraphModule(root, g)
    cf = aot_eager(gm, [rand(2, 4)])
    with torch.no_grad():
        root.w.copy_(ref_w)                          # undo the clamp a probe may not have done
    xv = rand(2, 4)
    (oc,) = cf(xv)
    with torch.no_grad():
        ref_w.clamp_(-0.1, 0.1)
    oe = torch.tanh(xv @ ref_w)
    torch.testing.assert_close(oc, oe, **TOL)
    torch.testing.assert_close(root.w.detach(), ref_w.detach(), **TOL)
    (gc,) = torch.autograd.grad(oc.sum(), root.w)
    (ge,) = torch.autograd.grad(oe.sum(), ref_w)
    torch.testing.assert_close(gc, ge, **TOL)


def test_parameter_written_through_a_detached_alias():
    """F.embedding(max_norm=...) renorms ``weight.detach()`` in place with grad enabled: the write
    is hidden from autograd (w stays a leaf that gets its gradient), not a differentiable one."""
    def f(idx, w):
        return (F.embedding(idx, w, max_norm=1.0) * 2,)
    idx = torch.randint(0, 6, (3, 4))
    w0 = torch.randn(6, 3, dtype=D) * 3
    we, wc = w0.clone().requires_grad_(), w0.clone().requires_grad_()
    cf = compile_fn(f, idx, wc.detach().clone().requires_grad_())
    (oc,), (oe,) = cf(idx, wc), f(idx, we)
    torch.testing.assert_close(oc, oe, **TOL)
    torch.testing.assert_close(wc.detach(), we.detach(), **TOL)       # renormed rows, as in eager
    assert wc.is_leaf and wc.grad_fn is None
    (gc,) = torch.autograd.grad((oc * oc).sum(), wc)
    (ge,) = torch.autograd.grad((oe * oe).sum(), we)
    torch.testing.assert_close(gc, ge, **TOL)


def test_input_written_through_a_detached_alias_keeps_its_gradient_path():
    def f(x, w):
        y = torch.exp(x) + w
        x.detach().mul_(2)                  # invisible to autograd: x keeps its grad_fn (x = leaf * 1)
        return (y, x * w)
    w = rand(4, grad=True)
    leaf_e, leaf_c = rand(3, 4, grad=True), None
    leaf_c = leaf_e.detach().clone().requires_grad_()
    xe, xc = leaf_e * 1.0, leaf_c * 1.0
    cf = compile_fn(f, leaf_c.detach().clone().requires_grad_() * 1.0, w)
    oc, oe = cf(xc, w), f(xe, w)
    for a, b in zip(oc, oe):
        torch.testing.assert_close(a, b, **TOL)
    torch.testing.assert_close(xc, xe, **TOL)
    ge = torch.autograd.grad(sum((o * o).sum() for o in oe), (leaf_e, w))
    gc = torch.autograd.grad(sum((o * o).sum() for o in oc), (leaf_c, w))
    for a, b in zip(gc, ge):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("leaf", [True, False])
def test_create_graph_through_saved_intermediates_never_drops_the_second_order(leaf):
    """The backward of x.exp() reads only the saved exp(x), which has no edge to x: the second
    autograd.grad(g, x, allow_unused=True) returned None (eager: exp(x)). It raises the
    double-backward error now; a non-leaf input refuses create_graph at once."""
    def f(x):
        return (x.exp().sum(),)
    w = rand(5, grad=True)
    x = w if leaf else w * 2
    cf = compile_fn(f, x)
    if not leaf:
        with pytest.raises(RuntimeError, match="double backward"):
            torch.autograd.grad(cf(x)[0], x, create_graph=True)
        return
    (g,) = torch.autograd.grad(cf(x)[0], x, create_graph=True)
    torch.testing.assert_close(g, x.exp(), **TOL)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(g.sum(), x, allow_unused=True)
