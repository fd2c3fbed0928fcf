"""Views, cat, indexing, constants: lowered without copies where eager has none."""
from __future__ import annotations

import pytest
import torch

from .util import BACKENDS, assert_close, compile_fn

pytestmark = [pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")]


def _views(x, y):
    return (
        x.view(6, 20) * 2,
        x.reshape(2, 3, 4, 5).permute(3, 1, 0, 2) + 1,
        x.t()[1:7:2] - 1,
        x.unsqueeze(1).expand(12, 3, 10) * 1.5,
        x.select(1, 3) + y[:, 0],
        x[None, 2:, -3:].squeeze(0) * 3,
        x.flatten() + 1,
        (x + 1).view(10, 12).t(),     # a view of a computed buffer, returned as is
        x.t(),                        # a view of an input, returned as is (aliases it)
    )


def _gather(x, y):
    idx = torch.tensor([3, 0, -1, 5])
    emb = torch.nn.functional.embedding(torch.tensor([[1, 4], [0, 11]]), x)
    return (x[idx] * 2, x[:, idx] + 1, torch.gather(x, 1, (y.abs() * 9).long().clamp(0, 9)[:, :10]),
            emb, torch.index_select(x, 0, torch.tensor([2, 2, 7])), x[idx, idx[:2, None]],
            torch.ops.aten._unsafe_index(x, [None, torch.arange(20) // 2]) * 2)


def _cat_and_constants(x, y):
    return (torch.cat([x, y * 2, x[:, :1]], 1) + 1, torch.cat([x, x], 0).sum(0),
            torch.stack([x[:, 0], y[:, 0]], 1) * 2,
            x + torch.arange(10, dtype=torch.float32), torch.full((12, 10), 3.5) * x,
            torch.zeros_like(x) + torch.ones(10), torch.where(x > 0, x, torch.zeros(())),
            torch.arange(3, 15, 2) * 2)


def _scatters(x, y):
    """select/slice_scatter (the backward of select and slice): pointwise, no ATen call."""
    aten = torch.ops.aten
    return (torch.select_scatter(x, y[:, 1] * 2, 1, 3), torch.select_scatter(x, x[-1], 0, -1) + 1,
            torch.slice_scatter(x, y, 1, 2, 7), torch.slice_scatter(x, y.t()[1:4].t(), 1, 1, None, 3),
            torch.slice_scatter(x, x[:4] * 2, 0, -4), torch.slice_scatter(x, y[:, :3], 1, 7, 100),
            aten.select_backward(y[:, 0], [12, 10], 1, 4), aten.slice_backward(y, [12, 10], 1, 0, 10, 2))


def _repeats(x, y):
    """repeat: a pointwise loop (modulo indexing), fused with the copy that feeds it."""
    return (x.repeat(2, 3), (x.t() * 2).contiguous().repeat(1, 2), y[:, :1].repeat(1, 4),
            x.repeat(2, 1, 1) + 1, x[0].repeat(3), y.repeat(1, 1), x.repeat(0, 2))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_views, _gather, _cat_and_constants, _scatters, _repeats],
                         ids=lambda f: f.__name__.strip("_"))
def test_views_and_indexing(backend, fn):
    x, y = torch.randn(12, 10), torch.randn(12, 5)
    compiled = compile_fn(fn, [x, y], backend)
    x, y = torch.randn(12, 10), torch.randn(12, 5)
    assert_close(compiled(x, y), fn(x, y), fn.__name__)
    if fn in (_scatters, _repeats):
        assert not compiled.fallbacks, compiled.fallbacks


def test_output_views_alias():
    """A view of an input comes back as a view of that input, like eager's."""
    x = torch.randn(4, 6)
    compiled = compile_fn(lambda x: (x.t(), x[1:3], (x * 2).t()), [x])
    a, b, c = compiled(x)
    assert a.data_ptr() == x.data_ptr() and a.stride() == (1, 6)
    assert b.data_ptr() == x[1:3].data_ptr()
    assert c.stride() == (1, 6)
    assert_close((a, b, c), (x.t(), x[1:3], (x * 2).t()))


def test_input_mutation():
    """x.add_(1) inside the graph: the caller's tensor is updated."""
    def fn(x, y):
        x.add_(y)
        return (x * 2,)
    x, y = torch.randn(5, 3), torch.randn(3)
    compiled = compile_fn(fn, [x.clone(), y])
    x1, x2 = x.clone(), x.clone()
    out = compiled(x1, y)
    ref = fn(x2, y)
    assert_close(out, ref)
    assert_close(x1, x2)
