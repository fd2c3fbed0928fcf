"""The frame's return value -> graph outputs (a tuple of tensors) + the output spec.

See ``capture.OutputSpec``: tensors and captured scalars (scalars.py; the graph returns them as
Python numbers) become ``Out(i)`` (one graph output per distinct node), constants ``Const(v)``,
containers built in the frame are rebuilt from their parts, and objects that came from outside
the frame are handed back as-is through ``PassThrough(k)``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..effects import EffectPlan
from ..guards.sources import Source
from .capture import DictSpec, NamedTupleSpec, OutputSpec, PassThrough, Seq, const, out, passthrough
from .dict_keys import has_value_keys
from .exc import Unsupported
from .numpy_values import NumpyArrayValue
from .rebuild_table import is_rebuilt
from .scalars import SymScalarValue
from .side_effects import SpecBuilder
from .values import (
    ConstantValue,
    DictValue,
    ListValue,
    NewObjectValue,
    SetValue,
    TensorValue,
    TupleValue,
    Value,
    real_object,
)

if TYPE_CHECKING:
    from .tracer import Tracer


class OutputBuilder:
    """One per captured graph.  Side effects are planned first (``effects``, see side_effects.py),
    so their objects take the first pass-through slots and their tensors the first outputs."""

    def __init__(self, tx: "Tracer"):
        self.tx = tx
        self.outputs: list[Any] = []       # TensorValue | SymScalarValue | NumpyArrayValue
        self._index: dict[torch.fx.Node, int] = {}
        self.passthrough: list[Source] = []
        self.effects = tx.side_effects.build(tx, self)     # CapturedGraph.side_effects

    def spec(self, v: Value) -> OutputSpec:
        """The output-plan node for ``v``.  Values the C++ plan cannot build (objects made in the
        frame, sets, OrderedDict/defaultdict) make the whole result a Python-built one."""
        if _needs_python(self.tx, v):
            return self._python_result(v)
        return self._spec(v)

    def _python_result(self, v: Value) -> OutputSpec:
        """The result is built by the entry's Python wrapper (side_effects.EffectPlan.result) and
        appended after the graph's outputs."""
        result = SpecBuilder(self.tx, self).value(v)
        plan = self.effects if self.effects is not None else EffectPlan([], 0, [])
        plan.result = result
        plan.n_objects = len(self.passthrough)
        self.effects = plan
        return out(len(self.outputs))

    def _spec(self, v: Value) -> OutputSpec:
        v = self.tx.resolve(v)
        if isinstance(v, (TensorValue, SymScalarValue)) or (isinstance(v, NumpyArrayValue) and v.source is None):
            # (an array: the graph returns its tensor, the compiled call hands back an ndarray)
            i = self._index.get(v.node)
            if i is None:
                i = self._index[v.node] = len(self.outputs)
                self.outputs.append(v)
            return out(i)
        if isinstance(v, ConstantValue):
            return const(v.value)
        if v.source is not None:
            return self._passthrough(v.source)
        if isinstance(v, TupleValue):
            if v.cls is not tuple:              # a namedtuple or structseq (torch.return_types.*)
                return NamedTupleSpec("namedtuple", v.cls, [self._spec(i) for i in v.items])
            return Seq("tuple", [self._spec(i) for i in v.items])
        if isinstance(v, ListValue):
            return Seq("list", [self._spec(i) for i in v.items])
        if isinstance(v, DictValue):
            return DictSpec("dict", list(v.items.keys()), [self._spec(i) for i in v.items.values()])
        obj = real_object(v)
        if obj is not None:
            return const(obj)
        raise Unsupported(f"returning {v.describe()}", "Return tensors, constants and containers of these.")

    def _passthrough(self, src: Source) -> PassThrough:
        if src not in self.passthrough:
            self.passthrough.append(src)
        return passthrough(self.passthrough.index(src))


def _needs_python(tx: "Tracer", v: Value, seen: set | None = None) -> bool:
    """Does ``v`` hold a value made in the frame that only Python code can rebuild?"""
    v = tx.resolve(v)
    if isinstance(v, (TensorValue, ConstantValue, SymScalarValue)) or v.source is not None:
        return False
    if isinstance(v, (NewObjectValue, SetValue)) or is_rebuilt(v):    # (iterators, deques: rebuild_table.py)
        return True
    if isinstance(v, DictValue) and (v.cls is not dict or v.default_factory is not None
                                     or has_value_keys(v.items)):
        return True                              # (tensor keys: the rebuilt dict needs the tensors)
    seen = set() if seen is None else seen
    if id(v) in seen:
        return True                              # a container that holds itself
    seen.add(id(v))
    parts = list(v.items.values()) if isinstance(v, DictValue) else \
        list(v.items) if isinstance(v, (TupleValue, ListValue)) else []
    return any(_needs_python(tx, p, seen) for p in parts)
