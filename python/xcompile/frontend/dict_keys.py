"""Dict keys of the trace's dicts (``DictValue.items``).

A key is the Python constant itself (``"a"``, ``3``, ``(1, 2)``), or a ``ValueKey`` for an object
that hashes by identity: a tensor or ``nn.Parameter`` of the trace (``{p: i for i, p in
enumerate(params)}``), an ``nn.Module``. A ``ValueKey`` compares equal only to a key for the
same object, as eager's ``dict`` does for these (``Tensor.__hash__`` is ``id``; its ``__eq__`` is
never reached: a dict compares keys by identity first, and distinct objects have distinct ids).

``dict_key(v)`` makes the key of a value, ``key_value(k)`` turns a key back into the value that
iteration, ``keys()`` and ``items()`` yield.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from . import hub
from .exc import Unsupported
from .values import ConstantValue, ListValue, ModuleValue, TensorValue, TupleValue, Value


class ValueKey:
    """A key standing for an identity-hashed object of the trace (``value``)."""

    __slots__ = ("value", "ident")

    def __init__(self, value: Value, ident: object):
        self.value = value
        self.ident = ident                       # the object whose identity is the key's

    def __hash__(self) -> int:
        return id(self.ident)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValueKey) and other.ident is self.ident

    def __repr__(self) -> str:
        return f"<key {self.value.describe()}>"


def identity_key(v: Value) -> ValueKey | None:
    """The key of a value that hashes by identity in eager, else None."""
    if isinstance(v, TensorValue):
        if type(v.fake).__hash__ is not torch.Tensor.__hash__:
            return None
        return ValueKey(v, v.fake)               # one fake per tensor (in-place ops return it again)
    if isinstance(v, ModuleValue) and type(v.module).__hash__ is object.__hash__:
        return ValueKey(v, v.module)
    return None


def _syms(v: Value) -> list[Any]:
    """The symbolic numbers in ``v`` (itself, or the items of a tuple or list, nested): the
    ``scalars.SymScalarValue`` values."""
    if isinstance(v, hub.SymScalarValue):
        return [v]
    if isinstance(v, (TupleValue, ListValue)):
        return [s for x in v.items for s in _syms(x)]
    return []


def has_syms(v: Value) -> bool:
    return bool(_syms(v))


def hash_key(v: Value) -> tuple[bool, Any]:
    """(True, the constant ``v`` hashes and compares as) for a set member, a dict key or an ``in``
    test, else (False, None). A symbolic size (or a number computed from sizes, or a tuple holding
    one) is specialized to its value now, with a guard that keeps it, as torch.compile does: two
    equal numbers are one member, never told apart by identity. A captured scalar
    (``Tensor.item()``) has no value at trace time: a graph break."""
    syms = _syms(v)
    if not syms:
        return hub.as_constant(v)
    if any(free_unbacked_symbols(s.sym) for s in syms):
        raise Unsupported(f"hashing or comparing {v.describe()} (a set member, dict key or `in` test) needs the "
                          "value of a captured scalar (Tensor.item()) at trace time",
                          "Compute with it using tensor ops, or accept the graph break here.")
    return hub.as_constant(v, specialize=True)


def dict_key(v: Value, what: str = "dict key") -> Any:
    """The ``DictValue.items`` key for ``v``: a constant, or a ``ValueKey``."""
    ok, k = hash_key(v) if has_syms(v) else hub.as_constant(v, specialize=True)
    if ok:
        return k
    key = identity_key(v)
    if key is None:
        raise Unsupported(f"{what} {v.describe()}", "Only constants, tensors and modules can be dict keys "
                          "inside a compiled region.")
    return key


def maybe_dict_key(v: Value) -> tuple[bool, Any]:
    """(True, key) when ``v`` can be a key (see ``dict_key``), else (False, None)."""
    ok, k = hash_key(v)
    if ok:
        return True, k
    key = identity_key(v)
    return (False, None) if key is None else (True, key)


def key_value(k: Any) -> Value:
    """The value a key stands for."""
    return k.value if isinstance(k, ValueKey) else ConstantValue(k)


def has_value_keys(items: dict) -> bool:
    return any(isinstance(k, ValueKey) for k in items)


__all__ = ["ValueKey", "dict_key", "has_syms", "has_value_keys", "hash_key", "identity_key", "key_value",
           "maybe_dict_key"]
