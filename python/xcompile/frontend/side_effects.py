"""Side effects on state that existed before the call: recorded while tracing, applied after the
graph runs.

While tracing, mutations never touch real objects.  The interpreter works on its own view
(``ListValue.items``, ``DictValue.items``, the attribute / global / cell overlays here) and tells
``SideEffects`` which pre-existing object it changed:

    mutated(v)                   a list or dict from outside the frame (append, setitem, pop...)
    store_attr(obj, name, v)     ``obj.name = v`` / ``del obj.name`` (plain objects, nn.Modules)
    store_global(g, name, v)     ``global name; name = v`` / ``del name``
    store_cell(cell, v)          ``nonlocal name; name = v`` for a cell of a function outside the trace

At the end of the trace ``build(out)`` turns the final state of every changed object into an
``EffectPlan``: tensors become extra graph outputs, objects from outside the frame (the targets,
and values stored into them) become *effect slots* that the guard tree fetches like graph inputs,
containers and objects made in the frame are rebuilt.  ``EffectPlan.apply(outputs, objects)``
then replays, in the order the objects were first changed:

    list       lst[:] = final items            dict     d.clear(); d.update(final items)
    blind list [lst.clear();] lst.extend(appended items)   (a list only appended to, never read:
               ``BlindList``; its contents and length are neither guarded nor fetched)
    object     object.__setattr__ per attribute (nn.Module.__setattr__ for modules; a user
               __setattr__ was inlined while tracing)
    global     g[name] = v / del g[name]
    cell       cell.cell_contents = v

The final state, not every intermediate step, is written: what the program leaves behind is the
same, and each object is written once.  The objects of slot k are ``passthrough_sources[k]`` of
the captured graph (effect slots come first there).  Whole-frame entries call the graph through
``wrap_compiled`` (only when there are effects; every other entry keeps the direct fast path);
the replacement code of a frame with graph breaks calls ``EffectPlan.apply`` itself. That
call-time half (``EffectPlan``, ``wrap_compiled``, ``with_side_effects``) is ``xcompile/effects.py``;
this module is the trace-time half.
"""
from __future__ import annotations

import dis
import linecache
import types
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ..effects import (
    AttrsStep,
    CallOf,
    CellStep,
    Const,
    DictOf,
    DictStep,
    EffectPlan,
    GlobalStep,
    ListStep,
    ListTailStep,
    NamedTupleOf,
    ObjectOf,
    SeqOf,
    SetOpsStep,
    Slot,
)
from ..guards.sources import AttrSource, ItemSource, Source
from .dict_keys import ValueKey
from .exc import Unsupported
from .rebuild_table import rebuilt_parts
from .values import (
    CellValue,
    ConstantValue,
    DictValue,
    LazyValue,
    ListValue,
    ModuleValue,
    NewObjectValue,
    SetValue,
    TensorValue,
    TupleValue,
    Value,
    real_object,
)

if TYPE_CHECKING:
    from .output import OutputBuilder
    from .tracer import Tracer



# Module tables a lazy MODULE_TREE does not watch (csrc/guard_leaves.cpp, skip_table), and
# ``__dict__`` (which reaches them).
LAZY_MODULE_TABLES = frozenset({
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
    "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs", "__dict__",
})

class _Deleted:
    def __repr__(self) -> str:
        return "<deleted>"


DELETED = _Deleted()        # an attribute / global / cell deleted by the traced code


@dataclass(eq=False)
class _Target:
    kind: str                          # "list" | "dict" | "attrs" | "global" | "cell"
    value: Any                         # ListValue / DictValue / the object's value / (dict, name) / CellValue
    where: Source | Any                # how to reach the real object: a source, or the object itself
    attrs: dict[str, Any] = field(default_factory=dict)   # "attrs": name -> Value | DELETED


