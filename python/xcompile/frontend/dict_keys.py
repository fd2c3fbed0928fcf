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

from . import hub
from .exc import Unsupported
from .values import ConstantValue, ModuleValue, TensorValue, Value


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


def dict_key(v: Value, what: str = "dict key") -> Any:
    """The ``DictValue.items`` key for ``v``: a constant, or a ``ValueKey``."""
    ok, k = hub.as_constant(v, specialize=True)
    if ok:
        return k
    key = identity_key(v)
    if key is None:
        raise Unsupported(f"{what} {v.describe()}", "Only constants, tensors and modules can be dict keys "
                          "inside a compiled region.")
    return key


def maybe_dict_key(v: Value) -> tuple[bool, Any]:
    """(True, key) when ``v`` can be a key (see ``dict_key``), else (False, None)."""
    ok, k = hub.as_constant(v)
    if ok:
        return True, k
    key = identity_key(v)
    return (False, None) if key is None else (True, key)


def key_value(k: Any) -> Value:
    """The value a key stands for."""
    return k.value if isinstance(k, ValueKey) else ConstantValue(k)


def has_value_keys(items: dict) -> bool:
    return any(isinstance(k, ValueKey) for k in items)


__all__ = ["ValueKey", "dict_key", "has_value_keys", "identity_key", "key_value", "maybe_dict_key"]
