"""``p.grad`` inside compiled code (issue #32: an optimizer's step reads every parameter's gradient).

Of a tensor from outside the frame, ``.grad`` is what the real tensor holds, read through its
source: None is guarded to stay None, a gradient is a graph input (a backward between calls
recompiles once, when it first appears), and an in-place update of it is an input mutation. A
tensor made in the frame has none. Before, every read was a graph break ("reading Tensor.grad").
"""
import pytest
import torch

import xcompile
from xcompile.testing import CompileCounter, CompileCounterWithBackend

pytestmark = pytest.mark.usefixtures("fresh_compilers")

BACKENDS = ("eager", "aot_eager", "inductor")


def _scaled_or_shifted(w, x):
    g = w.grad
    if g is None:
        return x + 1
    return x * g + w


def test_absent_then_present_recompiles_once():
    w = torch.randn(3, requires_grad=True)
    cnt = CompileCounter()
    cf = xcompile.compile(_scaled_or_shifted, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(cf(w, x), x + 1)
    (w * w).sum().backward()                                  # now it has one: the guard fails
    torch.testing.assert_close(cf(w, x), x * (2 * w.detach()) + w)
    w.grad = torch.randn(3)                                   # another gradient tensor: same graph
    torch.testing.assert_close(cf(w, x), x * w.grad + w)
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_and_gradients_agree(backend):
    w = torch.randn(4, requires_grad=True)
    w.grad = torch.randn(4)
    cf = xcompile.compile(_scaled_or_shifted, backend=backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(4, requires_grad=True)
        out, ref = cf(w, x), _scaled_or_shifted(w, x)
        torch.testing.assert_close(out, ref)
        ga = torch.autograd.grad(out.sum(), (w, x))
        gb = torch.autograd.grad(ref.sum(), (w, x))
        torch.testing.assert_close(ga, gb)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_update_of_the_gradient(backend):
    """As an optimizer does: the gradient changed in place is the caller's tensor, changed."""
    m = torch.nn.Linear(3, 2)
    m(torch.randn(5, 3)).sum().backward()

    def clip_and_step(m, lr):
        for p in m.parameters():
            p.grad.clamp_(-0.5, 0.5)
            with torch.no_grad():
                p.sub_(p.grad * lr)
        return m.weight.grad.sum()

    ref_m = torch.nn.Linear(3, 2)
    ref_m.load_state_dict(m.state_dict())
    for p, q in zip(ref_m.parameters(), m.parameters()):
        p.grad = q.grad.clone()
    cnt = CompileCounterWithBackend(backend)
    out = xcompile.compile(clip_and_step, backend=cnt, fullgraph=True)(m, 0.1)
    ref = clip_and_step(ref_m, 0.1)
    torch.testing.assert_close(out, ref)
    for p, q in zip(m.parameters(), ref_m.parameters()):
        torch.testing.assert_close(p, q)
        torch.testing.assert_close(p.grad, q.grad)
    assert cnt.frame_count == 1


def test_tensor_made_in_the_frame_has_none():
    def f(x):
        y = torch.zeros(3, requires_grad=True)
        return x + 1 if y.grad is None else x - 1
    cnt = CompileCounter()
    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(f, backend=cnt, fullgraph=True)(x), x + 1)
    assert cnt.frame_count == 1
