"""What ``reset()`` releases besides the compiled entries: caches that would keep old compiles
alive (ground floor; no xcompile imports).

- Our analyses cached per code object (``lru_cache``s keyed by code: its exception table,
  resume facts, global names): bounded, but each held its code objects (their constants, their
  C++ cache records) across ``reset()`` until thousands of other codes pushed them out. A module
  registers its cache with ``@clear_on_reset``.
- torch's ShapeEnv method caches (``_maybe_evaluate_static``, ``simplify``, ``replace``, ...):
  class-level, unbounded, keyed by ``self``; torch clears one only when a ShapeEnv of another
  version calls it, so they kept ShapeEnvs alive. Emptied when a trace makes a ShapeEnv
  (``release_shape_envs``, so at most the last one is held) and by ``reset()``.
- torch's FakeTensorMode dispatch cache (class-level, unbounded: one entry per op, dtype, shape
  and scalar arguments met).
- FX's generated sources: every GraphModule's ``forward`` source stays in ``linecache`` (with a
  copy of its globals) and in FX's loader forever. Entries whose ``forward`` is gone are dropped,
  at most once per ``_SWEEP_EVERY`` new entries (the sweep walks the gc's objects).
"""
from __future__ import annotations

import gc
import linecache
import types
from typing import Callable

from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.graph_module import _loader as _fx_loader

RESET_CLEARS: list[Callable[[], None]] = []
_FX_PREFIX = "<eval_with_key>"
_SWEEP_EVERY = 256
_swept_at = 0


def clear_on_reset(cached: Callable) -> Callable:
    """Register an ``lru_cache`` wrapper to be emptied by ``reset()``; returns it (a decorator)."""
    RESET_CLEARS.append(cached.cache_clear)  # type: ignore[attr-defined]
    return cached


def release_shape_envs() -> None:
    """Empty ShapeEnv's class-level method caches (they hold every ShapeEnv that called them)."""
    for attr in vars(ShapeEnv).values():
        clear_cache = getattr(attr, "cache_clear", None)
        if clear_cache is not None:
            clear_cache()


def sweep_fx_sources(force: bool = False) -> int:
    """Drop FX's cached sources (linecache, its loader) of GraphModules no longer alive; how many."""
    global _swept_at
    cache = _fx_loader.eval_cache
    if not force and len(cache) < _swept_at + _SWEEP_EVERY:
        return 0
    live = {o.__code__.co_filename for o in gc.get_objects()      # type(): a dead weakproxy raises
            if type(o) is types.FunctionType and o.__code__.co_filename.startswith(_FX_PREFIX)}
    dead = [k for k in cache if k.startswith(_FX_PREFIX) and k not in live]
    for k in dead:
        cache.pop(k, None)
        linecache.cache.pop(k, None)
    for k in [k for k in linecache.cache if k.startswith(_FX_PREFIX) and k not in live and k not in cache]:
        linecache.cache.pop(k, None)
    _swept_at = len(cache)
    return len(dead)


def release_all() -> None:
    for clear in RESET_CLEARS:
        clear()
    release_shape_envs()
    FakeTensorMode.cache_clear()
    sweep_fx_sources()
