"""xcompile.export against torch._dynamo.export, in one run.

1. The conformance tables (tests/conformance/): how many programs each exports to one graph
   (xcompile's checked against eager on fresh inputs), and xcompile's failures by reason.
2. The model zoo (tests/models/builders.py): export seconds of each model (eval, its first
   inputs), xcompile and torch._dynamo.export (Python-level graphs), each after its compiler's
   reset, with the exported graph's output compared to eager's.

    python benchmarks/export.py [--tables-only] [--models bert,gpt2] [--all]
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time
import warnings

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import xcompile  # noqa: E402

VERBOSE = "-v" in sys.argv


def _reason(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    first = re.sub(r"^export: \S+ ", "export: f ", first.removeprefix("Graph Break Reason: "))
    first = re.sub(r" \(.*?\)", "", first)           # (the source it names)
    return f"{type(e).__name__}: {first[:90]}"


def _close(a, b) -> bool:
    try:
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, equal_nan=True)
        return True
    except Exception:  # noqa: BLE001 (a benchmark row records any failure)
        return False


def tables() -> None:
    from tests.conformance.cases import ALL_CASES
    from tests.conformance.harness import _seeded, assert_same, materialize

    ours = theirs = checked = 0
    reasons: collections.Counter = collections.Counter()
    for case in ALL_CASES:
        with _seeded(1234):
            prog = case.build()
        with _seeded(7):
            args, kwargs = materialize(case.args), materialize(case.kwargs)
        with _seeded(1234):
            ref = case.build()
        try:
            xcompile.reset()
            gm, _ = xcompile.export(prog, *args, **kwargs)
            ours += 1
            with _seeded(8):
                a1, k1 = materialize(case.args), materialize(case.kwargs)
            with _seeded(8):
                a2, k2 = materialize(case.args), materialize(case.kwargs)
            try:
                assert_same(gm(*a1, **k1), ref(*a2, **k2), rtol=case.rtol, atol=case.atol,
                            actual_inputs=(a1, k1), expected_inputs=(a2, k2))
                assert_same((a1, k1), (a2, k2), path="inputs after the call", rtol=case.rtol, atol=case.atol)
                checked += 1
            except AssertionError as e:
                if VERBOSE:
                    print("  differs from eager:", case.name, str(e)[:150])
        except Exception as e:  # noqa: BLE001 (a benchmark row records any failure)
            reasons[_reason(e)] += 1
        with _seeded(1234):
            prog = case.build()
        try:
            torch._dynamo.reset()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch._dynamo.export(prog, tracing_mode="real")(*args, **kwargs)
            theirs += 1
        except Exception:  # noqa: BLE001 (a benchmark row records any failure)
            pass
    n = len(ALL_CASES)
    print(f"conformance programs: {n}")
    print(f"  exported to one graph: xcompile {ours} (equal to eager on fresh inputs: {checked}), "
          f"torch._dynamo.export {theirs}")
    print("  xcompile's failures by reason:")
    for r, k in reasons.most_common(25):
        print(f"    {k:4d}  {r}")


def zoo(names: list[str]) -> None:
    from tests.models.builders import build

    print(f"{'model':14s} {'xcompile s':>11s} {'torch s':>9s} {'ratio':>6s}  ok")
    for name in names:
        b = build(name)
        with torch.no_grad():
            want = b.model(*b.args, **b.kwargs)
            row = [name]
            times = []
            ok = "?"
            for which in ("xcompile", "torch"):
                try:
                    if which == "xcompile":
                        xcompile.reset()
                        t0 = time.perf_counter()
                        gm, _ = xcompile.export(b.model, *b.args, **b.kwargs)
                        times.append(time.perf_counter() - t0)
                        got = gm(*b.args, **b.kwargs)
                        ok = "ok" if _close(_tensors(got), _tensors(want)) else "MISMATCH"
                    else:
                        torch._dynamo.reset()
                        t0 = time.perf_counter()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            torch._dynamo.export(b.model, tracing_mode="real")(*b.args, **b.kwargs)
                        times.append(time.perf_counter() - t0)
                except Exception as e:  # noqa: BLE001 (a benchmark row records any failure)
                    times.append(float("nan"))
                    if which == "xcompile":
                        ok = _reason(e)[:60]
        ratio = times[1] / times[0] if times[0] == times[0] and times[1] == times[1] else float("nan")
        row += [f"{times[0]:11.2f}", f"{times[1]:9.2f}", f"{ratio:6.2f}", ok]
        print(f"{row[0]:14s} {row[1]} {row[2]} {row[3]}  {row[4]}", flush=True)


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if hasattr(x, "to_tuple"):
        x = x.to_tuple()
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        return [t for i in x for t in _tensors(i)]
    return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables-only", action="store_true")
    ap.add_argument("-v", action="store_true", help="name the programs whose export differs from eager")
    ap.add_argument("--models", default=None, help="comma-separated model names")
    ap.add_argument("--all", action="store_true", help="every model of the builders")
    a = ap.parse_args()
    torch.set_num_threads(1)
    tables()
    if a.tables_only:
        return
    from tests.models.builders import BENCH, NAMES
    names = a.models.split(",") if a.models else list(NAMES if a.all else BENCH)
    zoo(names)


if __name__ == "__main__":
    main()
