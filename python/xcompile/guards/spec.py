"""Guard specs: plain, printable data, built from sources before lowering to C++."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .sources import Source

# The closed set of guard kinds.  Each lowers to one C++ leaf (guards/lower.py).
TYPE_MATCH = "TYPE_MATCH"          # type(v) is value                        (value: a type)
ID_MATCH = "ID_MATCH"              # v is value                              (value: any object)
# type(v) is type(value) and v == value   (value: None/bool/int/float/str/tuple of these)
EQUALS_MATCH = "EQUALS_MATCH"
LENGTH_CHECK = "LENGTH_CHECK"      # len(v) == value                         (value: int; list/tuple/dict)
TENSOR_MATCH = "TENSOR_MATCH"      # same type, dispatch keys, dtype, device, sizes, strides, requires_grad as value
MODULE_TREE = "MODULE_TREE"        # v is value and no dict of the module tree (or global hooks) changed
DICT_UNCHANGED = "DICT_UNCHANGED"  # v is value and its contents are unchanged (version tag + identity snapshot)
DICT_KEYS = "DICT_KEYS"            # v is a dict whose keys are value, in this order (value: tuple of constants,
                                   # tensors and modules: those compared by identity, hashes_by_identity)

# type(v) is float and each relation (op, c) of value holds: v op c (a symbolic float's guards:
# ``lr >= 0``, ``momentum != 0``; ops FLOAT_RELATIONS, numbers shared with csrc/guard_leaves.h)
FLOAT_COMPARE = "FLOAT_COMPARE"

KINDS = (TYPE_MATCH, ID_MATCH, EQUALS_MATCH, LENGTH_CHECK, TENSOR_MATCH, MODULE_TREE, DICT_UNCHANGED,
         DICT_KEYS, FLOAT_COMPARE)
FLOAT_LT, FLOAT_LE, FLOAT_GT, FLOAT_GE, FLOAT_NE = 0, 1, 2, 3, 4
FLOAT_RELATION_TEXT = {FLOAT_LT: "<", FLOAT_LE: "<=", FLOAT_GT: ">", FLOAT_GE: ">=", FLOAT_NE: "!="}


@dataclass(frozen=True)
class Guard:
    source: Source
    kind: str
    value: Any = field(compare=False, hash=False)

    def __post_init__(self):
        assert self.kind in KINDS, self.kind

    def __str__(self) -> str:
        v = self.value
        if self.kind == TENSOR_MATCH:
            # (a sparse or otherwise unstrided tensor has no strides to show: CSR raises on stride())
            layout = f"stride={list(v.stride())}" if v.layout == torch.strided else f"layout={v.layout}"
            detail = (f"{type(v).__name__}, dtype={v.dtype}, device={v.device}, size={list(v.shape)}, "
                      f"{layout}, requires_grad={v.requires_grad}")
        elif self.kind in (TYPE_MATCH,):
            detail = getattr(v, "__qualname__", repr(v))
        elif self.kind in (ID_MATCH, MODULE_TREE, DICT_UNCHANGED):
            detail = f"id={id(v):#x} ({type(v).__name__})"
        elif self.kind == FLOAT_COMPARE:
            detail = ", ".join(f"{FLOAT_RELATION_TEXT[op]} {c!r}" for op, c in v)
        elif self.kind == DICT_KEYS and any(hashes_by_identity(k) for k in v):
            detail = "(" + ", ".join(f"<{type(k).__name__} id={id(k):#x}>" if hashes_by_identity(k) else repr(k)
                                     for k in v) + ")"
        else:
            detail = repr(v)
        return f"{self.kind}: {self.source.name()} {detail}"


def hashes_by_identity(key: Any) -> bool:
    """A dict key that eager's dict tells from others by identity alone (``Tensor.__hash__`` is
    ``id``; its ``==`` is elementwise and never reached for a key), compared so by DICT_KEYS."""
    return isinstance(key, (torch.Tensor, torch.nn.Module))


# What a shape relation reads of a value: a tensor's size or stride at a dim, its storage offset,
# or the value itself (a Python int). Numbers shared with csrc/guard_leaves.h (ShapeReadKind).
SIZE, STRIDE, STORAGE_OFFSET, INT_VALUE = 0, 1, 2, 3
_READ_TEXT = {SIZE: "size()[{}]", STRIDE: "stride()[{}]", STORAGE_OFFSET: "storage_offset()"}


def read_text(source: Source, what: int, dim: int) -> str:
    if what == INT_VALUE:
        return source.name()
    return f"{source.name()}.{_READ_TEXT[what].format(dim)}"


@dataclass(frozen=True)
class ShapeCheck:
    """One relation over sizes, strides, storage offsets and ints of the inputs (dynamic shapes):
    ``reads`` are (source, what, dim); ``program`` is the postfix program over them that the C++
    leaf runs (guards/shape_expr.py); ``text`` is the relation written with source names."""

    reads: tuple[tuple[Source, int, int], ...]
    program: tuple[int, ...]
    text: str

    def __str__(self) -> str:
        return f"SHAPE: {self.text}"


@dataclass
class GuardSet:
    """Everything one cache entry checks: per-source guards, plus frame-wide checks."""

    guards: list[Guard] = field(default_factory=list)
    # Tensor inputs that were distinct objects at trace time must stay distinct.
    no_aliasing: list[Source] = field(default_factory=list)
    # (first, again): ``again`` reached the same tensor object as the input ``first`` at trace
    # time (one placeholder serves both), so it must keep being that object.
    same_object: list[tuple[Source, Source]] = field(default_factory=list)
    # Grad mode / inference mode / autocast as seen at trace time (checked in C++).
    global_state: bool = True
    # MODULE_TREE guards watch every table of every module, not only those nn.Module's call
    # reads (csrc/guard_leaves.cpp, skip_table): set when the trace read one of the others.
    all_module_tables: bool = False
    # Tensor inputs with symbolic sizes: source -> (sizes, strides) that TENSOR_MATCH checks,
    # None for a symbolic entry (the relations below check those).
    dims: dict[Source, tuple[tuple, tuple | None]] = field(default_factory=dict)
    # Relations between symbolic sizes (dynamic shapes), in the order they are checked.
    shape_checks: list[ShapeCheck] = field(default_factory=list)
    # Produces the shape checks again with what a backend added to the ShapeEnv (see
    # shape_state.accept_facts); called once the backend compiled, before the guards are lowered.
    refresh: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    def add(self, source: Source, kind: str, value: Any) -> None:
        g = Guard(source, kind, value)
        if g not in self._seen:
            self._seen.add(g)
            self.guards.append(g)

    def set_float_relations(self, source: Source, relations: tuple) -> None:
        """The FLOAT_COMPARE guard of ``source`` (replacing one an earlier ``produce_guards`` made:
        guards compare by source and kind only)."""
        self.guards = [g for g in self.guards if not (g.source == source and g.kind == FLOAT_COMPARE)]
        self._seen.discard(Guard(source, FLOAT_COMPARE, None))
        self.add(source, FLOAT_COMPARE, relations)

    def __post_init__(self):
        self._seen = set(self.guards)

    def __str__(self) -> str:
        lines = [str(g) for g in self.guards]
        if len(self.no_aliasing) > 1:
            lines.append("NO_TENSOR_ALIASING: " + ", ".join(s.name() for s in self.no_aliasing))
        for first, again in self.same_object:
            lines.append(f"SAME_OBJECT: {again.name()} is {first.name()}")
        lines.extend(str(c) for c in self.shape_checks)
        if self.global_state:
            lines.append("GLOBAL_STATE: grad_mode, inference_mode, autocast")
        return "\n".join(lines)
