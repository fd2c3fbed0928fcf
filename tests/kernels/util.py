"""Compile-vs-eager helpers for the kernel tests (no frontend: graphs come from make_fx)."""
from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils import _pytree as pytree

from xcompile import config
from xcompile.kernels.compile import compile_aten_graph
from xcompile.kernels.decompose import trace_aten

# "cuda": the same tests through real Triton on an NVIDIA GPU (inputs moved there, results back)
BACKENDS = ("cpp",
            pytest.param("triton", marks=pytest.mark.skipif(
                torch.cuda.is_available(), reason="with a GPU, Triton runs for real (the cuda cases)")),
            pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]))

TOL = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float64: dict(atol=1e-10, rtol=1e-10),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
    torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2),
}


@contextlib.contextmanager
def kernel_backend(backend: str, **knobs):
    """Run the CPU graphs through ``backend`` ("cpp", or "triton" under TRITON_INTERPRET=1); any
    failure raises instead of falling back to eager, so a test cannot pass by not compiling."""
    knobs = dict(cpu_kernel_backend=backend, kernel_raise_errors=True, **knobs)
    missing = object()
    old = {k: getattr(config, k, missing) for k in knobs}
    try:
        for k, v in knobs.items():
            setattr(config, k, v)
        yield
    finally:
        for k, v in old.items():
            if v is missing:
                delattr(config, k)
            else:
                setattr(config, k, v)


def compile_fn(fn, inputs, backend="cpp", **knobs):
    if backend == "cuda":
        return _on_gpu(fn, inputs, **knobs)
    with kernel_backend(backend, **knobs):
        gm = trace_aten(fn, inputs)
        return compile_aten_graph(gm, list(inputs))


def _on_gpu(fn, inputs, **knobs):
    """Compile for CUDA tensors; the result takes and returns CPU tensors like the other backends."""
    def cuda(ts):
        return [t.cuda() if isinstance(t, torch.Tensor) else t for t in ts]
    with kernel_backend("triton", **knobs):
        compiled = compile_aten_graph(trace_aten(fn, cuda(inputs)), cuda(inputs))

    def run(*args):
        return [o.cpu() if isinstance(o, torch.Tensor) else o for o in compiled(*cuda(args))]
    run.kernels, run.fallbacks, run.wrapper_src = compiled.kernels, compiled.fallbacks, compiled.wrapper_src
    return run


def assert_close(got, want, name="", exact_dtype=True, tol=None, check_stride=True):
    got, want = pytree.tree_leaves(got), pytree.tree_leaves(want)
    assert len(got) == len(want), f"{name}: {len(got)} outputs, eager has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        where = f"{name}[{i}]"
        if not isinstance(w, torch.Tensor):
            assert g == w, where
            continue
        assert g.shape == w.shape, f"{where}: shape {tuple(g.shape)} vs eager {tuple(w.shape)}"
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} vs eager {w.dtype}"
        if check_stride and w.numel() > 1:
            gs = [s for s, n in zip(g.stride(), g.shape) if n > 1]
            ws = [s for s, n in zip(w.stride(), w.shape) if n > 1]
            assert gs == ws, f"{where}: strides {g.stride()} vs eager {w.stride()}"
        t = tol or TOL.get(w.dtype, dict(atol=0, rtol=0))
        torch.testing.assert_close(g, w, equal_nan=True, msg=lambda m: f"{where}: {m}", **t)


def check(fn, inputs, backend="cpp", name="", fresh=True, **kw):
    """Compile on ``inputs``; compare with eager on fresh random inputs of the same kind."""
    compiled = compile_fn(fn, inputs, backend)
    if fresh:
        inputs = [fresh_like(t) for t in inputs]
    assert_close(compiled(*inputs), fn(*inputs), name, **kw)
    return compiled


def fresh_like(t):
    if not isinstance(t, torch.Tensor):
        return t
    base = make_tensor(tuple(t.shape), t.dtype)
    return base.as_strided(t.shape, t.stride()) if t.is_contiguous() else \
        torch.empty_strided(t.shape, t.stride(), dtype=t.dtype).copy_(base)


def make_tensor(shape, dtype, low=None, high=None):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if not dtype.is_floating_point:
        lo, hi = (-9, 10) if low is None else (low, high)
        return torch.randint(lo, hi, shape, dtype=dtype)
    x = torch.randn(shape, dtype=torch.float64)
    if low is not None:
        x = low + (high - low) * torch.rand(shape, dtype=torch.float64)
    return x.to(dtype)


def n_kernels(compiled) -> int:
    return len(compiled.kernels)
