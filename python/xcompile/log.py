"""Named log artifacts, declared once.

``XCOMPILE_LOGS=graph_breaks,recompiles,guards`` (read at import) or
``xcompile.set_logs(guards=True, ...)`` turn artifacts on; each artifact logs through
the standard ``logging`` module under ``xcompile.<artifact>`` and prints to stderr.
"""
from __future__ import annotations

import logging
import os
import sys

ARTIFACTS = {
    "graph_breaks": "each graph break: reason, explanation, hint, user code traceback",
    "recompiles": "each recompile: which guard failed",
    "guards": "the guards of each new cache entry",
    "graph_code": "the FX graph code of each captured graph",
    "output_code": "generated kernels and wrappers",
    "fallbacks": "ops the kernel backend ran as ATen calls",
    "fusion": "fusion decisions and the reason for each rejected pair",
    "aot_graphs": "the forward and backward graphs after partitioning",
    "compile_times": "time spent in each compile phase",
    "warm_cache": "warm-start artifacts: stored, reused, ignored (and why), pruned",
    "cudagraphs": "each CUDA-graph recording, and each graph that runs without replay, with the reason",
    "dynamic": "symbolic sizes: each guard a trace adds on them, with the user line, and each specialization",
}

_enabled: set[str] = set()
_handler: logging.Handler | None = None


def _logger(artifact: str) -> logging.Logger:
    return logging.getLogger(f"xcompile.{artifact}")


def _ensure_handler() -> None:
    global _handler
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[xcompile:%(name)s] %(message)s"))
        root = logging.getLogger("xcompile")
        root.addHandler(_handler)
        root.propagate = False


def set_logs(**artifacts: bool) -> None:
    """Turn artifacts on or off: ``set_logs(graph_breaks=True, guards=False)``."""
    for name, on in artifacts.items():
        if name not in ARTIFACTS:
            raise ValueError(f"unknown log artifact {name!r}; known: {', '.join(sorted(ARTIFACTS))}")
        lg = _logger(name)
        if on:
            _ensure_handler()
            _enabled.add(name)
            lg.setLevel(logging.DEBUG)
        else:
            _enabled.discard(name)
            lg.setLevel(logging.WARNING)


def enabled(artifact: str) -> bool:
    return artifact in _enabled


def log(artifact: str, msg: str, *args) -> None:
    """Log ``msg % args`` under ``artifact`` if it is on (the check is a set lookup)."""
    if artifact in _enabled:
        _logger(artifact).debug(msg, *args)


# Observers of the compiler (xcompile.explain, CompileProfiler, tests): objects with
# on_break(record) and on_graph(code, gm, guards), and optionally on_recompile(code, reason).
_OBSERVERS: list = []


def add_observer(observer) -> None:
    _OBSERVERS.append(observer)


def remove_observer(observer) -> None:
    if observer in _OBSERVERS:
        _OBSERVERS.remove(observer)


def observers() -> tuple:
    """The observers now (a snapshot: one may remove itself while being told)."""
    return tuple(_OBSERVERS)


def _from_env() -> None:
    spec = os.environ.get("XCOMPILE_LOGS", "").strip()
    if not spec:
        return
    names = [s.strip().lstrip("+") for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in ARTIFACTS]
    if unknown:
        print(f"xcompile: XCOMPILE_LOGS names unknown artifacts {unknown}; known: {sorted(ARTIFACTS)}",
              file=sys.stderr)
    set_logs(**{n: True for n in names if n in ARTIFACTS})


_from_env()
