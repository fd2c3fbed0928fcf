"""Memory across ``xcompile.reset()``: N rounds of compile + call + reset in one process.

    OMP_NUM_THREADS=1 python benchmarks/reset_memory.py --backend inductor --rounds 10000
        [--variants static,dynamic,auto,break,train] [--kernels 20] [--warmup 0.1]
        [--tracemalloc] [--points 20]

Each round makes a NEW function (a fresh code object from ``exec``), compiles it on the
backend, calls it, and calls ``xcompile.reset()``.  The variants cycle round by round:

- ``static``: one graph, static shapes;
- ``dynamic``: ``dynamic=True``, the size changes with the round;
- ``auto``: called with two sizes, so automatic dynamic recompiles it symbolic;
- ``break``: a ``print`` in the middle (a graph break: two graphs, a runner, a resume function);
- ``train``: inputs that require grad and a ``backward()`` (AOT's backward graph).

The constant in each function is one of ``--kernels`` values (0: a new value every round), so
the kernel sources (and their hashes) recur every ``--kernels`` rounds; with 0 every inductor
round builds new kernels (slow: a compiler run each).

Printed: RSS after the warm-up and every ``rounds/points`` rounds (the curve), live object
counts from ``gc`` (GraphModules, ShapeEnvs, fake modes, our generated functions, linecache
entries, ``sys.modules``, loaded kernel libraries and mapped ``.so`` files), what one
``reset()`` frees at each point (RSS and counts before/after), and with ``--tracemalloc`` the
top allocation growth between the warm-up and the end.
"""
from __future__ import annotations

import argparse
import gc
import linecache
import sys
import time
import tracemalloc
import types
import warnings
import weakref

import torch

import xcompile
from xcompile.kernels import cache as kernel_cache

VARIANTS = ("static", "dynamic", "auto", "break", "train")

_SOURCES = {
    "static": """
def f(x):
    y = (x * {c} + 1.0).sin()
    return y.cos() * {c}
""",
    "dynamic": """
def f(x):
    return (x.relu() + {c}).exp() - x.size(0)
""",
    "auto": """
def f(x):
    return (x - {c}).tanh() * 2.0
""",
    "break": """
def f(x):
    y = (x + {c}).sigmoid()
    print("", end="", file=SINK)
    return (y * {c}).cos()
""",
    "train": """
def f(x, w):
    return ((x * w + {c}).sin() * w).sum()
""",
}


class _Null:
    def write(self, s):
        return len(s)

    def flush(self):
        pass


SINK = _Null()


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def mapped_kernel_libs() -> int:
    """Distinct kernel shared objects mapped into this process (from /proc/self/maps)."""
    root = str(kernel_cache.cache_dir())
    seen = set()
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith(root) and ".so" in parts[5]:
                seen.add(parts[5].strip())
    return len(seen)


