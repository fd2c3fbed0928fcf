"""Small, realistic models and programs for the model zoo (tests/e2e/test_model_zoo.py).

Each ``Case`` names a factory for the model (an ``nn.Module`` or a plain function, built under a
fixed seed) and one for the inputs (called under a fresh seed per call).  Sizes are tiny: the
zoo checks semantics, not speed.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Case:
    name: str
    model: Callable[[], object]
    inputs: Callable[[], tuple]
    modes: tuple = ("eval", "train")
    tol: tuple = (1e-4, 1e-4)           # (rtol, atol): float32 through different summation orders
    random: bool = False                # runs RNG ops: compared under config.fallback_random
    min_graphs: int = 1                 # torch.compile also compiles at least this many
    xfail: dict = dataclasses.field(default_factory=dict)   # (backend | "*", mode | "*") -> reason


def randn(*shape, **kw):
    return lambda: (torch.randn(*shape, **kw),)


def seq(*mods):
    """A factory for ``nn.Sequential(*mods)``: fresh copies each time, same initial weights."""
    return lambda: nn.Sequential(*copy.deepcopy(mods))


# -- blocks ------------------------------------------------------------------------------------

class ResBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + x)


class MHAKeyPadding(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x, kpm):
        return self.m(x, x, x, key_padding_mask=kpm)


def mha_kpm_inputs():
    kpm = torch.zeros(2, 5, dtype=torch.bool)
    kpm[1, 3:] = True
    return torch.randn(2, 5, 16), kpm


class MHACausal(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.MultiheadAttention(16, 4)

    def forward(self, x):
        n = x.shape[0]
        mask = torch.triu(torch.full((n, n), float("-inf")), 1)
        return self.m(x, x, x, attn_mask=mask, need_weights=False)[0]


class LSTMHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(6, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        o, (h, c) = self.rnn(x)
        return self.head(o), h, c


class GRUBidir(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(6, 8, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)


class GPTBlock(nn.Module):
    """Pre-norm decoder block with a causal mask over (cache + new) keys; returns the new cache."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x, k_cache, v_cache):
        b, t, c = x.shape
        hd = c // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in (q, k, v))
        k = torch.cat([k_cache, k], dim=2)
        v = torch.cat([v_cache, v], dim=2)
        s = k.shape[2]
        att = (q @ k.transpose(-2, -1)) / hd ** 0.5
        causal = torch.ones(t, s, dtype=torch.bool).tril(s - t)
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x)), k, v


