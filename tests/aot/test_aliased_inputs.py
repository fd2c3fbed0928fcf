"""Inputs a graph writes into that alias other inputs, and inputs restrided in place (issue #19,
items 2 and 3): every backend gives eager's values, in the outputs and in the inputs after the
call, whichever aliasing the first call had; outputs that are inputs stay those objects."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import xcompile

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _run(fn, make, seed):
    torch.manual_seed(seed)
    args = make()
    out = fn(*args)
    return args, out if isinstance(out, tuple) else (out,)


def _check(f, backend, makes):
    """Call compiled and eager ``f`` on the inputs of each factory in turn (fresh values)."""
    cf = xcompile.compile(f, backend=backend)
    for i, make in enumerate(makes):
        args_e, out_e = _run(f, make, i)
        args_c, out_c = _run(cf, make, i)
        for k, (a, e) in enumerate(zip(out_c, out_e)):
            assert a.shape == e.shape and a.stride() == e.stride(), f"call {i} output {k}: layout"
            torch.testing.assert_close(a, e, msg=lambda m: f"call {i} output {k}: {m}")
            for j, (ia, ie) in enumerate(zip(args_c, args_e)):
                assert (a is ia) == (e is ie), f"call {i}: output {k} is input {j} in eager only/here only"
        for j, (a, e) in enumerate(zip(args_c, args_e)):
            assert a.shape == e.shape and a.stride() == e.stride(), f"call {i} input {j}: layout after"
            torch.testing.assert_close(a, e, msg=lambda m: f"call {i} input {j} after the call: {m}")


def _base_and_row():
    base = torch.randn(2, 3)
    return base, base[0]


def _separate():
    return torch.randn(2, 3), torch.randn(3)


def _overlapping():
    base = torch.randn(6)
    return base[0:4], base[2:6]


def _apart():
    return torch.randn(4), torch.randn(4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ["aliased_first", "separate_first"])
def test_written_input_aliases_another(backend, order):
    def f(a, b):
        a.mul_(2)
        return b + 1

    makes = [_base_and_row, _separate, _base_and_row] if order == "aliased_first" else \
        [_separate, _base_and_row, _separate]
    _check(f, backend, makes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_views_one_written(backend):
    def f(va, vb):
        va.mul_(2)
        return vb + 1, va.sum()

    _check(f, backend, [_overlapping, _apart, _overlapping])


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_taken_before_a_break_written_after(backend):
    def f(x):
        v = x[0]
        if x.sum().item() > -1e9:          # a graph break: the resume gets x and v as inputs
            v.mul_(2)
        return x + 1

    _check(f, backend, [lambda: (torch.randn(2, 3),)] * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_written_input_aliases_a_buffer(backend):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(4))

        def forward(self, v):
            v.add_(1)
            return self.buf * 2

    m_e, m_c = M(), M()
    cm = xcompile.compile(m_c, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(cm(m_c.buf[1:3]), m_e(m_e.buf[1:3]))
        torch.testing.assert_close(m_c.buf, m_e.buf)
    torch.testing.assert_close(cm(torch.ones(2)), m_e(torch.ones(2)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_written_aliased_inputs_train(backend):
    def f(a, b):
        a.mul_(2)
        return (b * b).sum()

    for aliased in (True, False, True):
        grads = []
        for fn in (f, xcompile.compile(f, backend=backend)):
            torch.manual_seed(0)
            w = torch.randn(2, 3, requires_grad=True)
            base = w * 1.0
            args = (base, base[0]) if aliased else (base, torch.randn(3, requires_grad=True))
            fn(*args).backward()
            grads.append(w.grad)
        torch.testing.assert_close(grads[1], grads[0])
    # the compiled function kept one cache entry for both kinds of call
    assert len(xcompile._C.cache_entries(f)) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_restrided_and_written(backend):
    def f(x):
        x.t_()
        x[0, 0] = 1
        return x.sin(), x

    _check(f, backend, [lambda: (torch.randn(2, 3),)] * 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["t_", "squeeze_", "unsqueeze_", "transpose_", "as_strided_"])
def test_input_restrided_only(backend, op):
    def f(x):
        if op == "as_strided_":
            x.as_strided_((2, 2), (1, 2), 1)
        elif op == "unsqueeze_":
            x.unsqueeze_(0)
        elif op == "transpose_":
            x.transpose_(0, 1)
        else:
            getattr(x, op)()
        return x * 2

    _check(f, backend, [lambda: (torch.randn(1, 3) if op == "squeeze_" else torch.randn(2, 3),)] * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_restrided_with_grad(backend):
    def f(x):
        x.t_()
        return x @ x.t().sin()

    results = []
    for fn in (f, xcompile.compile(f, backend=backend)):
        torch.manual_seed(0)
        w = torch.randn(2, 3, requires_grad=True)
        x = w * 1.0
        out = fn(x)
        out.sum().backward()
        results.append((out, x.shape, w.grad))
    torch.testing.assert_close(results[1][0], results[0][0])
    assert results[1][1] == results[0][1]
    torch.testing.assert_close(results[1][2], results[0][2])
