"""Regressions found by the training fuzzer (tests/aot/fuzz_training_gen.py), minimised."""
import pytest
import torch

import xcompile

BACKENDS = ["aot_eager", "inductor"]


def _storage(t):
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_through_detach_of_input_shares_its_memory(backend):
    # fuzz seed 159: x.detach() is no autograd view of x, but eager's result shares x's memory
    def f(x):
        t = x.detach().flatten()[1:4]
        t.fill_(0.25)
        return t, x.detach(), x * 2

    xcompile.reset()
    cf = xcompile.compile(f, backend=backend)
    for _ in range(2):
        xe = torch.randn(3, 3, requires_grad=True)
        xc = xe.detach().clone().requires_grad_(True)
        eo, co = f(xe), cf(xc)
        for a, b, x, y in ((eo[0], co[0], xe, xc), (eo[1], co[1], xe, xc)):
            assert _storage(b) == _storage(y) and not b.requires_grad
            assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            torch.testing.assert_close(b, a)
        torch.testing.assert_close(xc, xe)
        co[1][0, 0] = 7.0                   # writes through the alias land in the input, as in eager
        assert xc[0, 0].item() == 7.0
        co[2].sum().backward()
        torch.testing.assert_close(xc.grad, torch.full((3, 3), 2.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_intermediate_written_in_place_keeps_eager_layout(backend):
    # fuzz seed 494: functionalization rebuilds the base as t(masked_fill(view)), row-major;
    # in eager the written view keeps the clone's column-major layout
    def f(x):
        t = x.clone().t()
        t.masked_fill_(t > 1, 0.5)
        return t, t.sum(0)

    xcompile.reset()
    cf = xcompile.compile(f, backend=backend)
    for grad in (True, False, True):
        xe = torch.randn(5, 3, requires_grad=grad)
        xc = xe.detach().clone().requires_grad_(grad)
        eo, co = f(xe), cf(xc)
        for a, b in zip(eo, co):
            assert a.stride() == b.stride()
            torch.testing.assert_close(b, a)
        if grad:
            w = torch.randn(3, 5)
            (eo[0] * w).sum().backward()
            (co[0] * w).sum().backward()
            torch.testing.assert_close(xc.grad, xe.grad)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("partition", ["min_cut", "save_all"])
def test_unused_dropout_still_draws_from_the_rng(backend, partition):
    # fuzz seed 1590: the partitioner copied only what the outputs need, dropping a dropout
    # whose result is unused, so the next dropout drew different numbers than eager
    import torch.nn.functional as F

    from xcompile import config
    from xcompile.aot.api import aot_compile

    def f(x):
        F.dropout(x.unflatten(-2, (5, 1)), p=0.5, training=True)
        return (F.dropout(x, p=0.5, training=True),)

    if partition == "save_all":
        if backend != "aot_eager":
            pytest.skip("save_all is only reachable through a custom backend")
        backend = lambda gm, ex: aot_compile(gm, ex, partition="save_all")  # noqa: E731
    xcompile.reset()
    with config.patch(fallback_random=True):
        cf = xcompile.compile(f, backend=backend)
        for seed in (0, 1):
            x = torch.randn(3, 5, 3, dtype=torch.float64, requires_grad=True)
            torch.manual_seed(seed)
            e = f(x)[0]
            torch.manual_seed(seed)
            c = cf(x)[0]
            torch.testing.assert_close(c, e)
            g = torch.randn_like(e)
            (ge,) = torch.autograd.grad(e, x, g)
            (gc,) = torch.autograd.grad(c, x, g)
            torch.testing.assert_close(gc, ge)


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_output_and_differentiable_alias_of_one_element(backend):
    # fuzz seed 294: inductor returned one tensor object for t.detach() and t.reshape(-1)
    # (1 element); marking it non-differentiable made the reshape lose its grad_fn
    def f(x):
        t = x[1] * 2
        return t.detach(), t.reshape(-1)

    xcompile.reset()
    cf = xcompile.compile(f, backend=backend)
    for _ in range(2):
        x = torch.randn(2, 1, requires_grad=True)
        eo, co = f(x), cf(x)
        assert [t.requires_grad for t in co] == [t.requires_grad for t in eo] == [False, True]
        torch.testing.assert_close(co[1], eo[1])
        (g,) = torch.autograd.grad(co[1].sum(), x)
        torch.testing.assert_close(g, torch.tensor([[0.0], [2.0]]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_output_that_is_a_view_of_a_differentiable_output(backend):
    # fuzz seed 653: inductor returned t[1].detach() as a view of the output t, and a view of a
    # tensor that requires grad requires grad whatever mark_non_differentiable said
    def f(x):
        t = x.gather(-1, torch.tensor([1, 0]))
        return t, t[1].detach()

    xcompile.reset()
    cf = xcompile.compile(f, backend=backend)
    x = torch.randn(2, requires_grad=True)
    eo, co = f(x), cf(x)
    assert [t.requires_grad for t in co] == [t.requires_grad for t in eo] == [True, False]
    assert co[1]._base is None and co[1].grad_fn is None
    torch.testing.assert_close(co[1], eo[1])