class SDPACausal(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class PoolIndices(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y, i = F.max_pool2d(self.conv(x), 2, return_indices=True)
        return y, i, F.max_unpool2d(y, i, 2)


class Losses(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x, target, soft, probs):
        z = self.lin(x)
        return (F.cross_entropy(z, target, label_smoothing=0.1, ignore_index=2),
                F.nll_loss(F.log_softmax(z, -1), target, reduction="sum"),
                F.cross_entropy(z, target, reduction="none"),
                F.mse_loss(z, soft), F.smooth_l1_loss(z, soft, beta=0.5), F.huber_loss(z, soft),
                F.binary_cross_entropy_with_logits(z, (soft > 0).float(), pos_weight=torch.full((5,), 2.0)),
                F.kl_div(F.log_softmax(z, -1), probs, reduction="batchmean"),
                F.l1_loss(z, soft, reduction="none"))


def loss_inputs():
    target = torch.randint(0, 5, (4,))
    target[0] = 2                        # an ignored row
    return torch.randn(4, 6), target, torch.randn(4, 5), torch.softmax(torch.randn(4, 5), -1)


class Dropouts(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.d = nn.Dropout(0.3)
        self.d1 = nn.Dropout1d(0.5)

    def forward(self, x):
        y = self.d1(self.d(F.relu(self.lin(x))).unsqueeze(0)).squeeze(0)
        return y + F.dropout(x, 0.2, training=self.training)


class BufferUpdate(nn.Module):
    """Buffers updated in forward (an EMA and a step counter), read back in the same call."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("ema", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        y = self.lin(x)
        with torch.no_grad():
            self.ema.mul_(0.9).add_(y.mean(0), alpha=0.1)
            self.steps += 1
        return y * self.steps, self.ema.clone()


def inplace_activations(x, w):
    y = x @ w
    y.add_(1.0).mul_(2)
    y.relu_()
    z = y * 3
    z.sub_(0.5)
    torch.sigmoid_(z)
    return z, y


def index_ops(x, idx, src):
    a = torch.zeros(5, 3).scatter_add(0, idx, src)
    b = torch.zeros(5, 3).index_add(0, idx[:, 0], x, alpha=2.0)
    c = torch.where(x > 0, x, x * 0.1).masked_fill(x < -1, 0.0)
    return a, b, c, x.cumsum(0), x.cumprod(1)


def index_inputs():
    return torch.randn(4, 3), torch.randint(0, 5, (4, 3)), torch.randn(4, 3)


def sort_ops(x):
    v, i = x.topk(3, dim=1)
    s, si = x.sort(dim=0, descending=True)
    return v, i, s, si, x.argmax(1), x.argmin(), (x > 0).sum(1), x.max(dim=1).indices, x.cummax(0)[1]


def noncontig(a, b, c):
    return a @ b[:, ::2], torch.sin(c) + 1, (c * 2).sum(1)


def noncontig_inputs():
    return (torch.randn(6, 4).t(), torch.randn(6, 10)[:, 1:],
            torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last))


class Float64Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.LayerNorm(6), nn.Linear(6, 2)).double()

    def forward(self, x, y):
        return self.net(x) + y.float().sum()


class AutocastBF16(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.b(F.gelu(self.a(x)))
        return y, y.float().softmax(-1)


class MixerBlock(nn.Module):
    def __init__(self, tokens=4, c=8):
        super().__init__()
        self.n1 = nn.LayerNorm(c)
        self.tok = nn.Sequential(nn.Linear(tokens, 8), nn.GELU(), nn.Linear(8, tokens))
        self.n2 = nn.LayerNorm(c)
        self.ch = nn.Sequential(nn.Linear(c, 16), nn.GELU(), nn.Linear(16, c))

    def forward(self, x):
        x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.n2(x))


class TinyViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 16, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, 16))
        self.pos = nn.Parameter(torch.randn(1, 5, 16))
        self.block = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True,
                                                norm_first=True, activation="gelu")
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        p = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], 1) + self.pos
        return self.head(self.block(p)[:, 0])


class PackedLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 5, batch_first=True)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, (h, _) = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=6)
        return out, h


class EmbeddingMaxNorm(nn.Module):
    """max_norm renormalizes the looked-up rows of the weight in place (through weight.detach())."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4, max_norm=1.0)

    def forward(self, idx):
        return self.emb(idx) * 2


class ChannelsLastConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return F.silu(self.bn(self.conv(x))) + x.mean(1, keepdim=True)


class AffineGridSample(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(6, 6)

    def forward(self, x):
        theta = self.loc(x.flatten(1)[:, :6]).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.shape, align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)


class UnfoldFold(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(18, 18)

    def forward(self, x):
        cols = self.lin(F.unfold(x, 3, padding=1).transpose(1, 2)).transpose(1, 2)
        return F.fold(cols, (4, 4), 3, padding=1)


def einsum_baddbmm_reductions(a, b, c):
    return (torch.einsum("bij,bjk->bik", a, b), torch.baddbmm(c, a, b, beta=0.5, alpha=2),
            F.normalize(a, dim=-1), F.cosine_similarity(a, a.flip(1), dim=-1), a.clamp(-0.5, 0.5),
            torch.logsumexp(a, -1), a.var(1, unbiased=False), a.std(-1))


def resample_and_pad(x):
    return (F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True),
            F.interpolate(x, scale_factor=2, mode="nearest-exact"), F.adaptive_avg_pool2d(x, (3, 5)),
            F.pad(x, (1, 2, 0, 1), mode="reflect"), F.pad(x, (1, 1), value=3.0))


def integer_ops(x, i):
    return ((i * 3 + 1) // 2, i % 3, (x > 0).to(torch.int32).cumsum(0), i.sum(1), x.argsort(1),
            i.float().mean(), torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0])))


