"""Constant folding (kernels/constant_fold.py): what only literals feed is computed once at compile
time with ATen; outputs stay fresh tensors each call; random and uninitialised values are not folded."""
from __future__ import annotations

import pytest
import torch

from .util import BACKENDS, assert_close, compile_fn


def _buckets(x):
    # deberta's relative positions: arange, sign, log, ceil, clamp over literals; then x reads them
    pos = torch.arange(8)[:, None] - torch.arange(8)[None, :]
    mid = torch.tensor(4)
    sign = torch.sign(pos)
    ab = torch.where((pos < mid) & (pos > -mid), mid - 1, torch.abs(pos))
    log_pos = torch.ceil(torch.log(ab / mid) / torch.log(torch.tensor(31 / mid)) * (mid - 1)) + mid
    bucket = torch.where(ab <= mid, pos.to(log_pos.dtype), log_pos * sign).long().clamp(0, 7)
    scale = torch.sqrt(torch.tensor(x.shape[-1], dtype=torch.float32) * 3)
    return torch.gather(x, 1, bucket) / scale


@pytest.mark.parametrize("backend", BACKENDS)
def test_literal_computations_fold(backend):
    x = torch.randn(8, 8)
    compiled = compile_fn(_buckets, [x], backend)
    assert len(compiled.kernels) == 1, compiled.wrapper_src       # only the gather/div is left
    x = torch.randn(8, 8)
    assert_close(compiled(x), _buckets(x))


def _returns_literals(x):
    c = torch.arange(6, dtype=torch.float32) * 2
    return c, c.view(2, 3), torch.tensor([1.0, 2.0]) + 1, x + c


@pytest.mark.parametrize("backend", BACKENDS)
def test_folded_outputs_are_fresh_each_call(backend):
    x = torch.randn(6)
    compiled = compile_fn(_returns_literals, [x], backend)
    first = compiled(x)
    for t in first:
        t.add_(100)                       # the caller owns its outputs
    again = compiled(x)
    assert_close(again, _returns_literals(x))
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(first, again))


def _random_and_uninitialised(x):
    return x + torch.rand(4) * 0, torch.empty_like(torch.arange(4.0)).fill_(3) + x, torch.rand(3)


def test_random_is_not_folded():
    x = torch.randn(4)
    compiled = compile_fn(_random_and_uninitialised, [x])
    a, b = compiled(x)[2], compiled(x)[2]
    assert not torch.equal(a, b)
    assert_close(compiled(x)[:2], _random_and_uninitialised(x)[:2])


def test_big_literals_stay_kernels():
    from xcompile.kernels import constant_fold
    n = constant_fold.MAX_NUMEL * 2
    fn = lambda x: x.sum() + torch.arange(n, dtype=torch.float32).cos()   # noqa: E731
    x = torch.randn(3)
    compiled = compile_fn(fn, [x])
    assert "cos.default" in compiled.wrapper_src          # computed by a kernel per call
    assert_close(compiled(x), fn(x))


def _literal_output_read_again(x):
    # an optimizer's first step: a step count made from a literal is an output (the new state),
    # and the bias correction folded from it reads it (KeyError: the count was never evaluated)
    step = torch.tensor(0.0) + 1
    correction = 1 - torch.tensor(0.9) ** step
    return step, x / correction


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_folded_value_reads_an_output(backend):
    x = torch.randn(5)
    compiled = compile_fn(_literal_output_read_again, [x], backend)
    first = compiled(x)
    assert_close(first, _literal_output_read_again(x))
    first[0].add_(5)                       # the output is still the caller's own tensor
    assert_close(compiled(x), _literal_output_read_again(x))