class BlindList:
    """What the trace did to a list from outside the frame without looking at it (``ListValue.blind``):
    ``append`` / ``extend`` add to ``tail``, ``clear`` sets ``cleared``.  The first read of the list's
    items calls ``observe``: the length guard goes in, the real items become lazy values, and the
    blind changes apply to them.  A list never observed needs only its type guarded, so appending
    to a list that outlives the call (``history.append(loss)``) does not recompile every call."""

    def __init__(self, tx: "Tracer", obj: list, source: Source):
        self.tx, self.obj, self.source = tx, obj, source
        self.cleared = False
        self.tail: list[Value] = []

    def observe(self) -> list[Value]:
        self.tx.guards.sequence(self.source, self.obj, type_known=True)     # LENGTH_CHECK
        base = [] if self.cleared else [LazyValue(o, ItemSource(self.source, i))
                                        for i, o in enumerate(self.obj)]
        return base + self.tail


class BlindSet:
    """What the trace did to a set from outside the frame (``SetValue.blind``), in order:
    ``("add", v)``, ``("discard", v)``, ``("clear", None)``; replayed after the graph."""

    def __init__(self, obj: set, source: Source | None):
        self.obj, self.source = obj, source
        self.ops: list[tuple[str, Any]] = []

    def where(self) -> str:
        return self.source.name() if self.source is not None else "reached through library code"


