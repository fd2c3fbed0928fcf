"""Every knob in one place.

Environment variables are read once, at import.  Change a knob for a scope with
``xcompile.config.patch(cache_size_limit=2)`` (a context manager and decorator);
plain assignment (``xcompile.config.cache_size_limit = 2``) works too.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _env_int_or_raw(name: str, default: int) -> int | str:
    """An int, or the raw text where it is not one (for a check that names it where it is used)."""
    v = os.environ.get(name)
    if v is None:
        return default
    try:
        return int(v)
    except ValueError:
        return v


def _env_bool(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    return default if v is None else v.strip().lower() in ("1", "true", "yes", "on")


# -- caching and guards -----------------------------------------------------------------
# Entries per code object; past it, the frame runs eagerly from then on (one warning).
cache_size_limit: int = _env_int("XCOMPILE_CACHE_SIZE_LIMIT", 8)
# A method (first argument ``self``) counts cache_size_limit per instance, so many instances of
# one nn.Module class each compile; past this many entries for one code object in all, the
# frame runs eagerly from then on.
accumulated_cache_size_limit: int = _env_int("XCOMPILE_ACCUMULATED_CACHE_SIZE_LIMIT", 256)
# Raise instead of warning when the cache size limit is hit.
fail_on_cache_limit_hit: bool = False
# Leave frames from these path prefixes alone (torch itself, the standard library, ourselves).
skip_file_prefixes: tuple = ()

# -- frontend ------------------------------------------------------------------------------
# A graph break (without fullgraph) raises instead of splitting the graph. Set for a scope by
# xcompile.error_on_graph_break(flag); compilations start with the value current at the call.
error_on_graph_break: bool = False
# Capture Tensor.item()/.tolist() as graph ops instead of breaking (frontend-breadth issue).
capture_scalar_outputs: bool = False
# Data-dependent output shapes (nonzero, masked_select, x[mask], unique) as graph ops with
# unbacked sizes instead of graph breaks.
capture_dynamic_output_shape_ops: bool = False
# NumPy code in the graph: np.ndarray inputs and outputs, np.* functions, ndarray methods and
# operators traced through torch._numpy (frontend/numpy_tracing.py). False: arrays are plain
# objects, Tensor.numpy() and torch.from_numpy are graph breaks.
trace_numpy: bool = True
# torch.func transforms (grad, vmap, jacrev, functional_call, ...) called in compiled code are
# traced into the graph (False: each call is a graph break and runs eagerly).
capture_func_transforms: bool = True

# -- dynamic shapes (torch's meanings; compile(dynamic=...) chooses the policy per function) --
# dynamic=None: after a recompile caused by a changed size (or int argument), make that
# dimension symbolic ("automatic dynamic").
automatic_dynamic_shapes: bool = True
# dynamic=None: the first compile specializes every size (False: symbolic from the start).
assume_static_by_default: bool = True
# Python int arguments are specialized (EQUALS_MATCH) instead of becoming symbolic inputs.
specialize_int: bool = False
# Python float arguments and floats read from outside (an optimizer's ``lr``) are specialized
# (EQUALS_MATCH) instead of becoming symbolic inputs once they change (torch's specialize_float).
specialize_float: bool = False
# Frontend errors that are not Unsupported: re-raise (True) or fall back to eager with a warning.
suppress_errors: bool = _env_bool("XCOMPILE_SUPPRESS_ERRORS", False)
# Check every FX graph (gm.graph.lint()) and guard tree after building it.
verify: bool = _env_bool("XCOMPILE_CHECK", False)

# -- AOT / kernels ----------------------------------------------------------------------
# RNG ops run through ATen's own generator, so results are bit-identical to eager.
fallback_random: bool = False
# Where compiled kernels are cached on disk.
cache_dir: str = os.environ.get("XCOMPILE_CACHE_DIR", os.path.expanduser("~/.cache/xcompile"))
# Size cap of cache_dir in MB: past it, the least recently used files are deleted (0: no cap).
cache_size_cap_mb: float = _env_int("XCOMPILE_CACHE_SIZE_CAP_MB", 1024)
# Warm start: compiled graphs are kept under cache_dir/warm (keyed by the captured graph, its
# inputs' metadata, the knobs and the versions) and reused by a later process
# (xcompile.save_cache_artifacts / load_cache_artifacts carry them between machines' dirs).
warm_start: bool = _env_bool("XCOMPILE_WARM_START", True)

# -- CUDA graphs (kernels/cudagraphs.py) ---------------------------------------------------
# Record each graph into a CUDA graph and replay it: on for mode="reduce-overhead" or
# "max-autotune" and options={"triton.cudagraphs": True} (set per compile), and for backend
# "cudagraphs".
cudagraphs: bool = False
# Graphs on the CPU use the CPU stand-in device (records the artifact, replays it into fixed
# output memory), so the bookkeeping runs without a GPU; off, CPU graphs run without replay.
cudagraph_stand_in: bool = _env_bool("XCOMPILE_CUDAGRAPH_STAND_IN", False)
# Calls that run the graph plainly before it is recorded (at least 1: the warm-up finds the
# inputs the graph writes into).
cudagraph_warmup: int = 1
# Recordings of one graph (a static input that moves records again) before it runs plainly.
cudagraph_max_records: int = 8
# An output of an earlier replay that the caller still holds when the graph replays again:
# "copy" gives it a copy of its values first (one device copy per held output, never an
# error); "error" makes any later access raise torch's "accessing tensor output of CUDAGraphs
# that has been overwritten" (no copies: torch's behaviour).
cudagraph_live_outputs: str = os.environ.get("XCOMPILE_CUDAGRAPH_LIVE_OUTPUTS", "copy")

# -- kernel generator (backend "inductor") ------------------------------------------------
# Which emitter CPU graphs use: "cpp" (C++/OpenMP) or "triton" (TRITON_INTERPRET=1 on the CPU).
cpu_kernel_backend: str = os.environ.get("XCOMPILE_CPU_KERNEL_BACKEND", "cpp")
# Raise kernel build/lowering errors instead of warning once and running the graph eagerly.
kernel_raise_errors: bool = _env_bool("XCOMPILE_KERNEL_RAISE_ERRORS", False)
# dynamic shapes: the inductor backend compiles a graph with symbolic sizes into kernels that
# take the sizes as arguments (one compile for every size); off, or where it cannot, it
# compiles the graph once per distinct size
dynamic_kernels: bool = _env_bool("XCOMPILE_DYNAMIC_KERNELS", True)
# Kernel libraries (.so) kept loaded for reuse when the same kernel source is compiled again;
# beyond it the least recently used are dropped, and unloaded once no compiled graph uses them.
kernel_libraries_loaded: int = _env_int("XCOMPILE_KERNEL_LIBRARIES_LOADED", 256)
# The C++ compiler for CPU kernels.
cpp_compiler: str = os.environ.get("CXX", "g++")
# Elements of work above which a C++ kernel's outer loop is run with OpenMP.
cpp_parallel_threshold: int = _env_int("XCOMPILE_CPP_PARALLEL_THRESHOLD", 32768)
# Vector math through glibc's libmvec: None = detect, True/False = force.
cpp_simd_math = None
# Threads that build kernels in parallel.
compile_threads: int = _env_int("XCOMPILE_COMPILE_THREADS", os.cpu_count() or 1)
# Largest pointwise body inlined into its consumers.
inline_max_ops: int = 24
# Fuse kernels at all (False: one kernel per op, for debugging).
kernel_fusion: bool = _env_bool("XCOMPILE_KERNEL_FUSION", True)
# Feed convolutions channels-last inputs.
kernel_channels_last_conv: bool = True
# Kernels check indirect indices (x[idx], gather, index_select, embedding) and raise like eager;
# False reads a clamped element instead (wrong answers on bad indices: benchmarking only).
kernel_index_checks: bool = _env_bool("XCOMPILE_KERNEL_INDEX_CHECKS", True)
# Fuse a pointwise value read transposed into a reduction's loop (False: it gets its own kernel,
# as gathers inside the reduction loop are slow: MLP-Mixer's x + t.transpose(1, 2) into a norm).
kernel_fuse_transposed_reads: bool = False
# C++ pointwise nests that read across their rows (NCHW <-> channels-last) run in 16x16 tiles.
kernel_tile_transposes: bool = True
# Triton: rows up to this many elements use persistent reductions; looped ones use this block.
triton_persistent_rnumel: int = 1024
triton_rblock: int = 256

# -- the minifier (debug/minifier.py; torch's TORCHDYNAMO_REPRO_AFTER / _LEVEL) -------------------
# Where to check compiles: "dynamo" (the backend's compile of each captured graph), "aot" (the
# compile of each AOT forward / backward / inference graph), None (off).
repro_after = os.environ.get("XCOMPILE_REPRO_AFTER") or None
# 1: on a backend failure (compiling or running a graph), write the graph as a repro, unminified;
# 2: on such a failure, minify the graph, then write the repro; 3: also run each compiled graph on
# generated inputs when it is compiled (minify on an exception); 4: also compare its results with
# eager's (float64 reference) and minify a mismatch.  A bad value is an error when it is used.
repro_level: int | str = _env_int_or_raw("XCOMPILE_REPRO_LEVEL", 2)
# Where repros go (run_<time>-pid_<pid>/minifier/repro.py under it); relative to the current
# directory when one is written.
repro_dir: str = os.environ.get("XCOMPILE_REPRO_DIR", "xcompile_repro")
# The minifier stops after this many candidate graphs or seconds, keeping the smallest failing one.
repro_max_attempts: int = _env_int("XCOMPILE_REPRO_MAX_ATTEMPTS", 300)
repro_timeout: float = float(_env_int("XCOMPILE_REPRO_TIMEOUT", 300))
# Level 4: results within this (absolute and relative) tolerance of eager's match.
repro_tolerance: float = 1e-3

# -- distributed ---------------------------------------------------------------------------------
# A frame compiled under DistributedDataParallel gets its graph split at DDP's bucket boundaries,
# one compiled subgraph per bucket, so each bucket's all-reduce overlaps the rest of the backward
# (backends/ddp.py; torch._dynamo.config.optimize_ddp). False: one graph, all-reduces after it.
optimize_ddp: bool = _env_bool("XCOMPILE_OPTIMIZE_DDP", True)

# -- the debug dump (debug/dump.py; torch's TORCH_COMPILE_DEBUG=1) ---------------------------------
# Per compiled frame, a folder of readable files (bytecode, FX graph, guards, AOT graphs and
# partition, loop IR, kernels, wrapper, timings) under
# <debug_dir or ./xcompile_debug>/run_<time>-pid_<pid>/<NNN>_<function>/.
debug: bool = _env_bool("XCOMPILE_DEBUG", False)
# Where the dump goes (relative to the current directory when written); setting it turns it on.
debug_dir: str | None = os.environ.get("XCOMPILE_DEBUG_DIR") or None

_KNOBS: set[str] | None = None


def _knobs() -> set[str]:
    global _KNOBS
    if _KNOBS is None:
        mod = sys.modules[__name__]
        _KNOBS = {k for k, v in vars(mod).items()
                  if not k.startswith("_") and not callable(v) and not isinstance(v, type(sys))}
    return _KNOBS


def _set(name: str, value) -> None:
    if name not in _knobs():
        raise AttributeError(f"xcompile.config has no knob {name!r}; known knobs: {sorted(_knobs())}")
    setattr(sys.modules[__name__], name, value)


@contextlib.contextmanager
def _patch_cm(changes: dict):
    mod = sys.modules[__name__]
    old = {k: getattr(mod, k) for k in changes}
    try:
        for k, v in changes.items():
            _set(k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(mod, k, v)


class patch:
    """Scoped override: ``with config.patch(verify=True): ...`` or ``@config.patch(...)``."""

    def __init__(self, arg=None, **changes):
        if isinstance(arg, dict):
            changes = {**arg, **changes}
        elif isinstance(arg, str):
            raise TypeError("use config.patch(name=value)")
        for k in changes:
            if k not in _knobs():
                raise AttributeError(f"xcompile.config has no knob {k!r}")
        self.changes = changes
        self._cm = None

    def __enter__(self):
        self._cm = _patch_cm(self.changes)
        return self._cm.__enter__()

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _patch_cm(self.changes):
                return fn(*args, **kwargs)

        return wrapper
