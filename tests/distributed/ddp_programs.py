"""What each rank runs in tests/distributed/test_ddp.py (module-level: the ranks import it by name).

``train``: one model trained side by side under eager DDP and compiled DDP (same init, same
inputs, AdamW), returning per step the losses, the gradients after DDP's all-reduce, the buckets
DDP reduced (from a comm hook: the parameter names of each bucket, in the order they were sent)
and, at the end, the parameters and the subgraphs the backend compiled (their parameter names).
"""
from __future__ import annotations

import copy
import time

import torch
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP

import xcompile
from xcompile.backends.registry import lookup_backend


class MLP(nn.Module):
    def __init__(self, width: int = 64, depth: int = 6, unused: bool = False):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.unused = nn.Linear(width, width) if unused else None   # never called: no gradient

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class Transformer(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.enc = nn.Sequential(*[nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
                                   for _ in range(2)])
        self.head = nn.Linear(d, 8)

    def forward(self, x):
        return self.head(self.enc(self.inp(x)))


def make_model(name: str) -> nn.Module:
    torch.manual_seed(0)
    if name == "mlp":
        return MLP()
    if name == "mlp_unused":
        return MLP(unused=True)
    if name == "seq":
        return nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(64, 64), nn.ReLU())])
    if name == "transformer":
        return Transformer()
    raise ValueError(name)


def make_input(name: str, rank: int, step: int, micro: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * rank + 10 * step + micro)
    if name == "transformer":
        return torch.randn(4, 6, 16, generator=g)
    return torch.randn(8, 64, generator=g)


class Recorder:
    """A backend that records each (sub)graph it compiles, then compiles it with ``inner``."""

    def __init__(self, inner: str):
        self.inner = lookup_backend(inner)
        self.graphs: list[list[str]] = []       # per compiled graph: its parameters' names
        self.names: dict[int, str] = {}

    def __call__(self, gm, example_inputs):
        params = []
        for n in gm.graph.nodes:
            if n.op == "get_attr":
                obj = gm
                for part in n.target.split("."):
                    obj = getattr(obj, part)
                if isinstance(obj, nn.Parameter):
                    params.append(self.names.get(id(obj), n.target))
        for n, v in zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs):
            if isinstance(v, nn.Parameter):
                params.append(self.names.get(id(v), n.target))
        self.graphs.append(sorted(set(params)))
        return self.inner(gm, example_inputs)


def bucket_hook(names: dict, log: list):
    def hook(state, bucket):
        log.append((time.perf_counter(), sorted(names[id(p)] for p in bucket.parameters())))
        return allreduce_hook(None, bucket)
    return hook


class Breaks:
    """An observer of the compiler (xcompile.log.add_observer): the graph-break reasons reported."""

    def __init__(self):
        self.reasons: list[str] = []

    def on_break(self, record) -> None:
        self.reasons.append(record.reason)

    def on_graph(self, code, gm, guards) -> None:
        pass


def scenarios(rank: int, world: int, runs: list) -> list:
    """Several ``train`` runs (each a dict of its arguments) in one process group."""
    return [train(rank, world, **kw) for kw in runs]


def train(rank: int, world: int, model_name: str, *, mode: str = "outer", backend: str = "inductor",
          steps: int = 5, bucket_cap_mb: float = 0.02, find_unused: bool = False, static_graph: bool = False,
          optimize_ddp: bool = True, no_sync: bool = False, fail_on_rank: int | None = None,
          lr: float = 1e-2) -> dict:
    xcompile.reset()
    breaks = Breaks()
    xcompile.log.add_observer(breaks)
    xcompile.config.optimize_ddp = optimize_ddp
    model = make_model(model_name)
    names = {id(p): n for n, p in model.named_parameters()}
    ddp_kw = dict(bucket_cap_mb=bucket_cap_mb, find_unused_parameters=find_unused, static_graph=static_graph)
    eager_model = copy.deepcopy(model)
    eager_names = {id(p): n for n, p in eager_model.named_parameters()}
    eager = DDP(eager_model, **ddp_kw)
    rec = Recorder(backend)
    rec.names = names
    if mode == "outer":
        compiled = xcompile.compile(DDP(model, **ddp_kw), backend=rec)
        cddp = compiled._orig_mod
    else:
        cddp = compiled = DDP(xcompile.compile(model, backend=rec), **ddp_kw)
    buckets_e: list = []
    buckets_c: list = []
    eager.register_comm_hook(None, bucket_hook(eager_names, buckets_e))
    cddp.register_comm_hook(None, bucket_hook(names, buckets_c))
    opt_e = torch.optim.AdamW(eager.parameters(), lr=lr)
    opt_c = torch.optim.AdamW(compiled.parameters(), lr=lr)
    out: dict = {"loss_e": [], "loss_c": [], "grads_e": [], "grads_c": [], "buckets_e": [], "buckets_c": []}
    for step in range(steps):
        for tag, m, opt, log in (("e", eager, opt_e, buckets_e), ("c", compiled, opt_c, buckets_c)):
            opt.zero_grad()
            del log[:]
            ddp = eager if tag == "e" else cddp
            if no_sync:                    # micro-step 0 accumulates locally, micro-step 1 all-reduces
                with ddp.no_sync():
                    m(make_input(model_name, rank, step, 0)).pow(2).mean().backward()
                assert not log, "no_sync: a bucket was all-reduced"
            x = make_input(model_name, rank, step, 1)
            if tag == "c" and fail_on_rank == rank and step == 1:
                x = x[:, :-1]              # a shape the model cannot take: the compiled step raises
            loss = m(x).pow(2).mean()
            loss.backward()
            out["loss_" + tag].append(loss.item())
            nm = eager_names if tag == "e" else names
            out["grads_" + tag].append({nm[id(p)]: None if p.grad is None else p.grad.clone()
                                        for p in m.parameters()})
            out["buckets_" + tag].append([b for _, b in log])
            opt.step()
    out["params_e"] = {n: p.detach().clone() for n, p in eager.module.named_parameters()}
    out["params_c"] = {names[id(p)]: p.detach().clone() for p in compiled.parameters()}
    out["subgraphs"] = rec.graphs
    out["breaks"] = breaks.reasons
    xcompile.log.remove_observer(breaks)
    return out
