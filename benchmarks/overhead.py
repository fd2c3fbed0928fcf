"""Per-call overhead: eager vs torch.compile(backend="eager") vs xcompile.compile(backend="eager").

Single thread, one process, variants interleaved round by round.  For each row it prints the
µs per call of each variant and  (xcompile - eager) / (torch.compile - eager):  the share of
torch.compile's overhead that xcompile still pays.  Target: <= 0.1 on every row.

    python benchmarks/overhead.py [--calls N] [--rounds R]
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
import xcompile
from _timing import per_call_us


def add_one(x):
    return x + 1


def sum16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15


class MLP8(torch.nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.layers = torch.nn.Sequential(*[m for _ in range(8) for m in (torch.nn.Linear(d, d), torch.nn.ReLU())])

    def forward(self, x):
        return self.layers(x)


class Params100(torch.nn.Module):
    """50 Linear(4, 4) layers: 100 parameters."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(50))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


_DEVNULL = open(os.devnull, "w")


def one_break(x):
    """Both compilers break at print: graph, print (eagerly), resume function's graph."""
    y = x + 1
    print(end="", file=_DEVNULL)
    return y * 2


def rows():
    x = torch.randn(8)
    yield "x + 1 (one small tensor)", add_one, (x,), None
    yield "sum of 16 tensor args", sum16, tuple(torch.randn(8) for _ in range(16)), None
    yield "8-layer MLP under no_grad", MLP8(), (torch.randn(4, 32),), torch.no_grad
    yield "module with 100 parameters", Params100(), (torch.randn(2, 4),), torch.no_grad
    yield "one graph break (2 graphs)", one_break, (x,), None


def _captured_graph(fn, args, ctx):
    """The FX graph xcompile captures for ``fn``, as a callable over ``args`` (for the floor column)."""
    seen = []

    def record(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    probe = xcompile.compile(fn, backend=record)
    if ctx is not None:
        with ctx():
            probe(*args)
    else:
        probe(*args)
    xcompile.reset()
    if len(seen) != 1:
        return fn                  # graph breaks: several graphs, eager is the floor
    (gm, example_inputs), = seen
    ids = [id(a) for a in args]
    order = [ids.index(id(t)) for t in example_inputs]  # placeholders are a subset of the args
    fwd = gm.forward
    return lambda *a: fwd(*[a[i] for i in order])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, 1 thread; "
          f"median of {a.rounds} interleaved rounds x {a.calls} calls")
    hdr = (f"{'row':30s} {'eager':>8s} {'graph':>8s} {'torch.c':>8s} {'xcomp':>8s} | {'xc-eager':>8s} "
           f"{'tc-eager':>8s} {'ratio':>6s} | {'xc-graph':>8s} {'tc-graph':>8s} {'ratio':>6s}")
    print(hdr)
    print("-" * len(hdr))
    worst = 0.0
    for name, fn, args, ctx in rows():
        tc = torch.compile(fn, backend="eager")
        xc = xcompile.compile(fn, backend="eager")
        graph = _captured_graph(fn, args, ctx)
        variants = {"eager": fn, "graph": graph, "torch": tc, "xcompile": xc}
        if ctx is not None:
            with ctx():
                us = per_call_us(variants, args, calls=a.calls, rounds=a.rounds)
        else:
            us = per_call_us(variants, args, calls=a.calls, rounds=a.rounds)
        for v in ("torch", "xcompile"):  # same answer as eager
            torch.testing.assert_close(variants[v](*args), fn(*args))
        xo, to = us["xcompile"] - us["eager"], us["torch"] - us["eager"]
        ratio = xo / to if to > 0 else float("nan")
        xg, tg = us["xcompile"] - us["graph"], us["torch"] - us["graph"]
        ratio_g = xg / tg if tg > 0 else float("nan")
        worst = max(worst, ratio if to > 0 else ratio_g)
        print(f"{name:30s} {us['eager']:8.2f} {us['graph']:8.2f} {us['torch']:8.2f} {us['xcompile']:8.2f} | "
              f"{xo:8.2f} {to:8.2f} {ratio:6.3f} | {xg:8.2f} {tg:8.2f} {ratio_g:6.3f}")
    print("\nus per call. graph = the captured FX graph called directly (the floor for both compilers).")
    print("ratio = xcompile's overhead / torch.compile's overhead, over eager and over the graph it runs;")
    print("rows where a compiler beats eager (module calls skip nn.Module.__call__) use the graph ratio.")
    print(f"worst ratio: {worst:.3f}  (target <= 0.1)")


if __name__ == "__main__":
    main()
