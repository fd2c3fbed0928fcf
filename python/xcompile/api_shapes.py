"""``mark_dynamic`` / ``maybe_mark_dynamic`` / ``mark_static`` / ``mark_static_address``, with
torch's names, arguments and meanings (the policy that reads them: ``frontend/shapes.py``).

- ``mark_dynamic(t, dim, min=None, max=None)``: the dimension is symbolic from the first
  compile, with its own symbol (no duck sizing); a trace that forces it to one value raises
  ``ConstraintViolationError`` naming the dimension and the line.
- ``maybe_mark_dynamic(t, dim)``: symbolic from the first compile; specializing it is allowed.
- ``mark_static(t, dim=None)``: never symbolic, even under ``dynamic=True`` (``mark_dynamic``
  wins over it). An ``nn.Module`` (or class) is accepted and left as it is.
- ``mark_static_address(t)``: the tensor keeps its address between calls (CUDA graphs).
"""
from __future__ import annotations

import torch

from .shape_state import DIM_RANGES, DYNAMIC_DIMS, MAYBE_DYNAMIC_DIMS, STATIC_ADDRESS, STATIC_DIMS


def _dims(t, index, who: str) -> set[int]:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"xcompile.{who} expects a tensor, got {type(t).__name__}")
    idx = list(range(t.dim())) if index is None else (list(index) if isinstance(index, (list, tuple)) else [index])
    out = set()
    for i in idx:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"xcompile.{who}: index must be an int or a list of ints, got {i!r}")
        if not -t.dim() <= i < max(t.dim(), 1):
            raise IndexError(f"xcompile.{who}: dimension {i} is out of range for a {t.dim()}-d tensor")
        out.add(i % t.dim() if t.dim() else 0)
    return out


def _record(t, attr: str, dims: set[int]) -> None:
    old: set[int] = getattr(t, attr, set())
    setattr(t, attr, set(old) | dims)


def mark_dynamic(t, index, *, min=None, max=None, specialize_on=None) -> None:
    """Mark dimension(s) ``index`` of ``t`` dynamic, optionally within ``[min, max]``."""
    for name, v in (("min", min), ("max", max)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise TypeError(f"xcompile.mark_dynamic: {name} must be an int, got {v!r}")
    if min is not None and max is not None and min > max:
        raise ValueError(f"xcompile.mark_dynamic: min={min} is greater than max={max}")
    dims = _dims(t, index, "mark_dynamic")
    _record(t, DYNAMIC_DIMS, dims)
    if min is not None or max is not None:
        ranges = dict(getattr(t, DIM_RANGES, None) or {})
        for d in dims:
            ranges[d] = (min, max)
        setattr(t, DIM_RANGES, ranges)


def maybe_mark_dynamic(t, index) -> None:
    """Mark dimension(s) dynamic as a hint: symbolic from the first compile, but a trace that
    needs the concrete size specializes it without an error."""
    _record(t, MAYBE_DYNAMIC_DIMS, _dims(t, index, "maybe_mark_dynamic"))


def mark_static(t, index=None) -> None:
    """Mark dimension(s) of ``t`` static (all of them by default); an ``nn.Module`` is accepted
    and left as it is (its parameters are static already)."""
    if isinstance(t, torch.nn.Module) or (isinstance(t, type) and issubclass(t, torch.nn.Module)):
        return
    _record(t, STATIC_DIMS, _dims(t, index, "mark_static"))


def mark_static_address(t, guard: bool = True) -> None:
    """The tensor keeps its address between calls (a static input of CUDA graphs)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"xcompile.mark_static_address expects a tensor, got {type(t).__name__}")
    setattr(t, STATIC_ADDRESS, bool(guard))