class SideEffects:
    def __init__(self) -> None:
        self._targets: dict[Any, _Target] = {}            # key -> target, in first-change order
        self._globals: dict[tuple[int, str], Any] = {}    # (id(globals dict), name) -> Value | DELETED
        self._keepalive: list[Any] = []
        self._module_reads: set[tuple[int, str]] = set()  # (id(module), name) read from the real module
        self._unreachable: set[int] = set()              # ids of outside containers without a source

    def __bool__(self) -> bool:
        return bool(self._targets)

    def describe(self) -> list[str]:
        return [_describe(t) for t in self._targets.values()]

    # -- recording ---------------------------------------------------------------------------------
    def unreachable(self, v: Value) -> None:
        """``v`` is a real list/dict from outside the frame without a source (read by library code)."""
        self._unreachable.add(id(v))
        self._keepalive.append(v)

    def mutated(self, v: Value) -> None:
        """A list or dict that came from outside the frame is about to change."""
        if id(v) in self._unreachable:
            raise Unsupported(f"mutating a {v.describe()} reached through library code",
                              "Only containers reached from the frame's arguments, globals and closures "
                              "can be changed inside a compiled region.")
        if v.source is None:
            return
        key = ("container", id(v))
        if key not in self._targets:
            kind = "list" if isinstance(v, ListValue) else "set" if isinstance(v, SetValue) else \
                getattr(v, "effect_kind", "dict")          # (a deque: stdlib_deque.py)
            self._targets[key] = _Target(kind, v, v.source)

    def mutated_local(self, v: Value) -> None:
        """A list or dict made inside the frame is about to change: nothing to replay."""

    def store_attr(self, obj_v: Value, obj: Any, name: str, value: Any) -> None:
        """``obj.name = value`` (``value`` may be DELETED) on a real object from outside the frame."""
        key = ("attrs", id(obj))
        t = self._targets.get(key)
        if t is None:
            where = obj_v.source if obj_v.source is not None else obj
            t = self._targets[key] = _Target("attrs", obj_v, where)
            self._keepalive.append(obj)
        previous = t.attrs.pop(name, None)                # re-stored names move to the end
        if value is DELETED and previous is not None and not _holds(obj, name):
            return                                        # set and deleted in the trace: nothing to do
        t.attrs[name] = value

    def attrs_source(self, obj: Any) -> Source | None:
        """The source the attribute writes to ``obj`` were recorded under, if any."""
        t = self._targets.get(("attrs", id(obj)))
        return t.where if t is not None and isinstance(t.where, Source) else None

    def attr(self, obj: Any, name: str) -> Any:
        """The traced value of ``obj.name`` if the trace stored it (DELETED if deleted), else None."""
        t = self._targets.get(("attrs", id(obj)))
        return None if t is None else t.attrs.get(name)

    def module_read(self, m: torch.nn.Module, name: str) -> None:
        """The trace read ``m.name`` from the real module (its value is baked into the graph)."""
        self._module_reads.add((id(m), name))

    def reads_module_tables(self) -> bool:
        """Whether the trace read a module table that a lazy MODULE_TREE leaves unwatched (the
        state_dict hook tables, the forward hooks' side tables) or a module's ``__dict__``: then
        the guard watches every table (guards/spec.py, GuardSet.all_module_tables)."""
        return any(name in LAZY_MODULE_TABLES for _, name in self._module_reads)

    def _rewatch_safe(self) -> bool:
        """After applying, may the entry's guard take the new module state as its baseline?
        Only when the trace relied on nothing that the effects change: every module attribute
        it writes is a plain attribute (not a parameter, buffer or submodule) that it never read
        from the real module.  Otherwise the guard fails on the next call and the frame recompiles."""
        touched = False
        for t in self._targets.values():
            if t.kind == "dict":
                touched = True
                if isinstance(t.where, AttrSource) and t.where.attr in ("_parameters", "_buffers", "_modules"):
                    return False              # register_buffer / _buffers[k] = t: the graph baked the old ones
            if t.kind == "set":
                touched = True
            if t.kind != "attrs" or not isinstance(real_object(t.value), torch.nn.Module):
                continue
            m = real_object(t.value)
            touched = True
            for name, v in t.attrs.items():
                if (id(m), name) in self._module_reads or name in m._parameters or name in m._buffers \
                        or name in m._modules or v is DELETED:
                    return False
                v = v.obj if isinstance(v, LazyValue) else v
                if isinstance(v, (torch.nn.Module, torch.nn.Parameter, ModuleValue)) \
                        or (isinstance(v, TensorValue) and v.cls is torch.nn.Parameter):
                    return False
        return touched

    def stored_attrs(self, obj: Any) -> dict[str, Any]:
        t = self._targets.get(("attrs", id(obj)))
        return {} if t is None else t.attrs

    def store_global(self, f_globals: dict, name: str, value: Any) -> None:
        key = ("global", id(f_globals), name)
        self._targets.pop(key, None)
        self._targets[key] = _Target("global", value, f_globals, {"name": name})
        self._globals[(id(f_globals), name)] = value
        self._keepalive.append(f_globals)

    def global_(self, f_globals: dict, name: str) -> Any:
        """The traced value of a global the trace stored (DELETED if deleted), else None."""
        return self._globals.get((id(f_globals), name))

    def store_cell(self, cell_v: CellValue, where: Source | Any) -> None:
        """A cell of a function outside the trace is rebound (its CellValue holds the new value)."""
        key = ("cell", id(cell_v))
        if key not in self._targets:
            self._targets[key] = _Target("cell", cell_v, where)

    # -- building the plan ----------------------------------------------------------------------------
    def build(self, tx: "Tracer", out: "OutputBuilder") -> "EffectPlan | None":
        """Must run before the return value's spec: effect slots take the first pass-through slots."""
        if not self._targets:
            return None
        b = SpecBuilder(tx, out)
        steps = [b.target(t) for t in self._targets.values()]
        plan = EffectPlan(steps, len(out.passthrough), self.describe(), self._rewatch_safe())
        plan.static_attrs = self._static_attrs()
        return plan

    def _static_attrs(self) -> list["StaticAttr"]:
        """Module attributes the trace read (their values are baked into the graph) and also
        rebinds: the next call sees another value, so the frame recompiles (the cache-limit
        warning names them: ``static_attr_report``)."""
        out = []
        for t in self._targets.values():
            m = real_object(t.value) if t.kind == "attrs" else None
            if not isinstance(m, torch.nn.Module):
                continue
            where = t.where.name() if isinstance(t.where, Source) else type(m).__name__
            for name in t.attrs:
                if (id(m), name) in self._module_reads and name in m.__dict__:
                    out.append(StaticAttr(f"{where}.{name}", name, m.__dict__[name], weakref.ref(m)))
        return out


def _describe(t: _Target) -> str:
    where = t.where.name() if isinstance(t.where, Source) else f"<{type(t.where).__name__}>"
    if t.kind == "attrs":
        return f"{where}: set attributes {', '.join(t.attrs)}"
    if t.kind == "global":
        return f"global {t.attrs['name']}"
    return f"{where}: {t.kind} contents"


