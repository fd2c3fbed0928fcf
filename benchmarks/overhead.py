"""Per-call overhead: eager vs torch.compile(backend="eager") vs xcompile.compile(backend="eager").

Single thread, one process, variants interleaved round by round.  For each row it prints the
µs per call of each variant and  (xcompile - eager) / (torch.compile - eager):  the share of
torch.compile's overhead that xcompile still pays.  Target: <= 0.1 on every row.

    python benchmarks/overhead.py [--calls N] [--rounds R] [--only SUBSTR]
    python benchmarks/overhead.py --instructions [--calls N] [--only SUBSTR]

A second table gives each compiler's overhead over its graph with the graph's cost taken out:
both compile each row with a stub backend whose "graph" returns the outputs it computed once, and
the column is µs per call of the compiled function minus µs per call of its stub (min over the
interleaved rounds; rows with graph breaks print "-").  The first table's "- graph" columns
subtract two large numbers for the deep-module rows and are mostly noise there; these are not.

--instructions: instructions per call of the cache-hit path, counted by valgrind's callgrind
(no timing noise): each row is compiled with a stub backend whose "graph" returns the outputs it
computed once, and the count of calling the compiled function minus the count of calling the
stub directly is what xcompile adds per call (rows with graph breaks are left out).
--all-tables counts the module rows as they were before MODULE_TREE left the state_dict hook
tables and idle forward-hook side tables unwatched.  Skipped, with a message, where
valgrind (or a C compiler for the small client-request helper) is missing.
"""
from __future__ import annotations

import argparse
import contextlib
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


class PreNormBlock(torch.nn.Module):
    """Pre-norm transformer block: attention (2 heads, causal) and a GELU MLP, each scaled by a
    learned per-channel gate: 14 parameters."""

    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.g1, self.g2 = torch.nn.Parameter(torch.ones(d)), torch.nn.Parameter(torch.ones(d))
        self.heads = 2

    def forward(self, x):
        B, T, C = x.shape
        h = C // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, h).transpose(1, 2) for t in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.g1 * self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.g2 * self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class PreNormTransformer(torch.nn.Module):
    """``n`` pre-norm blocks at width 16 and a final LayerNorm: 14 n + 2 parameters (338 at 24
    layers, 1122 at 80)."""

    def __init__(self, n, d=16):
        super().__init__()
        self.blocks = torch.nn.ModuleList(PreNormBlock(d) for _ in range(n))
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.ln(x)


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
    yield "24-layer pre-norm, 338 params", PreNormTransformer(24), (torch.randn(1, 4, 16),), torch.no_grad
    yield "80-layer pre-norm, 1122 params", PreNormTransformer(80), (torch.randn(1, 4, 16),), torch.no_grad


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


_ROUND_BUDGET_US = 200_000


def _row_calls(fn, args, most):
    """Calls per round for a row without --calls: ``most``, or fewer where eager is slow (about
    _ROUND_BUDGET_US of eager calls; at least 50), so the deep rows take seconds, not minutes."""
    import time
    for _ in range(3):
        fn(*args)
    t0 = time.perf_counter_ns()
    for _ in range(5):
        fn(*args)
    us = (time.perf_counter_ns() - t0) / 5 / 1000.0
    return max(50, min(most, int(_ROUND_BUDGET_US / max(us, 1e-3))))


# -- overhead over a stub graph (timing) ------------------------------------------------------------

def _stub_compiled(compile_fn, fn, args, ctx):
    """``fn`` compiled by ``compile_fn`` with a stub backend and called a few times (in ``ctx``):
    (compiled, its stub), or None where it compiled more or fewer than one graph."""
    stubs = []

    def backend(gm, example_inputs):
        stubs.append(_stub_backend(gm, example_inputs))
        return stubs[-1]
    compiled = compile_fn(fn, backend=backend)
    with (ctx() if ctx is not None else contextlib.nullcontext()):
        for _ in range(20):
            compiled(*args)
    return (compiled, stubs[0]) if len(stubs) == 1 else None


