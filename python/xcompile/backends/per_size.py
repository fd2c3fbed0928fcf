"""Graphs with symbolic sizes (dynamic shapes) for backends that compile static shapes.

The frontend hands a backend one graph whose input sizes are symbolic (``f32[s0, 5]``, and int
arguments ``Sym(s1)``); the eager backend runs it as it is, for every size. The AOT tracer and
the kernel generator still specialize to the sizes they are given, so ``aot_eager`` and
``inductor`` wrap such a graph in ``PerSize``: the backend compiles the graph for the sizes of
each distinct call signature it meets (sizes and strides of the symbolic tensor inputs, values
of the symbolic ints), once, and later calls with those sizes go straight to that compiled
graph. The frame itself is traced once and guarded symbolically, so a new size costs a backend
compile, not a new cache entry (which the cache size limit counts). Each new size is logged
under ``XCOMPILE_LOGS=recompiles``.

In the static copy a backend compiles, symbolic int inputs are constants (and are dropped from
its arguments), and sizes the graph returns (``x.shape[0] + 1``) are computed here from the
inputs and put back around the backend's result.
"""
from __future__ import annotations

from typing import Any, Callable, cast

import sympy
import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_symbols, free_unbacked_symbols

from .. import log
from ..debug import dump
from ..kernels.sizes import SCALAR_FUNCS

_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PY = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def _placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _backed(v: Any) -> bool:
    return bool(free_symbols(v)) and not free_unbacked_symbols(v)


def symbolic_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """Positions of the placeholders with symbolic sizes (not captured scalars), and of the int
    and float inputs (symbolic, or fixed by the trace after it made them inputs)."""
    return [i for i, n in enumerate(_placeholders(gm))
            if isinstance(n.meta.get("example_value"), (torch.SymInt, torch.SymFloat))
            or (isinstance(n.meta.get("example_value"), torch.Tensor) and _backed(n.meta["example_value"]))]


