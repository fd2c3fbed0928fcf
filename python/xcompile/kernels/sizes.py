"""Symbolic sizes in the kernel generator (dynamic shapes).

A graph traced with symbolic sizes (``f32[s0, 64]``) is lowered with its sizes, strides and
offsets as sympy expressions over the ShapeEnv's symbols (``s0``, ``2*s0 + 1``); plain graphs
keep Python ints. ``sym`` turns a ``SymInt`` (or an int) into that form. The kernels take the
symbols they use as ``int64_t`` arguments and the wrapper reads them from its inputs
(``s0 = arg0.size(0)``), so one compiled graph serves every size its guards admit.

Decisions the generator takes on sizes must hold for every such size: ``known`` decides a
relation only when it follows from the symbols' ranges (a backed size symbol is at least 2:
sizes 0 and 1 are specialized); code that needs an undecidable answer raises
``SymbolicUnsupported`` and the backend compiles that graph once per size instead.
"""
from __future__ import annotations

import contextvars
import math
import operator
import re
from typing import Any

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv as TorchFloorDiv

from .._torch_compat import shape_env_hints
from .index import FloorDiv, ModIndex, index_printer

_LOWER: dict[sympy.Symbol, int | None] = {}   # size symbol -> its least value (ShapeEnv), None: unbounded


class SymbolicUnsupported(RuntimeError):
    """The kernel generator cannot keep this graph's sizes symbolic."""


FLOAT_NAME = re.compile(r"xf\d+")        # a FloatArg's name (a kernel's double argument)


