"""Program zoo: real-model Python idioms (HF transformers, timm, diffusers) through the bytecode frontend.

Each program runs compiled (a counting backend over "eager", a few over "inductor") and eagerly,
twice or more with fresh random inputs under the same RNG seed; outputs (structure, dtype, shape,
strides, values), the inputs and any mutated Python/module state must equal eager's, and the
number of graphs compiled after the last call must be the one given (which is torch.compile's
count unless a comment says why not).  Findings FH* are in /work/briefs/s2/findings.md.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import itertools
import math
import warnings
from collections import OrderedDict
from typing import Optional, Tuple

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

import xcompile
from xcompile.testing import CompileCounterWithBackend

from .util import same


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


CASES: dict[str, dict] = {}


def case(name, make, inputs, graphs, *, backend="eager", state=None, calls=2, marks=()):
    """``make()`` builds the program (under a fixed seed); ``inputs(i)`` the i-th call's arguments;
    ``state(program)`` what it mutates."""
    CASES[name] = dict(make=make, inputs=inputs, graphs=graphs, backend=backend, state=state, calls=calls)
    if marks:
        CASES[name]["marks"] = marks


def _seeded(fn, seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn()


def _run(c):
    eager = _seeded(c["make"], 0)
    prog = _seeded(c["make"], 0)
    cnt = CompileCounterWithBackend(c["backend"])
    compiled = xcompile.compile(prog, backend=cnt)
    for i in range(c["calls"]):
        a_e = _seeded(lambda: c["inputs"](i), 100 + i)
        a_c = _seeded(lambda: c["inputs"](i), 100 + i)
        expected = _seeded(lambda: eager(*a_e), 7)
        actual = _seeded(lambda: compiled(*a_c), 7)
        same(actual, expected, f"call {i}: out")
        same(a_c, a_e, f"call {i}: inputs")
        if c["state"] is not None:
            same(c["state"](prog), c["state"](eager), f"call {i}: state")
    assert cnt.frame_count == c["graphs"], f"{cnt.frame_count} graphs, expected {c['graphs']}"


# ---------------------------------------------------------------------------------------------------------
# HuggingFace idioms
class Config:
    def __init__(self, **kw):
        self.hidden = 8
        self.layers = 2
        self.output_hidden_states = True
        self.use_return_dict = True
        self.eps = 1e-5
        self.__dict__.update(kw)


@dataclasses.dataclass
class EncoderOutput:                     # a plain dataclass output (ModelOutput, a dict subclass: FH1)
    last_hidden_state: torch.Tensor = None
    hidden_states: Optional[Tuple[torch.Tensor, ...]] = None

    def to_tuple(self):
        return tuple(v for v in (self.last_hidden_state, self.hidden_states) if v is not None)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(self.config.layers))
        self.norm = nn.LayerNorm(8, eps=self.config.eps)

    def forward(self, x, attention_mask: Optional[torch.Tensor] = None, output_hidden_states=None,
                return_dict=None, **kwargs):
        output_hidden_states = (output_hidden_states if output_hidden_states is not None
                                else self.config.output_hidden_states)
        return_dict = return_dict if return_dict is not None else self.config.use_return_dict
        all_h = () if output_hidden_states else None
        for layer in self.layers:
            if output_hidden_states:
                all_h = all_h + (x,)
            x = layer(x)
            if attention_mask is not None:
                x = x.masked_fill(attention_mask[..., None] == 0, torch.finfo(x.dtype).min)
        x = self.norm(x)
        if not return_dict:
            return tuple(v for v in [x, all_h] if v is not None)
        out = EncoderOutput(last_hidden_state=x, hidden_states=all_h)
        return out.to_tuple(), out.last_hidden_state.shape


case("hf_encoder_dataclass_output", Encoder, lambda i: (torch.randn(2, 3, 8),), 1)
case("hf_encoder_mask", Encoder, lambda i: (torch.randn(2, 3, 8), torch.randint(0, 2, (2, 3))), 1)
case("hf_encoder_return_tuple", lambda: functools.partial(Encoder(), return_dict=False, output_hidden_states=False),
     lambda i: (torch.randn(2, 3, 8),), 1)


class ModelOutput(OrderedDict):          # transformers.utils.ModelOutput, reduced
    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def _model_output(x):
    o = ModelOutput(logits=x * 2, hidden=x + 1)
    return o[0] * o["hidden"] + o.to_tuple()[1]


# FH1 (fixed): a dict subclass made in the frame is a traced value; torch.compile: 1 graph.
case("hf_model_output_dict_subclass", lambda: _model_output, lambda i: (torch.randn(3),), 1, calls=3)


def _causal_mask(x, mask):
    b, t, _ = x.shape
    min_val = torch.finfo(x.dtype).min
    causal = torch.triu(torch.full((t, t), min_val, dtype=x.dtype, device=x.device), diagonal=1)
    causal = causal[None, None, :, :].expand(b, 1, -1, -1)
    if mask is not None:
        causal = causal.clone()
        pad = (causal[..., :t] + mask[:, None, None, :]) == 0
        causal[..., :t] = causal[..., :t].masked_fill(pad, min_val)
    scores = x @ x.transpose(-1, -2) / math.sqrt(x.size(-1))
    return F.softmax(scores[:, None] + causal, dim=-1)


case("hf_causal_mask", lambda: _causal_mask, lambda i: (torch.randn(2, 4, 8), torch.ones(2, 4)), 1)
case("hf_causal_mask_none", lambda: _causal_mask, lambda i: (torch.randn(2, 4, 8), None), 1)
case("hf_causal_mask_inductor", lambda: _causal_mask, lambda i: (torch.randn(2, 4, 8), torch.ones(2, 4)), 1,
     backend="inductor")


class Rotary(nn.Module):
    def __init__(self, dim=8, max_pos=4, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._set_cos_sin_cache(max_pos)

    def _set_cos_sin_cache(self, seq_len):
        self.max_seq_len_cached = seq_len
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        emb = torch.cat((torch.outer(t, self.inv_freq),) * 2, dim=-1)
        self.cos_cached = emb.cos()            # rebinding (register_buffer in forward: FH7)
        self.sin_cached = emb.sin()

    def forward(self, q):
        seq_len = q.shape[-2]
        if seq_len > self.max_seq_len_cached:
            self._set_cos_sin_cache(seq_len)
        cos, sin = self.cos_cached[:seq_len].to(q.dtype), self.sin_cached[:seq_len].to(q.dtype)
        half = q.shape[-1] // 2
        return q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin


# 3 calls, seq 3, 6, 9: the cache grows on calls 2 and 3 (each a new static attribute value).
case("hf_rotary_cache_grows", Rotary, lambda i: (torch.randn(2, 3 + 3 * i, 8),), 3, calls=3,
     state=lambda m: (m.max_seq_len_cached, m.cos_cached, m.sin_cached))


class RotaryRegister(Rotary):
    """Old Llama rotary: the cache is rebuilt with register_buffer(persistent=False) inside forward
    (FH7: ``_non_persistent_buffers_set.add`` on a set from outside the frame, two writes to
    ``_buffers`` in one trace)."""

    def _set_cos_sin_cache(self, seq_len):
        self.max_seq_len_cached = seq_len
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        emb = torch.cat((torch.outer(t, self.inv_freq),) * 2, dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)


case("hf_rotary_register_buffer_in_forward", RotaryRegister, lambda i: (torch.randn(2, 3 + 3 * i, 8),), 3,
     calls=3, state=lambda m: (m.max_seq_len_cached, m.cos_cached, m.sin_cached, dict(m._buffers),
                               sorted(m._non_persistent_buffers_set), list(m.state_dict())))


class DynamicCache:
    def __init__(self):
        self.key_cache, self.value_cache = [], []

    def update(self, k, v, layer_idx):
        if len(self.key_cache) <= layer_idx:
            self.key_cache.append(k)
            self.value_cache.append(v)
        else:
            self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], k], dim=-2)
            self.value_cache[layer_idx] = torch.cat([self.value_cache[layer_idx], v], dim=-2)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]

    def get_seq_length(self, layer_idx=0):
        return 0 if len(self.key_cache) <= layer_idx else self.key_cache[layer_idx].shape[-2]


class Attn(nn.Module):
    def __init__(self, idx):
        super().__init__()
        self.idx, self.qkv, self.o = idx, nn.Linear(8, 24), nn.Linear(8, 8)

    def forward(self, x, past_key_value=None, use_cache=False):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if past_key_value is not None:
            k, v = past_key_value.update(k, v, self.idx)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=past_key_value is None or q.shape[-2] > 1)
        return self.o(a), (k, v) if use_cache else None


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Attn(i) for i in range(2))

    def forward(self, x, past=None, use_cache=True, output_hidden_states=False):
        hs = () if output_hidden_states else None
        presents = () if use_cache else None
        for layer in self.layers:
            if output_hidden_states:
                hs += (x,)
            x, pkv = layer(x, past, use_cache)
            if use_cache:
                presents = presents + (pkv,)
        return x, presents, hs


def _new_cache(m, x):
    c = DynamicCache()
    out = m(x, c)
    return out[0], c.key_cache, c.get_seq_length()


case("hf_dynamic_cache_made_in_frame", lambda: functools.partial(_new_cache, Decoder()),
     lambda i: (torch.randn(2, 3, 8),), 1)


def _outer_cache():
    m, holder = Decoder(), types_namespace()
    holder.cache = DynamicCache()

    def step(x):
        out = m(x, holder.cache, output_hidden_states=True)
        return out[0], out[2]
    step.holder = holder
    return step


def types_namespace():
    import types
    return types.SimpleNamespace()


# prefill (3 tokens) then 2 decode steps: the cache's lists grow each call (guarded lengths): 3 graphs, as torch.
case("hf_dynamic_cache_across_calls", _outer_cache, lambda i: (torch.randn(2, 3 if i == 0 else 1, 8),), 3,
     calls=3, state=lambda f: (f.holder.cache.key_cache, f.holder.cache.value_cache))


def _past_tuples(x, past_key_values):
    new = []
    for i, (k, v) in enumerate(past_key_values):
        new.append((torch.cat([k, x], 1), torch.cat([v, x * i], 1)))
    return tuple(new), past_key_values[0][0].shape[1]


case("hf_past_key_values_tuples", lambda: _past_tuples,
     lambda i: (torch.randn(2, 1, 4), tuple((torch.randn(2, 3, 4), torch.randn(2, 3, 4)) for _ in range(2))), 1)


class Cfg2:
    hidden_size = 8

    def __getattr__(self, name):
        if name == "n_embd":
            return self.hidden_size
        raise AttributeError(name)


class UsesCfg(nn.Module):
    def __init__(self):
        super().__init__()
        self.config, self.l = Cfg2(), nn.Linear(8, 8)

    def forward(self, x, **kwargs):
        d = getattr(self.config, "n_embd", None)
        drop = getattr(self.config, "dropout", 0.0)
        scale = kwargs.pop("scale", 1.0)
        return F.dropout(self.l(x), drop, self.training) * d * scale, hasattr(self.config, "zzz"), sorted(kwargs)


case("hf_config_getattr_kwargs", UsesCfg, lambda i: (torch.randn(2, 8),), 1)


def _compiling(x):
    import torch._dynamo
    flags = (torch.compiler.is_compiling(), torch._dynamo.is_compiling())
    return x + 1, flags if not any(flags) else (False, False)    # eager-equal output; FH6 in test_fe_hunt


case("hf_is_compiling", lambda: _compiling, lambda i: (torch.randn(3),), 1)


def _optional_import(x):
    try:
        import xcompile_no_such_flash_attn  # noqa: F401
        return x + 1
    except ImportError:
        return x * 2


# FH2; torch.compile: 0 graphs (it falls back on the import), we compile it.
case("hf_try_import", lambda: _optional_import, lambda i: (torch.randn(3),), 1)


def _asserts(x, mask):
    assert x.dim() == 3, f"expected 3d input, got {x.dim()}d"
    assert mask is None or mask.shape == x.shape[:2], "mask shape"
    return x.masked_fill(~mask[..., None], 0.0) if mask is not None else x


case("assert_with_messages", lambda: _asserts, lambda i: (torch.randn(2, 3, 4), torch.rand(2, 3) > 0.5), 1)


# ---------------------------------------------------------------------------------------------------------
# timm / diffusers idioms
def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, p=0.):
        super().__init__()
        self.drop_prob = p

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Mlp(nn.Module):
    def __init__(self, d, act_layer=nn.GELU, norm_layer=None):
        super().__init__()
        self.fc1, self.act = nn.Linear(d, 2 * d), act_layer()
        self.norm = norm_layer(2 * d) if norm_layer is not None else nn.Identity()
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return self.fc2(self.norm(self.act(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, d, drop_path=0.1, norm_layer=functools.partial(nn.LayerNorm, eps=1e-6)):  # noqa: B008
        super().__init__()
        self.norm1, self.mlp = norm_layer(d), Mlp(d, norm_layer=norm_layer)
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.ls = nn.Parameter(torch.ones(d) * 1e-1)

    @property
    def dim(self):
        return self.ls.shape[0]

    def forward(self, x):
        assert x.shape[-1] == self.dim, f"bad dim {x.shape}"
        return x + self.drop_path(self.mlp(self.norm1(x)) * self.ls)


class VitLike(nn.Module):
    def __init__(self, d=8, depth=3):
        super().__init__()
        dpr = [x.item() for x in torch.linspace(0, 0.2, depth)]
        self.blocks = nn.ModuleList([Block(d, dpr[i]) for i in range(depth)])
        self.heads = nn.ModuleList([nn.Linear(d, 2) for _ in range(depth)])
        for i in range(2):
            setattr(self, f"layer{i}", nn.Linear(d, d))
        self.register_buffer("scale", torch.tensor(2.0), persistent=False)

    def forward(self, x):
        outs = []
        for blk, head in zip(self.blocks, self.heads):
            x = blk(x)
            outs.append(head(x))
        x = self.blocks[-1](x)
        for b in self.blocks[1:]:          # FH3: a slice was a graph break (3 graphs)
            x = b(x)
        for i in range(2):
            x = getattr(self, f"layer{i}")(x)
        return x * self.scale, torch.stack(outs).sum(0)


case("timm_vit_eval", lambda: VitLike().eval(), lambda i: (torch.randn(2, 4, 8),), 1)
case("timm_vit_train_drop_path", lambda: VitLike().train(), lambda i: (torch.randn(2, 4, 8),), 1)
case("timm_vit_inductor", lambda: VitLike().eval(), lambda i: (torch.randn(2, 4, 8),), 1, backend="inductor")


class Perm(nn.Module):
    def __init__(self, dims=(0, 2, 1)):
        super().__init__()
        self.dims = dims

    def forward(self, x):
        b, *rest = x.shape
        y = x.permute(*self.dims).reshape(b, -1, *rest[:1])
        return y.contiguous(), math.prod(rest), f"{x.shape}", "{}-{}".format(b, len(rest))


# 2 graphs: the second call has another last dim (static shapes, then automatic dynamic), as torch.
case("permute_star_fstrings", Perm, lambda i: (torch.randn(2, 3, 4 + i),), 2)


class GradModes(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    @torch.no_grad()
    def ema(self, x):
        return self.b(x)

    def forward(self, x):
        with torch.no_grad():
            y = self.a(x)
        with torch.enable_grad():
            z = self.a(x) * 2
        w = self.ema(x)
        with contextlib.nullcontext():
            v = y + z + w
        return v, y.requires_grad, z.requires_grad, w.requires_grad


case("grad_mode_blocks_and_decorator", GradModes, lambda i: (torch.randn(2, 4, requires_grad=True),), 1)


class Autocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.a(x)
        with torch.autocast("cpu", enabled=False):
            z = self.a(x.float())
        return y, z


case("autocast_contexts", Autocast, lambda i: (torch.randn(2, 4),), 1)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        return self.l(x)

    @classmethod
    def from_cfg(cls, cfg):
        return cls(**cfg)


class Child(Base):
    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return super().forward(x) * self.scale


case("super_forward_classmethod_ctor", lambda: Child.from_cfg({"scale": 3.0}), lambda i: (torch.randn(2, 4),), 1)


class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.a.register_forward_pre_hook(lambda m, inp: (inp[0] * 2,))
        self.b.register_forward_hook(lambda m, inp, out: out + 1)
        self.features = []
        self.b.register_forward_hook(lambda m, inp, out: self.features.append(out.detach()))

    def forward(self, x):
        return self.b(self.a(x))


# FH4: hooks were a graph break around each hooked call.
case("forward_hooks_feature_capture", Hooked, lambda i: (torch.randn(2, 4),), 1, state=lambda m: m.features)


class Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.grad_checkpointing = True

    def _inner(self, x):
        return torch.relu(self.a(x))

    def forward(self, x):
        if self.grad_checkpointing and self.training:
            x = torch.utils.checkpoint.checkpoint(self._inner, x, use_reentrant=False)
        else:
            x = self._inner(x)
        return self.b(x)


# FH8: checkpoint(use_reentrant=False) is traced inline: 1 graph, as torch.compile (a checkpoint region).
case("activation_checkpoint", Checkpointed, lambda i: (torch.randn(2, 4, requires_grad=True),), 1)


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


class EnumCfg(nn.Module):
    def __init__(self, act=Act.GELU):
        super().__init__()
        self.act, self.l = act, nn.Linear(4, 4)

    def forward(self, x):
        if self.act is Act.RELU:
            return F.relu(self.l(x))
        return F.gelu(self.l(x)), self.act.value, self.act.name


case("enum_member_config", EnumCfg, lambda i: (torch.randn(2, 4),), 1)


Out = collections.namedtuple("Out", ["logits", "loss"])


def _namedtuple_out(x, y=None):
    logits = x * 2
    loss = F.mse_loss(logits, y) if y is not None else None
    return Out(logits=logits, loss=loss)


case("namedtuple_output", lambda: _namedtuple_out, lambda i: (torch.randn(3), torch.randn(3)), 1)


def _chain_sorted(xs, ys):
    tot = 0
    for t in itertools.chain(xs, ys):
        tot = tot + t
    s = sorted([(t.shape[0], i) for i, t in enumerate(xs)], key=lambda p: -p[0])
    d = {"a": 1}
    return tot * d.get("b", 3) + d.get("a"), s, isinstance(xs, (list, tuple))


case("itertools_chain_sorted_key_dict_get", lambda: _chain_sorted,
     lambda i: ([torch.randn(3), torch.randn(3)], (torch.randn(3),)), 1)


def _deco(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k) + 1
    return wrapper


@functools.lru_cache(None)
def _cached_shape(n):
    return tuple(range(n))


@_deco
def _wrapped(x):
    return x * len(_cached_shape(3))


case("functools_wraps_lru_cache", lambda: _wrapped, lambda i: (torch.randn(3),), 1)


def _closures(k):
    def inner(x):
        def inner2(y):
            return y * k
        return inner2(x) + k
    return inner


case("nested_closures", lambda: _closures(3), lambda i: (torch.randn(3),), 1)


class SeenSizes(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen, self.l = set(), nn.Linear(4, 4)

    def forward(self, x):
        if x.shape[0] not in self.seen:
            self.seen.add(x.shape[0])            # a set from outside: graph break (as torch)
        return self.l(x), len(self.seen)


case("module_set_attribute", SeenSizes, lambda i: (torch.randn(2 + i, 4),), 2, state=lambda m: sorted(m.seen))


def _update_after_break(x, d):
    d.update({"a": x * 2, "n": len(str(x.shape))})
    d.update(_log_and_pack(x))                   # FH5: the resume recompiled on every call
    return d["a"] + d["b"]


def _log_and_pack(x):
    warnings.warn("xcompile program zoo: graph break")
    return {"b": x + 1}


case("dict_update_with_break_in_args", lambda: _update_after_break,
     lambda i: (torch.randn(3), {"z": 0}), 3, calls=3)      # prefix, rest of _log_and_pack, rest


# ---------------------------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:xcompile program zoo")
@pytest.mark.parametrize("name", [pytest.param(n, marks=c.get("marks", ())) for n, c in CASES.items()])
def test_program(name):
    _run(CASES[name])
