"""NumPy code, torch.func transforms and checkpointing in the graph (issue #12), one process:

1. The FAQ's ``numpy_fn`` on two 1024x64 float32 arrays: NumPy, torch.compile, xcompile
   (inductor): graphs and µs per call.
2. Per-sample gradients, ``vmap(grad(loss))`` over a small MLP with ``functional_call``:
   eager torch.func, torch.compile, xcompile: graphs and µs per call.
3. A 12-layer MLP trained with every layer checkpointed (``use_reentrant=False``) and without:
   bytes saved for the backward (``saved_tensors_hooks``, parameters included) and ms per
   training step, eager / torch.compile / xcompile (inductor, 1 thread).

    python benchmarks/numpy_func.py [--tables 1,2,3]
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.testing import CompileCounterWithBackend as TorchCounter  # noqa: E402
from torch.func import functional_call, grad, vmap  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import xcompile  # noqa: E402
from _timing import per_call_us  # noqa: E402
from xcompile.testing import CompileCounterWithBackend  # noqa: E402


def numpy_fn(X, Y):
    return np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))


def table_numpy(a) -> None:
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((1024, 64), dtype=np.float32), rng.standard_normal((1024, 64), dtype=np.float32)
    tcnt, xcnt = TorchCounter("inductor"), CompileCounterWithBackend("inductor")
    variants = {"numpy": numpy_fn, "torch.compile": torch.compile(numpy_fn, backend=tcnt),
                "xcompile": xcompile.compile(numpy_fn, backend=xcnt)}
    want = numpy_fn(X, Y)
    for name, f in variants.items():
        got = f(X, Y)
        ok = isinstance(got, np.ndarray) and np.allclose(got, want, rtol=1e-4, atol=1e-3)
        if not ok:
            print(f"  {name}: result differs from NumPy's")
    us = per_call_us(variants, (X, Y), calls=50, rounds=7, warmup=3)
    print("\n1. the FAQ's numpy_fn on 1024x64 float32 arrays (inductor), µs per call")
    print(f"{'':16s}{'graphs':>8s}{'µs':>10s}{'vs numpy':>10s}")
    graphs = {"numpy": "-", "torch.compile": str(tcnt.frame_count), "xcompile": str(xcnt.frame_count)}
    for name in variants:
        print(f"{name:16s}{graphs[name]:>8s}{us[name]:10.1f}{us['numpy'] / us[name]:9.2f}x")


def table_vmap(a) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, y):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return ((out.squeeze(0) - y) ** 2).sum()

    def per_sample(p, x, y):
        return vmap(grad(loss), in_dims=(None, 0, 0))(p, x, y)

    x, y = torch.randn(64, 16), torch.randn(64, 1)
    tcnt, xcnt = TorchCounter("inductor"), CompileCounterWithBackend("inductor")
    variants = {"eager": per_sample, "torch.compile": torch.compile(per_sample, backend=tcnt),
                "xcompile": xcompile.compile(per_sample, backend=xcnt)}
    want = per_sample(params, x, y)
    for name, f in variants.items():
        got = f(params, x, y)
        for k in want:
            if not torch.allclose(got[k], want[k], rtol=1e-4, atol=1e-5):
                print(f"  {name}: gradient {k} differs from eager's")
    us = per_call_us(variants, (params, x, y), calls=50, rounds=7, warmup=3)
    print("\n2. per-sample gradients: vmap(grad(loss)) over a 16-32-1 MLP, batch 64 (inductor), µs per call")
    print(f"{'':16s}{'graphs':>8s}{'µs':>10s}{'vs eager':>10s}")
    graphs = {"eager": "-", "torch.compile": str(tcnt.frame_count), "xcompile": str(xcnt.frame_count)}
    for name in variants:
        print(f"{name:16s}{graphs[name]:>8s}{us[name]:10.1f}{us['eager'] / us[name]:9.2f}x")


class MLP(torch.nn.Module):
    def __init__(self, ckpt: bool, layers: int = 12, d: int = 256):
        super().__init__()
        self.ckpt = ckpt
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.GELU(), torch.nn.LayerNorm(d))
            for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False) if self.ckpt else layer(x)
        return x.square().mean()


def _saved_bytes(step) -> int:
    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = step()
    loss.backward()
    return sum(seen.values())


def table_checkpoint(a) -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 256)
    rows = []
    for ckpt in (False, True):
        base = MLP(ckpt)
        models = {"eager": base, "torch.compile": torch.compile(copy.deepcopy(base)),
                  "xcompile": xcompile.compile(copy.deepcopy(base), backend="inductor")}
        saved = {name: _saved_bytes(lambda m=m: m(x)) for name, m in models.items()}
        samples: dict[str, list[float]] = {n: [] for n in models}
        for _ in range(a.rounds):
            for name, m in models.items():
                t0 = time.perf_counter()
                for _ in range(5):
                    m(x).backward()
                samples[name].append((time.perf_counter() - t0) / 5 * 1e3)
        for name in models:
            rows.append((name, ckpt, saved[name], statistics.median(samples[name])))
    print("\n3. 12-layer MLP (d=256, batch 64), one training step, inductor, 1 thread")
    print(f"{'':16s}{'checkpoint':>11s}{'saved KiB':>11s}{'ms/step':>9s}")
    for name, ckpt, nbytes, ms in rows:
        print(f"{name:16s}{str(ckpt):>11s}{nbytes / 1024:11.0f}{ms:9.2f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", default="1,2,3")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, numpy {np.__version__}, 1 thread")
    tables = {"1": table_numpy, "2": table_vmap, "3": table_checkpoint}
    for t in a.tables.split(","):
        torch._dynamo.reset()
        xcompile.reset()
        tables[t.strip()](a)


if __name__ == "__main__":
    main()
