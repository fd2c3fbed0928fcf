"""Dynamic shapes in the frontend: which sizes of a graph input are symbolic (the policy),
the ShapeEnv they live in, and the guards they leave behind.

The policy, per dimension of a tensor input (torch.compile's):

    mark_dynamic(t, d)                 symbolic, its own symbol; specializing it is an error
    mark_static(t, d)                  static (mark_dynamic wins over it)
    maybe_mark_dynamic(t, d)           symbolic, its own symbol
    dynamic=True                       symbolic (duck sized: equal sizes share one symbol)
    dynamic=None, automatic dynamic    static at the first compile; a dimension whose size
                                       changed since the code's last compile is symbolic
    dynamic=False                      static, marks included

Sizes 0 and 1 stay specialized (ShapeEnv's ``specialize_zero_one``). The ShapeEnv is made on
the first symbolic input only (its first construction costs most of a second). After the
trace, ``produce_guards`` turns what the ShapeEnv learned into guard specs: which dims
TENSOR_MATCH leaves unchecked, and the relations (``s0 >= 2``, ``s0 == s1``, the strides of a
contiguous input, the guards the trace added by branching on sizes) that the C++
``shape_check`` leaf evaluates. Unbacked symbols (sizes made inside the graph: ``item()``,
``nonzero()``, ``x[mask]``) have no input to read: what the trace assumed about them is not a
guard (the graph computes them on every call).
"""
from __future__ import annotations

import functools
import math
import traceback
import types
import weakref
from typing import Any, Callable

import sympy
import torch
import torch._guards
from torch.fx.experimental.symbolic_shapes import (
    ConstraintViolationError,
    DimDynamic,
    RelaxedUnspecConstraint,
    ShapeEnv,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
    free_unbacked_symbols,
)
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from .. import config, log, shape_state
from .._torch_compat import shape_env_hints
from ..guards import spec
from ..guards.shape_expr import EQ, READ, UnsupportedShapeExpr, compile_relation, text
from ..guards.sources import ItemSource, Source
from ..release import release_shape_envs


class ShapeSource(torch._guards.Source):
    """One of our sources as ShapeEnv wants it (a ``torch._guards.Source``): it names the
    symbols it creates after the source (``TensorPropertySource(ShapeSource(L['x']), SIZE, 0)``)."""

    def __init__(self, source: Source):
        self.source = source

    @property
    def _name_template(self) -> str:
        return self.source.name()

    @functools.cached_property
    def guard_source(self) -> torch._guards.GuardSource:
        return torch._guards.GuardSource.LOCAL

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeSource) and other.source == self.source

    def __hash__(self) -> int:
        return hash(self.source)


class TracingShapeEnv(ShapeEnv):
    """A ShapeEnv that remembers where the trace fixed a symbol to a number (the user line a
    ``mark_dynamic`` error names)."""

    def __init__(self, where: Callable[[], traceback.FrameSummary | None], **kwargs: Any):
        release_shape_envs()                    # the last trace's ShapeEnv is not held by them
        super().__init__(**kwargs)
        self.where = where
        self.specialized: dict[sympy.Symbol, traceback.FrameSummary | None] = {}
        self.guards = _GuardList(self)          # each guard with the user line that added it
        self.guard_lines: list[traceback.FrameSummary | None] = []

    def line_of(self, sym: sympy.Symbol) -> traceback.FrameSummary | None:
        """The user line of the first guard on ``sym`` (or where it was replaced by a number)."""
        for g, line in zip(self.guards, self.guard_lines):
            if sym in g.expr.free_symbols and line is not None:
                return line
        return self.specialized.get(sym)

    def _set_replacement(self, a: sympy.Symbol, tgt: sympy.Expr, msg: str) -> None:
        if tgt.is_number and a not in self.specialized:
            line = self.specialized[a] = self.where()
            log.log("dynamic", "%s specialized to %s at %s", a, tgt,
                    f"{line.filename}:{line.lineno}: {line.line}" if line is not None else "(no user line)")
        super()._set_replacement(a, tgt, msg)


