"""The main job: one model compiled and timed against eager and torch.compile.

    python benchmarks/demo.py [--backend NAME]

Checks the compiled results against eager on fresh inputs, then prints first-call (compile)
time and steady-state µs per call for eager, torch.compile and xcompile.compile.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
import xcompile
from _timing import per_call_us


class Block(torch.nn.Module):
    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Model(torch.nn.Module):
    def __init__(self, d=64, depth=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(depth))
        self.head = torch.nn.Linear(d, 10)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return torch.softmax(self.head(x), dim=-1)


def first_call_s(fn, x):
    t0 = time.perf_counter()
    fn(x)
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=xcompile.api.DEFAULT_BACKEND)
    ap.add_argument("--torch-backend", default="inductor")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Model().eval()
    xc = xcompile.compile(model, backend=a.backend)
    tc = torch.compile(model, backend=a.torch_backend)
    x = torch.randn(8, 64)
    with torch.no_grad():
        t_xc, t_tc = first_call_s(xc, x), first_call_s(tc, x)
        for _ in range(3):  # fresh inputs: same answers as eager
            x = torch.randn(8, 64)
            ref = model(x)
            torch.testing.assert_close(xc(x), ref)
            torch.testing.assert_close(tc(x), ref, rtol=1e-4, atol=1e-5)
        us = per_call_us({"eager": model, "torch.compile": tc, "xcompile": xc}, (x,), calls=500, rounds=9)
    print("model: 4 pre-norm GELU MLP blocks (d=64) + softmax head, batch 8, no_grad, 1 thread")
    print(f"xcompile backend={a.backend!r}, torch.compile backend={a.torch_backend!r}; results match eager")
    print(f"{'':16s} {'first call s':>12s} {'us/call':>9s} {'speedup vs eager':>17s}")
    for name in ("eager", "torch.compile", "xcompile"):
        first = {"torch.compile": f"{t_tc:12.3f}", "xcompile": f"{t_xc:12.3f}"}.get(name, f"{'-':>12s}")
        print(f"{name:16s} {first} {us[name]:9.1f} {us['eager'] / us[name]:17.2f}x")


if __name__ == "__main__":
    main()
