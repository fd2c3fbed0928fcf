"""Startup: first-call seconds in a fresh process, cold and warm, xcompile against torch.compile.

    python benchmarks/startup.py [--models demo,bert] [--repeat 1]

For each model (benchmarks/demo.py's MLP, a zoo model from tests/models/builders.py) and each
compiler, every run is a fresh interpreter with fresh, empty cache directories
(XCOMPILE_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR temp dirs):

- cold: compile and call once, then save the artifacts (``xcompile.save_cache_artifacts()`` /
  ``torch.compiler.save_cache_artifacts()``) to a file;
- warm: another fresh interpreter with empty cache directories loads that file
  (``load_cache_artifacts``), then compiles and calls once.

Columns: ``import _dynamo`` = ``import torch._dynamo``, timed first and on its own in every child:
both compilers pay it once per process (torch.compile() imports it; xcompile's first call makes a
FakeTensorMode, whose constructor imports it) and neither can skip it, so the other columns
exclude it (a zoo model's ``transformers`` import has already paid it: ~0 there);
``compile+1st`` = ``compile(model)`` plus the first call, ``1st call`` = the first call alone,
``load`` = load_cache_artifacts. Every run checks its results against eager. Medians over
``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = textwrap.dedent('''
    import json, os, sys, time, warnings
    sys.path[:0] = [os.path.join(ROOT, "benchmarks"), ROOT]
    warnings.filterwarnings("ignore")
    import torch
    compiler, model_name, mode, art = sys.argv[1:5]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if model_name == "demo":
        from demo import Model
        model, args, kwargs = Model().eval(), (torch.randn(8, 64),), {}
    else:
        from tests.models.builders import build
        model, args, kwargs = build(model_name)
        model.eval()
    if compiler == "xcompile":
        import xcompile
        save, load = xcompile.save_cache_artifacts, xcompile.load_cache_artifacts
        compile_fn = xcompile.compile
    else:
        def save():
            got = torch.compiler.save_cache_artifacts()
            return got[0] if got else b""
        load, compile_fn = torch.compiler.load_cache_artifacts, torch.compile
    t0 = time.perf_counter()
    import torch._dynamo  # both pay it: torch.compile() imports it, xcompile's FakeTensorMode() does
    t_dynamo = time.perf_counter() - t0
    t_load = 0.0
    if mode == "warm":
        with open(art, "rb") as f:
            data = f.read()
        t0 = time.perf_counter()
        load(data)
        t_load = time.perf_counter() - t0
    with torch.no_grad():
        t0 = time.perf_counter()
        compiled = compile_fn(model)
        t1 = time.perf_counter()
        out = compiled(*args, **kwargs)
        t2 = time.perf_counter()
        ref = model(*args, **kwargs)
    flat = lambda o: [t for t in torch.utils._pytree.tree_leaves(o) if isinstance(t, torch.Tensor)]
    for a, b in zip(flat(out), flat(ref), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    extra = {}
    if mode == "cold":
        with open(art, "wb") as f:
            extra["artifact_bytes"] = f.write(save())
    if compiler == "xcompile":
        extra.update(xcompile.counters["warm"])
    print(json.dumps({"compile_first": t2 - t0, "first": t2 - t1, "load": t_load, "dynamo": t_dynamo,
                      "extra": extra}))
''').replace("ROOT", repr(ROOT))


def run_child(compiler: str, model: str, mode: str, art: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="startup-") as d:
        env = dict(os.environ, XCOMPILE_CACHE_DIR=os.path.join(d, "xc"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "inductor"), TRITON_CACHE_DIR=os.path.join(d, "triton"))
        env.pop("XCOMPILE_LOGS", None)
        p = subprocess.run([sys.executable, "-c", CHILD, compiler, model, mode, art], env=env,
                           capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"{compiler} {model} {mode} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="demo,bert")
    ap.add_argument("--compilers", default="xcompile,torch.compile")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="startup-art-") as arts:
        for model in a.models.split(","):
            for compiler in a.compilers.split(","):
                res: dict = {"cold": [], "warm": []}
                for r in range(a.repeat):
                    art = os.path.join(arts, f"{model}-{compiler}-{r}.bin")
                    for mode in ("cold", "warm"):
                        res[mode].append(run_child(compiler, model, mode, art))
                        print(f"  {model:6s} {compiler:14s} {mode}: {res[mode][-1]}", file=sys.stderr)
                rows.append((model, compiler, res))

    def med(runs, k):
        return statistics.median(x[k] for x in runs)

    print("first call in a fresh process (s), fresh cache dirs; warm = load_cache_artifacts of the cold run's "
          f"save_cache_artifacts; median of {a.repeat}; torch.set_num_threads(1), no_grad")
    print(f"{'model':8s} {'compiler':14s} {'import _dynamo':>15s} {'cold compile+1st':>17s} {'cold 1st call':>14s} "
          f"{'warm compile+1st':>17s} {'warm 1st call':>14s} {'load':>6s} {'cold/warm':>10s}")
    by = {}
    for model, compiler, res in rows:
        cc, cf = med(res["cold"], "compile_first"), med(res["cold"], "first")
        wc, wf = med(res["warm"], "compile_first"), med(res["warm"], "first")
        by[(model, compiler)] = (cc, wc)
        dyn = med(res["cold"] + res["warm"], "dynamo")
        print(f"{model:8s} {compiler:14s} {dyn:15.3f} {cc:17.3f} {cf:14.3f} {wc:17.3f} {wf:14.3f} "
              f"{med(res['warm'], 'load'):6.3f} {cc / wc:9.1f}x")
    for model in a.models.split(","):
        if (model, "xcompile") in by and (model, "torch.compile") in by:
            (xc, xw), (tc, tw) = by[(model, "xcompile")], by[(model, "torch.compile")]
            print(f"{model}: xcompile/torch.compile compile+1st: cold {xc / tc:.2f}x, warm {xw / tw:.2f}x")


if __name__ == "__main__":
    main()
