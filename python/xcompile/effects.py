"""Side effects applied after a compiled graph runs: the call-time half of ``frontend/side_effects.py``.

``EffectPlan`` (built at the end of a trace by ``SideEffects.build``) holds the recorded
mutations of pre-existing state as steps over the graph's outputs and the entry's effect slots;
``apply`` replays them. ``wrap_compiled`` / ``with_side_effects`` put a plan behind a whole-frame
cache entry; a frame with graph breaks calls ``EffectPlan.apply`` from its runner.
"""
from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Callable

import torch

if TYPE_CHECKING:
    from .frontend.side_effects import StaticAttr


_PLAIN_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


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
                return objects[spec[1]]
            if kind == "const":
                return spec[1]
            key = spec[1]
            if key in memo:
                return memo[key]
            if kind in ("tuple", "namedtuple"):
                parts = [val(p) for p in spec[-1]]
                r = tuple(parts) if kind == "tuple" else _make_namedtuple(spec[2], parts)
            elif kind == "list":
                r = memo[key] = []
                r.extend(val(p) for p in spec[2])
            elif kind == "set":
                r = memo[key] = set()
                r.update(val(p) for p in spec[2])
            elif kind == "dict":
                cls, factory = spec[4], spec[5]
                r = memo[key] = cls(val(factory)) if factory is not None else cls()
                r.update(zip(spec[2], [val(p) for p in spec[3]]))
            elif kind == "object":
                storage = spec[4]
                r = memo[key] = object.__new__(spec[2]) if storage is None else storage[0].__new__(spec[2])
                if storage is not None:
                    for k, p in zip(storage[1], storage[2]):
                        storage[0].__setitem__(r, k, val(p))
                for n, p in spec[3].items():
                    object.__setattr__(r, n, val(p))
            else:  # pragma: no cover
                raise AssertionError(kind)
            memo[key] = r
            return r

        for step in self.steps:
            kind = step[0]
            if kind == "list":
                target = val(step[1])
                target[:] = [val(p) for p in step[2]]
            elif kind == "list_tail":
                target = val(step[1])
                tail = [val(p) for p in step[3]]
                if step[2]:
                    target.clear()
                target.extend(tail)
            elif kind == "dict":
                target = val(step[1])
                new = list(zip(step[2], [val(p) for p in step[3]]))
                if type(target) in _PLAIN_DICTS:
                    target.clear()
                    target.update(new)
                else:                             # a user dict subclass: its own __setitem__ ran
                    base = collections.OrderedDict if isinstance(target, collections.OrderedDict) else dict
                    base.clear(target)            # while tracing; write the storage only
                    for k, x in new:
                        base.__setitem__(target, k, x)
            elif kind == "set_ops":               # a set from outside: its add/discard/clear, in order
                target = val(step[1])
                for op, p in step[2]:
                    if op == "clear":
                        target.clear()
                    elif op == "add":
                        target.add(val(p))
                    else:
                        target.discard(val(p))
            elif kind == "attrs":                 # a user __setattr__ already ran while tracing
                target = val(step[1])
                cls = torch.nn.Module if step[3] else object
                for name, p in step[2]:
                    if p is None:
                        cls.__delattr__(target, name)
                    else:
                        cls.__setattr__(target, name, val(p))
            elif kind == "global":
                _, g, name, p = step
                if p is None:
                    g.pop(name, None)
                else:
                    g[name] = val(p)
            elif kind == "cell":
                cell = val(step[1])
                if step[2] is None:
                    del cell.cell_contents
                else:
                    cell.cell_contents = val(step[2])
        return None if self.result is None else val(self.result)


def _make_namedtuple(cls, parts):
    return cls(parts) if hasattr(cls, "n_sequence_fields") else cls(*parts)


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


__all__ = ["EffectPlan", "with_side_effects", "wrap_compiled"]
