"""Python attributes on tensors: ``x.tag = 1`` and reading ``x.tag`` back.

A tensor is a Python object with an instance ``__dict__``. On a tensor from outside the frame
(an argument, a parameter, a tensor of a global) the write is a side effect like an attribute
write on any object from outside (``side_effects.store_attr``): read back from there by the rest
of the trace, applied to the real tensor with ``setattr`` after the graph ran. Reading the real
tensor's ``__dict__`` guards its keys (so an attribute found missing, ``getattr(t, "n", 0)``,
recompiles once it exists) and the value read.

A tensor made in the frame has no real object at trace time: its attributes are side effects on
the value itself (one value per tensor), read back from there; after the graph ran they are set
on the graph's output for it (``SpecBuilder.where`` makes the tensor an output), which is the
object the caller gets. What an in-place op returns is the tensor it changed.

Names that torch.Tensor itself defines (``requires_grad``, ``grad``, ``data``, methods...) are
not instance attributes and stay with ``attrs.py``.
"""
from __future__ import annotations

import inspect
import warnings
from typing import TYPE_CHECKING

import torch

from ..guards.sources import AttrSource
from . import hub
from .exc import Unsupported
from .side_effects import DELETED
from .values import ConstantValue, TensorValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer

_MISSING = object()


def _outside(tx: "Tracer", v: TensorValue) -> tuple[TensorValue, torch.Tensor] | None:
    """The value and the real tensor from outside the frame that ``v`` is (itself, or what an
    in-place op on it returned), None for a tensor made in the frame."""
    if v.source is None:
        for known in tx.gb.by_id.values():
            if known.fake is v.fake and known.source is not None and known.cls is v.cls:
                v = known
                break
        else:
            return None
    real = tx.gb.real_tensor(v)
    return None if real is None else (v, real)


def _made_here(tx: "Tracer", v: TensorValue) -> TensorValue:
    """The one value standing for a tensor made in the frame (per trace: kept on its SideEffects,
    not in a weak dictionary, whose callbacks would run Python code when a trace is freed)."""
    table: dict[int, TensorValue] = tx.side_effects.__dict__.setdefault("_tensors_made_here", {})
    return table.setdefault(id(v.fake), v)


def is_instance_attr_name(name: str) -> bool:
    """Not a name of torch.Tensor itself (those are methods, properties and C getsets)."""
    return inspect.getattr_static(torch.Tensor, name, _MISSING) is _MISSING


def tensor_instance_attr(tx: "Tracer", v: TensorValue, name: str) -> Value | None:
    """``v.name`` from the tensor's ``__dict__`` (None when it has no such attribute)."""
    outside = _outside(tx, v)
    if outside is None:                        # made in the frame: only what the trace stored
        here = _made_here(tx, v)
        return hub.stored_attribute(tx, here, name, None)
    v, real = outside
    stored = hub.stored_attribute(tx, real, name, v)           # AttrMissing when deleted
    if stored is not None:
        return stored
    d = real.__dict__
    if v.source is not None:                   # which attributes it has (present or not): its keys
        tx.guards.sequence(AttrSource(v.source, "__dict__"), d)
    if name in d:
        return tx.wrap(d[name], AttrSource(v.source, name) if v.source is not None else None, False)
    return None


def tensor_grad(tx: "Tracer", v: TensorValue) -> Value | None:
    """``v.grad``: of a tensor from outside the frame (a parameter, an argument), what the real
    tensor holds, read through its source (None is guarded to stay None; a gradient tensor is a
    graph input guarded like any other, and an in-place update of it, as an optimizer's, is an
    input mutation). A tensor made in the frame has none (no backward runs inside a compiled
    region). None (not handled here): an outside tensor without a source."""
    outside = _outside(tx, v)
    if outside is None:
        return ConstantValue(None) if v.source is None else None
    v, real = outside
    if v.source is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # .grad of a non-leaf warns; eager's read warns itself
        grad = real.grad
    return tx.wrap(grad, AttrSource(v.source, "grad"), False)


def store_tensor_attr(tx: "Tracer", v: TensorValue, name: str, value: Value | None) -> None:
    """``v.name = value`` (``value`` None: ``del v.name``)."""
    if not is_instance_attr_name(name):
        raise Unsupported(f"assignment to Tensor.{name} of {v.describe()}",
                          "Only plain Python attributes of tensors can be assigned in a compiled region.")
    outside = _outside(tx, v)
    if outside is None:                        # made in the frame: set on the graph's output after it
        here = _made_here(tx, v)
        if here.cls.__setattr__ is not object.__setattr__:
            raise Unsupported(f"assignment to attribute {name!r} of a {here.cls.__name__}, whose class "
                              "defines __setattr__")
        tx.side_effects.store_attr(here, here, name, DELETED if value is None else value)
        return
    v, real = outside
    if type(real).__setattr__ is not object.__setattr__:
        raise Unsupported(f"assignment to attribute {name!r} of a {type(real).__name__}, whose class "
                          "defines __setattr__")
    tx.side_effects.store_attr(v, real, name, DELETED if value is None else value)


__all__ = ["is_instance_attr_name", "store_tensor_attr", "tensor_grad", "tensor_instance_attr"]
