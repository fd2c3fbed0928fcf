"""How many kernels known patterns compile to, and that the fused results equal eager."""
from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F

from xcompile import log

from .util import BACKENDS, assert_close, compile_fn, n_kernels

PATTERNS = [
    # name, fn, input shapes, max kernels
    ("relu_add_mul", lambda x, y: torch.relu(x + y) * 2, [(8, 16), (16,)], 1),
    ("softmax", lambda x: torch.softmax(x, -1), [(8, 33)], 1),
    ("layer_norm_gelu", lambda x, w, b: F.gelu(F.layer_norm(x, (64,), w, b)), [(4, 8, 64), (64,), (64,)], 1),
    ("residual_rmsnorm", lambda x, r, w: F.rms_norm(x + r, (64,), w), [(16, 64), (16, 64), (64,)], 1),
    ("sum_then_epilogue", lambda x: x.sum(-1) * 3 + 1, [(8, 40)], 1),
    ("horizontal", lambda x, y: (x * 2, y + 1, x.exp()), [(8, 16), (8, 16)], 1),
    ("var_mean_pair", lambda x: (x.mean(-1), x.var(-1), x.amax(-1)), [(8, 40)], 1),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,fn,shapes,max_kernels", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_kernel_count(backend, name, fn, shapes, max_kernels):
    inputs = [torch.randn(s) for s in shapes]
    compiled = compile_fn(fn, inputs, backend)
    assert n_kernels(compiled) <= max_kernels, compiled.wrapper_src
    fresh = [torch.randn(s) for s in shapes]
    assert_close(compiled(*fresh), fn(*fresh), name, tol=dict(atol=1e-5, rtol=1e-5))


def test_matmul_is_extern_and_epilogue_fuses():
    def fn(x, w, b):
        return F.gelu(x @ w + b) * 2
    inputs = [torch.randn(8, 16), torch.randn(16, 32), torch.randn(32)]
    compiled = compile_fn(fn, inputs)
    assert n_kernels(compiled) == 1
    assert any("mm" in f for f in compiled.fallbacks)
    assert_close(compiled(*inputs), fn(*inputs))


def test_rejections_are_logged():
    """A reduction over the first dim cannot share loops with a pointwise op laid out by rows:
    the fusion log says why."""
    def fn(x):
        y = x * 2
        return y, y.sum(0)

    class Collect(logging.Handler):
        def __init__(self):
            super().__init__()
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())
    handler = Collect()
    logger = logging.getLogger("xcompile.fusion")
    logger.addHandler(handler)
    log.set_logs(fusion=True)
    try:
        compiled = compile_fn(fn, [torch.randn(8, 16)])
    finally:
        log.set_logs(fusion=False)
        logger.removeHandler(handler)
    assert any("not fusing" in m and "reduction space" in m for m in handler.messages), handler.messages
    x = torch.randn(8, 16)
    assert_close(compiled(x), fn(x), tol=dict(atol=1e-5, rtol=1e-5))


def test_buffer_reuse():
    """Intermediates that die free their memory for later ones of the same layout."""
    def fn(x, w):
        a = torch.relu(x @ w)       # extern in, extern out: buffers must be real tensors
        b = torch.sigmoid(a @ w)
        c = torch.tanh(b @ w)
        return (c @ w,)
    inputs = [torch.randn(16, 16), torch.randn(16, 16)]
    compiled = compile_fn(fn, inputs)
    assert "reuses" in compiled.wrapper_src or "del " in compiled.wrapper_src
    assert_close(compiled(*inputs), fn(*inputs), tol=dict(atol=1e-5, rtol=1e-5))


def test_residual_stream_is_stored_not_recomputed():
    """``x = x + f(norm(x))`` block after block: each residual sum is stored once (it has three
    readers: the norm's two loops and the next sum), not recomputed from every earlier block's
    output by each reader, which made kernels read more buffers the deeper they were."""
    def fn(x, w):
        for _ in range(6):
            x = x + torch.tanh(F.layer_norm(x, (32,)) @ w)
        return F.layer_norm(x, (32,))
    inputs = [torch.randn(16, 32), torch.randn(32, 32) / 6]
    compiled = compile_fn(fn, inputs)
    widest = max(len(k.params) for k in compiled.kernels)
    assert widest <= 5, compiled.wrapper_src
    assert_close(compiled(*inputs), fn(*inputs), tol=dict(atol=1e-4, rtol=1e-4))


def test_transposed_sum_is_not_read_inside_the_norm_loop():
    """``x + t.transpose(1, 2)`` feeding a layer_norm over the last dim (MLP-Mixer's token
    mixing): the transposed reads would be gathers in the norm's reduction loop; the sum gets a
    pointwise kernel of its own and the norm reads rows."""
    def fn(x, t, w, b):
        y = x + t.transpose(1, 2)
        return y, F.layer_norm(y, (32,), w, b)
    inputs = [torch.randn(4, 16, 32), torch.randn(4, 32, 16), torch.randn(32), torch.randn(32)]
    compiled = compile_fn(fn, inputs)
    assert n_kernels(compiled) == 2, compiled.wrapper_src
    assert_close(compiled(*inputs), fn(*inputs), tol=dict(atol=1e-5, rtol=1e-5))


def test_stored_cat_follows_its_inputs_layout():
    """A cat of channels-last convolution outputs (NCHW in the metadata: eager's convolutions
    ran NCHW) that is stored (three readers) is channels-last too: laid out as the metadata
    says, it was transposed on the way in and again on the way out."""
    def fn(x, w1, w2, g):
        c = torch.cat([F.conv2d(x, w1, padding=1), F.conv2d(x, w2, padding=1)], 1)
        return F.group_norm(c, 2, g, g) * 2, c.sum((2, 3))
    inputs = [torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(8, 3, 3, 3), torch.randn(12)]
    compiled = compile_fn(fn, inputs)
    assert "(2, 12, 6, 6), (432, 1, 72, 12)" in compiled.wrapper_src, compiled.wrapper_src
    assert_close(compiled(*inputs), fn(*inputs), tol=dict(atol=1e-4, rtol=1e-4))


def test_unrelated_nodes_stop_joining_a_kernel_past_the_stream_cap():
    """Independent updates of many same-shape arrays (an optimizer's parameters) fuse
    horizontally only up to MAX_HORIZONTAL_STREAMS arrays per kernel: one loop over 1,200 arrays
    defeated the prefetchers. A chain that shares an array with the kernel still joins it."""
    from xcompile.kernels.fusion import MAX_HORIZONTAL_STREAMS

    n = 40

    def fn(*ts):
        return tuple(t * 2 + 1 for t in ts)

    inputs = [torch.randn(64) for _ in range(n)]
    compiled = compile_fn(fn, inputs)
    assert 1 < len(compiled.kernels) < n, compiled.wrapper_src
    for k in compiled.kernels:
        assert len(k.params) <= MAX_HORIZONTAL_STREAMS + 2, k.source
    inputs = [torch.randn(64) for _ in range(n)]
    for got, want in zip(compiled(*inputs), fn(*inputs)):
        torch.testing.assert_close(got, want)
