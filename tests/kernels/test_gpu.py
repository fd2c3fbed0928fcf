"""The same checks through real Triton on an NVIDIA GPU (skipped without one)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from .opinfo import BINARY, UNARY
from .util import assert_close, compile_fn, make_tensor

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)
TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float16: dict(atol=2e-3, rtol=2e-3),
       torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2)}


def _cuda(ts):
    return [t.cuda() for t in ts]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_unary_gpu(dtype):
    ops = [op for op in UNARY if dtype in op.dtypes and op.triton]

    def inputs():
        return _cuda([make_tensor((33, 65), dtype, *(op.domain if op.domain and dtype.is_floating_point
                                                     else (None, None))) for op in ops])

    def fn(*xs):
        return tuple(op.fn(x) for op, x in zip(ops, xs))
    compiled = compile_fn(fn, inputs(), "triton")
    xs = inputs()
    for op, got, want in zip(ops, compiled(*xs), fn(*xs)):
        assert_close(got, want, op.name, tol=TOL.get(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_binary_gpu(dtype):
    ops = [op for op in BINARY if dtype in op.dtypes and op.triton and op.domain is None]

    def inputs():
        return _cuda([make_tensor(s, dtype) for _ in ops for s in ((4, 1, 33), (5, 1))])

    def fn(*xs):
        return tuple(op.fn(xs[2 * i], xs[2 * i + 1]) for i, op in enumerate(ops))
    compiled = compile_fn(fn, inputs(), "triton")
    xs = inputs()
    for op, got, want in zip(ops, compiled(*xs), fn(*xs)):
        assert_close(got, want, op.name, tol=TOL.get(dtype))


@pytest.mark.parametrize("rows,cols", [(64, 100), (8, 5000)], ids=["persistent", "looped"])
def test_reductions_gpu(rows, cols):
    def fn(x, w, b):
        return (torch.softmax(x, -1), F.layer_norm(x, (cols,), w, b), x.sum(-1), x.amax(0), x.argmax(-1),
                torch.var_mean(x, -1), F.rms_norm(x, (cols,), w))
    xs = _cuda([torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)])
    compiled = compile_fn(fn, xs, "triton")
    xs = _cuda([torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)])
    assert_close(compiled(*xs), fn(*xs), tol=dict(atol=1e-4, rtol=1e-4))


def test_fusion_gpu():
    def fn(x, y):
        return (torch.relu(x + y) * 2,)
    xs = _cuda([torch.randn(64, 64), torch.randn(64)])
    compiled = compile_fn(fn, xs, "triton")
    assert len(compiled.kernels) == 1
    assert_close(compiled(*xs), fn(*xs))
