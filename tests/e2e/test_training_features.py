"""Training features users rely on under torch.compile (issue #19 item 10): activation
checkpointing, meta tensors, and a plain error for a double backward."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import xcompile
from xcompile.testing import CompileCounter, CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def block(x, w):
    return torch.sin(x @ w).relu() * 2


def ckpt_fn(x, w):
    y = checkpoint(block, x, w, use_reentrant=False)
    return (y * 3).sum()


def grads_of(fn, *inputs):
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*inputs)
    out.backward()
    return out.detach(), [t.grad for t in inputs]


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_non_reentrant_is_traced(backend):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    cnt = CompileCounterWithBackend(backend)
    out, grads = grads_of(xcompile.compile(ckpt_fn, backend=cnt, fullgraph=True), x, w)
    ref, ref_grads = grads_of(ckpt_fn, x, w)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    assert cnt.frame_count == 1                  # one graph, no break around checkpoint


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, scale=1.0):
        return self.drop(torch.tanh(self.lin(x))) * scale


class CkptNet(torch.nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.a, self.b, self.reentrant = Layer(), Layer(), reentrant

    def forward(self, x):
        if self.reentrant is False:
            h = checkpoint(self.a, x, use_reentrant=False)
            return checkpoint(self.b, h, use_reentrant=False, scale=2.0).sum()   # kwargs go to fn
        kw = {} if self.reentrant is None else {"use_reentrant": self.reentrant}
        return checkpoint(self.b.forward, checkpoint(self.a, x, **kw), **kw).sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reentrant", [False, True, None])
def test_checkpointed_modules_with_dropout_match_eager(backend, reentrant):
    torch.manual_seed(0)
    m, m2 = CkptNet(reentrant), CkptNet(reentrant)
    m2.load_state_dict(m.state_dict())
    x = torch.randn(3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # use_reentrant=None warns, in eager too
        torch.manual_seed(1)
        out = xcompile.compile(m, backend=backend)(x)
        out.backward()
        torch.manual_seed(1)
        ref = m2(x2)
        ref.backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, x2.grad)
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def meta_fn(x, y):
    return (x @ y).relu() + x.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_meta_inputs(backend):
    x, y = torch.randn(3, 5, device="meta"), torch.randn(5, 5, device="meta")
    out, ref = xcompile.compile(meta_fn, backend=backend)(x, y), meta_fn(x, y)
    assert out.device.type == "meta"
    assert (out.shape, out.stride(), out.dtype) == (ref.shape, ref.stride(), ref.dtype)

    m = torch.nn.Sequential(torch.nn.Linear(5, 5, device="meta"), torch.nn.GELU())
    out = xcompile.compile(m, backend=backend)(x)
    assert out.device.type == "meta" and out.shape == (3, 5)

    xg = torch.randn(3, 5, device="meta", requires_grad=True)
    out = xcompile.compile(meta_fn, backend=backend)(xg, y)
    out.sum().backward()
    assert xg.grad.device.type == "meta" and xg.grad.shape == xg.shape


def test_meta_graph_does_not_reach_the_kernels(monkeypatch):
    import xcompile.kernels.compile as kc

    def boom(*a, **k):
        raise AssertionError("kernels asked to compile a meta graph")

    monkeypatch.setattr(kc, "compile_aten_graph", boom)
    import xcompile.backends.inductor as ind
    monkeypatch.setattr(ind, "compile_aten_graph", boom)
    x = torch.randn(3, 5, device="meta")
    assert xcompile.compile(meta_fn, backend="inductor")(x, torch.randn(5, 5, device="meta")).is_meta


def second_order(x):
    return (x.sin() * x).sum()


def matmul_loss(x, w):
    return (x @ w).tanh().sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_double_backward_is_a_plain_error(backend):
    x = torch.randn(4, requires_grad=True)
    y = xcompile.compile(second_order, backend=backend)(x)
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    torch.testing.assert_close(g, x.cos() * x + x.sin())          # first order is right
    with pytest.raises(RuntimeError, match="does not currently support double backward"):
        torch.autograd.grad(g.sum(), x)
    xs, w = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
    (gx,) = torch.autograd.grad(xcompile.compile(matmul_loss, backend=backend)(xs, w), xs,
                                create_graph=True)
    with pytest.raises(RuntimeError, match="does not currently support double backward"):
        gx.sum().backward()


def test_double_backward_on_backend_eager_works():
    x = torch.randn(4, requires_grad=True)
    (g,) = torch.autograd.grad(xcompile.compile(second_order, backend="eager")(x), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    x2 = x.detach().clone().requires_grad_()
    (g2,) = torch.autograd.grad(second_order(x2), x2, create_graph=True)
    (gg2,) = torch.autograd.grad(g2.sum(), x2)
    torch.testing.assert_close(gg, gg2)


def test_checkpoint_counts_one_graph_with_a_plain_counter():
    cnt = CompileCounter()
    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    xcompile.compile(ckpt_fn, backend=cnt)(x, w).backward()
    assert cnt.frame_count == 1


def _two_null_contexts():
    import contextlib
    return contextlib.nullcontext(), contextlib.nullcontext()


def ckpt_ctx_fn(x, w):
    y = checkpoint(block, x, w, use_reentrant=False, context_fn=_two_null_contexts)
    return (y * 3).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_that_breaks_runs_with_compilation_off(backend, monkeypatch):
    """A checkpoint form that is not traced (a custom context_fn) breaks, and runs as torch runs
    a torch._disable_dynamo function: nothing it calls is compiled, so its forward and its
    recomputation in the backward save the same tensors (was: CheckpointError)."""
    import xcompile.convert_frame as convert_frame
    seen = []
    convert = convert_frame.ConvertFrame._convert

    def spy(self, code, *args):
        seen.append(code.co_name)
        return convert(self, code, *args)

    monkeypatch.setattr(convert_frame.ConvertFrame, "_convert", spy)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    out, grads = grads_of(xcompile.compile(ckpt_ctx_fn, backend=backend), x, w)
    ref, ref_grads = grads_of(ckpt_ctx_fn, x, w)
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    assert "block" not in seen


def test_torch_compiler_disable_at_a_break_compiles_nothing_inside(monkeypatch):
    import xcompile.convert_frame as convert_frame
    seen = []
    convert = convert_frame.ConvertFrame._convert

    def spy(self, code, *args):
        seen.append(code.co_name)
        return convert(self, code, *args)

    monkeypatch.setattr(convert_frame.ConvertFrame, "_convert", spy)

    def inner(x):
        return x.cos()

    @torch.compiler.disable
    def outer(x):
        return inner(x) + 1

    @torch.compiler.disable(recursive=False)
    def shallow(x):
        return inner(x) * 2

    def f(x):
        return outer(x.sin()) * 2

    def g(x):
        return shallow(x.sin()) - 1

    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(x), f(x))
    assert "inner" not in seen                    # recursive: nothing inside is compiled
    torch.testing.assert_close(xcompile.compile(g, backend="eager")(x), g(x))
    assert "inner" in seen                        # recursive=False: the callees still are
