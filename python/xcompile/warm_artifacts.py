"""Warm-start artifacts between processes: ``save_cache_artifacts()`` bundles the entries this
process stored or used (warm_cache.py) with the shared objects of their kernels into bytes;
``load_cache_artifacts(data)`` checks them (magic, checksum, environment) and writes them into
the cache directory. Damaged or foreign bytes are ignored with a log line (``xcompile.warm_cache``),
and the graphs then compile as usual. The checks guard against stale and damaged bytes, not
against malice: the bundle carries shared objects that get loaded, so load only artifacts you made.
"""
from __future__ import annotations

import pickle

from . import cache_dir, log
from .kernels.cache import cache_dir as kernels_root
from .warm_cache import (
    _ENTRY_MAGIC,
    FORMAT,
    MAGIC,
    _entry_path,
    _ignored,
    _loads,
    _seal,
    _session,
    _unseal,
    _versions,
    _write_atomic,
    environment,
)


def save_cache_artifacts() -> bytes:
    """The warm-start entries this process stored or used, with the kernels they load, as bytes
    for ``load_cache_artifacts`` in another process (torch.compiler.save_cache_artifacts's
    contract, our own format)."""
    entries: dict[str, bytes] = {}
    shared: dict[str, bytes] = {}
    for key, path in list(_session.items()):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        payload = _unseal(data, _ENTRY_MAGIC)
        if payload is None:
            continue
        entry = _loads(payload)
        stems = {d[1][0] for _, d in entry["globals"] if d[0] == "kernel"}
        stems |= {k[0][0] for k in entry["kernels"]} | {k[1][0] for k in entry["kernels"] if k[1]}
        try:
            for stem in stems:
                if stem not in shared:
                    shared[stem] = (kernels_root() / "cpp" / f"{stem}.so").read_bytes()
        except OSError:
            continue
        entries[key] = data
    bundle = {"format": FORMAT, "env": environment(), "versions": _versions(), "entries": entries,
              "shared": shared}
    return _seal(pickle.dumps(bundle, protocol=4), MAGIC)


def load_cache_artifacts(data: bytes) -> dict | None:
    """Install the entries of ``save_cache_artifacts()``'s bytes into the cache directory.
    Returns ``{"entries": n, "kernels": m}``, or None when the bytes are ignored (damaged, or
    made by another torch/xcompile/Python or on another machine): that is logged, and the
    graphs are then compiled as usual."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_cache_artifacts takes bytes, got {type(data).__name__}")
    payload = _unseal(bytes(data), MAGIC)
    if payload is None:
        _ignored("artifacts ignored: not xcompile warm-start artifacts, or damaged (bad header or checksum)")
        return None
    try:
        bundle = _loads(payload)
        entries, shared, env = bundle["entries"], bundle["shared"], bundle["env"]
    except Exception as e:  # noqa: BLE001
        _ignored("artifacts ignored: unreadable (%s: %s)", type(e).__name__, e)
        return None
    if bundle.get("format") != FORMAT or env != environment():
        _ignored("artifacts ignored: made by %s, this process runs %s (or another machine / xcompile build)",
                 bundle.get("versions"), _versions())
        return None
    kdir = kernels_root() / "cpp"
    n_k = 0
    for stem, so in shared.items():
        path = kdir / f"{stem}.so"
        if not path.exists():
            _write_atomic(path, so)
            n_k += 1
    for key, entry in entries.items():
        if _unseal(entry, _ENTRY_MAGIC) is None:
            _ignored("artifact entry %s damaged; skipped", key)
            continue
        _write_atomic(_entry_path(key), entry)
        _session.setdefault(key, _entry_path(key))
    log.log("warm_cache", "loaded %d entries and %d kernels into %s", len(entries), n_k, cache_dir.root())
    cache_dir.added()
    return {"entries": len(entries), "kernels": n_k}


__all__ = ["load_cache_artifacts", "save_cache_artifacts"]