@dataclass
class StaticAttr:
    """A module attribute read as a constant by the trace and rebound by it (``self.steps += 1``)."""

    expr: str                 # "L['self'].steps"
    name: str
    value: Any                # what the trace read (baked into that entry's graph)
    module: Any               # weakref to the module

    def now(self) -> Any:
        m = self.module()
        return getattr(m, self.name, "<deleted>") if m is not None else "<module gone>"


def static_attr_report(code: types.CodeType, entries) -> list[str]:
    """Lines for the cache-limit warning when the newest entry's graph baked in a module attribute
    that the frame itself rebinds: the failing fact (``L['self'].steps == 7``), the user line that
    rebinds it, and a hint.  ``entries``: the code's cache entries, most recently used first."""
    for e in entries:
        plan = getattr(getattr(e, "compiled_fn", None), "effect_plan", None)
        attrs = getattr(plan, "static_attrs", None)
        if not attrs:
            continue
        lines = []
        for a in attrs:
            lines.append(f"   failing guard: {a.expr} == {a.value!r} (it is {a.now()!r} now)")
            at = _store_line(code, a.name)
            if at is not None:
                lines.append(f"   rebound in user code: {at}")
            kind = {int: "integer", float: "float", bool: "bool", str: "string"}.get(type(a.value))
            what = f"{kind} attributes" if kind else f"attributes of type {type(a.value).__name__}"
            lines.append(f"   hint: xcompile treats {what} of an nn.Module as static (each value is "
                         f"baked into the graph); keep a counter like this in a tensor (self.{a.name} += 1 "
                         f"on a buffer) or outside the module.")
        return lines
    return []


def _store_line(code: types.CodeType, name: str) -> str | None:
    """``File "...", line N: <source>`` of the first ``<obj>.name = ...`` in ``code``."""
    line = None
    for ins in dis.get_instructions(code):
        starts = getattr(ins, "starts_line", None)
        if starts is True:                  # 3.13: a flag, the number is line_number
            starts = getattr(ins, "line_number", None)
        if starts is not None and starts is not False:
            line = starts
        if ins.opname == "STORE_ATTR" and ins.argval == name and line is not None:
            text = linecache.getline(code.co_filename, line).strip()
            return f'File "{code.co_filename}", line {line}, in {code.co_name}: {text}'
    return None


def _holds(obj: Any, name: str) -> bool:
    """The real ``obj`` has an instance attribute ``name`` (for a module: also a parameter,
    buffer or submodule)."""
    d = getattr(obj, "__dict__", {})
    if name in d:
        return True
    return isinstance(obj, torch.nn.Module) and any(
        name in d.get(k, ()) for k in ("_parameters", "_buffers", "_modules"))


# -- value specs and steps (their format: effects.py, Slot ... CellStep) --------------------------------

