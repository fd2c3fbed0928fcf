"""An input that requires grad and is not dense keeps its strides through AOT's analysis (random
program 300356): the analysis traced such an input on a ``clone()``, which gave it contiguous
strides, so ``x.contiguous()`` traced as nothing and the compiled call returned the caller's view
itself (strides (6, 1), sharing the caller's memory) where eager returns a contiguous copy."""
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