def counts() -> dict[str, int]:
    """Live objects of the kinds that a leak across reset() keeps."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    gc.collect()
    warnings.simplefilter("ignore", FutureWarning)   # isinstance on torch.distributed's deprecated names
    c = dict.fromkeys(("GraphModule", "ShapeEnv", "FakeTensorMode", "FakeTensor", "our_functions",
                       "user_functions", "functions"), 0)
    for o in gc.get_objects():
        if isinstance(o, (weakref.ProxyType, weakref.CallableProxyType)):
            continue                                    # isinstance on a dead proxy raises
        if isinstance(o, torch.fx.GraphModule):
            c["GraphModule"] += 1
        elif isinstance(o, ShapeEnv):
            c["ShapeEnv"] += 1
        elif isinstance(o, FakeTensorMode):
            c["FakeTensorMode"] += 1
        elif isinstance(o, FakeTensor):
            c["FakeTensor"] += 1
        elif isinstance(o, types.FunctionType):
            c["functions"] += 1
            fn = o.__code__.co_filename
            if fn.startswith("<xcompile"):
                c["our_functions"] += 1
            elif fn == "<reset_memory>":
                c["user_functions"] += 1
    c["gc_objects"] = len(gc.get_objects())
    c["linecache"] = len(linecache.cache)
    c["sys_modules"] = len(sys.modules)
    c["kernel_libs_loaded"] = getattr(kernel_cache, "loaded_libraries", lambda: len(kernel_cache._loaded))()
    c["kernel_libs_mapped"] = mapped_kernel_libs()
    return c


def make_function(variant: str, c: float):
    ns = {"SINK": SINK, "torch": torch}
    exec(compile(_SOURCES[variant].format(c=c), "<reset_memory>", "exec"), ns)  # noqa: S102 (our source)
    return ns["f"]


def one_round(i: int, backend: str, variants: tuple[str, ...], kernels: int) -> None:
    variant = variants[i % len(variants)]
    c = float((i // len(variants)) % kernels if kernels else i) + 0.5
    f = make_function(variant, c)
    n = 8 + i % 5
    if variant == "dynamic":
        cf = xcompile.compile(f, backend=backend, dynamic=True)
        cf(torch.randn(n))
        cf(torch.randn(n + 3))
    elif variant == "auto":
        cf = xcompile.compile(f, backend=backend)
        cf(torch.randn(n))
        cf(torch.randn(n + 1))
    elif variant == "train":
        cf = xcompile.compile(f, backend=backend)
        w = torch.randn(n, requires_grad=True)
        cf(torch.randn(n), w).backward()
    else:
        cf = xcompile.compile(f, backend=backend)
        cf(torch.randn(n))
    del cf, f


def _fmt(c: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in c.items())


def _diff(a: dict[str, int], b: dict[str, int]) -> str:
    return " ".join(f"{k}{b[k] - a[k]:+d}" for k in a if b[k] != a[k]) or "(no change)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--rounds", type=int, default=10_000)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--kernels", type=int, default=20,
                    help="distinct constants (kernel sources recur after this many rounds per variant); 0: all new")
    ap.add_argument("--warmup", type=float, default=0.1, help="share of the rounds that is warm-up")
    ap.add_argument("--points", type=int, default=20, help="how many points on the curve")
    ap.add_argument("--tracemalloc", action="store_true", help="top allocation growth after the warm-up")
    a = ap.parse_args(argv)
    variants = tuple(a.variants.split(","))
    torch.manual_seed(0)
    warm = max(1, int(a.rounds * a.warmup))
    step = max(1, a.rounds // a.points)
    print(f"backend={a.backend} rounds={a.rounds} variants={','.join(variants)} kernels={a.kernels} "
          f"warm-up={warm} torch={torch.__version__}", flush=True)
    print(f"start: rss={rss_mb():.1f}MB", flush=True)
    t0 = time.time()
    base_rss = base_counts = snap0 = None
    for i in range(a.rounds):
        one_round(i, a.backend, variants, a.kernels)
        last = i + 1 == a.rounds
        point = (i + 1) == warm or ((i + 1) > warm and ((i + 1 - warm) % step == 0 or last))
        if point:                                   # what this reset frees, then the curve
            gc.collect()
            before_rss, before = rss_mb(), counts()
        xcompile.reset()
        if point:
            after_rss, after = rss_mb(), counts()
            if base_rss is None:
                base_rss, base_counts = after_rss, after
                if a.tracemalloc:
                    tracemalloc.start(8)
                    snap0 = tracemalloc.take_snapshot()
            per100 = (after_rss - base_rss) / max(1, i + 1 - warm) * 100
            print(f"round {i + 1:6d} {time.time() - t0:7.0f}s rss={after_rss:8.1f}MB "
                  f"(+{after_rss - base_rss:6.1f} since warm-up, {per100:+.2f}MB/100 rounds)  "
                  f"reset freed {before_rss - after_rss:+.1f}MB [{_diff(before, after)}]", flush=True)
            print(f"    live: {_fmt(after)}", flush=True)
    assert base_counts is not None
    print(f"growth after warm-up: rss {rss_mb() - base_rss:+.1f}MB over {a.rounds - warm} rounds; "
          f"counts {_diff(base_counts, counts())}", flush=True)
    if snap0 is not None:
        top = tracemalloc.take_snapshot().compare_to(snap0, "traceback")
        print("tracemalloc top growth since the warm-up:")
        for s in top[:12]:
            print(f"  {s.size_diff / 1024:+9.1f} KiB {s.count_diff:+7d} blocks")
            for line in s.traceback.format()[-6:]:
                print("      " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