class _GuardList(list):
    def __init__(self, env: TracingShapeEnv):
        super().__init__()
        self.env = env

    def append(self, guard: Any) -> None:
        super().append(guard)
        line = self.env.where()
        self.env.guard_lines.append(line)
        log.log("dynamic", "guard %s added at %s", guard.expr,
                f"{line.filename}:{line.lineno}: {line.line}" if line is not None else "(no user line)")


class ShapePolicy:
    """Which dims of each tensor input are symbolic, for one trace of ``code``."""

    def __init__(self, code: types.CodeType, dynamic: bool | None):
        self.code = code
        self.dynamic = dynamic
        # decided once per compile (a frame split at a break is traced twice: same answers)
        self._decided: dict[str, StatelessSymbolicContext | None] = {}
        self._decided_ints: dict[str, bool] = {}
        self.inputs: list[tuple[Source, _Geometry]] = []           # symbolic inputs: (source, fake's geometry)
        self.ints: list[tuple[Source, torch.SymInt]] = []          # symbolic int arguments
        self.floats: list[tuple[Source, torch.SymFloat]] = []      # symbolic floats from outside
        self.marked: list[tuple[Source, int]] = []                 # mark_dynamic dims: (source, dim)

    def start_trace(self) -> None:
        self.inputs.clear()
        self.ints.clear()
        self.floats.clear()
        self.marked.clear()

    def context(self, t: torch.Tensor, source: Source) -> StatelessSymbolicContext | None:
        """The symbolic context of a tensor input, or None when every dim stays static."""
        name = source.name()
        if name not in self._decided:
            self._decided[name] = self._decide(t, name)
        ctx = self._decided[name]
        if ctx is not None:
            for d in sorted(shape_state.marks(t, shape_state.DYNAMIC_DIMS)):
                self.marked.append((source, d))
        return ctx

    def _decide(self, t: torch.Tensor, name: str) -> StatelessSymbolicContext | None:
        sizes = tuple(t.shape)
        before = shape_state.seen(self.code, name)
        if self.dynamic is False or t.layout != torch.strided:
            return None                     # (a sparse tensor's sizes stay static: its fake has no strides)
        marked = shape_state.marks(t, shape_state.DYNAMIC_DIMS)
        maybe = shape_state.marks(t, shape_state.MAYBE_DYNAMIC_DIMS)
        static = shape_state.marks(t, shape_state.STATIC_DIMS)
        everywhere = self.dynamic is True or (self.dynamic is None and not config.assume_static_by_default)
        changed: set[int] = set()
        if self.dynamic is None and config.automatic_dynamic_shapes and before is not None \
                and len(before) == len(sizes):
            changed = {d for d, (a, b) in enumerate(zip(before, sizes)) if a is None or a != b}
        dims: list[DimDynamic] = []
        constraints: list[StrictMinMaxConstraint | RelaxedUnspecConstraint | None] = []
        for d in range(len(sizes)):
            if d in marked:
                lo, hi = shape_state.dim_range(t, d)
                dims.append(DimDynamic.DYNAMIC)
                constraints.append(StrictMinMaxConstraint(
                    vr=ValueRanges(lower=0 if lo is None else lo, upper=int_oo if hi is None else hi),
                    warn_only=False) if lo is not None or hi is not None else RelaxedUnspecConstraint(warn_only=False))
            elif d in static:
                dims.append(DimDynamic.STATIC)
                constraints.append(None)
            elif d in maybe:
                dims.append(DimDynamic.DYNAMIC)
                constraints.append(None)
            elif everywhere or d in changed:
                dims.append(DimDynamic.DUCK)
                constraints.append(None)
            else:
                dims.append(DimDynamic.STATIC)
                constraints.append(None)
        shape_state.record(self.code, name, tuple(None if k != DimDynamic.STATIC else s
                                                  for k, s in zip(dims, sizes)))
        if all(k == DimDynamic.STATIC for k in dims):
            return None
        return StatelessSymbolicContext(dynamic_sizes=dims, constraint_sizes=constraints)

    def note_input(self, source: Source, fake: torch.Tensor) -> None:
        # the geometry as the input arrives: the trace may change the fake's in place
        # (``x.squeeze_(0)``, ``x.t_()``), and the guards check what the caller passes
        self.inputs.append((source, _Geometry(fake)))

    def _automatic(self, source: Source, value: Any, never: bool) -> tuple[bool, tuple | None]:
        """(whether a number from ``source`` is symbolic, what the code's earlier compiles saw
        there): under dynamic=True, or once it took two values (automatic dynamic); never when
        ``never`` or dynamic=False. Decided once per compile, and recorded."""
        name = source.name()
        before = shape_state.seen(self.code, name)
        if name in self._decided_ints:
            return self._decided_ints[name], before
        if self.dynamic is False or never:
            symbolic = False
        elif self.dynamic is True or (self.dynamic is None and not config.assume_static_by_default):
            symbolic = True
        else:
            symbolic = bool(config.automatic_dynamic_shapes and before is not None and before != (value,))
        shape_state.record(self.code, name, (None,) if symbolic else (value,))
        self._decided_ints[name] = symbolic
        return symbolic, before

    def int_is_symbolic(self, value: int, source: Source) -> bool:
        """A Python int argument: never when ``config.specialize_int``; 0 and 1 always
        specialized; an int past int64 is a constant (torch ops given it raise)."""
        never = config.specialize_int or value in (0, 1) or not _INT64_MIN <= value < -_INT64_MIN
        return self._automatic(source, value, never)[0]

    def note_int(self, source: Source, sym: torch.SymInt) -> None:
        self.ints.append((source, sym))

    def float_is_symbolic(self, value: float, source: Source) -> bool:
        """A float from outside: never when ``config.specialize_float``, and never nan, inf (a
        relation on them cannot be guarded) or -0.0 (sympy has no -0.0: the ShapeEnv's number
        for it would be 0.0)."""
        never = config.specialize_float or not math.isfinite(value) or (value == 0 and math.copysign(1.0, value) < 0)
        return self._automatic(source, value, never)[0]

    def tuple_is_open(self, value: tuple, source: Source) -> bool:
        """A tuple of numbers with a float in it (Adam's ``betas``) is a constant guarded by value,
        until it takes another value at this source; then its items are read one by one, and a
        float among them that changed is symbolic at once (``float_is_symbolic``)."""
        opened, before = self._automatic(source, value, bool(config.specialize_float))
        if opened and before is not None and isinstance(before[0], tuple) and len(before[0]) == len(value):
            for i, (old, new) in enumerate(zip(before[0], value)):
                if type(new) is float and old != new:
                    shape_state.record(self.code, ItemSource(source, i).name(), (None,))
        return opened

    def note_float(self, source: Source, sym: torch.SymFloat) -> None:
        self.floats.append((source, sym))


