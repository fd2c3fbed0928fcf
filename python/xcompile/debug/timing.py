"""Compile-time metrics: ``xcompile.utils.compile_times()`` (torch._dynamo.utils.compile_times's
shape) and what ``XCOMPILE_LOGS=compile_times`` prints.

Each phase of a compile records its duration under a name:

    frontend.trace        the bytecode interpreter, one frame (convert_frame)
    guards.build          lowering the guard specs into the C++ guard tree
    backend               the backend's whole compile of one graph
    aot.joint_trace       AOT: the joint forward/backward trace
    aot.partition         AOT: the min-cut partition
    kernels.<pass>        the kernel generator's passes (ensure_meta, fold, lower, fuse,
                          codegen+build: C++/Triton source and compile, plan, wrapper)
    kernels.cache_hits    (a count) compiled kernels found in the on-disk cache

and, per compiled function (its code's qualified name), the total of its frontend and backend
time. Recording is a list append; nothing is recorded on the call path of compiled code.
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from typing import Any, Iterator

METRICS: dict[str, list[float]] = defaultdict(list)     # phase -> durations (s), in order
COUNTS: dict[str, int] = defaultdict(int)               # phase -> count (cache hits)
BY_FUNCTION: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
_function: list[str] = []                                 # the function being compiled, innermost last
SINKS: list = []        # also told of each record: (phase, seconds) -> None (the debug dump, dump.py)


def record(phase: str, seconds: float) -> None:
    METRICS[phase].append(seconds)
    if _function:
        BY_FUNCTION[_function[-1]][phase.split(".", 1)[0]] += seconds
    for sink in SINKS:
        sink(phase, seconds)


def count(phase: str, n: int = 1) -> None:
    COUNTS[phase] += n


@contextlib.contextmanager
def timed(phase: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        record(phase, time.perf_counter() - t0)


@contextlib.contextmanager
def compiling(name: str) -> Iterator[None]:
    """Phases recorded inside count toward ``name`` (a function's qualified name)."""
    _function.append(name)
    try:
        yield
    finally:
        _function.pop()


def reset() -> None:
    METRICS.clear()
    COUNTS.clear()
    BY_FUNCTION.clear()


def compile_times(repr: str = "str", aggregate: bool = False) -> Any:
    """The compile-time metrics so far. ``repr="str"``: a printable table (each phase's runtimes
    in seconds, or their sum with ``aggregate=True``), then the per-function totals;
    ``repr="csv"``: ``(headers, values)`` with one column per phase."""
    if repr not in ("str", "csv"):
        raise ValueError(f"compile_times: repr must be 'str' or 'csv', got {repr!r}")

    def fmt(ts: list[float]) -> str:
        return f"{sum(ts):.4f}" if aggregate else ", ".join(f"{t:.4f}" for t in ts)

    phases = sorted(METRICS)
    if repr == "csv":
        headers = phases + sorted(COUNTS)
        values = [fmt(METRICS[p]) for p in phases] + [str(COUNTS[c]) for c in sorted(COUNTS)]
        return headers, values
    rows = [(p, fmt(METRICS[p])) for p in phases] + [(c, f"{COUNTS[c]} (count)") for c in sorted(COUNTS)]
    width = max([len("Function")] + [len(r[0]) for r in rows])
    lines = ["xcompile compilation metrics:", f"{'Function':<{width}}  Runtimes (s)",
             f"{'-' * width}  {'-' * 12}"]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    if BY_FUNCTION:
        fw = max(len("Compiled function"), *(len(f) for f in BY_FUNCTION))
        kinds = sorted({k for d in BY_FUNCTION.values() for k in d})
        lines += ["", f"{'Compiled function':<{fw}}  " + "  ".join(f"{k + ' (s)':>14}" for k in kinds),
                  f"{'-' * fw}  " + "  ".join("-" * 14 for _ in kinds)]
        for f, d in BY_FUNCTION.items():
            lines.append(f"{f:<{fw}}  " + "  ".join(f"{d.get(k, 0.0):>14.4f}" for k in kinds))
    return "\n".join(lines)


__all__ = ["compile_times", "count", "record", "reset", "timed"]
