"""The DDP graph split in one process (a world of 1 on gloo): where the cuts go, what explain and
the graph-break log say, that the first steps run as captured until DDP has rebuilt its buckets,
inference calls, buffers, optimize_ddp=False. The 2-rank runs are in test_ddp.py."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import xcompile
from xcompile.backends import ddp as ddp_split

from .ddp_programs import MLP

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="needs torch.distributed with gloo")


@pytest.fixture(autouse=True)
def world_of_one(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    xcompile.reset()
    try:
        yield
    finally:
        xcompile.reset()
        dist.destroy_process_group()


class Counting:
    def __init__(self, inner="aot_eager"):
        self.inner = inner
        self.graphs: list = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        from xcompile.backends.registry import lookup_backend
        return lookup_backend(self.inner)(gm, example_inputs)


def _pair(model, **kw):
    torch.manual_seed(0)
    ref = copy.deepcopy(model)
    return DDP(model, **kw), DDP(ref, **kw)


def _step(m, x):
    loss = m(x).pow(2).mean()
    loss.backward()
    return loss.detach()


def _same_grads(a: nn.Module, b: nn.Module, atol=1e-6):
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        if p.grad is None or q.grad is None:
            assert p.grad is None and q.grad is None, n
        else:
            torch.testing.assert_close(p.grad, q.grad, atol=atol, rtol=1e-5, msg=n)
        p.grad = q.grad = None


def test_final_buckets_split_at_compile_and_explain_names_them():
    torch.manual_seed(0)
    ddp = DDP(MLP(), bucket_cap_mb=0.02, find_unused_parameters=True)     # buckets final at construction
    out = xcompile.explain(ddp)(torch.randn(8, 64))
    # DDP's buckets, registration order: {w0 b0 w1} {b1 w2 b2 w3} {b3 w4 b4 w5} {b5}
    assert len(ddp.reducer._get_zeros_like_grad_buckets()) == 4
    assert out.graph_count == 4 and out.graph_break_count == 3
    assert all(r.reason.startswith("DDPOptimizer: graph split at a DDP bucket boundary") for r in out.break_reasons)
    assert "bucket_cap_mb=0.02" in out.break_reasons[0].reason


@pytest.mark.slow
def test_first_step_runs_as_captured_then_split_along_ddp_buckets():
    torch.manual_seed(0)
    cddp, eddp = _pair(MLP(), bucket_cap_mb=0.02)
    be = Counting()
    compiled = xcompile.compile(cddp, backend=be)
    for i in range(3):
        x = torch.randn(8, 64)
        _step(compiled, x)
        _step(eddp, x)
        _same_grads(cddp.module, eddp.module)
        # step 0: the graph ran op by op while DDP recorded the gradients' order; then 3 buckets
        assert len(be.graphs) == (0 if i == 0 else 3)
    assert cddp._has_rebuilt_buckets


def test_inference_only_splits_after_pending_calls():
    torch.manual_seed(0)
    cddp, eddp = _pair(MLP(), bucket_cap_mb=0.02)
    be = Counting()
    compiled = xcompile.compile(cddp, backend=be)
    with torch.no_grad():
        for i in range(ddp_split.PENDING_CALLS + 2):
            x = torch.randn(8, 64)
            torch.testing.assert_close(compiled(x), eddp(x))
    assert len(be.graphs) == 3                   # the buckets DDP would build: 2 layers each


@pytest.mark.slow
def test_buffers_and_batchnorm():
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 32), nn.BatchNorm1d(32),
                          nn.ReLU(), nn.Linear(32, 4))
    cddp, eddp = _pair(model, bucket_cap_mb=0.003)
    be = Counting("inductor")
    compiled = xcompile.compile(cddp, backend=be)
    for _ in range(3):
        x = torch.randn(8, 16)
        _step(compiled, x)
        _step(eddp, x)
        _same_grads(cddp.module, eddp.module, atol=1e-5)
    assert len(be.graphs) >= 2
    for a, b in zip(cddp.module.buffers(), eddp.module.buffers()):
        torch.testing.assert_close(a, b)


def test_optimize_ddp_off_one_graph():
    torch.manual_seed(0)
    cddp, eddp = _pair(MLP(), bucket_cap_mb=0.02)
    be = Counting()
    with xcompile.config.patch(optimize_ddp=False):
        compiled = xcompile.compile(cddp, backend=be)
        for _ in range(2):
            x = torch.randn(8, 64)
            _step(compiled, x)
            _step(eddp, x)
            _same_grads(cddp.module, eddp.module)
    assert len(be.graphs) == 1


def test_no_split_outside_ddp():
    be = Counting()
    torch.manual_seed(0)
    m = MLP()
    xcompile.compile(m, backend=be)(torch.randn(8, 64)).sum().backward()
    assert len(be.graphs) == 1
    assert ddp_split.active_ddp() is None


class WithNoGradBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.b = MLP()

    def forward(self, x):
        with torch.no_grad():
            x = self.a(x)
        return self.b(x)


def test_graph_with_grad_mode_switch_is_not_split():
    """A grad-mode switch in the graph is consumed by the backend's trace: cutting between it and
    the ops it governs would lose it, so such a graph stays whole (and right)."""
    torch.manual_seed(0)
    cddp, eddp = _pair(WithNoGradBlock(), bucket_cap_mb=0.02, find_unused_parameters=True)
    be = Counting()
    compiled = xcompile.compile(cddp, backend=be)
    for _ in range(2):
        x = torch.randn(8, 64)
        _step(compiled, x)
        _step(eddp, x)
        _same_grads(cddp.module, eddp.module)
    assert len(be.graphs) == 1
