"""Lower a guard spec (plain data) into the C++ guard tree of one cache entry.

Each source becomes a node of the tree (an accessor chain from the frame), each guard a
leaf on its node, each graph input a slot the C++ check fills while it walks the tree.
Slots: ``[0, n_inputs)`` are the graph's inputs, then one slot per pass-through value.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .. import _C
from . import spec
from .sources import (
    AttrSource,
    CallSource,
    ClosureCellSource,
    ClosureSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Source,
)


def _same(v):
    return v


# Guard kind -> (GuardNode method that adds its C++ leaf, how the spec's value is passed).
_LEAVES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    spec.TYPE_MATCH: ("add_type_match", _same),
    spec.ID_MATCH: ("add_id_match", _same),
    spec.EQUALS_MATCH: ("add_equals_match", _same),
    spec.LENGTH_CHECK: ("add_length_check", int),
    spec.TENSOR_MATCH: ("add_tensor_match", _same),
    spec.MODULE_TREE: ("add_module_tree", _same),
    spec.DICT_KEYS: ("add_dict_keys", tuple),
    spec.DICT_UNCHANGED: ("add_dict_unchanged", _same),
    spec.FLOAT_COMPARE: ("add_float_compare", list),
}
assert set(_LEAVES) == set(spec.KINDS), "every guard kind needs a lowering row"


class _Lowering:
    def __init__(self, n_slots: int, all_module_tables: bool = False):
        self.root = _C.RootGuard(n_slots)
        self.all_module_tables = all_module_tables
        self.nodes: dict[Source, object] = {}

    def node(self, src: Source):
        n = self.nodes.get(src)
        if n is not None:
            return n
        if isinstance(src, LocalSource):
            n = self.root.local(src.index, src.local_name)
        elif isinstance(src, GlobalSource):
            n = self.root.global_(src.global_name)
        elif isinstance(src, ClosureSource):
            n = self.root.closure(src.index, src.var_name)
        elif isinstance(src, ClosureCellSource):
            n = self.root.closure_cell(src.index, src.var_name)
        elif isinstance(src, CallSource):
            n = self.root.call(src.fn, src.args, dict(src.kwargs) if src.kwargs else None, src.name())
        elif isinstance(src, GenericAttrSource):
            n = self.node(src.base).generic_attr(src.attr)
        elif isinstance(src, AttrSource):
            n = self.node(src.base).attr(src.attr)
        elif isinstance(src, ItemSource):
            n = self.node(src.base).item(src.key_object)
        else:
            raise TypeError(f"cannot lower a guard on source {src!r} ({type(src).__name__})")
        self.nodes[src] = n
        return n

    def add(self, g: spec.Guard, dims: dict) -> None:
        if g.kind == spec.TENSOR_MATCH and g.source in dims:      # symbolic sizes: not all checked
            sizes, strides = dims[g.source]
            self.node(g.source).add_tensor_match(g.value, str(g) + _symbolic_note(sizes, strides),
                                                 sizes=list(sizes),
                                                 strides=None if strides is None else list(strides))
            return
        if g.kind == spec.MODULE_TREE:
            self.node(g.source).add_module_tree(g.value, str(g), lazy_hooks=not self.all_module_tables)
            return
        if g.kind == spec.DICT_KEYS:
            keys = tuple(g.value)
            self.node(g.source).add_dict_keys(keys, str(g), by_identity=[spec.hashes_by_identity(k) for k in keys])
            return
        method, convert = _LEAVES[g.kind]
        getattr(self.node(g.source), method)(convert(g.value), str(g))


def _symbolic_note(sizes, strides) -> str:
    def show(dims):
        return "[" + ", ".join("*" if d is None else str(d) for d in dims) + "]"
    return f" (checked: size={show(sizes)}" + ("" if strides is None else f", stride={show(strides)}") + ")"


def lower_guards(guards: spec.GuardSet, input_sources: list[Source],
                 passthrough_sources: Sequence[Source] = ()):
    """Build the C++ RootGuard: guards, input slots, no-aliasing and global state."""
    n_inputs = len(input_sources)
    n_fixed = n_inputs + len(passthrough_sources)
    # SAME_OBJECT pairs need both objects in slots: inputs have theirs; others get extra slots
    # after the inputs and pass-through values (never passed to the compiled graph).
    extra: dict[Source, int] = {}
    shape_sources = [src for c in guards.shape_checks for src, _, _ in c.reads]
    for src in [s for pair in guards.same_object for s in pair] + shape_sources:
        if src not in input_sources and src not in extra:
            extra[src] = n_fixed + len(extra)
    low = _Lowering(n_fixed + len(extra), guards.all_module_tables)
    for g in guards.guards:
        low.add(g, guards.dims)
    for i, src in enumerate(input_sources):
        low.node(src).set_slot(i)
    for k, src in enumerate(passthrough_sources):
        low.node(src).set_slot(n_inputs + k)
    for src, slot in extra.items():
        low.node(src).set_slot(slot)

    def slot_of(src):
        return input_sources.index(src) if src in input_sources else extra[src]

    for first, again in guards.same_object:
        low.root.add_same_object([slot_of(first), slot_of(again)],
                                 f"SAME_OBJECT: {again.name()} is {first.name()}")
    alias_slots = [input_sources.index(s) for s in guards.no_aliasing if s in input_sources]
    if len(alias_slots) > 1:
        low.root.add_no_aliasing(alias_slots, "NO_TENSOR_ALIASING: " +
                                 ", ".join(s.name() for s in guards.no_aliasing))
    for c in guards.shape_checks:
        low.root.add_shape_check([(slot_of(src), what, dim) for src, what, dim in c.reads],
                                 list(c.program), str(c))
    if guards.global_state:
        low.root.add_global_state("GLOBAL_STATE: grad_mode, inference_mode, autocast, default_dtype, "
                                  "deterministic_algorithms")
    return low.root


def lower_output_spec(out, n_inputs: int):
    """Frontend output spec (``frontend/capture.OutputSpec``) -> the C++ plan, plain tuples that
    ``cache_entry.cpp`` runs: a pass-through value ``PassThrough(k)`` becomes
    ``("slot", n_inputs + k)``; the other kinds keep their fields."""
    kind = out[0]
    if kind == "source":
        return ("slot", n_inputs + out.slot)
    if kind in ("tuple", "list"):
        return (kind, [lower_output_spec(p, n_inputs) for p in out.parts])
    if kind == "dict":
        return ("dict", list(out.keys), [lower_output_spec(p, n_inputs) for p in out.parts])
    if kind == "namedtuple":
        return ("namedtuple", out.cls, [lower_output_spec(p, n_inputs) for p in out.parts])
    if kind in ("out", "const"):
        return tuple(out)
    raise ValueError(f"bad output spec {out!r}")
