"""The frame's return value -> graph outputs (a tuple of tensors) + the output spec.

See ``capture.OutputSpec``: tensors become ("out", i) (one graph output per distinct node),
constants ("const", v), containers built in the frame are rebuilt from their parts, and
objects that came from outside the frame are handed back as-is through ("source", k).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .exc import Unsupported
from .sources import Source
from .values import ConstantValue, DictValue, ListValue, TensorValue, TupleValue, Value, real_object

if TYPE_CHECKING:
    from .tracer import Tracer


class OutputBuilder:
    """One per captured graph.  Side effects are planned first (``effects``, see side_effects.py),
    so their objects take the first pass-through slots and their tensors the first outputs."""

    def __init__(self, tx: "Tracer"):
        self.tx = tx
        self.outputs: list[TensorValue] = []
        self._index: dict[torch.fx.Node, int] = {}
        self.passthrough: list[Source] = []
        self.effects = tx.side_effects.build(tx, self)
        tx.gb.effects = self.effects               # GraphBuilder.finish puts it in gm.meta

    def spec(self, v: Value) -> tuple:
        v = self.tx.resolve(v)
        if isinstance(v, TensorValue):
            i = self._index.get(v.node)
            if i is None:
                i = self._index[v.node] = len(self.outputs)
                self.outputs.append(v)
            return ("out", i)
        if isinstance(v, ConstantValue):
            return ("const", v.value)
        if v.source is not None:
            return self._passthrough(v.source)
        if isinstance(v, TupleValue):
            if v.cls is not tuple:              # a namedtuple or structseq (torch.return_types.*)
                return ("namedtuple", v.cls, [self.spec(i) for i in v.items])
            return ("tuple", [self.spec(i) for i in v.items])
        if isinstance(v, ListValue):
            return ("list", [self.spec(i) for i in v.items])
        if isinstance(v, DictValue):
            if v.cls is not dict:
                raise Unsupported(f"returning a {v.cls.__name__} built in the frame",
                                  "Return a plain dict (dict(d)) instead.")
            return ("dict", list(v.items.keys()), [self.spec(i) for i in v.items.values()])
        obj = real_object(v)
        if obj is not None:
            return ("const", obj)
        raise Unsupported(f"returning {v.describe()}", "Return tensors, constants and containers of these.")

    def _passthrough(self, src: Source) -> tuple:
        if src not in self.passthrough:
            self.passthrough.append(src)
        return ("source", self.passthrough.index(src))
