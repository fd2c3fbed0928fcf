"""Python attributes on tensors: ``x.tag = 1`` and reading ``x.tag`` back.

A tensor is a Python object with an instance ``__dict__``. On a tensor from outside the frame
(an argument, a parameter, a tensor of a global) the write is a side effect like an attribute
write on any object from outside (``side_effects.store_attr``): read back from there by the rest
of the trace, applied to the real tensor with ``setattr`` after the graph ran. Reading the real
tensor's ``__dict__`` guards its keys (so an attribute found missing, ``getattr(t, "n", 0)``,
recompiles once it exists) and the value read.

Names that torch.Tensor itself defines (``requires_grad``, ``grad``, ``data``, methods...) are
not instance attributes and stay with ``attrs.py``; a tensor made inside the frame has no real
object to carry the attribute out, so writing one is Unsupported.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import torch

from ..guards.sources import AttrSource
from . import hub
from .exc import Unsupported
from .side_effects import DELETED
from .values import TensorValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer

_MISSING = object()


def _real(tx: "Tracer", v: TensorValue) -> torch.Tensor | None:
    return tx.gb.real_tensor(v) if v.source is not None else None


def is_instance_attr_name(name: str) -> bool:
    """Not a name of torch.Tensor itself (those are methods, properties and C getsets)."""
    return inspect.getattr_static(torch.Tensor, name, _MISSING) is _MISSING


def tensor_instance_attr(tx: "Tracer", v: TensorValue, name: str) -> Value | None:
    """``v.name`` from the tensor's ``__dict__`` (None when it has no such attribute)."""
    real = _real(tx, v)
    if real is None:
        return None
    stored = hub.stored_attribute(tx, real, name, v)           # AttrMissing when deleted
    if stored is not None:
        return stored
    d = real.__dict__
    if v.source is not None:                   # which attributes it has (present or not): its keys
        tx.guards.sequence(AttrSource(v.source, "__dict__"), d)
    if name in d:
        return tx.wrap(d[name], AttrSource(v.source, name) if v.source is not None else None, False)
    return None


def store_tensor_attr(tx: "Tracer", v: TensorValue, name: str, value: Value | None) -> None:
    """``v.name = value`` (``value`` None: ``del v.name``)."""
    if not is_instance_attr_name(name):
        raise Unsupported(f"assignment to Tensor.{name} of {v.describe()}",
                          "Only plain Python attributes of tensors can be assigned in a compiled region.")
    real = _real(tx, v)
    if real is None:
        raise Unsupported(f"assignment to attribute {name!r} of {v.describe()}, a tensor made in the "
                          "compiled region", "Set Python attributes on tensors passed in, or outside the "
                          "compiled region.")
    if type(real).__setattr__ is not object.__setattr__:
        raise Unsupported(f"assignment to attribute {name!r} of a {type(real).__name__}, whose class "
                          "defines __setattr__")
    tx.side_effects.store_attr(v, real, name, DELETED if value is None else value)


__all__ = ["is_instance_attr_name", "store_tensor_attr", "tensor_instance_attr"]
