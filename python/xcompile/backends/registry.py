"""Backend names -> compiler functions ``(gm, example_inputs) -> callable``.

Built-in backends are imported lazily, so ``import xcompile`` stays cheap and a broken
optional backend only fails when it is asked for.
"""
from __future__ import annotations

from typing import Callable

from ..warmup import import_guarded

_BUILTIN = {
    "eager": "xcompile.backends.eager:eager",
    "aot_eager": "xcompile.backends.aot_eager:aot_eager",
    "inductor": "xcompile.backends.inductor:inductor",
    # torch's other AOT backends (backends/aot_variants.py)
    "aot_eager_default_partitioner": "xcompile.backends.aot_variants:aot_eager_default_partitioner",
    "aot_eager_decomp_partition": "xcompile.backends.aot_variants:aot_eager_decomp_partition",
    "cudagraphs": "xcompile.backends.aot_variants:cudagraphs",
}
_REGISTERED: dict[str, Callable] = {}


def register_backend(name: str, compiler_fn: Callable | None = None):
    """Register ``compiler_fn`` under ``name``; usable as a decorator."""
    def deco(fn):
        if not callable(fn):
            raise TypeError(f"backend {name!r} must be callable, got {type(fn).__name__}")
        _REGISTERED[name] = fn
        return fn

    return deco(compiler_fn) if compiler_fn is not None else deco


# Options of backend "inductor": the kernel generator's knobs of xcompile.config, applied while
# that compile's graphs are built (as torch's options patch inductor's config).
INDUCTOR_OPTIONS = ("fallback_random", "cpu_kernel_backend", "kernel_raise_errors", "cpp_compiler",
                    "cpp_parallel_threshold", "cpp_simd_math", "compile_threads", "inline_max_ops",
                    "kernel_fusion", "kernel_channels_last_conv", "kernel_index_checks",
                    "kernel_fuse_transposed_reads", "kernel_tile_transposes",
                    "triton_persistent_rnumel", "triton_rblock")


# Options that name torch's inductor config rather than an xcompile knob.
INDUCTOR_FLAG_OPTIONS = ("triton.cudagraphs",)
# The modes that record CUDA graphs (as torch's do).
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


def wants_cudagraphs(options: dict) -> bool:
    """Whether a compile with these options (``mode`` included) replays CUDA graphs."""
    return options.get("mode") in CUDAGRAPH_MODES or bool(options.get("triton.cudagraphs"))


def list_backends() -> list[str]:
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def lookup_backend(backend) -> Callable:
    """A backend name or callable -> the compiler function. Raises a clear error otherwise."""
    if callable(backend) and not isinstance(backend, str):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string or a callable (gm, example_inputs) -> callable, "
                        f"got {type(backend).__name__}")
    if backend in _REGISTERED:
        return _REGISTERED[backend]
    if backend in _BUILTIN:
        mod, _, attr = _BUILTIN[backend].partition(":")
        try:
            fn = getattr(import_guarded(mod), attr)
        except (ImportError, AttributeError) as e:
            raise RuntimeError(f"backend {backend!r} is not available: {e}") from e
        _REGISTERED[backend] = fn
        return fn
    raise ValueError(f"unknown backend {backend!r}; available: {', '.join(list_backends())}")
