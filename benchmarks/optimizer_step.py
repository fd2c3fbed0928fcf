"""optimizer.step() alone: eager vs torch.compile vs xcompile, the same optimizer state, one process.

Each variant owns a copy of the model (``--params`` parameters: Linear layers of width
``--width``, gradients filled once) and its optimizer; a step of one variant is timed against
the others round by round (interleaved). Graph counts and the graph breaks other than the
optimizer's own grad-mode wrapper (``torch._dynamo.graph_break()`` in torch.optim) are printed:
a step that ran eagerly would show here, not only in the times.

    python benchmarks/optimizer_step.py [--opt adamw|adamw-fused|adam|sgd] [--params 100] [--width 64]
                                        [--backend inductor] [--threads 1] [--rounds 15]
                                        [--scheduler cosine]

``--scheduler cosine``: each step is followed by a CosineAnnealingLR step (eagerly, as users
run it), so the ``lr`` the compiled step reads changes every step; the compiles each compiler
made over the whole run are printed (torch.compile's: torch._dynamo's unique graphs).
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch

import xcompile
from xcompile.testing import CompileCounterWithBackend

OPTS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
    "adamw-fused": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, fused=True),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
}


def model(params: int, width: int) -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(params // 2)])
    for p in m.parameters():
        p.grad = torch.randn_like(p) * 1e-2
    return m


def _with_scheduler(opt, step):
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10**6)

    def run():
        step()
        sched.step()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opt", default="adamw", choices=sorted(OPTS))
    ap.add_argument("--params", type=int, default=100)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=20, help="steps per variant per round")
    ap.add_argument("--scheduler", choices=["none", "cosine"], default="none")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")

    base = model(args.params, args.width)
    variants = {}
    counters = {}
    for name in ("eager", "torch.compile", "xcompile"):
        m = copy.deepcopy(base)
        for p, q in zip(m.parameters(), base.parameters()):
            p.grad = q.grad.clone()
        opt = OPTS[args.opt](m.parameters())
        if name == "xcompile":
            step_x = opt.step                  # (before a scheduler wraps it: explain() looks at the step)
        if name == "eager":
            step = opt.step
        elif name == "torch.compile":
            step = torch.compile(opt.step, backend=args.backend)
        else:
            cnt = counters[name] = CompileCounterWithBackend(args.backend)
            step = xcompile.compile(opt.step, backend=cnt)
        variants[name] = step if args.scheduler == "none" else _with_scheduler(opt, step)
    t0 = {}
    for name, fn in variants.items():          # first calls: the state is made, then the compiles
        start = time.perf_counter()
        for _ in range(3):
            fn()
        t0[name] = time.perf_counter() - start
    samples: dict[str, list[float]] = {n: [] for n in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            start = time.perf_counter_ns()
            for _ in range(args.steps):
                fn()
            samples[name].append((time.perf_counter_ns() - start) / args.steps / 1e6)
    ms = {n: statistics.median(v) for n, v in samples.items()}
    n_params = sum(1 for _ in base.parameters())
    print(f"{args.opt} step over {n_params} parameters ({args.width}-wide Linear layers), "
          f"backend {args.backend}, {args.threads} thread(s), median of {args.rounds} rounds")
    for name in variants:
        print(f"  {name:14s} {ms[name]:8.3f} ms/step   first 3 calls {t0[name]:6.2f} s   "
              f"vs eager {ms['eager'] / ms[name]:5.2f}x   vs torch.compile {ms['torch.compile'] / ms[name]:5.2f}x")
    if args.scheduler != "none":
        from torch._dynamo.utils import counters as torch_counters

        from xcompile.backends.per_size import PerSize
        print(f"  with the lr changed every step: torch.compile made {torch_counters['stats']['unique_graphs']} "
              f"graphs; xcompile {counters['xcompile'].frame_count} graphs and {PerSize.backend_compiles} "
              f"per-value backend compiles")
    cnt = counters["xcompile"]
    explained = xcompile.explain(step_x)()
    other = [str(b).splitlines()[0] for b in explained.break_reasons if "graph_break()" not in str(b)]
    print(f"  xcompile: {cnt.frame_count} compiles, {explained.graph_count} graph(s) per step, "
          f"{explained.op_count} ops; breaks other than torch.optim's own: {other or 'none'}")


if __name__ == "__main__":
    main()
