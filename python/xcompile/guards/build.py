"""Guards from what the trace looked at: sources in, a printable ``GuardSet`` out.

The interpreter calls one method per fact it relied on; each installs the guard kind
that protects that fact (see ``guards/spec.py`` for the kinds):

    tensor_input(src, t)     a graph input: TENSOR_MATCH, and it joins ``no_aliasing``
    alias(src, first, t)     the same tensor object reached again: SAME_OBJECT with input ``first``
                             (or ID_MATCH when it is a parameter/buffer of the graph)
    constant(src, v)         a specialized non-tensor input: EQUALS_MATCH
    identity(src, obj)       a function, class, python module or other object used as-is: ID_MATCH
    object_type(src, obj)    attributes were read from it: TYPE_MATCH
    sequence(src, obj, …)    a list/tuple that was indexed or iterated: TYPE_MATCH + LENGTH_CHECK;
                             a dict: TYPE_MATCH + DICT_KEYS (its keys, in order)
    module_tree(src, m)      an nn.Module: MODULE_TREE (covers its attributes, parameters, buffers,
                             submodules and hooks; values read through it need nothing more)

Nothing is guarded that the trace did not use; the same guard is never added twice.
"""
from __future__ import annotations

import torch

from . import spec
from .sources import Source

# EQUALS_MATCH values (spec: None/bool/int/float/str/tuple of these).  The C++ leaf also takes
# bytes, torch.dtype (by identity) and torch.device (by value: a fresh ``torch.device('cpu')``
# each call must not recompile).
_EQUALS_TYPES = (type(None), bool, int, float, str, bytes, torch.dtype, torch.device)


def equals_matchable(v) -> bool:
    if type(v) is tuple:
        return all(equals_matchable(x) for x in v)
    return type(v) in _EQUALS_TYPES


class GuardBuilder:
    def __init__(self) -> None:
        self.guard_set = spec.GuardSet()

    # -- one method per fact ----------------------------------------------------------------
    def tensor_input(self, source: Source, t: torch.Tensor) -> None:
        self.guard_set.add(source, spec.TENSOR_MATCH, t)
        if source not in self.guard_set.no_aliasing:
            self.guard_set.no_aliasing.append(source)

    def alias(self, source: Source, first: Source | None, t: torch.Tensor) -> None:
        """``source`` reached a tensor the trace already has (input ``first``, or a parameter)."""
        if source == first:
            return
        if first is not None and first in self.guard_set.no_aliasing:
            pair = (first, source)
            if pair not in self.guard_set.same_object:
                self.guard_set.same_object.append(pair)
        else:
            self.guard_set.add(source, spec.ID_MATCH, t)

    def same_object(self, first: Source, again: Source) -> None:
        """A list, dict or module reached through two sources was one object at trace time."""
        if first != again and (first, again) not in self.guard_set.same_object:
            self.guard_set.same_object.append((first, again))

    def constant(self, source: Source, value) -> None:
        if equals_matchable(value):
            self.guard_set.add(source, spec.EQUALS_MATCH, value)
        else:                                    # dtypes, layouts, memory formats are singletons
            self.guard_set.add(source, spec.ID_MATCH, value)

    def identity(self, source: Source, obj) -> None:
        self.guard_set.add(source, spec.ID_MATCH, obj)

    def object_type(self, source: Source, obj) -> None:
        self.guard_set.add(source, spec.TYPE_MATCH, type(obj))

    def sequence(self, source: Source, obj, *, type_known: bool = False) -> None:
        if not type_known:
            self.guard_set.add(source, spec.TYPE_MATCH, type(obj))
        if isinstance(obj, dict):               # same length is not enough: keys and their order
            self.guard_set.add(source, spec.DICT_KEYS, tuple(obj))
        else:
            self.guard_set.add(source, spec.LENGTH_CHECK, len(obj))

    def module_tree(self, source: Source, module: torch.nn.Module) -> None:
        self.guard_set.add(source, spec.MODULE_TREE, module)

    # -- result -------------------------------------------------------------------------------
    def build(self) -> spec.GuardSet:
        return self.guard_set