class FloatArg:
    """A symbolic float of the graph (an input, or Python arithmetic on inputs: an optimizer's
    ``lr``): the wrapper has its value each call (as the traced code computed it), and kernels
    take it as a ``double`` argument named ``name``. A lowering may pass it around and load it
    as a constant (``cconst``: converted as a literal is); using it as a number at compile time
    (arithmetic, ordering, ``float()``) raises ``SymbolicUnsupported``, and the graph is compiled
    per value instead. It equals no number (a special case for ``alpha == 1`` is not taken)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def _refuse(self, *args: Any) -> Any:
        raise SymbolicUnsupported(f"a symbolic float ({self.name}) used as a number at compile time")

    __float__ = __int__ = __index__ = __bool__ = __neg__ = __pos__ = __abs__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __pow__ = __rpow__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = _refuse


# Python arithmetic the traced code did on numbers (FX nodes of graphs with symbolic floats):
# computed per call by the wrapper (kernels) or the per-size copy, as the traced code computed it
SCALAR_FUNCS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.neg, operator.pos, operator.abs, math.sqrt, math.exp, math.log, math.cos,
    math.sin, math.floor, math.ceil, math.trunc, torch.sym_float, torch.sym_int, torch.sym_max,
    torch.sym_min, float, int, abs, max, min})


def sym(v: Any) -> Any:
    """An int, or the sympy expression of a SymInt (ints stay ints; sympy integers become ints)."""
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        node = v.node
        expr = node.expr
        env = getattr(node, "shape_env", None)
        if env is not None:
            expr = _exact_divisions(env.replace(expr), env)
            for s in expr.free_symbols:      # (names repeat across ShapeEnvs: always this one's range)
                _LOWER[s] = _lower(env, s)
        return int(expr) if expr.is_Integer else expr
    if isinstance(v, sympy.Basic):
        return int(v) if v.is_Integer else v
    return v


def _exact_divisions(expr: sympy.Expr, env: Any) -> sympy.Expr:
    """``s0 // 2`` as ``s0/2`` where the ShapeEnv knows the division is exact (a guard said
    ``s0 % 2 == 0``): then ``2 * (s0 // 2)`` is ``s0`` to sympy as well."""
    if not expr.has(TorchFloorDiv):
        return expr
    exact = {m.args for m in getattr(env, "divisible", ())}
    return expr.replace(lambda e: isinstance(e, TorchFloorDiv) and e.args in exact, lambda e: e.args[0] / e.args[1])


def is_symbolic(v: Any) -> bool:
    return isinstance(v, sympy.Basic) and not v.is_Integer


def any_symbolic(values) -> bool:
    return any(is_symbolic(v) for v in values)


def size_symbols(e: Any) -> set:
    """The size symbols in ``e`` (those ``sym`` has met; not loop variables)."""
    if not isinstance(e, sympy.Basic):
        return set()
    return {s for s in e.free_symbols if s in _LOWER}


def _lower(env: Any, s: sympy.Symbol) -> int | None:
    r = env.var_to_range.get(s)
    try:
        return int(r.lower) if r is not None else None
    except (TypeError, ValueError, AttributeError):    # -oo: an int that may be negative
        return None


def _shifted(e: sympy.Expr) -> sympy.Expr:
    """``e`` with each size symbol written as ``low + t``, ``t`` a non-negative symbol: sympy's
    sign reasoning then knows the ranges."""
    env = _ENV.get()
    lows = {s: _lower(env, s) if env is not None else _LOWER.get(s) for s in size_symbols(e)}
    sub = {s: low + sympy.Symbol(f"_{s.name}_t", integer=True, nonnegative=True)
           for s, low in lows.items() if low is not None}
    return sympy.expand(e.xreplace(sub)) if sub else e


_ENV: contextvars.ContextVar = contextvars.ContextVar("xcompile_shape_env", default=None)


def using_shape_env(env: Any):
    """Within this context ``known`` also asks ``env`` what its guards imply (``s0 % 2 == 0``)."""
    return _EnvContext(env)


class _EnvContext:
    def __init__(self, env):
        self.env = env

    def __enter__(self):
        self.token = _ENV.set(self.env)

    def __exit__(self, *exc):
        _ENV.reset(self.token)


def known(rel: Any) -> bool:
    """Whether the relation holds for every size (False also when undecided)."""
    if isinstance(rel, bool):
        return rel
    if rel is sympy.true:
        return True
    if rel is sympy.false:
        return False
    if _known_by_ranges(rel):
        return True
    env = _ENV.get()
    if env is None or not isinstance(rel, sympy.Basic) or rel.has(FloorDiv, ModIndex):
        return False
    try:
        return env._maybe_evaluate_static(rel) is sympy.true       # what its guards imply, no new guard
    except Exception:  # noqa: BLE001 - an expression it cannot reason about: undecided
        return False


def _known_by_ranges(rel: Any) -> bool:
    if isinstance(rel, sympy.core.relational.Relational):
        diff = _shifted(rel.lhs - rel.rhs)
        op = rel.rel_op
        if op == "<":
            return bool(diff.is_negative)
        if op == "<=":
            return bool(diff.is_nonpositive)
        if op == ">":
            return bool(diff.is_positive)
        if op == ">=":
            return bool(diff.is_nonnegative)
        if op == "==":
            return diff == 0
        if op == "!=":
            return bool(diff.is_nonzero)
    return False


def decide(rel: Any) -> bool:
    """The truth of ``rel`` when it is the same for every size, else ``SymbolicUnsupported``."""
    if isinstance(rel, bool):
        return rel
    if known(rel):
        return True
    if known(rel.negated if hasattr(rel, "negated") else sympy.Not(rel)):
        return False
    raise SymbolicUnsupported(f"the kernel generator needs to know whether {rel} (symbolic sizes)")


def lt(a, b) -> bool:
    return decide(sympy.sympify(a) < sympy.sympify(b)) if is_symbolic(a) or is_symbolic(b) else a < b


def smax(a, b):
    """max of two sizes (symbolic ones when decidable)."""
    return b if lt(a, b) else a


def nonzero(e: Any) -> bool:
    """``e`` (a size or element count) is never 0."""
    return known(sympy.sympify(e) > 0) if is_symbolic(e) else e != 0


pyexpr = index_printer("//", "min", "max")


def vshape(t: torch.Tensor) -> tuple:
    """A (fake) tensor's sizes as ints or sympy expressions."""
    return tuple(sym(s) for s in t.shape)


def vstride(t: torch.Tensor) -> tuple:
    return tuple(sym(s) for s in t.stride())



def input_symbols(graph) -> dict:
    """Each size symbol of a KernelGraph -> where the wrapper reads it: ("size"|"stride", input
    position, dim), ("offset", position) or ("int", position). Symbols only met inside
    expressions (``s0*s1``) are bound by the plain symbols they are made of."""
    where: dict = {}
    for pos, name in enumerate(graph.inputs):
        if name is None:
            continue
        lay = graph.buffers[name].layout
        for d, e in enumerate(lay.size):
            if isinstance(e, sympy.Symbol):
                where.setdefault(e, ("size", pos, d))
        for d, e in enumerate(lay.stride):
            if isinstance(e, sympy.Symbol):
                where.setdefault(e, ("stride", pos, d))
    for pos, e in graph.sym_inputs.items():
        if isinstance(e, sympy.Symbol):
            where.setdefault(e, ("int", pos))
    return where


def graph_size_names(graph) -> frozenset[str]:
    """The names kernels take as arguments: size symbols (``int64_t``) and floats (``double``)."""
    return frozenset(s.name for s in input_symbols(graph)) | frozenset(graph.float_names())


def hint(e: Any) -> int:
    """An example value of a size (the first call's): for choices that are right for every size
    and only fast for some (block sizes), never for correctness."""
    if not is_symbolic(e):
        return int(e)
    env = _ENV.get()
    values = shape_env_hints(env) if env else {}
    v = sympy.sympify(e).xreplace(values)
    try:
        return max(int(v), 1) if v.is_number else 1024
    except TypeError:
        return 1024


def broadcast_sizes(*shapes) -> tuple:
    """``torch.broadcast_shapes`` for sizes that may be symbolic (equal symbolic sizes must be
    the same expression: the trace guarded them equal, and the ShapeEnv wrote them so)."""
    if not any(any_symbolic(s) for s in shapes):
        return tuple(torch.broadcast_shapes(*shapes))
    n = max(len(s) for s in shapes)
    out: list = []
    for d in range(n):
        sizes = [s[len(s) - n + d] for s in shapes if len(s) - n + d >= 0]
        picked: Any = 1
        for x in sizes:
            if x == 1:
                continue
            if picked == 1:
                picked = x
            elif picked != x and sympy.expand(sympy.sympify(picked) - x) != 0:
                raise SymbolicUnsupported(f"cannot broadcast sizes {picked} and {x}")
        out.append(picked)
    return tuple(out)


def shape_env_of(values: list) -> Any:
    """The ShapeEnv of the first symbolic size among fake tensors, SymInts and SymFloats (None:
    all static)."""
    for v in values:
        if isinstance(v, torch.SymFloat):
            return v.node.shape_env
        sizes = [v] if isinstance(v, torch.SymInt) else \
            [*v.shape, *v.stride(), v.storage_offset()] if isinstance(v, torch.Tensor) else []
        for s in sizes:
            if isinstance(s, torch.SymInt):
                return s.node.shape_env
    return None
