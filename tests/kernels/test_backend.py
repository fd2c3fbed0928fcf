"""The "inductor" backend on torch-level FX graphs (what the frontend hands over): parameters
read through the real objects, inference and training paths, extern ATen calls."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from xcompile import config
from xcompile.backends.inductor import inductor

from .util import assert_close

TOL = dict(atol=1e-4, rtol=1e-4)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.c2(x))
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)), y


class Block(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def _compile(model, x):
    with config.patch(kernel_raise_errors=True):   # (was: set, then del -- which removed the knob)
        return inductor(torch.fx.symbolic_trace(model), [x])


@pytest.mark.parametrize("make,shape", [(ConvNet, (2, 3, 16, 16)), (Block, (2, 8, 32))], ids=["convnet", "block"])
def test_inference_models(make, shape):
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(shape)
    with torch.no_grad():
        fn = _compile(model, x)
        x = torch.randn(shape)
        got = fn(x)
        want = model(x)
    assert_close(tuple(got), want if isinstance(want, tuple) else (want,), make.__name__, tol=TOL)
    assert fn.fallbacks, "matmul/convolution/attention run as extern ATen calls"


def test_parameters_are_read_at_call_time():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8))
    x = torch.randn(4, 8)
    with torch.no_grad():
        fn = _compile(model, x)
        for p in model.parameters():      # what an optimizer step does: in place
            p.add_(torch.randn_like(p))
        assert_close(tuple(fn(x)), (model(x),), tol=TOL)


def test_training_through_aot():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    twin = copy.deepcopy(model)
    x = torch.randn(5, 8)
    fn = _compile(model, x)
    out = fn(x.clone().requires_grad_())
    out = out[0] if isinstance(out, (tuple, list)) else out
    out.square().sum().backward()
    twin(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        assert_close(p.grad, q.grad, f"grad of {name}", tol=TOL)


def test_batchnorm_training_updates_buffers():
    """Training-mode batch norm mutates its running stats: the real buffers are updated."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    twin = copy.deepcopy(model)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        fn = _compile(model, x)
        got = fn(x)
        want = twin(x)
    assert_close(tuple(got), (want,), tol=TOL)
    assert_close(model[1].running_mean, twin[1].running_mean, tol=TOL)
    assert_close(model[1].running_var, twin[1].running_var, tol=TOL)
