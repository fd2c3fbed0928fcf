"""Compiled DistributedDataParallel: one training step on 2 ranks (gloo, CPU, 1 thread each).

Variants, interleaved step by step in the same processes (one process group):
eager DDP, DDP + torch.compile (inductor), DDP + xcompile.compile (inductor), each compiled one
with its optimize_ddp on (graph split at the bucket boundaries) and off (one graph).
Per variant: the median time of a step (forward, backward, AdamW), the number of buckets DDP
all-reduced and of graphs compiled, and how much of the all-reduce overlaps the backward:
the time from the first bucket's all-reduce (a DDP comm hook records when each bucket is handed
over) to the last one (when the backward's last gradient is ready), and its share of the backward
(``loss.backward()`` call to return, which also waits for the all-reduces to finish).

    python benchmarks/ddp.py [--width 1024] [--depth 8] [--batch 64] [--bucket-mb 8] [--steps 10]
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def mlp(width: int, depth: int):
    # a user class: torch.compile(DDP(nn.Sequential(...))) compiles nothing in torch 2.13 (it traces
    # DDP.forward, breaks on its logger and on _inside_ddp_forward, and skips Sequential.forward)
    import torch
    import torch.nn as nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

        def forward(self, x):
            for layer in self.layers:
                x = torch.nn.functional.gelu(layer(x))
            return x
    return MLP()


def rank_main(rank: int, world: int, args: dict) -> dict:
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    import xcompile

    torch.manual_seed(0)
    base = mlp(args["width"], args["depth"])
    counts: dict = {}

    def counting(name, inner):
        def backend(gm, example_inputs):
            counts[name] = counts.get(name, 0) + 1
            return inner(gm, example_inputs)
        return backend

    from xcompile.backends.registry import lookup_backend
    variants: dict = {}
    kw = dict(bucket_cap_mb=args["bucket_mb"])
    variants["eager"] = DDP(copy.deepcopy(base), **kw)
    if args["torch"]:
        import torch._dynamo
        from torch._inductor.compile_fx import compile_fx
        for on in (True, False):
            name = f"torch.compile optimize_ddp={'on' if on else 'off'}"
            with torch._dynamo.config.patch(optimize_ddp=on):
                m = torch.compile(DDP(copy.deepcopy(base), **kw), backend=counting(name, compile_fx))
                variants[name] = (m, on)
    for on in (True, False):
        name = f"xcompile optimize_ddp={'on' if on else 'off'}"
        m = xcompile.compile(DDP(copy.deepcopy(base), **kw), backend=counting(name, lookup_backend("inductor")))
        variants[name] = (m, on)

    stamps: dict = {}

    def hook_for(name):
        def hook(state, bucket):
            stamps[name].append(time.perf_counter())
            return allreduce_hook(None, bucket)
        return hook

    runs = {}
    for name, v in variants.items():
        m, on = v if isinstance(v, tuple) else (v, None)
        ddp = getattr(m, "_orig_mod", m)
        ddp.register_comm_hook(None, hook_for(name))
        stamps[name] = []
        runs[name] = (m, on, torch.optim.AdamW(m.parameters(), lr=1e-4))

    def step(name, i):
        m, on, opt = runs[name]
        g = torch.Generator().manual_seed(100 * rank + i)
        x = torch.randn(args["batch"], args["width"], generator=g)
        stamps[name] = []
        t0 = time.perf_counter()
        if on is not None and name.startswith("torch"):
            with torch._dynamo.config.patch(optimize_ddp=on):
                loss = m(x).pow(2).mean()
        elif on is not None:
            with xcompile.config.patch(optimize_ddp=on):
                loss = m(x).pow(2).mean()
        else:
            loss = m(x).pow(2).mean()
        tb = time.perf_counter()
        loss.backward()
        te = time.perf_counter()
        opt.step()
        opt.zero_grad()
        t1 = time.perf_counter()
        h = stamps[name]
        return dict(step=t1 - t0, backward=te - tb, overlap=(h[-1] - h[0]) if h else 0.0, buckets=len(h),
                    to_end=te - h[0] if h else 0.0)

    warm = {}
    for name in runs:                               # compile, DDP's bucket rebuild, first kernels
        t = time.perf_counter()
        for i in range(args["warmup"]):
            step(name, i)
        warm[name] = time.perf_counter() - t
    samples: dict = {name: [] for name in runs}
    for i in range(args["steps"]):
        for name in runs:
            samples[name].append(step(name, 1000 + i))
    out = {}
    for name, s in samples.items():
        out[name] = {k: statistics.median(d[k] for d in s) for k in ("step", "backward", "overlap", "to_end")}
        out[name]["buckets"] = s[-1]["buckets"]
        out[name]["graphs"] = counts.get(name, 0)
        out[name]["warmup_s"] = warm[name]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bucket-mb", type=float, default=8.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true", help="leave out torch.compile")
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    args = dict(width=a.width, depth=a.depth, batch=a.batch, bucket_mb=a.bucket_mb, steps=a.steps,
                warmup=a.warmup, torch=not a.no_torch)
    from tests.distributed.harness import run_ranks
    res = run_ranks(rank_main, Path(tempfile.mkdtemp(prefix="xc_ddp_bench_")), args, timeout=a.timeout)
    r = res[0]
    mb = a.width * (a.width + 1) * 4 / 2**20
    print(f"DDP, 2 ranks (gloo, 1 thread each): MLP {a.depth} x Linear({a.width}, {a.width}) ({mb:.1f} MB each), "
          f"batch {a.batch}, bucket_cap_mb={a.bucket_mb:g}; median of {a.steps} steps (rank 0)")
    print(f"{'variant':34} {'step ms':>8} {'x eager':>8} {'bwd ms':>8} {'overlap ms':>10} {'overlap/bwd':>11} "
          f"{'buckets':>7} {'graphs':>6} {'warmup s':>8}")
    e = r["eager"]["step"]
    for name, d in r.items():
        print(f"{name:34} {d['step'] * 1e3:8.1f} {e / d['step']:8.2f} {d['backward'] * 1e3:8.1f} "
              f"{d['overlap'] * 1e3:10.1f} {d['overlap'] / d['backward']:11.0%} {d['buckets']:7d} {d['graphs']:6d} "
              f"{d['warmup_s']:8.1f}")
    print("overlap: from the first bucket's all-reduce to the last (the backward still computing meanwhile); "
          "x eager: eager step time / variant step time")


if __name__ == "__main__":
    main()