class PerSize:
    """Calls ``compile_static(gm_copy, inputs)`` once per distinct sizes of the symbolic inputs."""

    backend_compiles = 0                  # over all instances (benchmarks/dynamic.py reports it)

    def __init__(self, compile_static: Callable, gm: torch.fx.GraphModule, example_inputs: list,
                 positions: list[int], name: str):
        self.compile_static = compile_static
        self.gm = gm
        self.name = name
        fakes = [n.meta["example_value"] for n in _placeholders(gm)]
        self.tensors = [i for i in positions if isinstance(fakes[i], torch.Tensor)]
        # symbolic ints and floats: constants in each compiled copy
        self.ints = [i for i in positions if isinstance(fakes[i], (torch.SymInt, torch.SymFloat))]
        self.fakes = fakes
        self.floats = [i for i in positions if isinstance(fakes[i], torch.SymFloat)]
        self.compiled: dict[tuple, Callable] = {}
        self.float_values: set[tuple] = set()
        dumping = dump.current()          # the debug dump: sizes compiled at later calls join the frame's folder
        if dumping is not None:
            self.compile_static = dumping.within(dumping.label, compile_static)
        key = self.key(example_inputs)
        self._as_is(key)                  # (counts the first call's float values)
        self._compile(key, list(example_inputs))

    def key(self, args) -> tuple:
        return (tuple((tuple(args[i].shape), args[i].stride()) for i in self.tensors),
                tuple(_number_key(args[i]) for i in self.ints))

    def _compile(self, key: tuple, args: list) -> Callable:
        gm = torch.fx.GraphModule(self.gm, self.gm.graph.__deepcopy__())   # same parameters
        values = self._bindings(args)
        placeholders = _placeholders(gm)
        for i in self.ints:                             # symbolic ints, floats: constants in this copy
            p = placeholders[i]
            for user in list(p.users):
                user.args = _replaced(user.args, p, args[i])
                user.kwargs = _replaced(user.kwargs, p, args[i])
            gm.graph.erase_node(p)
        out = gm.graph.output_node()
        outs = list(cast(tuple, out.args[0]))
        sizes = {i: self._value(o, values, args) for i, o in enumerate(outs)
                 if isinstance(o, torch.fx.Node) and isinstance(o.meta.get("example_value"), _SYM)}
        sizes.update({i: o for i, o in enumerate(outs) if not isinstance(o, torch.fx.Node)})
        out.args = (tuple(o for i, o in enumerate(outs) if i not in sizes),)
        gm.recompile()            # (no dead-code pass: FX would drop in-place method calls)
        for n in gm.graph.nodes:                      # the static compile traces its own fakes
            n.meta.pop("example_value", None)
        if self.compiled:
            log.log("recompiles", "%s: compiling the dynamic graph for new sizes %s (%d so far)",
                    self.name, key, len(self.compiled) + 1)
        kept = [a for i, a in enumerate(args) if i not in self.ints]
        fn = self.compile_static(gm, kept)
        PerSize.backend_compiles += 1
        self.compiled[key] = _adapted(fn, set(self.ints), sizes, len(outs))
        return self.compiled[key]

    def _bindings(self, args: list) -> dict:
        """Each input symbol -> the size (stride, offset, int) it stands for in ``args``; the
        symbols the trace made (``_expr``) and what the ShapeEnv replaced them with since."""
        values: dict = {}

        def bind(f, r) -> None:
            if isinstance(f, (torch.SymInt, torch.SymFloat)):
                for e in (f.node._expr, f.node.expr):
                    if isinstance(e, sympy.Symbol):
                        values.setdefault(e, r)

        for i in self.tensors:
            fake, real = self.fakes[i], args[i]
            for f, r in [*zip(fake.size(), real.size()), *zip(fake.stride(), real.stride()),
                         (fake.storage_offset(), real.storage_offset())]:
                bind(f, r)
        for i in self.ints:
            bind(self.fakes[i], args[i])
        return values

    def _value(self, out: torch.fx.Node, values: dict, args: list):
        """The number a symbolic output stands for. A float is computed as the traced code did
        (Python arithmetic on the inputs, in the graph's order: sympy's evaluation may group
        and round otherwise). Sizes are read from the expression the trace made: a
        backend's attempt at one graph for all sizes may have taught the ShapeEnv a value for a
        size after the frame's guards were made (it then gave up, and the graph is compiled per
        size), which the replaced expression would return for every size (random program 300639:
        a size returned was the first size compiled's)."""
        sym = out.meta["example_value"]
        if isinstance(sym, torch.SymFloat):
            ok, v = _python_value(out, {p: a for p, a in zip(_placeholders(self.gm), args)})
            if ok:
                return float(v)
        for e in (sym.node._expr, sym.node.expr):
            r = sympy.sympify(e.xreplace(values))
            if r.is_number:
                return _PY[type(sym)](r)
        raise AssertionError(f"per_size: output {sym} is not a function of the input sizes")

    def __call__(self, *args):
        key = self.key(args)
        fn = self.compiled.get(key)
        if fn is None:
            fn = self._as_is(key) or self._compile(key, list(args))
        return fn(*args)

    def _as_is(self, key: tuple) -> Callable | None:
        """The graph as it is (right for every value) for a float seen in no compiled copy once
        ``MAX_FLOAT_COPIES`` values have copies: a float that changes every call (an LR
        scheduler's) would otherwise compile a copy per call, forever."""
        if not self.floats:
            return None
        values = tuple(_number_key(v) for i, v in zip(self.ints, key[1]) if i in self.floats)
        if values in self.float_values or len(self.float_values) < MAX_FLOAT_COPIES:
            self.float_values.add(values)
            return None
        if len(self.float_values) == MAX_FLOAT_COPIES:
            self.float_values.add(("as is",))
            log.log("fallbacks", "%s: a float input took more than %d values: the graph runs as it is for "
                    "new values (kernels keep floats as constants)", self.name, MAX_FLOAT_COPIES)
        return self.gm.forward


# copies compiled for distinct values of the float inputs before new values run the graph as is
MAX_FLOAT_COPIES = 2


def _number_key(v: Any) -> Any:
    """A per-size key for an int or float argument: a float by its bits (0.0 and -0.0 are equal
    numbers that give different results; nan is not equal to itself)."""
    return ("f", v.hex()) if isinstance(v, float) else v


