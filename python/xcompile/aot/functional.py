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


def has_metadata_mutation(t: torch.Tensor) -> bool:
    torch._sync(t)
    return bool(torch._functionalize_has_metadata_mutation(t))
