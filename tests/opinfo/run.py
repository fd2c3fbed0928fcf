"""Run the OpInfo database through one xcompile backend and dtype; print each failing op and a summary.

    python tests/opinfo/run.py --backend inductor --dtype float32 [--grad] [--ops a,b]
        [--max-samples N] [--max-seconds S] [--no-inplace] [--shard i/n] [-v]

Backends: eager, aot_eager, inductor, inductor-dynamic (inductor with dynamic=True).
The summary line counts ops agreeing with eager out of the ops run (an op agrees when every
sample does); ops run partly or wholly without a kernel (fallbacks, frames without a graph) are
counted beside it, since they agree for the wrong reason.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="inductor")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--grad", action="store_true", help="also gradients (forward samples that require grad)")
    p.add_argument("--ops", default="", help="comma-separated op names (default: the whole database)")
    p.add_argument("--max-samples", type=int, default=None)
    p.add_argument("--max-seconds", type=float, default=None, help="stop sampling an op after this long")
    p.add_argument("--no-inplace", action="store_true")
    p.add_argument("--shard", default="", help="i/n: every n-th op from the i-th (0-based), for parallel runs")
    p.add_argument("-v", "--verbose", action="store_true", help="every op's line, not only the failing ones")
    a = p.parse_args(argv)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from tests.opinfo import harness
    logging.getLogger("torch").setLevel(logging.CRITICAL)
    dtype = harness.DTYPES[a.dtype]
    ops = harness.select(harness.op_db(), [n for n in a.ops.split(",") if n])
    if a.shard:
        i, n = (int(v) for v in a.shard.split("/"))
        ops = ops[i::n]
    agree = run = failing = unsupported = 0
    fallback_ops, no_graph_ops = [], []
    start = time.perf_counter()
    for k, op in enumerate(ops):
        print(f"[{k + 1}/{len(ops)}] {harness.full_name(op)}", file=sys.stderr, flush=True)
        o = harness.run_op(op, a.backend, dtype, grad=a.grad, inplace=not a.no_inplace,
                           max_samples=a.max_samples, max_seconds=a.max_seconds)
        if o.note:
            unsupported += 1
            if a.verbose:
                print(f"-    {o.name}: {o.note}", flush=True)
            continue
        run += 1
        agree += o.ok
        failing += not o.ok
        if o.fallbacks:
            fallback_ops.append(o.name)
        if o.no_graph:
            no_graph_ops.append(o.name)
        extra = (f" [fallbacks {len(o.fallbacks)}: {o.fallbacks[0][:160]}]" if o.fallbacks else "") + \
                (f" [no graph {o.no_graph}]" if o.no_graph else "") + (f" [breaks {o.breaks}]" if o.breaks else "")
        if not o.ok:
            print(f"FAIL {o.name} ({o.samples} samples, {o.seconds:.1f}s){extra}", flush=True)
            for f in o.failures[:3]:
                print(f"       {f}", flush=True)
        elif a.verbose or extra:
            print(f"ok   {o.name} ({o.samples} samples, {o.seconds:.1f}s){extra}", flush=True)
    kind = "forward+grad" if a.grad else "forward"
    print(f"SUMMARY {a.backend} {a.dtype} {kind}: {agree}/{run} ops agree, {failing} failing, "
          f"{len(fallback_ops)} with fallbacks, {len(no_graph_ops)} without a graph for some sample, "
          f"{unsupported} not run (dtype unsupported or skipped); {time.perf_counter() - start:.0f}s", flush=True)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
