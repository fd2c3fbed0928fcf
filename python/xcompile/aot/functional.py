"""Functionalization helpers shared by the schema pass and the graph tracers.

We use the C++ functionalization layer directly (``torch._enable_functionalization``):
it sits *below* autograd in the dispatcher, so a function run on functional wrappers
can call ``torch.autograd.grad`` and the whole forward+backward comes out functional.
(``torch.func.functionalize`` is a functorch transform and refuses autograd inside it.)

    with functionalization():
        fx = to_functional(x)          # wrapper carrying x's requires_grad
        ...run the program on fx...
        new_x = from_functional(fx)    # the value fx holds now (after in-place ops)
        has_data_mutation(fx)          # True if the program wrote into x
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from .._torch_compat import statically_known_true


@contextlib.contextmanager
def functionalization() -> Iterator[None]:
    """Turn on functionalization (views are re-applied as real views) for the block."""
    torch._enable_functionalization(reapply_views=True)
    try:
        yield
    finally:
        torch._disable_functionalization()


def to_functional(t):
    """Wrap a tensor in a functional wrapper that mirrors its autograd metadata."""
    if not isinstance(t, torch.Tensor):
        return t
    wrapped = torch._to_functional_tensor(t)
    torch._mirror_autograd_meta_to(t, wrapped)
    return wrapped


def from_functional(t):
    """The plain tensor a functional wrapper holds now (pending view updates applied)."""
    if not isinstance(t, torch.Tensor):
        return t
    torch._sync(t)
    return torch._from_functional_tensor(t)


def has_data_mutation(t: torch.Tensor) -> bool:
    torch._sync(t)
    return bool(torch._functionalize_has_data_mutation(t))  # type: ignore[attr-defined]  # private binding


def mutation_counter(t: torch.Tensor) -> int:
    """How many writes the functional wrapper ``t`` has seen."""
    return int(torch._functionalize_mutation_counter(t))  # type: ignore[attr-defined]  # private binding


def has_metadata_mutation(t: torch.Tensor) -> bool:
    torch._sync(t)
    return bool(torch._functionalize_has_metadata_mutation(t))



def same_layout(shape, a: tuple, b: tuple) -> bool:
    """Strides ``a`` and ``b`` of a tensor of ``shape`` provably lay it out the same (no guard
    is added on a symbolic size: what cannot be told is "not the same")."""
    return all(statically_known_true(n <= 1) or statically_known_true(x == y) for n, x, y in zip(shape, a, b))


def same_shape(a, b) -> bool:
    return len(a) == len(b) and all(statically_known_true(x == y) for x, y in zip(a, b))

def non_overlapping(shape, stride: tuple) -> bool:
    """No two elements of a tensor of ``shape`` laid out by ``stride`` share memory (provably:
    an expanded ``x.expand(3)`` does not qualify, and neither does a symbolic size not known)."""
    extent = 1
    dims = [(st, n) for n, st in zip(shape, stride) if not statically_known_true(n <= 1)]
    if not all(isinstance(st, int) and isinstance(n, int) for st, n in dims):
        return False
    for st, n in sorted(dims):
        if st < extent:
            return False
        extent = st * (n - 1) + extent
    return True


def restride(t: torch.Tensor, stride: tuple) -> None:
    """Give functional wrapper ``t`` the layout ``stride`` again, values kept.

    A write into a wrapper (``x.mul_(2)``) replaces the value it holds with the out-of-place
    result, and the wrapper takes that result's strides: a tensor that is not dense (``x[:, 1:]``)
    came out contiguous, so a later ``x.contiguous()`` traced as nothing and returned ``x``
    itself, where eager, whose ``x`` keeps its strides, returns a copy (and ``x.reshape`` a copy
    instead of a view). The value is written into a buffer through a view with the strides
    eager has and the wrapper holds that view from then on (functional ops only: a scatter
    into the buffer, then the view)."""
    size = tuple(t.shape)
    offset = t.storage_offset()
    extent = offset + 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(n != 0 for n in size) else 0
    with torch.no_grad():
        buf = torch.empty((extent,), dtype=t.dtype, device=t.device)
        view = buf.as_strided(size, stride, offset)
        view.copy_(t)
        value = from_functional(view)
    torch._functionalize_replace(t, value)  # type: ignore[attr-defined]  # private binding
    torch._functionalize_commit_update(t)  # type: ignore[attr-defined]
