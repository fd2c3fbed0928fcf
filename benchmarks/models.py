"""Real models (transformers, diffusers; tests/models/builders.py): eager vs torch.compile vs xcompile.compile.

Each model runs in its own fresh process with empty kernel caches (TORCHINDUCTOR_CACHE_DIR and
XCOMPILE_CACHE_DIR point at new temp dirs), inference under ``torch.no_grad()``.  Per model:

- graphs / graph breaks of xcompile and torch.compile with backend "eager"
  (``xcompile.explain``, ``torch._dynamo.explain``);
- first-call seconds of ``torch.compile(model)`` and ``xcompile.compile(model)`` (both "inductor"),
  each from a reset compiler; both compilers first compile one unrelated function, so one-time
  imports and set-up are out of both numbers;
- steady-state ms per call of eager, torch.compile and xcompile.compile (both "inductor"),
  interleaved round by round (benchmarks/_timing.py), medians;
- speedups over eager, and xcompile's speed relative to torch.compile (> 1: xcompile is faster).

A compiler that fails on a model prints its error class in the row; the benchmark goes on.
Outputs are compared with eager's (MISMATCH flags a difference); a graph that xcompile's kernel
generator could not build runs eagerly with a warning, and the row counts those.  One thread by default.

    python benchmarks/models.py [--models bert,llama] [--all] [--quick] [--threads N] [--rounds R]

Default models: those flagged ``bench=True`` in the builders (a representative subset);
``--all`` runs every model.  ``--quick``: 3 rounds of shorter samples.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
_TAG = "@@models-bench@@ "


# -- the child: one model, one fresh process -------------------------------------------------

def _err(e: BaseException) -> str:
    return type(e).__name__


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0][:160] if s else ''}"


def _leaves(out):
    if isinstance(out, dict):
        for v in out.values():
            yield from _leaves(v)
    elif isinstance(out, (tuple, list)):
        for v in out:
            yield from _leaves(v)
    else:
        yield out


def _close(a, b) -> bool:
    import torch
    la, lb = list(_leaves(a)), list(_leaves(b))
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and x.shape == y.shape
                    and torch.allclose(x, y, rtol=1e-3, atol=1e-3, equal_nan=True)):
                return False
    return True


def _calls_for(fn, target_s):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < target_s / 4 or n < 3:
        fn()
        n += 1
    per = (time.perf_counter() - t0) / n
    return max(3, int(target_s / per))


def child(name: str, threads: int, rounds: int, quick: bool) -> dict:
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(threads)
    import torch._dynamo

    import xcompile
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    from tests.models.builders import build

    from _timing import per_call_us

    row: dict = {"name": name, "threads": threads}
    model, args, kwargs = build(name)
    with torch.no_grad():
        expected = model(*args, **kwargs)

        # Imports and one-time set-up of both compilers, out of the first-call numbers.
        def warm(x):
            return torch.sin(x) * 2

        for compile_ in (torch.compile, xcompile.compile):
            try:
                compile_(warm)(torch.randn(3))
            except Exception:  # noqa: BLE001  (the model's own compile will report it)
                pass
        torch._dynamo.reset()
        xcompile.reset()

        compiled = {"eager": model}
        for key, compile_ in (("torch", torch.compile), ("xcompile", xcompile.compile)):
            try:
                fn = compile_(model)             # both default to backend "inductor"
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    t0 = time.perf_counter()
                    out = fn(*args, **kwargs)
                    row[f"first_{key}"] = time.perf_counter() - t0
                # xcompile runs a graph its kernel generator cannot build eagerly, with a warning.
                eager = [str(w.message) for w in caught if "running this graph eagerly" in str(w.message)]
                if eager:
                    row[f"eager_graphs_{key}"] = len(eager)
                    row[f"why_{key}"] = eager[0][:200]
                row[f"ok_{key}"] = _close(out, expected)
                compiled[key] = fn
            except Exception as e:  # noqa: BLE001
                row[f"err_{key}"] = _err(e)
                row[f"why_{key}"] = _first_line(e)

        variants = {k: (lambda f=f: f(*args, **kwargs)) for k, f in compiled.items()}
        calls = _calls_for(variants["eager"], 0.01 if quick else 0.05)
        us = per_call_us(variants, (), calls=calls, rounds=rounds, warmup=2 if quick else 5)
        for k, v in us.items():
            row[f"ms_{k}"] = v / 1000.0

        # Graph and break counts (backend "eager"); explain resets each compiler.
        torch._dynamo.reset()
        try:
            ex = torch._dynamo.explain(model)(*args, **kwargs)
            row["graphs_torch"], row["breaks_torch"] = ex.graph_count, ex.graph_break_count
        except Exception as e:  # noqa: BLE001
            row["graphs_torch"] = _err(e)
        torch._dynamo.reset()
        try:
            ex = xcompile.explain(model)(*args, **kwargs)
            row["graphs_xcompile"], row["breaks_xcompile"] = ex.graph_count, ex.graph_break_count
            if ex.break_reasons:
                row["break_xcompile"] = str(ex.break_reasons[0]).splitlines()[0][:160]
        except Exception as e:  # noqa: BLE001
            row["graphs_xcompile"] = _err(e)
            row.setdefault("why_xcompile", _first_line(e))
    return row


# -- the parent: one subprocess per model, then the table ------------------------------------

def run_one(name: str, a) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-models-") as tmp:
        env = dict(os.environ)
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        env["XCOMPILE_CACHE_DIR"] = os.path.join(tmp, "xcompile")
        env["OMP_NUM_THREADS"] = str(a.threads)
        env["HF_HUB_OFFLINE"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--threads", str(a.threads),
               "--rounds", str(a.rounds)] + (["--quick"] if a.quick else [])
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            return {"name": name, "crash": f"timeout after {a.timeout}s"}
        wall = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith(_TAG):
            row = json.loads(line[len(_TAG):])
            row["wall"] = wall
            return row
    tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"name": name, "crash": f"exit {p.returncode}: {tail[:160]}"}


def _count(row, who):
    g = row.get(f"graphs_{who}")
    if g is None:
        return "-"
    if isinstance(g, str):
        return "error"
    return f"{g}/{row.get(f'breaks_{who}', '?')}"


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def print_table(rows, a):
    cols = (f"{'model':12s} | {'graphs/breaks':^17s} | {'first call s':^15s} | {'ms per call':^26s} | "
            f"{'speedup/eager':^17s} | {'xc vs':>6s}")
    hdr = (f"{'':12s} | {'torch':>8s} {'xcomp':>8s} | {'torch':>7s} {'xcomp':>7s} | {'eager':>8s} {'torch':>8s} "
           f"{'xcomp':>8s} | {'torch':>8s} {'xcomp':>8s} | {'torch':>6s}")
    print(cols)
    print(hdr)
    print("-" * len(hdr))
    sp_tc, sp_xc, rel = [], [], []
    notes = []
    for r in rows:
        name = r["name"]
        if "crash" in r:
            print(f"{name:12s} | the benchmark process failed: {r['crash']}")
            continue

        def first(who):
            return f"{'error':>7s}" if f"err_{who}" in r else f"{r[f'first_{who}']:7.1f}"

        def ms(who):
            v = r.get(f"ms_{who}")
            return f"{v:8.3f}" if v is not None else f"{'error':>8s}"

        def ratio(num, den):
            return f"{num / den:7.2f}x" if num and den else f"{'-':>8s}"

        e, t, x = r.get("ms_eager"), r.get("ms_torch"), r.get("ms_xcompile")
        if e and t:
            sp_tc.append(e / t)
        if e and x:
            sp_xc.append(e / x)
        if t and x:
            rel.append(t / x)
        flags = "".join(f"  MISMATCH({who})" for who in ("torch", "xcompile") if r.get(f"ok_{who}") is False)
        flags += "".join(f"  [{who}: {r[f'err_{who}']}]" for who in ("torch", "xcompile") if f"err_{who}" in r)
        flags += "".join(f"  [{who}: {r[f'eager_graphs_{who}']} graph(s) ran eagerly]" for who in ("torch", "xcompile")
                         if f"eager_graphs_{who}" in r)
        flags += "".join(f"  [{who} explain: {r[f'graphs_{who}']}]" for who in ("torch", "xcompile")
                         if isinstance(r.get(f"graphs_{who}"), str))
        print(f"{name:12s} | {_count(r, 'torch'):>8s} {_count(r, 'xcompile'):>8s} | {first('torch'):>7s} "
              f"{first('xcompile'):>7s} | {ms('eager')} {ms('torch')} {ms('xcompile')} | "
              f"{ratio(e, t)} {ratio(e, x)} | {ratio(t, x)[1:]}{flags}")
        for who in ("torch", "xcompile"):
            if f"why_{who}" in r:
                notes.append(f"{name}: {who}: {r[f'why_{who}']}")
        if r.get("break_xcompile"):
            notes.append(f"{name}: xcompile's first graph break: {r['break_xcompile']}")
    print("-" * len(hdr))
    def g(xs, w):
        return f"{_geomean(xs):{w}.2f}x" if xs else f"{'-':>{w + 1}s}"
    print(f"{'geomean':12s} | {'':17s} | {'':15s} | {'':26s} | {g(sp_tc, 7)} {g(sp_xc, 7)} | {g(rel, 5)}")
    print(f"\ngraphs/breaks: backend \"eager\" (explain).  first call: seconds, backend \"inductor\", empty kernel "
          f"caches.\nms: per call, median of {a.rounds} interleaved rounds; backend \"inductor\".  "
          f"xc vs torch: torch.compile's ms / xcompile's (> 1: xcompile is faster).")
    for n in notes:
        print("  " + n)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: the bench subset)")
    ap.add_argument("--all", action="store_true", help="every model of the builders")
    ap.add_argument("--quick", action="store_true", help="3 rounds of short samples")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=0, help="timing rounds (default 9, --quick 3)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per model process")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.rounds = a.rounds or (3 if a.quick else 9)
    if a.child:
        try:
            row = child(a.child, a.threads, a.rounds, a.quick)
        except Exception as e:  # noqa: BLE001 - reported as the row, not a crash of the table
            traceback.print_exc()
            row = {"name": a.child, "crash": _first_line(e)}
        print(_TAG + json.dumps(row), flush=True)
        return

    sys.path.insert(0, ROOT)
    from tests.models.builders import BENCH, NAMES
    names = [s.strip() for s in a.models.split(",") if s.strip()] or (list(NAMES) if a.all else list(BENCH))
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {', '.join(NAMES)}")
    import torch
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, {a.threads} thread(s), CPU, inference "
          f"(no_grad); one fresh process per model, empty kernel caches; median of {a.rounds} interleaved rounds")
    rows = []
    for n in names:
        r = run_one(n, a)
        rows.append(r)
        status = r.get("crash") or f"{r.get('wall', 0):.0f}s"
        print(f"  {n}: {status}", file=sys.stderr, flush=True)
    print()
    print_table(rows, a)


if __name__ == "__main__":
    main()