def make_shape_env(where: Callable[[], traceback.FrameSummary | None]) -> TracingShapeEnv:
    """``where`` (a bound method: the GraphBuilder's) is held weakly: the graph's fakes hold
    their sizes' SymNodes from C++ (their TensorImpls), a link the cycle collector cannot see, so
    a ShapeEnv that held the trace strongly (graph, fakes, tracer) kept all of it alive forever."""
    if isinstance(where, types.MethodType):
        ref = weakref.WeakMethod(where)

        def where_weak() -> traceback.FrameSummary | None:
            method = ref()
            return method() if method is not None else None
        where = where_weak
    return TracingShapeEnv(where, allow_scalar_outputs=bool(config.capture_scalar_outputs),
                           allow_dynamic_output_shape_ops=bool(config.capture_dynamic_output_shape_ops))


_INT64_MIN = -(2**63)


class _Geometry:
    """A fake input's sizes, strides and offset when the trace met it (``size``, ``stride`` and
    ``storage_offset`` as a tensor answers them)."""

    __slots__ = ("_offset", "_size", "_stride")

    def __init__(self, fake: torch.Tensor):
        self._size, self._stride, self._offset = tuple(fake.size()), tuple(fake.stride()), fake.storage_offset()

    def size(self, d: int | None = None) -> Any:
        return self._size if d is None else self._size[d]

    def stride(self) -> tuple:
        return self._stride

    def storage_offset(self) -> Any:
        return self._offset


def _expr(v: Any) -> Any:
    return v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(int(v))


