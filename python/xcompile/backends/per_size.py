"""Graphs with symbolic sizes (dynamic shapes) for backends that compile static shapes.

The frontend hands a backend one graph whose input sizes are symbolic (``f32[s0, 5]``); the
eager backend runs it as it is, for every size. The AOT tracer and the kernel generator still
specialize to the sizes they are given, so ``aot_eager`` and ``inductor`` wrap such a graph in
``PerSize``: the backend compiles the graph for the sizes of each distinct call signature it
meets (sizes and strides of the symbolic inputs), once, and later calls with those sizes go
straight to that compiled graph. The frame itself is traced once and guarded symbolically, so
a new size costs a backend compile, not a new cache entry (which the cache size limit counts).
Each new size is logged under ``XCOMPILE_LOGS=recompiles``.
"""
from __future__ import annotations

from typing import Callable, cast

import sympy
import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_symbols, free_unbacked_symbols

from .. import log


def symbolic_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of the placeholders whose example value has symbolic sizes (not captured scalars)."""
    out = []
    for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        v = n.meta.get("example_value")
        if isinstance(v, torch.Tensor) and free_symbols(v) and not free_unbacked_symbols(v):
            out.append(i)
    return out


class PerSize:
    """Calls ``compile_static(gm_copy, inputs)`` once per distinct sizes of the symbolic inputs."""

    def __init__(self, compile_static: Callable, gm: torch.fx.GraphModule, example_inputs: list,
                 positions: list[int], name: str):
        self.compile_static = compile_static
        self.gm = gm
        self.positions = positions
        self.name = name
        self.compiled: dict[tuple, Callable] = {}
        self._compile(self.key(example_inputs), list(example_inputs))

    def key(self, args) -> tuple:
        return tuple((tuple(args[i].shape), args[i].stride()) for i in self.positions)

    def _compile(self, key: tuple, args: list) -> Callable:
        gm = torch.fx.GraphModule(self.gm, self.gm.graph.__deepcopy__())   # same parameters
        out = gm.graph.output_node()
        outs = list(cast(tuple, out.args[0]))
        # sizes the graph returns (x.shape[0] + 1) are constants at these sizes: the backend
        # compiles the tensor outputs only, and the constants are put back around its result
        sizes = {i: self._value(o.meta["example_value"], args) for i, o in enumerate(outs)
                 if isinstance(o, torch.fx.Node) and not isinstance(o.meta.get("example_value"), torch.Tensor)
                 and isinstance(o.meta.get("example_value"), (torch.SymInt, torch.SymFloat, torch.SymBool))}
        if sizes:
            out.args = (tuple(o for i, o in enumerate(outs) if i not in sizes),)
            gm.graph.eliminate_dead_code()
            gm.recompile()
        for n in gm.graph.nodes:                      # the static compile traces its own fakes
            n.meta.pop("example_value", None)
        if self.compiled:
            log.log("recompiles", "%s: compiling the dynamic graph for new sizes %s (%d so far)",
                    self.name, [k[0] for k in key], len(self.compiled) + 1)
        fn = self.compile_static(gm, args)
        if sizes:
            fn = _with_constants(fn, sizes, len(outs))
        self.compiled[key] = fn
        return fn

    def _value(self, sym, args: list):
        """A symbolic number's value for these inputs: its expression with each input symbol
        replaced by the size (stride, offset) it stands for."""
        values = {}
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        for i in self.positions:
            fake, real = placeholders[i].meta["example_value"], args[i]
            for f, r in [*zip(fake.size(), real.size()), *zip(fake.stride(), real.stride()),
                         (fake.storage_offset(), real.storage_offset())]:
                if isinstance(f, torch.SymInt) and isinstance(f.node.expr, sympy.Symbol):
                    values[f.node.expr] = r
        expr = sym.node.expr.xreplace(values)
        return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(sym)](expr)

    def __call__(self, *args):
        fn = self.compiled.get(self.key(args))
        if fn is None:
            fn = self._compile(self.key(args), list(args))
        return fn(*args)


def _with_constants(fn: Callable, constants: dict[int, object], n: int) -> Callable:
    def run(*args):
        outs = iter(fn(*args))
        return tuple(constants[i] if i in constants else next(outs) for i in range(n))
    return run
