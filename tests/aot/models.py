"""Models for the AOT tests and the training benchmark, and a frontend-like tracer.

``trace(model)`` builds what the bytecode frontend hands a backend: a torch-level FX
graph whose parameters and buffers are ``get_attr`` nodes naming the real objects
(nn modules are inlined down to ``torch.nn.functional`` calls; BatchNorm modules, whose
forward branches on the input's rank, stay ``call_module`` nodes) returning a tuple.
"""
from __future__ import annotations

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F


class _Tracer(torch.fx.Tracer):
    proxy_buffer_attributes = True

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return isinstance(m, nn.modules.batchnorm._BatchNorm)


def trace(model) -> torch.fx.GraphModule:
    """A module, or a plain function of tensors, as a frontend-like graph."""
    tracer = _Tracer()
    graph = tracer.trace(model)
    out = graph.output_node()
    if not isinstance(out.args[0], (tuple, list)):
        out.args = ((out.args[0],),)
    gm = torch.fx.GraphModule(tracer.root, graph)
    gm.recompile()
    return gm


class GeluMLP(nn.Module):
    def __init__(self, d=32, hidden=128):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc3 = nn.Linear(hidden, d)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        h = self.norm(F.gelu(self.fc2(h)))
        return (self.fc3(h),)


class FunctionalBatchNorm(nn.Module):
    """BatchNorm written with F.batch_norm: buffers become get_attr nodes, stats mutate in place."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        self.num_batches_tracked.add_(1)
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training, 0.1, 1e-5)


class ConvBN(nn.Module):
    def __init__(self, c=8, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c)                 # stays a call_module node
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.bn2 = FunctionalBatchNorm(c)            # get_attr buffers, in-place stats
        self.fc = nn.Linear(c * 8 * 8, classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.max_pool2d(F.relu(self.bn2(self.conv2(h))), 2)
        return (self.fc(h.flatten(1)),)


class TransformerBlock(nn.Module):
    def __init__(self, d=32, heads=4, p=0.1):
        super().__init__()
        self.heads, self.p = heads, p
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(p)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(a.transpose(1, 2).flatten(2)))
        x = x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))
        return (x,)


class InplaceOnInput(nn.Module):
    """Writes into its input (data only), then computes from it."""

    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        x.mul_(2)
        x.add_(1)
        return (torch.tanh(self.fc(x)),)


class ReturnsInputView(nn.Module):
    """Returns views of its input next to a computed output (``out.view_as(x)`` style)."""

    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        y = torch.sigmoid(self.fc(x))
        return (y, x.view(-1), x.t(), y.view_as(x))


class OutputWithoutGrad(nn.Module):
    """One output requires grad, the others do not (detached, integer)."""

    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        y = F.silu(self.fc(x))
        return (y, y.detach() * 2, y.argmax(-1))


# name -> (constructor, input shape): the models the issue names
MODELS = {
    "gelu_mlp": (GeluMLP, (16, 32)),
    "conv_bn": (ConvBN, (4, 3, 16, 16)),
    "transformer": (TransformerBlock, (2, 8, 32)),
    "inplace_input": (InplaceOnInput, (8, 16)),
    "input_view": (ReturnsInputView, (16, 16)),
    "output_no_grad": (OutputWithoutGrad, (8, 16)),
}