# -- the table -----------------------------------------------------------------------------------

CASES = [
    Case("resnet_block", ResBlock, randn(2, 8, 6, 6)),
    Case("mha_key_padding_mask", MHAKeyPadding, mha_kpm_inputs),
    Case("mha_causal_attn_mask", MHACausal, randn(5, 2, 16)),
    Case("transformer_encoder", lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
         randn(2, 5, 16)),
    Case("transformer_decoder", lambda: nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, norm_first=True),
         lambda: (torch.randn(4, 2, 16), torch.randn(5, 2, 16))),
    Case("lstm", LSTMHead, randn(2, 5, 6)),
    # torch.compile leaves RNN modules to eager too; here the weakref check in GRU breaks.
    Case("gru_bidirectional", GRUBidir, randn(5, 2, 6), min_graphs=0, modes=("train",)),
    Case("gpt_block_kv_cache", GPTBlock, lambda: (torch.randn(2, 3, 16), torch.randn(2, 2, 4, 8),
                                                  torch.randn(2, 2, 4, 8))),
    Case("sdpa_causal", SDPACausal, randn(2, 5, 16)),
    Case("conv1d_dilation_groups", seq(nn.Conv1d(4, 8, 3, dilation=2, groups=2, padding=2), nn.ReLU(),
                                       nn.Conv1d(8, 4, 1)), randn(2, 4, 11)),
    Case("conv2d_padding_modes", seq(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
                                     nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular"),
                                     nn.Conv2d(4, 2, 3, padding=2, padding_mode="replicate", stride=2)),
         randn(2, 3, 7, 7)),
    Case("conv3d_bn_avgpool", seq(nn.Conv3d(2, 3, 3, padding=1), nn.BatchNorm3d(3), nn.ReLU(), nn.AvgPool3d(2)),
         randn(2, 2, 4, 4, 4)),
    Case("conv_transpose2d", seq(nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), nn.Tanh(),
                                 nn.ConvTranspose2d(3, 2, 2, stride=2)), randn(2, 4, 3, 3)),
    Case("conv_pool_flatten_linear", seq(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                         nn.Linear(16, 5)), randn(2, 3, 6, 6)),
    Case("batchnorm1d_mlp", seq(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)), randn(5, 6)),
    # momentum=None: the cumulative average reads float(num_batches_tracked), a graph break in a
    # loop (torch.compile also runs the Sequential eagerly in training).
    Case("batchnorm2d_cumulative", seq(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4, affine=False, momentum=None)),
         randn(3, 3, 4, 4), min_graphs=0),
    Case("groupnorm_instancenorm", seq(nn.Conv2d(4, 6, 1), nn.GroupNorm(3, 6), nn.SiLU(),
                                       nn.InstanceNorm2d(6, affine=True, track_running_stats=True)),
         randn(2, 4, 5, 5)),
    Case("layernorm_rmsnorm", seq(nn.Linear(8, 8), nn.LayerNorm(8), nn.Mish(), nn.RMSNorm(8), nn.Hardswish()),
         randn(3, 4, 8)),
    Case("pooling_mix", seq(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(3, 2, 1, ceil_mode=True),
                            nn.AvgPool2d(2, count_include_pad=False, padding=1), nn.AdaptiveAvgPool2d((3, 2)),
                            nn.AdaptiveMaxPool2d(1), nn.Flatten()), randn(2, 3, 9, 9)),
    Case("pool_return_indices_unpool", PoolIndices, randn(2, 3, 8, 8)),
    Case("upsample_nearest_bilinear", seq(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(2, 2, 1),
                                          nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=False)),
         randn(2, 2, 3, 4)),
    Case("upsample_bicubic", seq(nn.Upsample(size=(5, 7), mode="bicubic", align_corners=True)), randn(1, 2, 3, 4),
         modes=("eval",)),
    Case("pixel_shuffle", seq(nn.Conv2d(2, 8, 1), nn.PixelShuffle(2), nn.PixelUnshuffle(2), nn.ELU()),
         randn(2, 2, 4, 4)),
    Case("activations", seq(nn.Linear(6, 6), nn.GELU(approximate="tanh"), nn.PReLU(6), nn.Softplus(beta=2, threshold=5),
                            nn.LeakyReLU(0.1), nn.ELU(0.5), nn.Hardsigmoid(), nn.Softsign(), nn.Hardtanh(-0.3, 0.3),
                            nn.CELU(), nn.SELU(), nn.LogSigmoid()), randn(4, 6)),
    Case("embedding_padding_idx", seq(nn.Embedding(10, 4, padding_idx=0), nn.Flatten(), nn.Linear(12, 2)),
         lambda: (torch.randint(0, 10, (5, 3)),)),
    Case("embedding_bag_mean", lambda: nn.EmbeddingBag(10, 4, mode="mean"), lambda: (torch.randint(0, 10, (5, 3)),)),
    Case("embedding_bag_offsets", lambda: nn.EmbeddingBag(10, 4, mode="sum"),
         lambda: (torch.randint(0, 10, (7,)), torch.tensor([0, 2, 2, 5]))),
    Case("losses", Losses, loss_inputs),
    Case("dropout_train", Dropouts, randn(3, 8), random=True),
    Case("buffers_updated_in_forward", BufferUpdate, randn(3, 4)),
    Case("inplace_activations", lambda: inplace_activations, lambda: (torch.randn(3, 4), torch.randn(4, 5))),
    Case("scatter_index_add_where_cumsum", lambda: index_ops, index_inputs),
    Case("topk_sort_argmax_int_outputs", lambda: sort_ops, randn(4, 6)),
    Case("noncontiguous_inputs", lambda: noncontig, noncontig_inputs),
    Case("float64_model", Float64Model, lambda: (torch.randn(3, 5, dtype=torch.float64), torch.randn(2))),
    Case("autocast_bfloat16", AutocastBF16, randn(3, 8), tol=(2e-2, 2e-2)),
    Case("mlp_mixer", MixerBlock, randn(2, 4, 8)),
    Case("vit_tiny", TinyViT, randn(2, 3, 8, 8)),
    Case("packed_sequence_lstm", PackedLSTM, lambda: (torch.randn(3, 6, 4), torch.tensor([6, 2, 4])),
         min_graphs=0),     # packing reads data: breaks around it, as torch.compile (0 graphs)
    Case("embedding_max_norm", EmbeddingMaxNorm, lambda: (torch.randint(0, 10, (4, 3)),)),
    Case("channels_last_conv_bn", ChannelsLastConvBN,
         lambda: (torch.randn(2, 3, 5, 5).to(memory_format=torch.channels_last),)),
    Case("affine_grid_sample", AffineGridSample, randn(2, 1, 4, 4)),
    Case("unfold_fold", UnfoldFold, randn(2, 2, 4, 4)),
    Case("einsum_baddbmm_reductions", lambda: einsum_baddbmm_reductions,
         lambda: (torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(2, 3, 5))),
    Case("resample_and_pad", lambda: resample_and_pad, randn(2, 3, 6, 8)),
    Case("integer_ops_no_grad_outputs", lambda: integer_ops,
         lambda: (torch.randn(4, 5), torch.randint(0, 7, (4, 5)))),
]


# -- training steps (forward + loss + backward + optimizer.step() in one compiled function) ---------

def training_step(opt: str):
    """(model, optimizer, step) built under a fixed seed."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        # No bias before the BatchNorm: that gradient is ~0 and Adam would amplify its rounding noise.
        model = nn.Sequential(nn.Linear(6, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    if opt == "sgd":
        optim = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        optim = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)

    def step(x, target):
        optim.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        optim.step()
        return loss

    return model, optim, step
