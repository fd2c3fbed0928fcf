"""Interleaved timing: every variant of a row is measured in the same rounds, in one process."""
from __future__ import annotations

import gc
import statistics
import time


def per_call_us(variants: dict, args, *, calls: int = 2000, rounds: int = 15, warmup: int = 50) -> dict:
    """Median over rounds of the mean µs per call, for each variant, rounds interleaved."""
    for fn in variants.values():
        for _ in range(warmup):
            fn(*args)
    samples = {name: [] for name in variants}
    gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in variants.items():
                t0 = time.perf_counter_ns()
                for _ in range(calls):
                    fn(*args)
                samples[name].append((time.perf_counter_ns() - t0) / calls / 1000.0)
    finally:
        gc.enable()
    return {name: statistics.median(v) for name, v in samples.items()}
