"""Where a model's time goes under xcompile's "inductor", next to eager and torch.compile.

For each model: milliseconds per call of eager, torch.compile (torch's inductor) and
xcompile.compile (backend "inductor"), measured interleaved round by round in one process
(medians), then -- with --profile -- a per-graph breakdown of xcompile's launch plans: every
statement of each generated wrapper is timed (kernel launches, extern ATen calls, buffer
allocations, restrides and copies, the outputs' views), summed per call, and the rest of the
model's time (guards, the AOT runtime, Python between graphs) is what is left over.

    python benchmarks/profile_model.py [mixer,unet,mlp_train,deberta_v2,dit,...] [--rounds R] [--threads T]
        [--profile] [--code] [--torch-profile]

Names not defined here are the real models of tests/models/builders.py (inference).
--code prints each graph's wrapper (XCOMPILE_LOGS=output_code prints the kernels too);
--torch-profile prints torch.profiler's op table of eager and of torch.compile for comparison.
"""
from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import xcompile  # noqa: E402
import xcompile.kernels.compile as kcompile  # noqa: E402

# -- models ------------------------------------------------------------------------------------------

class MixerBlock(nn.Module):
    def __init__(self, tokens, c, tok_hidden, ch_hidden):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.tok = nn.Sequential(nn.Linear(tokens, tok_hidden), nn.GELU(), nn.Linear(tok_hidden, tokens))
        self.ch = nn.Sequential(nn.Linear(c, ch_hidden), nn.GELU(), nn.Linear(ch_hidden, c))

    def forward(self, x):
        x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.n2(x))


class Mixer(nn.Module):
    """MLP-Mixer on 32x32 images: 4x4 patches (64 tokens), 128 channels, 4 blocks."""

    def __init__(self, c=128, depth=4, patch=4, img=32, classes=10):
        super().__init__()
        tokens = (img // patch) ** 2
        self.stem = nn.Conv2d(3, c, patch, patch)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, c, 64, 4 * c) for _ in range(depth)])
        self.norm = nn.LayerNorm(c)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(1))


class ResBlock(nn.Module):
    def __init__(self, cin, cout, groups=8):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(groups, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(groups, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    """A small diffusion-style UNet: GroupNorm/SiLU residual blocks, strided downsampling,
    nearest upsampling, skip concatenations; 3x32x32 in and out."""

    def __init__(self, ch=(32, 64, 64)):
        super().__init__()
        self.inp = nn.Conv2d(3, ch[0], 3, padding=1)
        self.down = nn.ModuleList()
        self.pool = nn.ModuleList()
        c = ch[0]
        for co in ch:
            self.down.append(ResBlock(c, co))
            self.pool.append(nn.Conv2d(co, co, 3, stride=2, padding=1))
            c = co
        self.mid = ResBlock(c, c)
        self.up = nn.ModuleList()
        for co in reversed(ch):
            self.up.append(ResBlock(c + co, co))
            c = co
        self.out = nn.Sequential(nn.GroupNorm(8, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

    def forward(self, x):
        h = self.inp(x)
        skips = []
        for blk, pool in zip(self.down, self.pool):
            h = blk(h)
            skips.append(h)
            h = pool(h)
        h = self.mid(h)
        for blk in self.up:
            h = F.interpolate(h, scale_factor=2.0, mode="nearest")
            h = blk(torch.cat([h, skips.pop()], 1))
        return self.out(h)


def mlp_train_step():
    """An MLP training step: forward, cross entropy, backward, SGD with momentum, in one function."""
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, target):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        return loss
    return model, step


def vit_block():
    return nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True, norm_first=True,
                                      activation="gelu")


def _zoo(name):
    sys.path.insert(0, ROOT)
    from tests.e2e import zoo_models
    return getattr(zoo_models, name)


def zoo_train_step():
    model, _, step = _zoo("training_step")("sgd")
    return model, step


MODELS = {
    # name: (factory -> module or (module, step fn), inputs, train)
    "mixer": (lambda: Mixer(), lambda: (torch.randn(8, 3, 32, 32),), False),
    "unet": (lambda: UNet(), lambda: (torch.randn(2, 3, 32, 32),), False),
    "mlp_train": (mlp_train_step, lambda: (torch.randn(64, 256), torch.randint(0, 10, (64,))), True),
    # the tiny models of tests/e2e/zoo_models.py: per-call overhead dominates
    "mixer_zoo": (lambda: _zoo("MixerBlock")(), lambda: (torch.randn(2, 4, 8),), False),
    "resblock_zoo": (lambda: _zoo("ResBlock")(), lambda: (torch.randn(2, 8, 6, 6),), False),
    "train_zoo": (zoo_train_step, lambda: (torch.randn(5, 6), torch.randint(0, 3, (5,))), True),
    "vit_block": (vit_block, lambda: (torch.randn(8, 65, 128),), False),
    "mlp": (lambda: nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)),
            lambda: (torch.randn(64, 256),), False),
}