def _min_per_call_us(variants: dict, args, *, calls: int, rounds: int, warmup: int = 50) -> dict:
    """Min over rounds of the mean µs per call, for each variant, rounds interleaved (the least
    disturbed round: what is subtracted here is small, so the spread matters more than bias)."""
    import gc
    import time
    for f in variants.values():
        for _ in range(warmup):
            f(*args)
    best = {name: float("inf") for name in variants}
    gc.disable()
    try:
        for _ in range(rounds):
            for name, f in variants.items():
                t0 = time.perf_counter_ns()
                for _ in range(calls):
                    f(*args)
                best[name] = min(best[name], (time.perf_counter_ns() - t0) / calls / 1000.0)
    finally:
        gc.enable()
    return best


def stub_overhead(fn, args, ctx, *, calls: int, rounds: int):
    """{"xcompile": (call µs, stub µs) or None, "torch": ...}: each compiler's call of ``fn``
    compiled with a stub backend, and of that stub directly (None: graph breaks)."""
    import torch._dynamo
    xcompile.reset()
    torch._dynamo.reset()
    compiled = {"xcompile": _stub_compiled(xcompile.compile, fn, args, ctx),
                "torch": _stub_compiled(torch.compile, fn, args, ctx)}
    variants = {}
    for name, pair in compiled.items():
        if pair is not None:
            variants[name], variants[name + ":stub"] = pair
    with (ctx() if ctx is not None else contextlib.nullcontext()):
        us = _min_per_call_us(variants, args, calls=calls, rounds=rounds) if variants else {}
    xcompile.reset()
    torch._dynamo.reset()
    return {name: (us[name], us[name + ":stub"]) if name in us else None for name in compiled}


# -- instruction counts (callgrind) ----------------------------------------------------------------

_HELPER_C = r"""
#include <valgrind/callgrind.h>
void xc_cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_TOGGLE_COLLECT; }
void xc_cg_stop(const char* name) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(name); }
int xc_cg_running(void) { return RUNNING_ON_VALGRIND; }
"""


def _build_helper(workdir):
    """The client-request helper (callgrind.h's macros are inline asm, so a tiny shared object):
    its path, or None with the reason printed."""
    import shutil
    import subprocess
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("--instructions: no C compiler (cc/gcc) to build the callgrind helper; skipped")
        return None
    src, so = os.path.join(workdir, "cg_helper.c"), os.path.join(workdir, "cg_helper.so")
    with open(src, "w") as f:
        f.write(_HELPER_C)
    r = subprocess.run([cc, "-O1", "-shared", "-fPIC", src, "-o", so], capture_output=True, text=True)
    if r.returncode != 0:
        print("--instructions: cannot build the callgrind helper (valgrind headers missing?); skipped\n"
              + r.stderr.strip()[:500])
        return None
    return so


def _stub_backend(gm, example_inputs):
    """The graph computed once; every call returns those outputs (the graph's cost drops out)."""
    out = tuple(gm.forward(*example_inputs))

    def stub(*args):
        return out
    return stub


def _instructions_child(a):
    """Runs under callgrind: per row, N calls of the compiled module, then N of its stub."""
    import ctypes
    helper = ctypes.CDLL(os.environ["XC_CG_HELPER"])
    if not helper.xc_cg_running():
        raise SystemExit("--instructions-child runs under valgrind only")
    if a.all_tables:
        from xcompile.frontend.side_effects import SideEffects
        SideEffects.reads_module_tables = lambda self: True     # type: ignore[method-assign]
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    for k, (name, fn, args, ctx) in enumerate(rows()):
        if a.only and a.only not in name:
            continue
        stubs = []

        def backend(gm, example_inputs, stubs=stubs):
            stubs.append(_stub_backend(gm, example_inputs))
            return stubs[-1]
        xc = xcompile.compile(fn, backend=backend)
        ctx_ = ctx() if ctx is not None else contextlib.nullcontext()
        with ctx_:
            for _ in range(20):
                xc(*args)
            if len(stubs) != 1:                      # graph breaks: nothing comparable
                continue
            stub = stubs[0]
            for label, f in (("xcompile", xc), ("stub", stub), ("empty", None)):
                helper.xc_cg_start()
                if f is None:
                    for _ in range(a.calls):
                        pass
                else:
                    for _ in range(a.calls):
                        f(*args)
                helper.xc_cg_stop(f"row{k}:{label}".encode())
        xcompile.reset()


