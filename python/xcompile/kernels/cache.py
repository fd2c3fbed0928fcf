"""Building and caching kernels on disk, by source hash.

C++ kernels are built with the system compiler in a thread pool; each becomes
``<cache_dir>/cpp/<hash>.so`` (written to a temporary name, then renamed, so concurrent
processes never see half a file).  Triton kernels are Python modules under
``<cache_dir>/triton/``.  A process that finds the file builds nothing.
"""
from __future__ import annotations

import _ctypes
import collections
import concurrent.futures
import ctypes
import functools
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

from .. import _C, config
from ..cache_dir import added, touch
from .cpp_prelude import have_libmvec

CPP_FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fno-math-errno",
             "-fno-trapping-math", "-shared", "-fPIC", "-std=gnu++17", "-w"]


# every compiler run of this process, by key (tests check that a warm cache builds nothing)
BUILT: list[str] = []


class KernelBuildError(RuntimeError):
    """The C++ compiler is missing or rejected a kernel."""


def cache_dir() -> Path:
    return Path(config.cache_dir or os.path.expanduser("~/.cache/xcompile"))


def compiler() -> str:
    return config.cpp_compiler or "g++"


@functools.lru_cache(None)
def _machine() -> str:
    """What -march=native depends on: the CPU model and flags."""
    info = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    info += line
                if line.startswith("flags"):
                    break
    except OSError:
        pass
    return info


def _link_flags() -> list[str]:
    return ["-lmvec", "-lm"] if have_libmvec() else ["-lm"]


def cpp_key(source: str) -> str:
    h = hashlib.sha256()
    for part in (source, compiler(), " ".join(CPP_FLAGS + _link_flags()), _machine()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


_pool: concurrent.futures.ThreadPoolExecutor | None = None


def pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        workers = config.compile_threads or max(2, os.cpu_count() or 2)
        _pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="xcompile-build")
    return _pool


def build_cpp(source: str, key: str | None = None) -> Path:
    """The path of the shared object for ``source``, building it if no process has yet."""
    key = key or cpp_key(source)
    d = cache_dir() / "cpp"
    so = d / f"{key}.so"
    if so.exists():
        touch(so)                       # its last use, for pruning (cache_dir.py)
        return so
    d.mkdir(parents=True, exist_ok=True)
    cc = compiler()
    if shutil.which(cc) is None:
        raise KernelBuildError(f"C++ compiler {cc!r} not found (set CXX or xcompile.config.cpp_compiler)")
    src = d / f"{key}.cpp"
    with tempfile.NamedTemporaryFile("w", dir=d, suffix=".cpp", delete=False) as f:
        f.write(source)
    os.replace(f.name, src)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".so")
    os.close(fd)
    cmd = [cc, *CPP_FLAGS, str(src), "-o", tmp, *_link_flags()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        os.unlink(tmp)
        raise KernelBuildError(f"running {cc!r} failed: {e}") from e
    if proc.returncode != 0:
        os.unlink(tmp)
        raise KernelBuildError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    os.replace(tmp, so)
    BUILT.append(key)
    added()
    return so


def build_cpp_many(sources: list[str]) -> list[Path]:
    """Build several kernels at once (the thread pool runs the compilers in parallel)."""
    keys = [cpp_key(s) for s in sources]
    todo = {k: s for k, s in zip(keys, sources) if not (cache_dir() / "cpp" / f"{k}.so").exists()}
    if len(todo) > 1:
        futures = {k: pool().submit(build_cpp, s, k) for k, s in todo.items()}
        for f in futures.values():
            f.result()
    return [build_cpp(s, k) for k, s in zip(keys, sources)]


# Kernel libraries loaded in this process, by path (the source hash): a kernel built again, by
# this compile or a later one, reuses its loaded library. The last config.kernel_libraries_loaded
# used are held here; one dropped from here stays loaded while a compiled graph still holds one of
# its functions (a function holds its library), and is unloaded (dlclose) when the last goes.
# Without the cap every kernel of a long process (a server recompiling for days, a random-program
# search) stayed mapped after reset().
_loaded: collections.OrderedDict[str, ctypes.CDLL] = collections.OrderedDict()
_alive: weakref.WeakValueDictionary[str, ctypes.CDLL] = weakref.WeakValueDictionary()
UNLOADED: list[str] = []          # paths unloaded, for tests (kept short)
_lock = threading.Lock()


def _unload(handle: int, path: str) -> None:
    try:
        _ctypes.dlclose(handle)   # type: ignore[attr-defined]  # POSIX only, as the kernels
    except OSError:
        return
    UNLOADED.append(path)
    del UNLOADED[:-64]


def _library(path: str) -> ctypes.CDLL:
    with _lock:
        lib = _loaded.get(path)
        if lib is None:
            lib = _alive.get(path)
            if lib is None:
                lib = _alive[path] = ctypes.CDLL(path)
                weakref.finalize(lib, _unload, lib._handle, path)
            _loaded[path] = lib
        _loaded.move_to_end(path)
        while len(_loaded) > max(1, int(config.kernel_libraries_loaded)):
            _loaded.popitem(last=False)
        return lib


def loaded_libraries() -> int:
    """How many kernel libraries this process has loaded now (held or still in use)."""
    return len(_alive)


def load_cpp(path: Path, symbol: str = "kernel", nargs: int = 0, returns_int: bool = False, nsizes: int = 0):
    """``symbol`` from the shared object at ``path``: for a kernel, a ``_C.KernelLauncher`` of
    ``nargs`` tensors (or addresses) and ``nsizes`` sizes; else (or a library built before
    kernels had a packed entry) a ctypes function of ``nargs`` pointers and ``nsizes`` int64
    sizes (returning an int64 when ``returns_int``: kernels with index checks return an error
    code). Either holds its library loaded."""
    lib = _library(str(path))
    if symbol == "kernel" and hasattr(lib, "kernel_packed"):
        # the tensors themselves, data pointers read in C (csrc/kernel_launch.cpp)
        address = ctypes.cast(lib.kernel_packed, ctypes.c_void_p).value
        launcher = _C.KernelLauncher(address, nargs, nsizes, lib)
        launcher.xcompile_so = (Path(path).stem, symbol, nargs, returns_int, nsizes)
        return launcher
    fn: Any = lib[symbol]     # a new function object: not cached on the library
    fn.argtypes = [ctypes.c_void_p] * nargs + [ctypes.c_int64] * nsizes
    fn.restype = ctypes.c_int64 if returns_int else None
    # how to load it again in another process (warm_cache.py describes wrappers by it)
    fn.xcompile_so = (Path(path).stem, symbol, nargs, returns_int, nsizes)
    return fn


def load_python_module(source: str, prefix: str = "triton"):
    """Write ``source`` under the cache (by hash) and import it (Triton needs a real file)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    d = cache_dir() / prefix
    path = d / f"k{key}.py"
    if not path.exists():
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=d, suffix=".py", delete=False) as f:
            f.write(source)
        os.replace(f.name, path)
    name = f"xcompile_kernels_{prefix}_{key}"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None   # a .py file path always has both
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod
