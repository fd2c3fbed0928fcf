"""A small transformer's decode step under CUDA-graph replay: eager, torch.compile(mode=
"reduce-overhead"), xcompile.compile(mode="reduce-overhead"), and the bare replay of xcompile's
own recording (``torch.cuda.CUDAGraph.replay``, i.e. the cudaGraphLaunch floor).

    python benchmarks/cudagraphs.py [--model decoder|tiny] [--layers 4] [--width 256] [--calls 500] [--rounds 9]

Prints µs per call (median of interleaved rounds, synchronised at the end of each round) and,
for both compilers, the time per call above the bare replay: the guard check, input copies,
output bookkeeping and the launch wrapper.

Without a GPU it runs on the CPU: xcompile records with the CPU stand-in device
(config.cudagraph_stand_in), whose "replay" runs the compiled kernels, and torch.compile skips
CUDA graphs for CPU tensors. The column above the bare replay is then xcompile's C++
bookkeeping and guard cost around the same kernels; the GPU figures need a GPU.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn

import xcompile
from xcompile import config
from xcompile.kernels import cudagraphs as cg


class Block(nn.Module):
    """Pre-norm attention over a fixed cache of keys/values, then an MLP: one decode step."""

    def __init__(self, d: int, heads: int, cache: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.o = nn.Linear(d, d), nn.Linear(d, d)
        self.register_buffer("k", torch.randn(1, heads, cache, d // heads))
        self.register_buffer("v", torch.randn(1, heads, cache, d // heads))
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q = self.q(self.ln1(x)).view(b, t, self.heads, d // self.heads).transpose(1, 2)
        a = torch.softmax(q @ self.k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1) @ self.v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    def __init__(self, layers: int, d: int, heads: int = 4, cache: int = 128, vocab: int = 1000):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads, cache) for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


class Tiny(nn.Module):
    """One small elementwise kernel: the time above the bare replay is the bookkeeping alone."""

    def forward(self, x):
        return x * 2 + 1


def _timed(variants: dict, x, calls: int, rounds: int, sync) -> dict:
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(x)
            sync()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--model", choices=("decoder", "tiny"), default="decoder",
                    help="tiny: x * 2 + 1 on 8 floats (the bookkeeping around one small kernel)")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if not cuda:
        torch.set_num_threads(1)
    torch.manual_seed(0)
    if a.model == "tiny":
        model, x = Tiny().to(device), torch.randn(8, device=device)
    else:
        model = Decoder(a.layers, a.width).to(device).eval()
        x = torch.randn(1, 1, a.width, device=device)
    with torch.no_grad(), config.patch(cudagraph_stand_in=not cuda):
        ours = xcompile.compile(model, mode="reduce-overhead")
        theirs = torch.compile(model, mode="reduce-overhead")
        for _ in range(5):
            torch.testing.assert_close(ours(x), model(x), atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(theirs(x), model(x), atol=1e-4, rtol=1e-4)
        graphs = cg.recorded_graphs()
        if len(graphs) != 1 or graphs[0].recorder.replay is None:
            print(f"xcompile recorded {len(graphs)} graphs (expected 1); nothing to compare", file=sys.stderr)
            return 1
        bare_replay = graphs[0].recorder.replay
        variants = {"eager": model, "torch.compile": theirs, "xcompile": ours,
                    "bare replay": lambda _x: bare_replay()}
        us = _timed(variants, x, a.calls, a.rounds, sync)
    name = torch.cuda.get_device_name() if cuda else "CPU (xcompile: stand-in device; torch: no CUDA graphs)"
    what = "x * 2 + 1 on 8 floats" if a.model == "tiny" else f"decode step, {a.layers} layers, width {a.width}, batch 1"
    print(f"{what}; {name}; torch {torch.__version__}")
    print(f"median of {a.rounds} interleaved rounds x {a.calls} calls")
    print(f"{'variant':16s} {'us/call':>10s} {'above bare replay':>18s}")
    for k, v in us.items():
        above = "" if k in ("eager", "bare replay") else f"{v - us['bare replay']:18.2f}"
        print(f"{k:16s} {v:10.2f} {above}")
    s = graphs[0].stats
    print(f"xcompile graph: {s['replays']} replays, {s['copies_in']} input copies, "
          f"{s['released_outputs']} held outputs copied out, {s['direct_calls']} direct calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
