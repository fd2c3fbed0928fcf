"""The on-disk cache directory (``config.cache_dir``): its size cap and pruning by least recent use.

What lives there: ``cpp/`` (built kernels, ``<key>.so`` with their ``<key>.cpp``), ``triton/``
(generated Triton modules) and ``warm/`` (warm-start entries, warm_cache.py).  A file counts as
used when it is written or read back: the readers ``touch()`` it, so its mtime is its last use
(atime is unreliable under ``relatime``/``noatime`` mounts).

``prune()`` deletes the least recently used files until the directory fits under
``config.cache_size_cap_mb``; it runs after a process adds files (at most every
``_PRUNE_EVERY`` additions) and on request.  Deleting a shared object another process has
loaded is safe on POSIX (the mapping stays); a warm entry whose kernels were pruned is a miss.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from . import config, log

_SUBDIRS = ("cpp", "triton", "warm")
_PRUNE_EVERY = 32
_added = 0


def root() -> Path:
    return Path(config.cache_dir or os.path.expanduser("~/.cache/xcompile"))


def touch(path: Path | str) -> None:
    """Mark ``path`` as used now (its mtime); a missing file is left alone."""
    try:
        os.utime(path)
    except OSError:
        pass


def usage() -> tuple[int, list[tuple[float, int, Path]]]:
    """Total bytes under the cache directory and ``(mtime, size, path)`` of each file."""
    files: list[tuple[float, int, Path]] = []
    total = 0
    base = root()
    for sub in _SUBDIRS:
        d = base / sub
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if not e.is_file(follow_symlinks=False):
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, Path(e.path)))
            total += st.st_size
    return total, files


def prune(cap_mb: float | None = None) -> int:
    """Delete least recently used files until the cache fits under ``cap_mb`` (default
    ``config.cache_size_cap_mb``; 0 or less: no cap). Returns the bytes freed."""
    cap_mb = config.cache_size_cap_mb if cap_mb is None else cap_mb
    if cap_mb is None or cap_mb <= 0:
        return 0
    cap = int(cap_mb * 1024 * 1024)
    total, files = usage()
    if total <= cap:
        return 0
    freed = 0
    now = time.time()
    for mtime, size, path in sorted(files, key=lambda f: f[0]):
        if total - freed <= cap:
            break
        if path.suffix in (".tmp",) or (path.name.startswith("tmp") and now - mtime < 600):
            continue        # another process's file being written
        try:
            path.unlink()
        except OSError:
            continue
        freed += size
    log.log("warm_cache", "pruned %d bytes from %s (cap %s MB)", freed, root(), cap_mb)
    return freed


def added() -> None:
    """A process wrote a file into the cache: prune now and then."""
    global _added
    _added += 1
    if _added % _PRUNE_EVERY == 1:
        try:
            prune()
        except Exception as e:  # noqa: BLE001 - pruning never fails a compile
            log.log("warm_cache", "pruning failed: %s: %s", type(e).__name__, e)