def _check_marks(env: TracingShapeEnv, policy: ShapePolicy) -> None:
    for source, d in policy.marked:
        fake = next(f for s, f in policy.inputs if s == source)
        e = env.simplify(_expr(fake.size(d)))
        if not e.is_number:
            continue
        size = fake.size(d)
        sym = size.node._expr if isinstance(size, torch.SymInt) else None   # before replacements
        where = env.line_of(sym) if isinstance(sym, sympy.Symbol) else None
        at = (f" at {where.filename}:{where.lineno}" + (f"\n    {where.line}" if where.line else "")) \
            if where is not None else " (its size is 0 or 1, which is always specialized)"
        raise ConstraintViolationError(
            f"Constraints violated ({source.name()}.size()[{d}])! {source.name()}.size()[{d}] was "
            f"marked dynamic (xcompile.mark_dynamic), but the traced code specialized it to "
            f"{int(e)}{at}.\nHint: remove the mark_dynamic call for this dimension, use "
            f"maybe_mark_dynamic, or change the code so that it does not need the concrete size.")


def _float_guards(env: ShapeEnv, policy: ShapePolicy, guard_set: spec.GuardSet) -> set[sympy.Symbol]:
    """The guards of the symbolic floats; returns their symbols. What the trace branched on is a
    relation of one float to a constant (``momentum != 0``, ``lr >= 0``: FLOAT_COMPARE, checked in
    C++); a float the trace specialized, or related otherwise (to another float, to a size), is
    guarded by value (EQUALS_MATCH), which holds every assumption the trace made about it."""
    # (by the symbol made for it: ``node.expr`` is a number once the trace specialized it)
    symbols = {sym.node._expr: (source, sym) for source, sym in policy.floats
               if isinstance(sym.node._expr, sympy.Symbol)}
    if not symbols:
        return set()
    relations: dict[sympy.Symbol, list[tuple[int, float]]] = {s: [] for s in symbols}
    by_value = {s for s in symbols if env.simplify(s).is_number}
    for g in env.guards:
        e = env.simplify(g.expr)
        mine = e.free_symbols & symbols.keys()
        if not mine or e is sympy.true or e == sympy.true:
            continue
        rel = _float_relation(e, next(iter(mine))) if len(mine) == 1 and e.free_symbols == mine else None
        if rel is None:
            by_value |= mine
        else:
            relations[next(iter(mine))].append(rel)
    for s, (source, sym) in symbols.items():
        if s in by_value:
            guard_set.add(source, spec.EQUALS_MATCH, float(sym.node.hint))
        elif relations[s]:
            guard_set.set_float_relations(source, tuple(dict.fromkeys(relations[s])))
    return set(symbols)


_FLOAT_OPS = {sympy.StrictLessThan: spec.FLOAT_LT, sympy.LessThan: spec.FLOAT_LE,
              sympy.StrictGreaterThan: spec.FLOAT_GT, sympy.GreaterThan: spec.FLOAT_GE,
              sympy.Unequality: spec.FLOAT_NE}
_FLIPPED = {spec.FLOAT_LT: spec.FLOAT_GT, spec.FLOAT_GT: spec.FLOAT_LT, spec.FLOAT_LE: spec.FLOAT_GE,
            spec.FLOAT_GE: spec.FLOAT_LE, spec.FLOAT_NE: spec.FLOAT_NE}


def _float_relation(e: Any, z: sympy.Symbol) -> tuple[int, float] | None:
    """``e`` as ``z op c``, when it is literally the float compared with a constant (``momentum
    != 0``, ``0.0 <= lr``: as torch.optim's checks are), else None. A relation of arithmetic on
    it (``lr + 0.1 > 0.5``) is not rewritten: ``lr > 0.4`` would differ from it within an ulp
    of the bound, where rounding decides."""
    op = _FLOAT_OPS.get(type(e))
    if op is None:
        return None
    lhs, rhs = e.lhs, e.rhs
    if lhs == z and rhs.is_number:
        c = rhs
    elif rhs == z and lhs.is_number:
        c, op = lhs, _FLIPPED[op]
    else:
        return None
    if c.is_Integer and abs(int(c)) > 2**53:          # (Python compares such an int exactly)
        return None
    c = float(c)
    return (op, c) if math.isfinite(c) else None


