"""``mark_dynamic`` / ``maybe_mark_dynamic`` / ``mark_static``, with torch's names and arguments.

xcompile compiles static shapes: every dimension is specialized to the size it was traced
with, and a new size recompiles (up to ``config.cache_size_limit`` entries per function).
These calls therefore only record the marks on the tensor; ``mark_static`` asks for what
already happens, and a compilation that meets a dimension marked dynamic says once, in a
warning, that it specialized it (``dynamic_mark_warning``) instead of quietly ignoring it.
"""
from __future__ import annotations

import warnings

import torch

_DYNAMIC = "_xcompile_dynamic_dims"
_STATIC = "_xcompile_static_dims"


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
    """Mark dimension(s) ``index`` of ``t`` dynamic. Recorded only: xcompile specializes every
    dimension and warns once when it compiles a function with such an input."""
    if min is not None and max is not None and min > max:
        raise ValueError(f"xcompile.mark_dynamic: min={min} is greater than max={max}")
    _record(t, _DYNAMIC, _dims(t, index, "mark_dynamic"))


def maybe_mark_dynamic(t, index) -> None:
    """Like ``mark_dynamic``, but a hint that may be ignored (it is: shapes are static)."""
    _dims(t, index, "maybe_mark_dynamic")


def mark_static(t, index=None) -> None:
    """Mark dimension(s) of ``t`` static (all of them by default); an ``nn.Module`` is accepted
    and left as it is. This is what xcompile does anyway."""
    if isinstance(t, torch.nn.Module) or (isinstance(t, type) and issubclass(t, torch.nn.Module)):
        return
    _record(t, _STATIC, _dims(t, index, "mark_static"))


_warned: set = set()


def dynamic_mark_warning(where: str, inputs, names) -> None:
    """Warn once per function when one of its graph inputs has dimensions marked dynamic."""
    for t, name in zip(inputs, names):
        dims = getattr(t, _DYNAMIC, None) if isinstance(t, torch.Tensor) else None
        if not dims or where in _warned:
            continue
        _warned.add(where)
        sizes = ", ".join(f"dim {d} = {t.shape[d]}" for d in sorted(dims) if d < t.dim())
        warnings.warn(
            f"xcompile compiles static shapes: {name} of {where} was marked dynamic "
            f"({sizes}), but it is specialized to these sizes; each new size recompiles, up to "
            f"config.cache_size_limit entries. Hint: pad inputs to a few fixed sizes.",
            stacklevel=3)
        return