def _fw_bw(model):
    """One forward and backward of ``model`` (train mode) with a mean-square loss; the model
    alone is compiled, the loss and backward() run around it (gradients are reset each call)."""
    params = list(model.parameters())

    def step(x):
        for p in params:
            p.grad = None
        loss = model(x).float().square().mean()
        loss.backward()
        return loss
    return step


def build(name: str, ab: dict | None = None):
    """{variant: callable}, for eager, torch.compile and xcompile, each with its own weights;
    with ``ab`` (config knobs) also "xc_ab", xcompile compiled under those knobs.
    ``<model>:train``: forward + backward of a module in train mode (see ``_fw_bw``)."""
    if name.endswith(":train"):
        make, inputs, _ = MODELS[name[:-len(":train")]]
        variants = ("eager", "torch", "xcompile") + (("xc_ab",) if ab else ())
        torch.manual_seed(0)
        base = make().train()
        models = {v: copy.deepcopy(base) for v in variants}
        models["torch"] = torch.compile(models["torch"])
        for v in variants[2:]:
            models[v] = xcompile.compile(models[v], backend="inductor")
        runs = {v: _fw_bw(m) for v, m in models.items()}
        if ab:
            runs["xc_ab"] = _under_knobs(runs["xc_ab"], ab)
        return runs, inputs, True
    if name not in MODELS:
        return _build_real(name, ab)
    make, inputs, train = MODELS[name]
    variants = ("eager", "torch", "xcompile") + (("xc_ab",) if ab else ())
    torch.manual_seed(0)
    if train:
        runs = {}
        for v in variants:
            torch.manual_seed(0)
            _, step = make()
            runs[v] = step
    else:
        base = make().eval()
        runs = {v: copy.deepcopy(base) for v in variants}
    runs["torch"] = torch.compile(runs["torch"])
    for v in variants[2:]:
        runs[v] = xcompile.compile(runs[v], backend="inductor")
    if ab:
        runs["xc_ab"] = _under_knobs(runs["xc_ab"], ab)
    return runs, inputs, train


def _build_real(name: str, ab: dict | None = None):
    """A real model of tests/models/builders.py (bert, deberta_v2, dit, ...), inference: each
    variant calls its own copy with the builder's keyword arguments bound."""
    sys.path.insert(0, ROOT)
    from tests.models.builders import build as build_real
    built = build_real(name)
    variants = ("eager", "torch", "xcompile") + (("xc_ab",) if ab else ())
    models = {v: copy.deepcopy(built.model) for v in variants}
    models["torch"] = torch.compile(models["torch"])
    for v in variants[2:]:
        models[v] = xcompile.compile(models[v], backend="inductor")
    kwargs = built.kwargs
    runs = {v: (lambda *a, _m=m: _m(*a, **kwargs)) for v, m in models.items()}
    if ab:
        runs["xc_ab"] = _under_knobs(runs["xc_ab"], ab)
    return runs, (lambda: tuple(built.args)), False


def _under_knobs(fn, knobs: dict):
    """``fn`` whose first call (the compile) runs with ``knobs`` set on xcompile.config."""
    state = {"first": True}

    def run(*args):
        if state["first"]:
            state["first"] = False
            # set directly (not config.patch): experimental knobs the code reads with getattr too
            missing = object()
            old = {k: getattr(xcompile.config, k, missing) for k in knobs}
            for k, v in knobs.items():
                setattr(xcompile.config, k, v)
            try:
                return fn(*args)
            finally:
                for k, v in old.items():
                    if v is missing:
                        delattr(xcompile.config, k)
                    else:
                        setattr(xcompile.config, k, v)
        return fn(*args)
    return run


def parse_knobs(text: str | None) -> dict:
    out = {}
    for part in filter(None, (text or "").split(",")):
        k, v = part.split("=", 1)
        try:
            out[k] = eval(v, {})  # noqa: S307  (a command-line literal: 1, 0.5, False, "cpp")
        except Exception:  # noqa: BLE001
            out[k] = v
    return out


