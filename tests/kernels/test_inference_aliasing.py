"""Backend "inductor" on the inference path: outputs that are (views of) inputs the program
mutates come back as eager returns them -- the input object itself, or a view sharing its
storage -- with the mutation visible in the input; compared with eager on fresh inputs."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import xcompile


def _relations(outs, ins):
    """For each output: which inputs it is / shares storage with, and which earlier outputs."""
    def rel(o, objs):
        return [("is" if o is t else "shares", j) for j, t in enumerate(objs)
                if o is t or o.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()]
    return [(rel(o, ins), rel(o, outs[:i])) for i, o in enumerate(outs)]


def _add_(x):
    x.add_(1)
    return x


def _mul_view(x):
    x.mul_(2)
    return x.view(-1)


def _two(x, w):
    x.add_(w)
    return x * 2, x[0], x


def _transpose_of_mutated(x):
    x.sub_(0.5)
    return x.t(), x.sum()


def _view_no_mutation(x):
    return x.t(), x[1:]


def _mutates_other_input(x, y):
    y.mul_(3)
    return x + y, y[:, 1]


CASES = [_add_, _mul_view, _two, _transpose_of_mutated, _view_no_mutation, _mutates_other_input]


def _check(fn, compiled, nargs, grad_mode):
    for _ in range(2):                                 # fresh inputs each call
        args = [torch.randn(3, 4) for _ in range(nargs)]
        ref_args = [a.clone() for a in args]
        with grad_mode():
            got = compiled(*args)
            want = fn(*ref_args)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        assert _relations(got, args) == _relations(want, ref_args)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.stride() == w.stride() and g.dtype == w.dtype
            torch.testing.assert_close(g, w)
        for a, r in zip(args, ref_args):
            torch.testing.assert_close(a, r)           # the mutation is visible in the input


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("grad_mode", [torch.no_grad, torch.enable_grad], ids=["no_grad", "grad_on"])
def test_outputs_alias_mutated_inputs_like_eager(fn, grad_mode):
    xcompile.reset()
    compiled = xcompile.compile(fn, backend="inductor", fullgraph=True)
    _check(fn, compiled, fn.__code__.co_argcount, grad_mode)


def test_first_output_is_the_input_object():
    x = torch.randn(5)
    compiled = xcompile.compile(_add_, backend="inductor", fullgraph=True)
    before = x.clone()
    with torch.no_grad():
        out = compiled(x)
    assert out is x
    torch.testing.assert_close(x, before + 1)


class Counter(nn.Module):
    """A module returning a buffer it updates in place (a lifted state input)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(4))

    def forward(self, x):
        self.seen.add_(x.sum(0))
        return x * 2, self.seen


def test_module_returns_its_mutated_buffer():
    eager, model = Counter(), Counter()
    compiled = xcompile.compile(model, backend="inductor", fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(3, 4)
            out, seen = compiled(x)
            ref, ref_seen = eager(x)
            assert seen is model.seen
            torch.testing.assert_close(out, ref)
            torch.testing.assert_close(model.seen, eager.seen)


# -- outputs that are views of other outputs ---------------------------------------------------------

def _split_of_channels_last(a):
    # fuzz seed 20059: t1 got strides (6, 1, 3, 3) where eager has (6, 1, 6, 3) -- they differ only
    # in the stride of a size-1 dim, and the split view of t1 came back as a copy
    t1 = torch.floor(a) * 3
    return torch.split(t1, 3, -3)[-1], t1


_W = torch.randn(4, 3, 3, 3)


def _slice_of_conv(a):
    # the convolution runs channels-last (our layout), eager's output is contiguous: the output
    # is a copy in eager's strides, and its slice must be a view of that copy
    y = torch.nn.functional.conv2d(a, _W)
    return y[:, 1:3], y, y.sum()


def _views_of_mm(a):
    y = a @ a.t()
    return y.t()[1:], y, y[2]


def _split_of_stack(a):
    # fuzz seed 70088: the split came first in the outputs and was taken as the base of the stack
    t0 = torch.stack([a, a], -2)
    return torch.split(t0, 2, -5)[0], t0


@pytest.mark.parametrize("fn, make", [
    (_split_of_channels_last, lambda: torch.randn(3, 3, 1, 2).contiguous(memory_format=torch.channels_last)),
    (_split_of_stack, lambda: torch.randn(3, 8, 17, 17, dtype=torch.float64).transpose(-1, -2)),
    (_slice_of_conv, lambda: torch.randn(2, 3, 8, 8)),
    (_views_of_mm, lambda: torch.randn(5, 5)),
], ids=["split_channels_last", "split_of_stack", "slice_of_conv", "views_of_mm"])
def test_output_view_of_output_shares_storage(fn, make):
    xcompile.reset()
    compiled = xcompile.compile(fn, backend="inductor", fullgraph=True)
    for _ in range(2):
        a = make()
        with torch.no_grad():
            got, want = compiled(a.clone()), fn(a.clone())
        # one object for two eager views of one storage is fine (torch.compile does the same)
        assert [[j for _, j in o] for _, o in _relations(got, [])] == \
            [[j for _, j in o] for _, o in _relations(want, [])]
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            assert [s for s, n in zip(g.stride(), g.shape) if n > 1] == \
                [s for s, n in zip(w.stride(), w.shape) if n > 1]
            # (a float32 sum of a convolution's outputs may cancel down to ~0.5: 1e-5 apart
            # from eager's in about one run in six at the default tolerance)
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-4)


def test_layouts_equal_up_to_size1_strides():
    from xcompile.kernels.ir import Layout, same_strides
    f = torch.float32
    assert Layout(f, (3, 3, 1, 2), (6, 1, 3, 3)) == Layout(f, (3, 3, 1, 2), (6, 1, 6, 3))
    assert hash(Layout(f, (3, 1), (1, 7))) == hash(Layout(f, (3, 1), (1, 1)))
    assert Layout(f, (3, 2), (2, 1)) != Layout(f, (3, 2), (1, 3))
    assert Layout(f, (3, 2), (2, 1)) != Layout(f, (3, 2), (2, 1), 1)
    assert Layout(f, (0, 2), (2, 1), 4) == Layout(f, (0, 2), (1, 0))
    assert same_strides((2, 1), (1, 5), (1, 2)) and not same_strides((2, 2), (1, 5), (1, 2))