class SpecBuilder:
    def __init__(self, tx: "Tracer", out: "OutputBuilder"):
        self.tx = tx
        self.out = out

    def slot(self, src: Source) -> tuple:
        return Slot("slot", self.out._passthrough(src).slot)

    def where(self, where: Source | Any) -> tuple:
        if isinstance(where, TensorValue):             # a tensor made in the frame (tensor_attrs.py)
            return self.value(where)
        return self.slot(where) if isinstance(where, Source) else Const("const", where)

    def target(self, t: _Target) -> tuple:
        if t.kind == "deque":                          # no slice assignment: cleared and refilled
            return ListTailStep("list_tail", self.where(t.where), True, [self.value(i) for i in t.value.items])
        if t.kind == "list":
            blind = t.value.blind
            if blind is not None:                      # never read: extend the real list
                return ListTailStep("list_tail", self.where(t.where), blind.cleared,
                                    [self.value(i) for i in blind.tail])
            return ListStep("list", self.where(t.where), [self.value(i) for i in t.value.items])
        if t.kind == "set":
            ops = [(op, None if x is None else self.value(x)) for op, x in t.value.blind.ops]
            return SetOpsStep("set_ops", self.where(t.where), ops)
        if t.kind == "dict":
            items = t.value.items
            key_specs = {i: self.key(k) for i, k in enumerate(items) if isinstance(k, ValueKey)}
            return DictStep("dict", self.where(t.where), list(items), [self.value(i) for i in items.values()],
                            key_specs or None)
        if t.kind == "attrs":                          # modules: nn.Module.__setattr__ routes the value
            is_module = isinstance(real_object(t.value), torch.nn.Module)
            return AttrsStep("attrs", self.where(t.where),
                             [(n, None if v is DELETED else self.value(v)) for n, v in t.attrs.items()], is_module)
        if t.kind == "global":
            v = t.value
            return GlobalStep("global", t.where, t.attrs["name"], None if v is DELETED else self.value(v))
        if t.kind == "cell":
            c = t.value.contents
            return CellStep("cell", self.where(t.where), None if c is None else self.value(c))
        raise AssertionError(t.kind)

    def key(self, k: ValueKey) -> tuple:
        """A tensor or module key: the object itself when it comes from outside the frame (a
        parameter keying an optimizer's state: never a copy of it out of the graph)."""
        v = self.tx.resolve(k.value)
        if isinstance(v, TensorValue):                 # (the value or one an in-place op returned)
            known = [u for u in self.tx.gb.by_id.values() if u.fake is v.fake]
            real = self.tx.gb.real_tensor(known[0]) if known else None
        else:
            real = real_object(v)
        return Const("const", real) if real is not None else self.value(v)

    def value(self, v: Any) -> tuple:
        if isinstance(v, LazyValue):                    # never looked at: the object as it was
            return self.slot(v.source) if v.source is not None else Const("const", v.obj)
        v = self.tx.resolve(v)
        if isinstance(v, TensorValue):
            if v.source is not None and v.node.op in ("placeholder", "get_attr"):
                return self.slot(v.source)              # the input object itself, not a copy
            return self.out.spec(v)
        if isinstance(v, ConstantValue):
            return Const("const", v.value)
        if getattr(v, "sym", None) is not None:         # a captured scalar (scalars.py): a graph output
            return self.out.spec(v)
        if v.source is not None:
            return self.slot(v.source)
        if isinstance(v, TupleValue):
            parts = [self.value(i) for i in v.items]
            if v.cls is tuple:
                return SeqOf("tuple", id(v), parts)
            return NamedTupleOf("namedtuple", id(v), v.cls, parts)
        if isinstance(v, ListValue):
            return SeqOf("list", id(v), [self.value(i) for i in v.items])
        if isinstance(v, SetValue):
            return SeqOf("set", id(v), [self.value(i) for i in v.items])
        if isinstance(v, DictValue):
            factory = None if v.default_factory is None else self.value(v.default_factory)
            key_specs = {i: self.value(k.value) for i, k in enumerate(v.items) if isinstance(k, ValueKey)}
            return DictOf("dict", id(v), list(v.items), [self.value(i) for i in v.items.values()], v.cls, factory,
                          key_specs or None)
        if isinstance(v, NewObjectValue):
            storage: Any
            if isinstance(v.storage, (ListValue, TupleValue)):      # a list / tuple subclass
                storage = (list if isinstance(v.storage, ListValue) else tuple, None,
                           [self.value(i) for i in v.storage.items])
            else:
                storage = None if v.storage is None else \
                    (v.storage.cls, list(v.storage.items), [self.value(i) for i in v.storage.items.values()])
            return ObjectOf("object", id(v), v.cls, {n: self.value(a) for n, a in v.attrs.items()}, storage)
        made = rebuilt_parts(v)                          # iterators, deques (rebuild_table.py)
        if made is not None:
            return CallOf("call", id(v), made[0], [self.value(p) for p in made[1]])
        obj = real_object(v)
        if obj is not None:
            return Const("const", obj)
        raise Unsupported(f"storing {v.describe()} into state that outlives the call",
                          "Store tensors, constants, containers of these, or objects from outside the frame.")


__all__ = ["DELETED", "BlindList", "EffectPlan", "StaticAttr", "static_attr_report", "SideEffects"]
