"""Dynamic shapes: compiles, compile time and per-call cost when sizes change (issue #11).

Three tables, one process, variants interleaved where they are timed:

1. A transformer block called at 32 sequence lengths from 1 to 512 (inductor): graphs traced,
   backend compiles, total compile seconds; then µs per call at lengths 64 and 500 for eager,
   torch.compile, xcompile (the entry that served the sweep) and xcompile's static entry.
2. LlamaForCausalLM (small config) ``generate(max_new_tokens=64)`` with the default dynamic
   cache and ``forward`` compiled: tokens against eager, graphs traced, ms per token.
3. The per-call cost of symbolic guards: ``x + 1`` (backend eager) with a dynamic dimension
   against the static entry, torch.compile beside it.

    python benchmarks/dynamic.py [--tables 1,2,3] [--lengths 32] [--tokens 64] [--backend inductor]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.testing import CompileCounterWithBackend as TorchCounter  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import xcompile  # noqa: E402
from _timing import per_call_us  # noqa: E402
from xcompile.backends.per_size import PerSize  # noqa: E402
from xcompile.testing import CompileCounterWithBackend  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d=128, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


def _lengths(n: int) -> list[int]:
    out = sorted({max(1, round(1 + (512 - 1) * (i / (n - 1)) ** 2)) for i in range(n)})
    return out


def table_block(a) -> None:
    torch.manual_seed(0)
    block = Block().eval()
    lengths = _lengths(a.lengths)
    xcnt, tcnt = CompileCounterWithBackend(a.backend), TorchCounter(a.backend)
    xc = xcompile.compile(block, backend=xcnt)
    tc = torch.compile(block, backend=tcnt)
    before = PerSize.backend_compiles
    secs = {"torch.compile": 0.0, "xcompile": 0.0}
    with torch.no_grad():
        for n in lengths:
            x = torch.randn(1, n, 128)
            for name, f in (("torch.compile", tc), ("xcompile", xc)):
                t0 = time.perf_counter()
                out = f(x)
                secs[name] += time.perf_counter() - t0
                torch.testing.assert_close(out, block(x), rtol=1e-4, atol=1e-4)
        print(f"\n1. transformer block (d=128, 4 heads), {len(lengths)} sequence lengths 1..512, "
              f"backend {a.backend!r}, no_grad, 1 thread")
        print(f"{'':16s}{'graphs':>8s}{'per-size compiles':>19s}{'s in sweep calls':>18s}")
        print(f"{'torch.compile':16s}{tcnt.frame_count:8d}{'-':>19s}{secs['torch.compile']:18.1f}")
        print(f"{'xcompile':16s}{xcnt.frame_count:8d}{PerSize.backend_compiles - before:19d}"
              f"{secs['xcompile']:18.1f}")
        print(f"\n{'length':>8s}{'eager':>10s}{'torch.c':>10s}{'xc dyn':>10s}{'xc static':>10s}"
              f"   us per call; xc dyn / xc static")
        for n in (64, 500):
            x = torch.randn(1, n, 128)
            static = xcompile.compile(block, backend=a.backend, dynamic=False)
            static(x)
            us = per_call_us({"eager": block, "tc": tc, "xc": xc, "static": static}, (x,),
                             calls=a.calls, rounds=a.rounds, warmup=5)
            print(f"{n:8d}{us['eager']:10.1f}{us['tc']:10.1f}{us['xc']:10.1f}{us['static']:10.1f}"
                  f"   {us['xc'] / us['static']:.2f}")


def table_generate(a) -> None:
    import logging

    import transformers
    logging.disable(logging.WARNING)

    def make():
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, intermediate_size=344, vocab_size=4000,
                                       max_position_embeddings=512)
        return transformers.LlamaForCausalLM(cfg).eval()

    models = {"eager": make(), "torch.compile": make(), "xcompile": make()}
    tcnt, xcnt = TorchCounter(a.backend), CompileCounterWithBackend(a.backend)
    models["torch.compile"].forward = torch.compile(models["torch.compile"].forward, backend=tcnt)
    models["xcompile"].forward = xcompile.compile(models["xcompile"].forward, backend=xcnt)
    ids = torch.randint(0, 4000, (1, 12))
    kw = dict(max_new_tokens=a.tokens, do_sample=False, pad_token_id=0)
    first, outs = {}, {}
    before = PerSize.backend_compiles
    for name, m in models.items():
        t0 = time.perf_counter()
        outs[name] = m.generate(ids, **kw)
        first[name] = time.perf_counter() - t0
    xc_backend = PerSize.backend_compiles - before
    samples: dict[str, list[float]] = {n: [] for n in models}
    for _ in range(a.gen_rounds):
        for name, m in models.items():
            t0 = time.perf_counter()
            m.generate(ids, **kw)
            samples[name].append((time.perf_counter() - t0) * 1e3)
    ms = {n: statistics.median(v) for n, v in samples.items()}
    print(f"\n2. LlamaForCausalLM (2 layers, d=128), generate({a.tokens} new tokens), dynamic cache, "
          f"forward compiled ({a.backend!r}), median of {a.gen_rounds} rounds")
    print(f"{'':16s}{'tokens = eager':>16s}{'graphs':>8s}{'first call s':>14s}{'ms/token':>10s}{'vs eager':>10s}")
    for name in models:
        graphs = {"eager": "-", "torch.compile": str(tcnt.frame_count), "xcompile": str(xcnt.frame_count)}[name]
        print(f"{name:16s}{str(torch.equal(outs[name], outs['eager'])):>16s}{graphs:>8s}{first[name]:14.2f}"
              f"{ms[name] / a.tokens:10.2f}{ms['eager'] / ms[name]:9.2f}x")
    print(f"xcompile per-size backend compiles during the first generate(): {xc_backend}")


def add_one(x):
    return x + 1


def table_guards(a) -> None:
    x = torch.randn(8)
    static = xcompile.compile(add_one, backend="eager", dynamic=False)
    dyn = xcompile.compile(add_one, backend="eager", dynamic=True)
    tc_static = torch.compile(add_one, backend="eager", dynamic=False)
    tc_dyn = torch.compile(add_one, backend="eager", dynamic=True)
    xcompile.reset()
    torch._dynamo.reset()
    variants = {"eager": add_one, "xc static": static, "xc dynamic": dyn, "tc static": tc_static,
                "tc dynamic": tc_dyn}
    us = per_call_us(variants, (x,), calls=a.calls * 10, rounds=a.rounds)
    print("\n3. x + 1 (backend eager), µs per call: the cost of symbolic shape guards")
    for name, v in us.items():
        print(f"{name:12s}{v:8.2f}")
    print(f"xcompile: dynamic - static = {us['xc dynamic'] - us['xc static']:+.2f} us (target <= 0.3); "
          f"torch.compile: {us['tc dynamic'] - us['tc static']:+.2f} us")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", default="1,2,3")
    ap.add_argument("--lengths", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--gen-rounds", type=int, default=3)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, 1 thread")
    tables = {"1": table_block, "2": table_generate, "3": table_guards}
    for t in a.tables.split(","):
        xcompile.reset()
        torch._dynamo.reset()
        tables[t](a)


if __name__ == "__main__":
    main()
