"""Index expressions of the loop IR: sympy over non-negative integer loop variables, with floor
division and modulo that simplify under the loop ranges, and a printer for C/Triton source.
"""
from __future__ import annotations

import sympy
from sympy import Expr


def index_var(prefix: str, i: int) -> sympy.Symbol:
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


class FloorDiv(sympy.Function):
    """``a // b`` on non-negative integers (C and Python agree there)."""

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        # (k*b*y + z) // b  ->  k*y + z // b   when every other term is a multiple of b
        if a.is_Add and b.is_Integer:
            whole, rest = [], []
            for t in a.args:
                c, _ = t.as_coeff_Mul()
                (whole if c.is_Integer and int(c) % int(b) == 0 else rest).append(t)
            if whole:
                return sum(sympy.expand(t / b) for t in whole) + FloorDiv(sympy.Add(*rest), b)
        if a.is_Mul and b.is_Integer:
            c, t = a.as_coeff_Mul()
            if c.is_Integer and int(c) % int(b) == 0:
                return sympy.Integer(int(c) // int(b)) * t
        return None


class ModIndex(sympy.Function):
    """``a % b`` on non-negative integers."""

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        if a.is_Add and b.is_Integer:
            keep = []
            for t in a.args:
                c, _ = t.as_coeff_Mul()
                if not (c.is_Integer and int(c) % int(b) == 0):
                    keep.append(t)
            if len(keep) < len(a.args):
                return ModIndex(sympy.Add(*keep), b)
        if a.is_Mul and b.is_Integer:
            c, _ = a.as_coeff_Mul()
            if c.is_Integer and int(c) % int(b) == 0:
                return sympy.Integer(0)
        return None


def expr_bound(e: Expr, ranges: dict) -> int | None:
    """An upper bound (inclusive) of a non-negative index expression, or None if unknown."""
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        n = ranges.get(e)
        return None if n is None else n - 1
    if e.is_Add:
        total = 0
        for a in e.args:
            b = expr_bound(a, ranges)
            if b is None:
                return None
            total += b
        return total
    if e.is_Mul:
        c, t = e.as_coeff_Mul()
        if c.is_Integer and int(c) >= 0:
            b = expr_bound(t, ranges)
            return None if b is None else int(c) * b
        return None
    if isinstance(e, FloorDiv):
        b = expr_bound(e.args[0], ranges)
        return None if b is None else b // int(e.args[1])
    if isinstance(e, ModIndex):
        return int(e.args[1]) - 1
    return None


def simplify_index(e: Expr, ranges: dict) -> Expr:
    """Drop ``//`` and ``%`` that the variables' ranges make no-ops; fold ``b*(a//b) + a%b``."""
    if not isinstance(e, sympy.Basic) or e.is_Atom:
        return e

    def rule(x):
        if isinstance(x, FloorDiv):
            b = expr_bound(x.args[0], ranges)
            if b is not None and b < int(x.args[1]):
                return sympy.Integer(0)
        if isinstance(x, ModIndex):
            b = expr_bound(x.args[0], ranges)
            if b is not None and b < int(x.args[1]):
                return x.args[0]
        return x

    e = e.replace(lambda x: isinstance(x, (FloorDiv, ModIndex)), rule)
    if e.is_Add:  # c*b*(a // b) + c*(a % b)  ->  c*a   (a view/reshape round trip stays linear)
        terms = list(e.args)
        for t in terms:
            c1, m = t.as_coeff_Mul()
            if not isinstance(m, ModIndex):
                continue
            a, b = m.args
            for u in terms:
                c2, f = u.as_coeff_Mul()
                if isinstance(f, FloorDiv) and f.args == (a, b) and c2 == c1 * b:
                    rest = [x for x in terms if x is not t and x is not u]
                    return simplify_index(sympy.Add(*rest) + c1 * a, ranges)
    return e


def index_printer(floordiv: str, minimum: str, maximum: str):
    """A printer of index expressions for one target language: C (``/``, ``xc_imin``) or
    Triton/Python (``//``, ``tl.minimum``)."""
    def pr(e) -> str:
        e = sympy.sympify(e)
        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            return e.name
        if e.is_Add:
            return "(" + " + ".join(pr(a) for a in e.as_ordered_terms()) + ")"
        if e.is_Mul:
            return "(" + "*".join(pr(a) for a in e.args) + ")"
        if isinstance(e, FloorDiv):
            return f"({pr(e.args[0])} {floordiv} {pr(e.args[1])})"
        if isinstance(e, ModIndex):
            return f"({pr(e.args[0])} % {pr(e.args[1])})"
        if isinstance(e, (sympy.Min, sympy.Max)):
            fn = minimum if isinstance(e, sympy.Min) else maximum
            out = pr(e.args[0])
            for a in e.args[1:]:
                out = f"{fn}({out}, {pr(a)})"
            return out
        if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            return "(" + "*".join([pr(e.base)] * int(e.exp)) + ")"
        raise NotImplementedError(f"index expression {e}")
    return pr