# -- timing ------------------------------------------------------------------------------------------

CLOCK = time.perf_counter


def time_variants(runs: dict, args, rounds: int, target_s: float = 0.02) -> tuple[dict, dict]:
    """Median ms per call of each variant, and the median over rounds of each variant's speedup
    over eager in that round (robust to load that drifts between rounds: the machine is shared).
    Rounds interleave the variants; calls per round are sized to about ``target_s`` of eager."""
    for fn in runs.values():
        for _ in range(3):
            fn(*args)
    t0 = time.perf_counter()
    for _ in range(3):
        runs["eager"](*args)
    calls = max(1, int(target_s / max((time.perf_counter() - t0) / 3, 1e-6)))
    samples = {v: [] for v in runs}
    gc.disable()
    try:
        for _ in range(rounds):
            for v, fn in runs.items():
                t0 = CLOCK()
                for _ in range(calls):
                    fn(*args)
                samples[v].append((CLOCK() - t0) / calls * 1e3)
    finally:
        gc.enable()
    ms = {v: statistics.median(s) for v, s in samples.items()}
    speedup = {v: statistics.median(e / x for e, x in zip(samples["eager"], s)) for v, s in samples.items()}
    return ms, speedup


# -- the per-statement profile of each generated wrapper -----------------------------------------------

class Recorder:
    """Collects every function ``compile_aten_graph`` returns (one per compiled graph)."""

    def __init__(self):
        self.graphs: list = []
        self._real = kcompile._compile

    def __enter__(self):
        def compiling(gm, example_inputs, bound, **kw):
            fn = self._real(gm, example_inputs, bound, **kw)
            self.graphs.append(fn)
            return fn
        kcompile._compile = compiling
        return self

    def __exit__(self, *exc):
        kcompile._compile = self._real


def _statements(src: str):
    """Top-level statements of the wrapper body: (label, category, source lines)."""
    lines = src.splitlines()
    out, label = [], "prologue"
    i = 1
    while i < len(lines):
        ln = lines[i]
        stripped = ln.strip()
        if stripped.startswith("# extern:"):
            label = "extern " + stripped[len("# extern:"):].strip()
            i += 1
            continue
        if stripped.startswith("# kernel"):
            label = stripped[2:].split(":")[0].replace(" (cpp)", "").replace(" (triton)", "")
            label += ": " + stripped.split(":", 1)[1].strip()[:60]
            i += 1
            continue
        block = [ln]
        i += 1
        while i < len(lines) and lines[i].startswith("        "):
            block.append(lines[i])
            i += 1
        s = stripped
        if s.startswith("return"):
            cat = "outputs (return, views)"
        elif s.startswith("del "):
            cat = "del"
        elif "empty_strided(" in s and "=" in s.split("empty_strided(")[0]:
            cat = "alloc"
        elif "# reuses" in s:
            cat = "alloc (reuse)"
        elif s.startswith("if ") and ".stride()" in s:
            cat = "restride check/copy"
        elif ".copy_(" in s:
            cat = "copy_ into input"
        elif label.startswith("extern"):
            cat = label
        else:
            cat = "kernel " + label
        out.append((label, cat, block))
    return out


def instrument(fn, stats: dict) -> None:
    """Swap ``fn``'s code for a copy that times each statement into ``stats[category]``."""
    src = fn.wrapper_src
    head = src.splitlines()[0]
    body = ["    _t0 = _now()"]
    for k, (label, cat, block) in enumerate(_statements(src)):
        if block[0].strip().startswith("return"):
            expr = block[0].strip()[len("return"):]
            body += [f"    _r = {expr}", f"    _acc({cat!r}, _now() - _t0)", "    return _r"]
            continue
        body += block
        body += [f"    _t1 = _now(); _acc({cat!r}, _t1 - _t0); _t0 = _t1"]
    ns = fn.__globals__
    ns["_now"] = time.perf_counter_ns

    def acc(cat, dt, _s=stats):
        _s[cat] = _s.get(cat, 0) + dt
    ns["_acc"] = acc
    code = head + "\n" + "\n".join(body) + "\n"
    tmp = {}
    exec(compile(code, "<xcompile wrapper, profiled>", "exec"), ns, tmp)  # noqa: S102  (the benchmark's own source)
    fn.__code__ = tmp["call"].__code__


