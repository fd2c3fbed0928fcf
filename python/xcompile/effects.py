"""Side effects applied after a compiled graph runs: the call-time half of ``frontend/side_effects.py``.

``EffectPlan`` (built at the end of a trace by ``SideEffects.build``) holds the recorded
mutations of pre-existing state as steps over the graph's outputs and the entry's effect slots;
``apply`` replays them. ``wrap_compiled`` / ``with_side_effects`` put a plan behind a whole-frame
cache entry; a frame with graph breaks calls ``EffectPlan.apply`` from its runner.
"""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Callable, Literal, NamedTuple

import torch

if TYPE_CHECKING:
    from .frontend.side_effects import StaticAttr


_PLAIN_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


# -- the plan's format ---------------------------------------------------------------------------------
# Value specs: how a value is found or rebuilt when the plan is applied. ``key`` is the id of the
# traced value a built one came from: one value built in the frame is one object per apply,
# however often it is stored (the runner of a graph break reuses them by that key). Each node is
# a named tuple whose first field names its kind (the output spec's ``("out", i)`` nodes, from
# frontend/capture.py, appear here too).
class Slot(NamedTuple):
    """``objects[slot]``: an object from outside the frame (an effect slot of the entry)."""
    kind: Literal["slot"]
    slot: int


class Const(NamedTuple):
    kind: Literal["const"]
    value: Any


class SeqOf(NamedTuple):
    """A tuple, list or set (``kind``) built in the frame."""
    kind: Literal["tuple", "list", "set"]
    key: int
    parts: list


class NamedTupleOf(NamedTuple):
    kind: Literal["namedtuple"]
    key: int
    cls: type
    parts: list


class DictOf(NamedTuple):
    """A dict (``cls``: dict, OrderedDict, defaultdict with ``factory``'s value) built in the frame."""
    kind: Literal["dict"]
    key: int
    keys: list
    parts: list
    cls: type
    factory: Any                               # a value spec, or None
    key_specs: Any = None                      # {position in keys: value spec} for tensor / module keys


class ObjectOf(NamedTuple):
    """An object of a user class built in the frame: its attributes, and for a dict subclass its
    storage ``(dict | OrderedDict, [keys], [value specs])`` (a list / tuple subclass:
    ``(list | tuple, None, [item specs])``)."""
    kind: Literal["object"]
    key: int
    cls: type
    attrs: dict
    storage: tuple | None


class CallOf(NamedTuple):
    """An object built in the frame that Python rebuilds as ``make(*parts)``: an iterator returned
    from the frame (``map`` / ``zip`` / ``itertools`` objects over its items), a deque
    (``frontend/rebuild_table.py``)."""
    kind: Literal["call"]
    key: int
    make: Any
    parts: list


# Steps: the mutations of state from outside the frame, in order.
class ListStep(NamedTuple):
    """``target[:] = parts``."""
    kind: Literal["list"]
    target: Any
    parts: list


class ListTailStep(NamedTuple):
    """A list the frame only appended to (never read): clear it first if ``cleared``, extend."""
    kind: Literal["list_tail"]
    target: Any
    cleared: bool
    tail: list


class SetOpsStep(NamedTuple):
    """A set from outside: its add/discard/clear calls, ``(op, value spec | None)``, in order."""
    kind: Literal["set_ops"]
    target: Any
    ops: list


class DictStep(NamedTuple):
    """The dict's new contents, in order."""
    kind: Literal["dict"]
    target: Any
    keys: list
    parts: list
    key_specs: Any = None                      # {position in keys: value spec} for tensor / module keys


class AttrsStep(NamedTuple):
    """Attributes set (a spec) or deleted (None); through nn.Module's __setattr__ when ``is_module``."""
    kind: Literal["attrs"]
    target: Any
    attrs: list
    is_module: bool


class GlobalStep(NamedTuple):
    """``globals[name] = value`` (None: deleted)."""
    kind: Literal["global"]
    globals: Any                               # the module's globals dict
    name: str
    value: Any


class CellStep(NamedTuple):
    """A closure cell's new contents (None: emptied)."""
    kind: Literal["cell"]
    target: Any
    value: Any


