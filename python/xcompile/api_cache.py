"""``xcompile.save_cache_artifacts()`` / ``load_cache_artifacts(data)``: warm start across processes
(torch.compiler's names and contract, our own format; the work is in warm_artifacts.py and warm_cache.py, loaded on
first use so that ``import xcompile`` stays cheap)."""
from __future__ import annotations

from .warmup import import_guarded


def save_cache_artifacts() -> bytes:
    """The compiled artifacts of this process (warm-start entries and the kernels they load) as
    bytes. In a fresh process, ``load_cache_artifacts(data)`` before the first call makes that
    call skip the backend's work for every graph that comes out the same."""
    return import_guarded("xcompile.warm_artifacts").save_cache_artifacts()


def load_cache_artifacts(data: bytes) -> dict | None:
    """Install ``save_cache_artifacts()``'s bytes into ``config.cache_dir``. Returns
    ``{"entries": n, "kernels": m}``, or None where the bytes are damaged or were made by another
    torch / xcompile / Python or on another machine (logged under ``xcompile.warm_cache``; the
    graphs then compile as usual)."""
    return import_guarded("xcompile.warm_artifacts").load_cache_artifacts(data)


__all__ = ["load_cache_artifacts", "save_cache_artifacts"]