def _callgrind_totals(outdir):
    """{dump description: total instructions} of every callgrind dump in ``outdir``."""
    totals = {}
    for fname in os.listdir(outdir):
        desc = total = None
        with open(os.path.join(outdir, fname)) as f:
            for line in f:
                if line.startswith("desc: Trigger: Client Request: "):
                    desc = line.split("Client Request: ", 1)[1].strip()
                elif line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
        if desc is not None and total is not None:
            totals[desc] = total
    return totals


def instructions(a) -> int:
    import shutil
    import subprocess
    import tempfile
    if shutil.which("valgrind") is None:
        print("--instructions: valgrind is not installed; skipped (apt-get install valgrind)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        so = _build_helper(tmp)
        if so is None:
            return 0
        outdir = os.path.join(tmp, "out")
        os.mkdir(outdir)
        cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
               f"--callgrind-out-file={outdir}/cg.%p", sys.executable, os.path.abspath(__file__),
               "--instructions-child", "--calls", str(a.calls)] + (["--only", a.only] if a.only else []) \
            + (["--all-tables"] if a.all_tables else [])
        print("running under callgrind (minutes: torch's import is interpreted instruction by instruction)...")
        r = subprocess.run(cmd, env={**os.environ, "XC_CG_HELPER": so}, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-3000:])
            raise SystemExit(f"callgrind run failed ({r.returncode})")
        totals = _callgrind_totals(outdir)
    print(f"instructions per call on the cache-hit path ({a.calls} calls each; graph = a stub that returns "
          f"its outputs, so only the compiler's own work is counted)")
    hdr = f"{'row':30s} {'xcompile':>10s} {'stub':>10s} {'overhead':>10s}"
    print(hdr)
    print("-" * len(hdr))
    for k, (name, _fn, _args, _ctx) in enumerate(rows()):
        xc, stub, empty = (totals.get(f"row{k}:{v}") for v in ("xcompile", "stub", "empty"))
        if xc is None or stub is None or empty is None:
            continue
        per = [(t - empty) / a.calls for t in (xc, stub)]
        print(f"{name:30s} {per[0]:10.0f} {per[1]:10.0f} {per[0] - per[1]:10.0f}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default=None, help="rows whose name contains this")
    ap.add_argument("--instructions", action="store_true", help="callgrind instruction counts per call")
    ap.add_argument("--all-tables", action="store_true",
                    help="--instructions with MODULE_TREE watching every module table (as before lazy tables)")
    ap.add_argument("--instructions-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.instructions or a.instructions_child:
        a.calls = a.calls or 200
        return _instructions_child(a) if a.instructions_child else instructions(a)
    fixed_calls = a.calls
    a.calls = a.calls or 2000
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, 1 thread; "
          f"median of {a.rounds} interleaved rounds x "
          + (f"{a.calls} calls" if fixed_calls else
             f"up to {a.calls} calls (slow rows: about {_ROUND_BUDGET_US // 1000} ms of eager calls per round)"))
    hdr = (f"{'row':30s} {'eager':>8s} {'graph':>8s} {'torch.c':>8s} {'xcomp':>8s} | {'xc-eager':>8s} "
           f"{'tc-eager':>8s} {'ratio':>6s} | {'xc-graph':>8s} {'tc-graph':>8s} {'ratio':>6s}")
    print(hdr)
    print("-" * len(hdr))
    worst = 0.0
    stub_rows = []
    for name, fn, args, ctx in rows():
        if a.only and a.only not in name:
            continue
        tc = torch.compile(fn, backend="eager")
        xc = xcompile.compile(fn, backend="eager")
        graph = _captured_graph(fn, args, ctx)
        variants = {"eager": fn, "graph": graph, "torch": tc, "xcompile": xc}
        with (ctx() if ctx is not None else contextlib.nullcontext()):
            calls = fixed_calls or _row_calls(fn, args, a.calls)
            us = per_call_us(variants, args, calls=calls, rounds=a.rounds)
        for v in ("torch", "xcompile"):  # same answer as eager
            torch.testing.assert_close(variants[v](*args), fn(*args))
        xo, to = us["xcompile"] - us["eager"], us["torch"] - us["eager"]
        ratio = xo / to if to > 0 else float("nan")
        xg, tg = us["xcompile"] - us["graph"], us["torch"] - us["graph"]
        ratio_g = xg / tg if tg > 0 else float("nan")
        worst = max(worst, ratio if to > 0 else ratio_g)
        print(f"{name:30s} {us['eager']:8.2f} {us['graph']:8.2f} {us['torch']:8.2f} {us['xcompile']:8.2f} | "
              f"{xo:8.2f} {to:8.2f} {ratio:6.3f} | {xg:8.2f} {tg:8.2f} {ratio_g:6.3f}")
        stub_rows.append((name, stub_overhead(fn, args, ctx, calls=a.calls, rounds=a.rounds)))
    print("\nus per call. graph = the captured FX graph called directly (the floor for both compilers).")
    print("ratio = xcompile's overhead / torch.compile's overhead, over eager and over the graph it runs;")
    print("rows where a compiler beats eager (module calls skip nn.Module.__call__) use the graph ratio.")
    print("For the deep-module rows the graph columns subtract two large, noisy times: the stub table below")
    print("measures the same overhead without the graph's cost.")
    print(f"worst ratio: {worst:.3f}  (target <= 0.1)")

    print(f"\noverhead over the graph, measured with stub backends: min of {a.rounds} interleaved rounds "
          f"x {a.calls} calls")
    hdr = (f"{'row':30s} {'xcomp':>8s} {'xc stub':>8s} {'torch.c':>8s} {'tc stub':>8s} | {'xc ovh':>8s} "
           f"{'tc ovh':>8s} {'ratio':>6s}")
    print(hdr)
    print("-" * len(hdr))
    worst_stub = 0.0
    for name, res in stub_rows:
        cells = []
        for v in ("xcompile", "torch"):
            cells += [f"{res[v][0]:8.2f}", f"{res[v][1]:8.2f}"] if res[v] else [f"{'-':>8s}"] * 2
        ovh = {v: res[v][0] - res[v][1] if res[v] else None for v in res}
        ratio_s = ovh["xcompile"] / ovh["torch"] if None not in ovh.values() and ovh["torch"] > 0 else None
        if ratio_s is not None:
            worst_stub = max(worst_stub, ratio_s)
        print(f"{name:30s} {' '.join(cells[:2])} {' '.join(cells[2:])} | "
              + " ".join(f"{ovh[v]:8.2f}" if ovh[v] is not None else f"{'-':>8s}" for v in ("xcompile", "torch"))
              + (f" {ratio_s:6.3f}" if ratio_s is not None else f" {'-':>6s}"))
    print("\nus per call. Each compiler compiles the row with a stub backend: its \"graph\" returns the outputs")
    print("it computed once, so the graph's own cost is gone. xcomp / torch.c = the compiled function called;")
    print("xc stub / tc stub = that compiler's stub called directly with the same arguments;")
    print("xc ovh / tc ovh = compiled minus stub: what each compiler adds per call (guards, argument handling,")
    print("the call into the graph); ratio = xc ovh / tc ovh.  \"-\": graph breaks (more than one graph).")
    print(f"worst stub ratio: {worst_stub:.3f}")


if __name__ == "__main__":
    main()