def value_parts(spec) -> list:
    """The value specs directly inside a value spec or a step (None entries left out)."""
    kind = spec[0]
    if kind in ("out", "slot", "const"):
        return []
    if isinstance(spec, (SeqOf, NamedTupleOf, CallOf)):
        return list(spec.parts)
    if isinstance(spec, DictOf):
        return [*spec.parts, *([spec.factory] if spec.factory is not None else []),
                *(spec.key_specs.values() if spec.key_specs else [])]
    if isinstance(spec, ObjectOf):
        return [*spec.attrs.values(), *(spec.storage[2] if spec.storage is not None else [])]
    if isinstance(spec, ListStep):
        return [spec.target, *spec.parts]
    if isinstance(spec, ListTailStep):
        return [spec.target, *spec.tail]
    if isinstance(spec, SetOpsStep):
        return [spec.target, *(p for _, p in spec.ops if p is not None)]
    if isinstance(spec, DictStep):
        return [spec.target, *spec.parts, *(spec.key_specs.values() if spec.key_specs else [])]
    if isinstance(spec, AttrsStep):
        return [spec.target, *(p for _, p in spec.attrs if p is not None)]
    if isinstance(spec, GlobalStep):
        return [] if spec.value is None else [spec.value]
    if isinstance(spec, CellStep):
        return [spec.target, *([spec.value] if spec.value is not None else [])]
    raise AssertionError(f"not an effect spec: {spec!r}")


class EffectPlan:
    """The recorded side effects of one trace, ready to apply after the graph ran."""

    def __init__(self, steps: list[tuple], n_objects: int, described: list[str], rewatch: bool = False):
        self.steps = steps
        # a return value only Python can build (objects made in the frame, sets...): a value spec
        # built after the effects and appended to the graph's outputs (output.OutputBuilder)
        self.result: tuple | None = None
        self.n_objects = n_objects           # effect slots: passthrough_sources[:n_objects]
        self.described = described
        # after applying, the entry's guard re-baselines its module/dict watches (see
        # SideEffects._rewatch_safe): writing `self.cache = ...` in forward does not recompile
        self.rewatch = rewatch
        self.static_attrs: list[StaticAttr] = []   # module attributes baked in and rebound (recompiles)

    def __repr__(self) -> str:
        return f"EffectPlan({'; '.join(self.described)})"

    def apply(self, outputs, objects, memo: dict | None = None):
        """Apply every effect. ``outputs``: the graph's outputs; ``objects``: the effect slots.
        Returns the Python-built result (``self.result``), else None.
        ``memo`` (optional) receives the objects built in the frame, by the id of their value
        (the replacement code of a graph break reuses them: one object, not a copy)."""
        memo = {} if memo is None else memo

        def val(spec):
            kind = spec[0]
            if kind == "out":
                return outputs[spec[1]]
            if kind == "slot":
                return objects[spec.slot]
            if kind == "const":
                return spec.value
            key = spec.key
            if key in memo:
                return memo[key]
            if isinstance(spec, SeqOf) and kind == "tuple":
                r = tuple(val(p) for p in spec.parts)
            elif isinstance(spec, NamedTupleOf):
                r = _make_namedtuple(spec.cls, [val(p) for p in spec.parts])
            elif isinstance(spec, SeqOf) and kind == "list":
                r = memo[key] = []
                r.extend(val(p) for p in spec.parts)
            elif isinstance(spec, SeqOf):
                r = memo[key] = set()
                r.update(val(p) for p in spec.parts)
            elif isinstance(spec, DictOf):
                r = memo[key] = spec.cls(val(spec.factory)) if spec.factory is not None else spec.cls()
                keys = list(spec.keys)
                for i, p in (spec.key_specs or {}).items():
                    keys[i] = val(p)
                r.update(zip(keys, [val(p) for p in spec.parts]))
            elif isinstance(spec, CallOf):
                r = spec.make(*[val(p) for p in spec.parts])
            elif isinstance(spec, ObjectOf):
                storage = spec.storage
                if storage is not None and storage[0] is tuple:     # a tuple subclass: items first
                    r = memo[key] = tuple.__new__(spec.cls, [val(p) for p in storage[2]])
                else:
                    r = memo[key] = object.__new__(spec.cls) if storage is None else storage[0].__new__(spec.cls)
                if storage is not None and storage[0] is list:
                    list.extend(r, [val(p) for p in storage[2]])
                elif storage is not None and storage[0] is not tuple:
                    for k, p in zip(storage[1], storage[2]):
                        storage[0].__setitem__(r, k, val(p))
                for n, p in spec.attrs.items():
                    object.__setattr__(r, n, val(p))
            else:  # pragma: no cover
                raise AssertionError(kind)
            memo[key] = r
            return r

        try:
            return self._apply_steps(val)
        finally:
            # ``val`` refers to itself (its closure holds its own cell) and to ``memo``: left
            # so, the cycle kept every object built here (a model's output and its tensors)
            # alive until the garbage collector ran, not until the caller dropped it
            val = None  # type: ignore[assignment]

    def _apply_steps(self, val):
        for step in self.steps:
            if isinstance(step, ListStep):
                target = val(step.target)
                target[:] = [val(p) for p in step.parts]
            elif isinstance(step, ListTailStep):
                target = val(step.target)
                tail = [val(p) for p in step.tail]
                if step.cleared:
                    target.clear()
                target.extend(tail)
            elif isinstance(step, DictStep):
                target = val(step.target)
                keys = list(step.keys)
                for i, p in (step.key_specs or {}).items():
                    keys[i] = val(p)
                new = list(zip(keys, [val(p) for p in step.parts]))
                if type(target) in _PLAIN_DICTS:
                    target.clear()
                    target.update(new)
                else:                             # a user dict subclass: its own __setitem__ ran
                    base = collections.OrderedDict if isinstance(target, collections.OrderedDict) else dict
                    base.clear(target)            # while tracing; write the storage only
                    for k, x in new:
                        base.__setitem__(target, k, x)
            elif isinstance(step, SetOpsStep):    # a set from outside: its add/discard/clear, in order
                target = val(step.target)
                for op, p in step.ops:
                    if op == "clear":
                        target.clear()
                    elif op == "add":
                        target.add(val(p))
                    else:
                        target.discard(val(p))
            elif isinstance(step, AttrsStep):     # a user __setattr__ already ran while tracing
                target = val(step.target)
                cls = torch.nn.Module if step.is_module else object
                for name, p in step.attrs:
                    if p is None:
                        cls.__delattr__(target, name)
                    else:
                        cls.__setattr__(target, name, val(p))
            elif isinstance(step, GlobalStep):
                if step.value is None:
                    step.globals.pop(step.name, None)
                else:
                    step.globals[step.name] = val(step.value)
            elif isinstance(step, CellStep):
                cell = val(step.target)
                if step.value is None:
                    del cell.cell_contents
                else:
                    cell.cell_contents = val(step.value)
        return None if self.result is None else val(self.result)


