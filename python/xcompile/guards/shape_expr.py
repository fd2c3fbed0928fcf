"""Symbolic-shape relations (sympy, from the ShapeEnv) -> the postfix programs the C++
``shape_check`` leaf runs (csrc/guard_shapes.cpp), and readable text for guard dumps.

``compile_relation(expr, reads_of)``: ``reads_of`` maps each free symbol to a read (an index
into the relation's own read list, filled here). Integer arithmetic only: sizes, strides and
offsets are ints, and so are the relations ShapeEnv keeps about them. A node this compiler
does not know raises ``UnsupportedShapeExpr``; the caller then compiles the frame with static
shapes instead of guarding less.
"""
from __future__ import annotations

from typing import Any, Callable

import sympy
import torch.utils._sympy.functions as F

# opcodes: keep in sync with guard_shapes.cpp
READ, CONST, ADD, SUB, MUL, FLOORDIV, MOD, NEG, ABS, MAX, MIN, POW = range(12)
EQ, NE, LT, LE, GT, GE, AND, OR, NOT = range(12, 21)

_INT64 = (-(2 ** 63), 2 ** 63 - 1)


class UnsupportedShapeExpr(Exception):
    pass


_REL = {sympy.Eq: EQ, sympy.Ne: NE, sympy.StrictLessThan: LT, sympy.LessThan: LE,
        sympy.StrictGreaterThan: GT, sympy.GreaterThan: GE}
_BIN = {F.FloorDiv: FLOORDIV, F.CleanDiv: FLOORDIV, F.Mod: MOD, F.PythonMod: MOD,
        F.PowByNatural: POW}


def compile_relation(expr: Any, read_index: Callable[[sympy.Symbol], int]) -> list[int]:
    """Postfix program of a boolean relation; ``read_index(symbol)`` gives a symbol's read."""
    out: list[int] = []
    _emit(expr, read_index, out)
    return out


def _fold(items: list, read_index, out: list[int], op: int) -> None:
    _emit(items[0], read_index, out)
    for it in items[1:]:
        _emit(it, read_index, out)
        out.append(op)


def _emit(e: Any, read_index, out: list[int]) -> None:
    if e is sympy.true or e is True:
        out += [CONST, 1]
    elif e is sympy.false or e is False:
        out += [CONST, 0]
    elif isinstance(e, sympy.Symbol):
        out += [READ, read_index(e)]
    elif isinstance(e, sympy.Integer) or (isinstance(e, int) and not isinstance(e, bool)):
        v = int(e)
        if not _INT64[0] <= v <= _INT64[1]:
            raise UnsupportedShapeExpr(f"constant {v} does not fit in 64 bits")
        out += [CONST, v]
    elif type(e) in _REL:
        _emit(e.args[0], read_index, out)
        _emit(e.args[1], read_index, out)
        out.append(_REL[type(e)])
    elif isinstance(e, sympy.And):
        _fold(list(e.args), read_index, out, AND)
    elif isinstance(e, sympy.Or):
        _fold(list(e.args), read_index, out, OR)
    elif isinstance(e, sympy.Not):
        _emit(e.args[0], read_index, out)
        out.append(NOT)
    elif isinstance(e, sympy.Add):
        _fold(list(e.args), read_index, out, ADD)
    elif isinstance(e, sympy.Mul):
        args = list(e.args)
        if any(not (a.is_integer or isinstance(a, sympy.Integer)) for a in args):
            raise UnsupportedShapeExpr(f"non-integer product {e}")
        _fold(args, read_index, out, MUL)
    elif isinstance(e, sympy.Pow):
        base, exp = e.args
        if not (isinstance(exp, sympy.Integer) and int(exp) >= 0):
            raise UnsupportedShapeExpr(f"power {e}")
        _emit(base, read_index, out)
        out += [CONST, int(exp), POW]
    elif type(e) in _BIN:
        _emit(e.args[0], read_index, out)
        _emit(e.args[1], read_index, out)
        out.append(_BIN[type(e)])
    elif isinstance(e, F.ModularIndexing):          # (x // div) % mod
        x, div, mod = e.args
        _emit(x, read_index, out)
        _emit(div, read_index, out)
        out.append(FLOORDIV)
        _emit(mod, read_index, out)
        out.append(MOD)
    elif isinstance(e, F.CeilDiv):                  # -((-a) // b)
        a, b = e.args
        _emit(a, read_index, out)
        out.append(NEG)
        _emit(b, read_index, out)
        out += [FLOORDIV, NEG]
    elif isinstance(e, (sympy.Max, F.Max)):
        _fold(list(e.args), read_index, out, MAX)
    elif isinstance(e, (sympy.Min, F.Min)):
        _fold(list(e.args), read_index, out, MIN)
    elif isinstance(e, sympy.Abs):
        _emit(e.args[0], read_index, out)
        out.append(ABS)
    elif isinstance(e, F.Identity):
        _emit(e.args[0], read_index, out)
    else:
        raise UnsupportedShapeExpr(f"{type(e).__name__} in a shape guard ({e})")


def text(expr: Any, names: dict) -> str:
    """The relation with each symbol written as the source it reads (``L['x'].size()[0]``)."""
    try:
        return str(expr.xreplace({s: sympy.Symbol(names[s]) for s in expr.free_symbols if s in names}))
    except Exception:  # noqa: BLE001 - printing only
        return str(expr)
