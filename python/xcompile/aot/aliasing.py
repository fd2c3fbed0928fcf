"""Inputs a graph writes into that share memory with other inputs.

Functional graphs treat their inputs as independent tensors: compiled for ``a.mul_(2);
return b + 1``, the graph reads ``b``'s old values when ``b`` is a view of ``a`` (a resume
function gets ``x`` and a view ``v = x[0]`` taken before the break as two inputs, so this
is common). Eager's answer needs the write to be seen through every alias, so:

- at compile time, examples that share memory are traced as independent fake stand-ins
  (``independent_examples``): the graph is compiled for the usual, unaliased call;
- at call time, ``shares_storage(primals, written)`` (C++, a pointer compare per input)
  says whether an input the graph writes into shares its storage with another input; then
  the torch-level graph runs eagerly instead (``eager_for_aliased``), which gives eager's
  answer for any aliasing. No stale value, no recompile, whichever call comes first.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from .. import _C
from ..log import log

shares_storage = _C.shares_storage


def _storage_key(t) -> int | None:
    if not isinstance(t, torch.Tensor) or isinstance(t, FakeTensor) or t.is_meta:
        return None
    try:
        s = t.untyped_storage()
    except (RuntimeError, NotImplementedError):     # sparse, nested, wrapper subclasses
        return None
    return s.data_ptr() if s.nbytes() else None


def any_shared(primals: list) -> bool:
    """Whether two of the real tensors in ``primals`` share a storage (compile time)."""
    seen: set[int] = set()
    for p in primals:
        key = _storage_key(p)
        if key is None:
            continue
        if key in seen:
            return True
        seen.add(key)
    return False


def independent_examples(examples: list, state: list) -> list:
    """``examples`` with every tensor that shares memory with another primal replaced by a fake
    stand-in of its own storage (same size, strides, offset, dtype, device, requires_grad)."""
    counts: dict[int, int] = {}
    for p in list(examples) + list(state):
        key = _storage_key(p)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    if not any(c > 1 for c in counts.values()):
        return list(examples)
    mode = FakeTensorMode()
    out = []
    for p in examples:
        key = _storage_key(p)
        if key is None or counts[key] < 2:
            out.append(mode.from_tensor(p) if isinstance(p, torch.Tensor) else p)
            continue
        with mode:
            storage = torch.empty(p.untyped_storage().nbytes() // p.element_size(), dtype=p.dtype,
                                  device=p.device)
            fake = storage.as_strided(p.size(), p.stride(), p.storage_offset())
        out.append(fake.requires_grad_(p.requires_grad) if p.requires_grad else fake)
    return out


def eager_for_aliased(eager: Callable, what: str) -> Callable:
    """The torch-level graph, run when written inputs share memory (logged the first time)."""
    said: list[bool] = []

    def run(*inputs):
        if not said:
            said.append(True)
            log("fallbacks", "%s: an input it writes into shares memory with another input; "
                "running the graph eagerly for such calls", what)
        return eager(*inputs)

    return run


class WrittenInputsChecked:
    """A compiled graph that writes into some of its primals, with the call-time check.

    ``compiled(*inputs)`` takes the user inputs; ``state`` are the parameters/buffers it has
    bound (primals ``len(inputs)`` onward), ``written`` the primal indices it writes into."""

    __slots__ = ("compiled", "eager", "state", "written")

    def __init__(self, compiled: Callable, eager: Callable, state: tuple, written: tuple):
        self.compiled = compiled
        self.eager = eager_for_aliased(eager, "inductor")
        self.state = tuple(state)
        self.written = tuple(written)

    def __call__(self, *inputs):
        if shares_storage(inputs + self.state, self.written):
            return self.eager(*inputs)
        return self.compiled(*inputs)