def _python_value(node: Any, bound: dict) -> tuple[bool, Any]:
    """(True, value) when ``node`` is Python arithmetic on the graph's number inputs, computed as
    the traced code computed it; (False, None) otherwise (a size read from a tensor)."""
    if not isinstance(node, torch.fx.Node):
        return True, node
    if node.op == "placeholder":
        v = bound.get(node)
        return (True, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (False, None)
    fn = node.target
    if node.op != "call_function" or fn not in SCALAR_FUNCS or node.kwargs or not callable(fn):
        return False, None
    vals = []
    for a in node.args:
        ok, v = _python_value(a, bound)
        if not ok:
            return False, None
        vals.append(v)
    return True, fn(*vals)


def _fixed_number(v: Any) -> tuple[bool, Any]:
    """(True, the number) for an output example that the static sizes fix (an int, or a symbolic
    int whose expression the ShapeEnv reduces to a constant: ``x.size(-1) + 3`` after a guard
    fixed that size), else (False, None)."""
    if isinstance(v, (bool, int, float)):
        return True, v
    if isinstance(v, _SYM):
        node = v.node
        expr = node.shape_env.simplify(node.expr) if node.shape_env is not None else node.expr
        if not getattr(expr, "free_symbols", True):
            return True, _PY[type(v)](expr)
    return False, None


def number_outputs(compile_static: Callable, gm: torch.fx.GraphModule, example_inputs: list,
                   name: str) -> Callable | None:
    """A graph with static sizes that returns numbers besides tensors (a size read in the traced
    code, ``acc += t.size(-1)``): the numbers are fixed by the sizes, so ``compile_static``
    compiles a copy that returns the tensors only, and the numbers are put back around it (AOT
    graphs return tensors). None when every output is a tensor; the graph as it is (``gm.forward``,
    logged) when a number is not fixed."""
    out = gm.graph.output_node()
    if not isinstance(out.args[0], (tuple, list)):
        return None                    # one output (a graph made outside the frontend): as it is
    outs = list(out.args[0])
    numbers: dict[int, object] = {}
    for i, o in enumerate(outs):
        v = o.meta.get("example_value") if isinstance(o, torch.fx.Node) else o
        if not isinstance(v, (bool, int, float, *_SYM)):
            continue                   # tensors (and whatever else): the backend's to take
        ok, c = _fixed_number(v)
        if not ok:
            log.log("fallbacks", "whole graph eager (%s): output %d is %s, not fixed by the sizes", name, i,
                    type(v).__name__)
            return gm.forward
        numbers[i] = c
    if not numbers:
        return None
    copy = torch.fx.GraphModule(gm, gm.graph.__deepcopy__())          # same parameters
    cout = copy.graph.output_node()
    cout.args = (tuple(o for i, o in enumerate(cast(tuple, cout.args[0])) if i not in numbers),)
    copy.recompile()                   # (no dead-code pass: FX would drop in-place method calls)
    return _adapted(compile_static(copy, list(example_inputs)), set(), numbers, len(outs))


def _replaced(tree: Any, node: torch.fx.Node, value: Any) -> Any:
    if tree is node:
        return value
    if isinstance(tree, (tuple, list)):
        return type(tree)(_replaced(t, node, value) for t in tree)
    if isinstance(tree, dict):
        return {k: _replaced(t, node, value) for k, t in tree.items()}
    if isinstance(tree, slice):
        return slice(_replaced(tree.start, node, value), _replaced(tree.stop, node, value),
                     _replaced(tree.step, node, value))
    return tree


def _adapted(fn: Callable, drop: set[int], constants: dict[int, object], n: int) -> Callable:
    """``fn`` (compiled without the dropped inputs and constant outputs) called as the graph is."""
    if not drop and not constants:
        return fn

    def run(*args):
        outs = iter(fn(*[a for i, a in enumerate(args) if i not in drop]) if drop else fn(*args))
        return tuple(constants[i] if i in constants else next(outs) for i in range(n))
    return run