def profile_graphs(graphs: list, run, args, calls: int) -> None:
    """Per graph, per category: µs per model call; the model's time outside the graphs."""
    stats = [dict() for _ in graphs]
    saved = [g.__code__ for g in graphs]
    for g, s in zip(graphs, stats):
        instrument(g, s)
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            run(*args)
        total = (time.perf_counter_ns() - t0) / calls
    finally:
        gc.enable()
        for g, code in zip(graphs, saved):
            g.__code__ = code
    inside = 0.0
    for k, (g, s) in enumerate(zip(graphs, stats)):
        per = {c: v / calls / 1e3 for c, v in s.items()}
        tot = sum(per.values())
        inside += tot
        kinds = {"kernel": 0.0, "extern": 0.0, "other": 0.0}
        for c, v in per.items():
            kinds["kernel" if c.startswith("kernel") else "extern" if c.startswith("extern") else "other"] += v
        n_k = sum(1 for kk in g.kernels)
        print(f"\n  graph {k}: {tot:8.1f} µs per call  ({n_k} kernels, {len(g.fallbacks)} extern calls; "
              f"kernels {kinds['kernel']:.1f} µs, extern {kinds['extern']:.1f} µs, other {kinds['other']:.1f} µs)")
        for c, v in sorted(per.items(), key=lambda kv: -kv[1])[:25]:
            print(f"    {v:8.1f} µs {100 * v / max(total / 1e3, 1e-9):5.1f}%  {c}")
    print(f"\n  all graphs: {inside:.1f} µs of {total / 1e3:.1f} µs per call (instrumented); "
          f"outside the graphs (guards, AOT runtime, Python, timer overhead): {total / 1e3 - inside:.1f} µs")


def torch_profile(run, args, label: str, calls: int = 20) -> None:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            run(*args)
    print(f"\n  torch.profiler, {label} ({calls} calls):")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="?", default="mixer,unet,mlp_train")
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--code", action="store_true")
    ap.add_argument("--torch-profile", action="store_true")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the thread's CPU time (time.thread_time): less noise from other "
                         "processes on a shared machine, though not from their use of the caches")
    ap.add_argument("--ab", help="knob=value,...: also time xcompile compiled with these config knobs")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    warnings.filterwarnings("ignore")
    if a.cpu_time:
        global CLOCK
        CLOCK = time.thread_time
    print(f"torch {torch.__version__}, {a.threads} thread(s); median of {a.rounds} interleaved rounds "
          f"(speedups: median of the per-round ratios to eager)" + (f"; ab: {a.ab}" if a.ab else "") +
          ("; thread CPU time" if a.cpu_time else "; wall time"))
    hdr = (f"{'model':12s} | {'eager ms':>9s} {'torch ms':>9s} {'xc ms':>9s} | "
           f"{'torch x':>7s} {'xc x':>7s} {'xc/torch':>8s}")
    print(hdr)
    print("-" * len(hdr))
    for name in a.models.split(","):
        with Recorder() as rec:
            runs, inputs, train = build(name, parse_knobs(a.ab))
            args = inputs()
            ctx = torch.enable_grad() if train else torch.no_grad()
            with ctx:
                for fn in runs.values():
                    fn(*args)
        with ctx:
            ms, sp = time_variants(runs, args, a.rounds)
        e, t, x = ms["eager"], ms["torch"], ms["xcompile"]
        print(f"{name:12s} | {e:9.3f} {t:9.3f} {x:9.3f} | {sp['torch']:6.2f}x {sp['xcompile']:6.2f}x "
              f"{sp['xcompile'] / sp['torch']:8.2f}" +
              (f" | ab {ms['xc_ab']:9.3f} ms {sp['xc_ab']:6.2f}x" if "xc_ab" in ms else ""))
        if a.code:
            for k, g in enumerate(rec.graphs):
                print(f"\n  graph {k} wrapper:\n" + g.wrapper_src)
        if a.profile:
            with ctx:
                calls = max(5, int(0.3 / (x / 1e3)))
                profile_graphs(rec.graphs, runs["xcompile"], args, calls)
        if a.torch_profile:
            with ctx:
                torch_profile(runs["eager"], args, "eager")
                torch_profile(runs["torch"], args, "torch.compile")
                torch_profile(runs["xcompile"], args, "xcompile (its C++ kernels are not listed)")
        xcompile.reset()
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
