"""NumPy arrays in and out of a compiled graph (``config.trace_numpy``, frontend/numpy_tracing.py).

The frontend makes an ndarray the frame reads a graph input whose placeholder is marked
``meta["xcompile_numpy"]``: the cache entry hands the array itself to the compiled graph, and
``wrap_compiled`` views it as a tensor first (``torch.as_tensor``: the same memory, so in-place
writes reach the caller's array, as in NumPy). Outputs listed in ``gm.meta["numpy_outputs"]`` are
arrays in the traced program: the graph returns their tensors, converted back here
(``Tensor.numpy(force=True)``: no grad, on the CPU, as torch.compile hands them back).
"""
from __future__ import annotations

from typing import Any, Callable

import torch


def _positions(gm: torch.fx.GraphModule) -> tuple[tuple[int, ...], tuple[int, ...]]:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ins = tuple(i for i, n in enumerate(placeholders) if n.meta.get("xcompile_numpy"))
    return ins, tuple(gm.meta.get("numpy_outputs", ()))


def wrap_compiled(compiled: Callable | None, gm: torch.fx.GraphModule) -> Callable | None:
    """``compiled`` with its ndarray inputs viewed as tensors and its ndarray outputs converted
    back (``compiled`` itself when the graph has neither)."""
    if compiled is None:
        return None
    ins, outs = _positions(gm)
    if not ins and not outs:
        return compiled
    in_set, out_set = frozenset(ins), frozenset(outs)
    scalars = frozenset(gm.meta.get("numpy_scalar_outputs", ()))   # NumPy scalars: arr[()] is np.float64

    def with_numpy(*args: Any) -> Any:
        run = compiled
        if in_set:
            args = tuple(torch.as_tensor(a, device="cpu") if i in in_set else a for i, a in enumerate(args))
            if _overlapping(args, ins):
                # two inputs view the same memory (``a`` and ``a[:]``): the graph was compiled for
                # independent ones, so this call runs the traced program op by op, as eager would
                run = gm.forward
        result = run(*args)
        if not out_set:
            return result
        return tuple((r.numpy(force=True)[()] if i in scalars else r.numpy(force=True)) if i in out_set else r
                     for i, r in enumerate(result))

    with_numpy.__name__ = getattr(compiled, "__name__", "compiled") + "_numpy"
    return with_numpy


def _extent(t: torch.Tensor) -> tuple[int, int] | None:
    """The bytes a tensor's elements span (None when it has none)."""
    if t.numel() == 0:
        return None
    lo = hi = t.data_ptr()
    size = t.element_size()
    for n, st in zip(t.shape, t.stride()):
        if st >= 0:
            hi += (n - 1) * st * size
        else:
            lo += (n - 1) * st * size
    return lo, hi + size


def _overlapping(args: tuple, arrays: tuple[int, ...]) -> bool:
    """Whether an input that came from an ndarray shares memory with another tensor input
    (arrays viewed separately get separate storages, which the aliasing checks cannot see)."""
    extents = [(i, _extent(a)) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    for i in arrays:
        mine = _extent(args[i])
        if mine is None:
            continue
        for j, other in extents:
            if j != i and other is not None and mine[0] < other[1] and other[0] < mine[1]:
                return True
    return False
