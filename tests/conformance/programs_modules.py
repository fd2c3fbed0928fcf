"""Module calls: torch.nn layers, containers, custom modules with submodules and attributes.

Each builder runs twice under one seed, so the eager and the compiled module start with equal
parameters; the harness compares module state (parameters and buffers) after every call."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .harness import CaseTable, rg, ri, rn

T = CaseTable("module")

T.build("linear", lambda: nn.Linear(4, 3), rn(2, 4))
T.build("linear_no_bias_3d_input", lambda: nn.Linear(4, 6, bias=False), rn(2, 5, 4))
T.build("conv2d", lambda: nn.Conv2d(3, 4, 3, padding=1), rn(2, 3, 8, 8), rtol=1e-4, atol=1e-5)
T.build("conv1d_stride", lambda: nn.Conv1d(2, 3, 3, stride=2), rn(1, 2, 9), rtol=1e-4, atol=1e-5)
T.build("layernorm", lambda: nn.LayerNorm(6), rn(3, 6))
T.build("batchnorm_eval", lambda: nn.BatchNorm1d(5).eval(), rn(4, 5))
T.build("batchnorm_train_updates_buffers", lambda: nn.BatchNorm2d(3), rn(2, 3, 4, 4))
T.build("embedding", lambda: nn.Embedding(10, 4), ri(2, 3, high=10))
T.build("embedding_padding_idx", lambda: nn.Embedding(10, 4, padding_idx=0), ri(5, high=10))
T.build("sequential_mlp", lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), rn(3, 4))
T.build("dropout_eval_identity",
        lambda: nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.GELU()).eval(), rn(3, 4))
T.build("mlp_with_grad",
        lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), rg(5, 4), grad=True)
T.build("groupnorm", lambda: nn.GroupNorm(2, 4), rn(2, 4, 3, 3), rtol=1e-4, atol=1e-5)
T.build("maxpool_avgpool",
        lambda: nn.Sequential(nn.MaxPool2d(2), nn.AvgPool2d(2), nn.Flatten()), rn(2, 3, 8, 8))


class Residual(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)
        self.scale = 0.5

    def forward(self, x):
        return x + self.scale * self.fc(self.norm(x))


T.build("custom_residual", lambda: Residual(6), rn(2, 6))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Residual(4) for _ in range(3)])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


T.build("modulelist_loop", Stack, rn(3, 4))


class IndexedList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(4)])

    def forward(self, x):
        x = self.layers[0](x)
        for i in range(1, len(self.layers)):
            x = x + self.layers[i](x)
        return self.layers[-1](x)


T.build("modulelist_indexing_len", IndexedList, rn(2, 3))


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})

    def forward(self, x):
        out = {k: head(x) for k, head in self.heads.items()}
        return out, self.heads["a"](x) * 2


T.build("moduledict", Router, rn(3, 4))


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.randn(4))
        self.weight = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return x * self.weight + self.offset


T.build("buffer_and_parameter", WithBuffer, rn(3, 4))


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("running", torch.zeros(4))

    def forward(self, x):
        self.steps += 1
        self.running.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return x - self.running


T.build("inplace_buffer_update", Counter, rn(3, 4))


class Configured(nn.Module):
    def __init__(self, act="relu", use_bias=True, depth=2):
        super().__init__()
        self.act = act
        self.use_bias = use_bias
        self.depth = depth
        self.fc = nn.Linear(4, 4, bias=use_bias)

    def forward(self, x):
        for _ in range(self.depth):
            x = self.fc(x)
            x = F.relu(x) if self.act == "relu" else torch.tanh(x)
        if self.use_bias:
            x = x + 1
        return x


T.build("attributes_control_python", lambda: Configured("tanh", True, 3), rn(2, 4))


class Helper(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def _gate(self, x):
        return torch.sigmoid(self.proj(x))

    def forward(self, x):
        return x * self._gate(x) + self._gate(x * 2)


T.build("method_helper", Helper, rn(3, 4))


class FunctionalWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 4))
        self.b = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return F.linear(x, self.w, self.b), x @ self.w.t()


T.build("functional_with_parameters", FunctionalWeights, rg(2, 4), grad=True)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Sequential(nn.Linear(3, 3), nn.SiLU()), nn.Identity())
        self.block2 = Residual(3)

    def forward(self, x, *, scale=1.0):
        return self.block2(self.block(x)) * scale


T.build("nested_sequential_kwargs", Nested, rn(2, 3), kwargs={"scale": 3.0})


class Attention(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        y = att.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


T.build("attention_block", Attention, rn(2, 5, 8), rtol=1e-4, atol=1e-5)


class SDPA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


T.build("scaled_dot_product_attention", SDPA, rn(1, 2, 4, 8), rn(1, 2, 4, 8), rn(1, 2, 4, 8),
        rtol=1e-4, atol=1e-5)


class ChildrenIter(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        for m in self.children():
            x = m(x)
        return x, sum(p.sum() for p in self.parameters())


T.build("children_and_parameters_iteration", ChildrenIter, rn(2, 3))


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 2)
        self.dec = nn.Linear(2, 4)

    def forward(self, x, y=None):
        z = self.enc(x)
        out = self.dec(z)
        if y is not None:
            return out, z, (out - y).pow(2).mean()
        return out, z


T.build("optional_target_argument", TupleOut, rn(3, 4), rn(3, 4))
T.build("transformer_encoder_layer_eval",
        lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).eval(),
        rn(2, 3, 8), rtol=1e-4, atol=1e-5)
