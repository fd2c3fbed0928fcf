"""A tensor that is not dense keeps its strides through AOT's traces, as in eager.

- An input that requires grad was traced on a ``clone()``, which has contiguous strides: ``x.contiguous()``
  traced as nothing and the compiled call returned the caller's view itself (strides (6, 1), sharing
  its memory) where eager returns a contiguous copy (random program 300356).
- A write into a tensor (``x.mul_(2)``) took the out-of-place result's (contiguous) strides under
  functionalization, with or without grad: ``x.contiguous()`` after it returned ``x`` itself, and a
  later write into that "copy" reached the caller's ``x``."""
import pytest
import torch

import xcompile

pytestmark = pytest.mark.usefixtures("fresh_compilers")

BACKENDS = ("aot_eager", "inductor")
VIEWS = {
    "columns": lambda a: a[:, 1:],
    "transposed columns": lambda a: a[:, 1:].t(),
    "every other row": lambda a: a[::2],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_contiguous_of_a_strided_input_is_a_copy(backend, view, requires_grad):
    def f(v):
        return v.contiguous(), v.contiguous() * 2
    cf = xcompile.compile(f, backend=backend)
    for _ in range(2):
        a = torch.randn(4, 6, requires_grad=requires_grad)
        v = VIEWS[view](a)
        out, ref = cf(v), f(v)
        for o, r in zip(out, ref):
            torch.testing.assert_close(o, r)
            assert o.stride() == r.stride() and o.is_contiguous()
        assert out[0].untyped_storage().data_ptr() != a.untyped_storage().data_ptr(), "returned the input's memory"
        if requires_grad:
            g = torch.randn_like(ref[0])
            ga = torch.autograd.grad((out[0] * g).sum() + out[1].sum(), a)
            gb = torch.autograd.grad((ref[0] * g).sum() + ref[1].sum(), a)
            torch.testing.assert_close(ga, gb)


@pytest.mark.parametrize("backend", BACKENDS)
def test_after_a_graph_break(backend):
    """The program as the search found it, shrunk: the view crosses a graph break first."""
    def f(a1):
        v3 = a1[:, 1:]
        bool((a1 > 0).any())
        return v3.contiguous()
    a = torch.randn(3, 6, requires_grad=True)
    out, ref = xcompile.compile(f, backend=backend)(a), f(a)
    torch.testing.assert_close(out, ref)
    assert out.stride() == ref.stride() == (5, 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_written_strided_input_keeps_its_strides(backend, view, requires_grad):
    def f(x):
        x.mul_(2)
        y = x.contiguous()             # a copy in eager: x is still strided after the write
        y.add_(1)                      # ... so this does not reach x
        return y, x.reshape(-1) * 1, x.is_contiguous()
    cf = xcompile.compile(f, backend=backend)
    for _ in range(2):
        w = torch.randn(4, 6, requires_grad=requires_grad)
        xe, xc = VIEWS[view](w * 1), VIEWS[view](w * 1)     # views of non-leaves, which may be written
        ref, out = f(xe), cf(xc)
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(xc, xe)       # the write reached the input, and only the write
        assert out[0].stride() == ref[0].stride()
        assert out[0].untyped_storage().data_ptr() != xc.untyped_storage().data_ptr(), "returned the input's memory"
        if requires_grad:
            g = torch.randn_like(ref[0])
            ga = torch.autograd.grad((out[0] * g).sum() + out[1].sum(), w)
            gb = torch.autograd.grad((ref[0] * g).sum() + ref[1].sum(), w)
            torch.testing.assert_close(ga, gb)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_out_argument_keeps_its_strides(backend):
    def f(a, b, out):
        torch.add(a, b, out=out)
        return out.contiguous()
    cf = xcompile.compile(f, backend=backend)
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    oe, oc = torch.zeros(4, 6)[:, 1:], torch.zeros(4, 6)[:, 1:]
    ref, got = f(a, b, oe), cf(a, b, oc)
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(oc, oe)
    assert got.untyped_storage().data_ptr() != oc.untyped_storage().data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strided_input_only_read_is_not_written(backend):
    """The clone of a strided input that requires grad, restrided for the trace, was counted as
    written by the program: the call wrote it back into the caller's view, whose base eager
    autograd had saved (random program 300034: 'modified by an inplace operation')."""
    def f(v):
        return (v > 0).sum(), v * 2
    w = torch.randn(3, 6, dtype=torch.double, requires_grad=True)
    base = w.sigmoid()                                      # saves its output for backward
    v = base[:, 1:].t()
    version = v._version
    out, ref = xcompile.compile(f, backend=backend)(v), f(v)
    torch.testing.assert_close(out, ref)
    assert v._version == version, "the input was written"
    ga = torch.autograd.grad(out[1].sum(), w, retain_graph=True)
    gb = torch.autograd.grad(ref[1].sum(), w)
    torch.testing.assert_close(ga, gb)
