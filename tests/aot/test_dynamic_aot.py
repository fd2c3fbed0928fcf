"""AOT graphs with symbolic sizes (issue #11): a training step compiled with ``dynamic=True``
traces its forward and backward once; every batch size then runs those graphs (aot_eager) or
kernels taking the sizes (inductor). Values and gradients are compared with eager on fresh
inputs, and no per-size backend compile may happen where the symbolic path applies."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import xcompile
from xcompile.backends.per_size import PerSize

BACKENDS = ("aot_eager", "inductor")
SIZES = (3, 5, 17, 33)


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


def _step(model, x):
    out = model(x)
    out.square().mean().backward()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_step_once_for_every_batch(backend):
    ref = _mlp()
    mine = copy.deepcopy(ref)
    compiled = xcompile.compile(mine, backend=backend, dynamic=True)
    before = PerSize.backend_compiles
    for n in SIZES:
        x = torch.randn(n, 8)
        torch.testing.assert_close(_step(compiled, x), _step(ref, x))
        for p, q in zip(ref.parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None
    assert PerSize.backend_compiles == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_that_needs_the_sizes(backend):
    """mean's and view's backward need the symbolic sizes: they are saved beside the tensors."""
    def f(x, w):
        h = (x @ w).view(x.shape[0], 2, -1)
        return h.mean(dim=(1, 2)), h.sum() / x.shape[0]
    compiled = xcompile.compile(f, backend=backend, dynamic=True)
    before = PerSize.backend_compiles
    for n in SIZES:
        x, w = torch.randn(n, 6), torch.randn(6, 4, requires_grad=True)
        w2 = w.detach().clone().requires_grad_()
        a, b = f(x, w)
        (a.sum() + b).backward()
        ca, cb = compiled(x, w2)
        (ca.sum() + cb).backward()
        torch.testing.assert_close((ca, cb), (a, b))
        torch.testing.assert_close(w2.grad, w.grad)
    assert PerSize.backend_compiles == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_the_loss_does_not_use(backend):
    """Its gradient is missing in the backward: zeros of the size it has in this call."""
    def f(x):
        y = x.sin()
        return y * 2, y.cos()
    compiled = xcompile.compile(f, backend=backend, dynamic=True)
    for n in SIZES:
        x = torch.randn(n, 3, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        f(x)[0].sum().backward()
        compiled(x2)[0].sum().backward()
        torch.testing.assert_close(x2.grad, x.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_call_after_training_compile(backend):
    model = _mlp()
    compiled = xcompile.compile(model, backend=backend, dynamic=True)
    x = torch.randn(5, 8)
    _step(compiled, x)
    with torch.no_grad():
        for n in (4, 9):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x), model(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_aliasing_an_input_compiles_per_size_and_stays_right(backend):
    def f(x, w):
        return x.t(), (x * w).sum(0)
    compiled = xcompile.compile(f, backend=backend, dynamic=True)
    for n in (3, 4, 6):
        x, w = torch.randn(n, 5), torch.randn(5, requires_grad=True)
        w2 = w.detach().clone().requires_grad_()
        a, b = f(x, w)
        b.sum().backward()
        ca, cb = compiled(x, w2)
        cb.sum().backward()
        assert ca._base is x or ca.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        torch.testing.assert_close((ca, cb), (a, b))
        torch.testing.assert_close(w2.grad, w.grad)


def test_sequence_model_with_symbolic_length():
    """An embedding, attention and a loss over a symbolic sequence length, on inductor."""
    torch.manual_seed(0)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 16)
            self.qkv = torch.nn.Linear(16, 48)
            self.out = torch.nn.Linear(16, 50)

        def forward(self, ids):
            h = self.emb(ids)
            q, k, v = self.qkv(h).chunk(3, -1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            logits = self.out(a + h)
            return F.cross_entropy(logits.view(-1, 50), ids.view(-1))

    ref = M()
    mine = copy.deepcopy(ref)
    compiled = xcompile.compile(mine, backend="inductor", dynamic=True)
    for t in (5, 9, 20):
        ids = torch.randint(0, 50, (2, t))
        loss, closs = ref(ids), compiled(ids)
        loss.backward()
        closs.backward()
        torch.testing.assert_close(closs, loss)
        for p, q in zip(ref.parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_size_returned_after_a_failed_symbolic_attempt(backend):
    """The attempt at one graph for all sizes taught the ShapeEnv a value for a size (an in-place
    op on ``v[::2]`` branched on its length being 1) after the frame's guards were made, and gave
    up; the per-size graphs then returned that value as the size for every size (random
    program 300639: ``a0[-1] = rows`` wrote 2 where eager wrote 3)."""
    def f(a0, v):
        w = v * 1
        w[::2].add_(1)
        rows, cols = v.shape
        xcompile.graph_break()          # the first graph returns the size
        a0[-1] = rows
        return rows, w * cols
    compiled = xcompile.compile(f, backend=backend)
    for rows, cols in [(3, 4), (2, 5), (3, 4), (4, 3)]:
        base = torch.randn(2 * rows, cols)
        mine = base.clone()
        got, ref = compiled(mine[:rows], mine[rows:]), f(base[:rows], base[rows:])
        assert got[0] == ref[0] == rows
        torch.testing.assert_close(got[1], ref[1])
        torch.testing.assert_close(mine, base)
