"""``torch.cond`` inside compiled code (issue #12): a constant predicate traces its branch inline; a
tensor predicate keeps both branches as subgraphs of one graph (values and gradients equal to
eager's on eager/aot_eager/inductor, graph counts equal to torch.compile's); branches whose
results differ in shape raise torch's error, as in eager; a branch with a side effect is a break."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as TorchCounter

import xcompile
from xcompile.testing import CompileCounter

BACKENDS = ("eager", "aot_eager", "inductor")
W = torch.randn(3, 3)


def tensor_pred(x, y):
    z = x * 2
    out = torch.cond(z.sum() > 0, lambda a, b: (a @ W).sin() + b, lambda a, b: a.cos() - b, (z, y))
    return out + 1


def const_pred(x, flag: bool):
    return torch.cond(flag, lambda a: a.sin(), lambda a: a.cos(), (x,)) * 3


class WithParams(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.cond(x.mean() > 0, lambda t: self.lin(t).relu(), lambda t: self.lin(t * -1), (x,))


pytestmark = pytest.mark.usefixtures("fresh_compilers")


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_predicate_both_ways_and_gradients(backend):
    cnt, tcnt = CompileCounter(), TorchCounter()
    compiled = xcompile.compile(tensor_pred, backend=cnt if backend == "eager" else backend)
    tc = torch.compile(tensor_pred, backend=tcnt)
    for sign in (1.0, -1.0, 1.0, -1.0):
        x = (torch.randn(2, 3).abs() * sign).requires_grad_()
        y = torch.randn(2, 3, requires_grad=True)
        x2, y2 = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        want = tensor_pred(x, y)
        want.sum().backward()
        got = compiled(x2, y2)
        got.sum().backward()
        tc(x.detach(), y.detach())
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(x2.grad, x.grad)
        torch.testing.assert_close(y2.grad, y.grad)
    if backend == "eager":
        assert cnt.frame_count == 1
        tc(x2, y2)
        assert tcnt.frame_count == 2                   # (its no-grad call compiled another)


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_predicate_traces_its_branch(backend):
    cnt = CompileCounter()
    compiled = xcompile.compile(const_pred, backend=cnt if backend == "eager" else backend)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x, True), const_pred(x, True))
    torch.testing.assert_close(compiled(x, False), const_pred(x, False))
    if backend == "eager":
        assert cnt.frame_count == 2                    # one per flag value, guarded


@pytest.mark.parametrize("backend", BACKENDS)
def test_branches_read_module_parameters(backend):
    torch.manual_seed(0)
    m = WithParams()
    compiled = xcompile.compile(m, backend=backend)
    for sign in (1.0, -1.0):
        x = torch.randn(5, 3).abs() * sign
        torch.testing.assert_close(compiled(x), m(x))
    m.lin.weight.data.mul_(2)                          # parameters are read, not baked in
    x = torch.randn(5, 3).abs()
    torch.testing.assert_close(compiled(x), m(x))


def test_branches_of_different_shapes_raise_as_eager():
    def f(x):
        return torch.cond(x.sum() > 0, lambda a: a, lambda a: a[:1], (x,))
    x = torch.randn(3)
    with pytest.raises(Exception) as eager:
        f(x)
    with pytest.raises(type(eager.value)):
        xcompile.compile(f, backend="eager")(x)


SEEN: list = []


def test_a_branch_with_a_side_effect_behaves_as_eager():
    """Eager torch.cond refuses it (it compiles the branches itself): so does the compiled call,
    after a graph break names the effect."""
    def f(x):
        def true_fn(a):
            SEEN.append(1)
            return a + 1
        return torch.cond(x.sum() > 0, true_fn, lambda a: a - 1, (x,))
    x = torch.randn(3).abs()
    with pytest.raises(Exception) as eager:
        f(x)
    with pytest.raises(type(eager.value)):
        xcompile.compile(f, backend="eager")(x)
    assert not SEEN


def _loop(x, n):
    y = x * 2
    i, out = torch.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, (v @ W).sin() + 1), (torch.tensor(0), y))
    return out.cos(), i


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_in_the_graph(backend):
    cnt = CompileCounter()
    compiled = xcompile.compile(_loop, backend=cnt if backend == "eager" else backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)       # no "running this graph eagerly"
        for k in (0, 3, 5):
            x, n = torch.randn(4, 3), torch.tensor(k)
            torch.testing.assert_close(compiled(x, n), _loop(x, n))
    if backend == "eager":
        assert cnt.frame_count == 1


def test_cond_kernels_do_not_fall_back():
    compiled = xcompile.compile(tensor_pred, backend="inductor")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for sign in (1.0, -1.0):
            x, y = torch.randn(2, 3).abs() * sign, torch.randn(2, 3)
            torch.testing.assert_close(compiled(x, y), tensor_pred(x, y))