def produce_guards(env: ShapeEnv | None, policy: ShapePolicy, guard_set: spec.GuardSet) -> None:
    """What the trace assumed about symbolic sizes, as guard specs in ``guard_set``."""
    if env is None or not (policy.inputs or policy.ints or policy.floats):
        return
    if isinstance(env, TracingShapeEnv):
        _check_marks(env, policy)
    bound: dict[sympy.Symbol, tuple[Source, int, int]] = {}
    pending: list[tuple[tuple[Source, int, int], Any]] = []

    def visit(read: tuple[Source, int, int], value: Any) -> int | None:
        e = env.simplify(_expr(value))
        if e.is_number:
            return int(e)
        if isinstance(e, sympy.Symbol) and e not in bound:
            bound[e] = read
        else:
            pending.append((read, e))
        return None

    floats = _float_guards(env, policy, guard_set)
    for source, sym in policy.ints:                       # int arguments first: ``n`` names s0
        value = visit((source, spec.INT_VALUE, 0), sym)
        if value is not None:                                 # specialized by the trace
            guard_set.add(source, spec.EQUALS_MATCH, value)
    for source, fake in policy.inputs:
        sizes = tuple(visit((source, spec.SIZE, d), s) for d, s in enumerate(fake.size()))
        guard_set.dims[source] = (sizes, None)
    for source, fake in policy.inputs:
        strides = tuple(visit((source, spec.STRIDE, d), s) for d, s in enumerate(fake.stride()))
        off = visit((source, spec.STORAGE_OFFSET, 0), fake.storage_offset())
        if off is not None and off != 0:
            pending.append(((source, spec.STORAGE_OFFSET, 0), sympy.Integer(off)))
        guard_set.dims[source] = (guard_set.dims[source][0], strides)
    names = {s: spec.read_text(*r) for s, r in bound.items()}

    def check(expr: Any, first: tuple[Source, int, int] | None = None) -> None:
        reads: list[tuple[Source, int, int]] = [] if first is None else [first]
        index: dict[sympy.Symbol, int] = {}

        def read_index(sym: sympy.Symbol) -> int:
            if sym not in index:
                if sym not in bound:
                    raise UnsupportedShapeExpr(f"symbol {sym} has no source")
                index[sym] = len(reads)
                reads.append(bound[sym])
            return index[sym]

        program = compile_relation(expr, read_index)
        if first is not None:
            program = [READ, 0, *program, EQ]
            shown = f"{spec.read_text(*first)} == {text(expr, names)}"
        else:
            shown = text(expr, names)
        guard_set.shape_checks.append(spec.ShapeCheck(tuple(reads), tuple(program), shown))

    for read, e in pending:                                   # duck sizing, strides of inputs
        check(e, first=read)
    for sym in bound:                                         # ranges: 0/1 specialized, marks
        vr = env.var_to_range.get(sym)
        read_here = False
        if vr is not None and vr.lower not in (-int_oo, sympy.S.NegativeInfinity) \
                and (vr.lower > 0 or bound[sym][1] != spec.SIZE):
            check(sympy.GreaterThan(sym, vr.lower))
            read_here = True
        if vr is not None and vr.upper not in (int_oo, sympy.S.Infinity):
            check(sympy.LessThan(sym, vr.upper))
            read_here = True
        if bound[sym][1] == spec.INT_VALUE and not read_here:
            # a symbolic int the graph takes as an int64: a Python int past int64 (2**64) fails
            # the read, so the call recompiles with it as a constant and raises what eager raises
            check(sympy.GreaterThan(sym, _INT64_MIN))
    for g in env.guards:                                      # what the trace branched on
        e = env.simplify(g.expr)
        if e is sympy.true or e == sympy.true:
            continue
        if e.free_symbols & floats:       # a float's value was branched on: the float is
            hints = shape_env_hints(env)
            for sym in e.free_symbols - floats:      # specialized; the sizes beside it are pinned
                if sym in bound:
                    check(sympy.Eq(sym, int(hints[sym])))
            continue
        if free_unbacked_symbols(e):      # sizes made inside the graph (item(), nonzero()): no
            log.log("dynamic", "guard %s on an unbacked size left to the graph", e)   # input to read
            continue
        check(e)

