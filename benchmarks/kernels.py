"""Generated kernels on the CPU: eager vs torch.compile (torch's inductor) vs xcompile's "inductor".

One process, variants interleaved round by round, inference (no_grad).  For each workload at
two sizes it prints µs per call, the speedup over eager of both compilers, xcompile's ratio to
torch.compile (> 1: xcompile is faster) with the geomean, and the first-call (compile) time of
both.  Both compilers start from empty kernel caches (fresh temp dirs) unless --warm.

    python benchmarks/kernels.py [--only softmax,mlp] [--rounds R] [--warm]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from _timing import per_call_us


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1)


class LayerNormGelu(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return F.gelu(self.ln(x))


class ResidualRMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d))

    def forward(self, x, r):
        return F.rms_norm(x + r, (x.shape[-1],), self.w)


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block; attention through scaled_dot_product_attention."""

    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = MLP(d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        x = F.relu(self.b2(self.c2(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Embed(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.emb = nn.Embedding(n, d)

    def forward(self, idx):
        return self.emb(idx) * 2.0


class GatherAdd(nn.Module):
    def forward(self, x, idx):
        return torch.gather(x, 1, idx) + 1.0


def workloads():
    r = torch.randn
    yield "softmax over rows", "32x256", Softmax(), (r(32, 256),)
    yield "softmax over rows", "1024x1024", Softmax(), (r(1024, 1024),)
    yield "layer_norm + GELU", "32x256", LayerNormGelu(256), (r(32, 256),)
    yield "layer_norm + GELU", "512x1024", LayerNormGelu(1024), (r(512, 1024),)
    yield "residual + RMSNorm", "32x256", ResidualRMSNorm(256), (r(32, 256), r(32, 256))
    yield "residual + RMSNorm", "512x1024", ResidualRMSNorm(1024), (r(512, 1024), r(512, 1024))
    yield "GELU MLP block", "16x128", MLP(128), (r(16, 128),)
    yield "GELU MLP block", "256x512", MLP(512), (r(256, 512),)
    yield "transformer block", "1x32x128", Block(128, 4), (r(1, 32, 128),)
    yield "transformer block", "4x128x256", Block(256, 4), (r(4, 128, 256),)
    yield "embedding * 2", "32 of 1000x256", Embed(1000, 256), (torch.randint(0, 1000, (32,)),)
    yield "embedding * 2", "4096 of 32000x512", Embed(32000, 512), (torch.randint(0, 32000, (4096,)),)
    yield "gather + 1", "64x1024 take 256", GatherAdd(), (r(64, 1024), torch.randint(0, 1024, (64, 256)))
    yield "gather + 1", "1024x1024", GatherAdd(), (r(1024, 1024), torch.randint(0, 1024, (1024, 1024)))
    yield "small conv net", "1x3x32x32", ConvNet(), (r(1, 3, 32, 32),)
    yield "small conv net", "8x3x64x64", ConvNet(), (r(8, 3, 64, 64),)


def _first_call(fn, args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def _xcompile(model, args):
    """xcompile.compile(model, backend="inductor"); if the frontend is not up to it, our backend
    on a symbolic_trace graph (marked "fx" in the table)."""
    import xcompile
    try:
        fn = xcompile.compile(model, backend="inductor")
        out, t = _first_call(fn, args)
        return fn, out, t, ""
    except Exception as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {e}".splitlines()[0][:80]
    from xcompile.backends.inductor import inductor
    t0 = time.perf_counter()
    gm = torch.fx.symbolic_trace(model)
    compiled = inductor(gm, list(args))

    def fn(*a):
        return compiled(*a)[0]
    out = fn(*args)
    return fn, out, time.perf_counter() - t0, f"fx ({why})"


def _calls_for(fn, args, target_s=0.02):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < target_s / 4 or n < 3:
        fn(*args)
        n += 1
    per = (time.perf_counter() - t0) / n
    return max(3, int(target_s / per))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--warm", action="store_true", help="keep the compilers' on-disk caches")
    ap.add_argument("--threads", type=int, default=0, help="torch/OpenMP threads (default: torch's)")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    if a.threads:
        torch.set_num_threads(a.threads)
    if not a.warm:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-inductor-")
        os.environ["XCOMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-xcompile-")
    import xcompile
    xcompile.config.cache_dir = os.environ.get("XCOMPILE_CACHE_DIR", xcompile.config.cache_dir)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU; inference; "
          f"median of {a.rounds} interleaved rounds; {'warm' if a.warm else 'empty'} kernel caches")
    hdr = (f"{'workload':20s} {'size':>10s} | {'eager':>9s} {'torch.c':>9s} {'xcomp':>9s} µs | "
           f"{'tc/eager':>8s} {'xc/eager':>8s} {'xc vs tc':>8s} | {'compile tc':>10s} {'compile xc':>10s}")
    print(hdr)
    print("-" * len(hdr))
    ratios, notes = [], []
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    for name, size, model, args in workloads():
        if only and not any(o in name for o in only):
            continue
        model.eval()
        with torch.no_grad():
            ref = model(*args)
            tc = torch.compile(model)
            out_tc, t_tc = _first_call(tc, args)
            xc, out_xc, t_xc, note = _xcompile(model, args)
            ok = torch.allclose(out_xc, ref, atol=1e-4, rtol=1e-4) and torch.allclose(out_tc, ref, atol=1e-4,
                                                                                      rtol=1e-4)
            variants = {"eager": model, "torch": tc, "xc": xc}
            calls = _calls_for(model, args)
            us = per_call_us(variants, args, calls=calls, rounds=a.rounds, warmup=3)
        ratio = us["torch"] / us["xc"]
        ratios.append(ratio)
        flag = "" if ok else "  MISMATCH"
        if note:
            notes.append(f"{name} {size}: {note}")
            flag += "  [fx]"
        print(f"{name:20s} {size:>10s} | {us['eager']:9.1f} {us['torch']:9.1f} {us['xc']:9.1f}    | "
              f"{us['eager'] / us['torch']:7.2f}x {us['eager'] / us['xc']:7.2f}x {ratio:7.2f}x | "
              f"{t_tc:9.1f}s {t_xc:9.2f}s{flag}")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("-" * len(hdr))
        print(f"geomean of xcompile's speed relative to torch.compile: {geo:.2f}x  (target >= 1.0)")
    for n in notes:
        print("  [fx] xcompile.compile failed, timed our backend on a symbolic_trace graph:", n)


if __name__ == "__main__":
    main()
