"""CUDA-graph replay on a real GPU (mode="reduce-overhead"): values and gradients against eager,
graphs recorded and replayed, held outputs kept, fallbacks for CPU tensors. Run by the GPU
script; skipped without a GPU."""
import copy

import pytest
import torch
import torch.nn as nn

import xcompile
from xcompile import config
from xcompile.kernels import cudagraphs as cg

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]


@pytest.fixture(autouse=True)
def fresh():
    xcompile.reset()
    with config.patch(warm_start=False):
        yield
    xcompile.reset()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(32)
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 32)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x)))) + x


@pytest.mark.parametrize("backend", ["inductor", "cudagraphs"])
def test_inference_replays_and_matches_eager(backend):
    torch.manual_seed(0)
    m = Net().cuda().eval()
    kw = dict(mode="reduce-overhead") if backend == "inductor" else dict(backend="cudagraphs")
    c = xcompile.compile(m, **kw)
    held = []
    with torch.no_grad():
        for _ in range(6):
            x = torch.randn(4, 32, device="cuda")
            out = c(x)
            held.append((x, out))
            torch.testing.assert_close(out, m(x), atol=1e-4, rtol=1e-4)
    for x, out in held:                                  # held outputs were copied out, not overwritten
        torch.testing.assert_close(out, m(x), atol=1e-4, rtol=1e-4)
    graphs = cg.recorded_graphs()
    assert graphs and all(g.stats["state"] == "recorded" and g.stats["replays"] >= 4 for g in graphs)


def test_training_replays_forward_and_backward():
    torch.manual_seed(0)
    m = Net().cuda()
    twin = copy.deepcopy(m)
    c = xcompile.compile(twin, mode="reduce-overhead")
    for _ in range(5):
        x = torch.randn(4, 32, device="cuda")
        m(x).square().mean().backward()
        c(x).square().mean().backward()
        for p, q in zip(m.parameters(), twin.parameters()):
            torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4)
            p.grad = q.grad = None
    assert len(cg.recorded_graphs()) == 2 and all(g.stats["replays"] >= 3 for g in cg.recorded_graphs())


def test_error_mode_matches_torch():
    m = Net().cuda().eval()
    with config.patch(cudagraph_live_outputs="error"):
        c = xcompile.compile(m, mode="reduce-overhead")
        with torch.no_grad():
            for _ in range(3):
                c(torch.randn(4, 32, device="cuda"))
            old = c(torch.randn(4, 32, device="cuda"))
            c(torch.randn(4, 32, device="cuda"))
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        old + 1


def test_cpu_tensors_run_without_replay():
    m = Net().eval()
    c = xcompile.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 32)
            torch.testing.assert_close(c(x), m(x))
    assert not cg.recorded_graphs()                      # nothing recorded


def test_decode_loop_feeding_outputs_back():
    torch.manual_seed(0)
    m = Net().cuda().eval()
    c = xcompile.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        x = torch.randn(1, 32, device="cuda")
        ref = x.clone()
        for _ in range(10):
            x = c(x)
            ref = m(ref)
            torch.testing.assert_close(x, ref, atol=1e-3, rtol=1e-3)