def _make_namedtuple(cls, parts):
    """A namedtuple takes its fields as arguments; a structseq and ``torch.Size`` one tuple."""
    return cls(*parts) if hasattr(cls, "_fields") else cls(parts)


def wrap_compiled(compiled: Callable, plan: EffectPlan, n_tensors: int, guard=None) -> Callable:
    """The graph entry's callable for a graph with side effects: called with
    ``(*graph_inputs, *effect_objects)``, runs the graph, applies the effects, returns the outputs.
    ``guard`` (the entry's RootGuard) re-baselines its watches afterwards when the plan allows."""
    rewatch = guard.rewatch if guard is not None and plan.rewatch else None

    def run_and_apply(*args):
        outs = compiled(*args[:n_tensors])
        result = plan.apply(outs, args[n_tensors:])
        if rewatch is not None:
            rewatch()
        return outs if plan.result is None else (*outs, result)
    run_and_apply.__qualname__ = f"side_effects({getattr(compiled, '__qualname__', 'graph')})"
    run_and_apply.effect_plan = plan  # type: ignore[attr-defined]  # read by static_attr_report
    return run_and_apply


def with_side_effects(captured, compiled: Callable, n_inputs: int, guard=None) -> tuple[Callable, int]:
    """(callable, number of slots it takes) for ``CacheEntry.graph``: unchanged without effects."""
    plan = captured.side_effects
    if plan is None:
        return compiled, n_inputs
    return wrap_compiled(compiled, plan, n_inputs, guard), n_inputs + plan.n_objects


__all__ = ["EffectPlan", "value_parts", "with_side_effects", "wrap_compiled"]
