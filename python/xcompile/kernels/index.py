"""Index expressions of the loop IR: sympy over non-negative integer loop variables, with floor
division and modulo that simplify under the loop ranges, and a printer for C/Triton source.
"""
from __future__ import annotations

import sympy
from sympy import Expr
from torch.utils._sympy.functions import FloorDiv as TorchFloorDiv
from torch.utils._sympy.functions import Mod as TorchMod
from torch.utils._sympy.functions import PythonMod as TorchPythonMod


def index_var(prefix: str, i: int) -> sympy.Symbol:
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def _quotient(t: Expr, b: Expr) -> Expr | None:
    """``t / b`` when ``b`` divides ``t`` exactly (as polynomials), else None."""
    if b.is_Integer:
        c, rest = t.as_coeff_Mul()
        return sympy.Integer(int(c) // int(b)) * rest if c.is_Integer and int(c) % int(b) == 0 else None
    q = sympy.cancel(t / b)
    return q if sympy.fraction(q)[1] == 1 else None


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
        if a.is_Add:
            whole, rest = [], []
            for t in a.args:
                q = _quotient(t, b)
                (whole if q is not None else rest).append(q if q is not None else t)
            if whole:
                return sympy.Add(*whole) + FloorDiv(sympy.Add(*rest), b)
        if a.is_Mul:
            q = _quotient(a, b)
            if q is not None:
                return q
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
        if a.is_Add:
            keep = [t for t in a.args if _quotient(t, b) is None]
            if len(keep) < len(a.args):
                return ModIndex(sympy.Add(*keep), b)
        if a.is_Mul and _quotient(a, b) is not None:
            return sympy.Integer(0)
        return None


def expr_bound(e: Expr, ranges: dict) -> Expr | None:
    """An upper bound (inclusive) of a non-negative index expression, or None if unknown.
    Loop ranges may be symbolic sizes (positive symbols, constants of the kernel): the bound
    is then an expression of them."""
    if e.is_Integer:
        return e
    if e.is_Symbol:
        n = ranges.get(e)
        if n is not None:
            return sympy.sympify(n) - 1
        return e if e.is_positive else None      # a size symbol; loop and index variables: unknown
    if e.is_Add or e.is_Mul:
        bounds = []
        for a in e.args:
            if a.is_Number and a < 0:
                return None
            b = expr_bound(a, ranges)
            if b is None:
                return None
            bounds.append(b)
        return sympy.Add(*bounds) if e.is_Add else sympy.Mul(*bounds)
    if isinstance(e, FloorDiv):
        b = expr_bound(e.args[0], ranges)
        return None if b is None else FloorDiv(b, e.args[1])
    if isinstance(e, ModIndex):
        return e.args[1] - 1
    return None


def _below(b: Expr, n: Expr) -> bool:
    """``b < n`` for every value of the sizes in them."""
    b, n = sympy.sympify(b), sympy.sympify(n)
    if b.is_Integer and n.is_Integer:
        return int(b) < int(n)
    return bool(sympy.expand(n - b).is_positive)


def simplify_index(e: Expr, ranges: dict) -> Expr:
    """Drop ``//`` and ``%`` that the variables' ranges make no-ops; fold ``b*(a//b) + a%b``."""
    if not isinstance(e, sympy.Basic) or e.is_Atom:
        return e

    def rule(x):
        if isinstance(x, FloorDiv):
            b = expr_bound(x.args[0], ranges)
            if b is not None and _below(b, x.args[1]):
                return sympy.Integer(0)
        if isinstance(x, ModIndex):
            b = expr_bound(x.args[0], ranges)
            if b is not None and _below(b, x.args[1]):
                return x.args[0]
        return x

    e = e.replace(lambda x: isinstance(x, (FloorDiv, ModIndex)), rule)
    if e.is_Add:  # c*b*(a // b) + c*(a % b)  ->  c*a   (a view/reshape round trip stays linear)
        terms = list(e.args)
        for t in terms:
            c1, m = _split(t, ModIndex)
            if m is None:
                continue
            a, b = m.args
            for u in terms:
                c2, f = _split(u, FloorDiv)
                if f is not None and f.args == (a, b) and sympy.expand(c2 - c1 * b) == 0:
                    rest = [x for x in terms if x is not t and x is not u]
                    return simplify_index(sympy.Add(*rest) + c1 * a, ranges)
    return e


def _split(t: Expr, kind) -> tuple[Expr, Expr | None]:
    """``t`` as ``coefficient * f`` with ``f`` of ``kind`` (FloorDiv or ModIndex), if it is one."""
    if isinstance(t, kind):
        return sympy.Integer(1), t
    if t.is_Mul:
        fs = [a for a in t.args if isinstance(a, kind)]
        if len(fs) == 1:
            return sympy.Mul(*[a for a in t.args if a is not fs[0]]), fs[0]
    return sympy.Integer(1), None


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
            c, rest = e.as_coeff_Mul()
            if c.is_Rational and not c.is_Integer:     # an exact division of sizes: (s0*3) / 2
                return f"(({pr(c.p * rest)}) {floordiv} {c.q})"
            return "(" + "*".join(pr(a) for a in e.args) + ")"
        if isinstance(e, (FloorDiv, TorchFloorDiv)):
            return f"({pr(e.args[0])} {floordiv} {pr(e.args[1])})"
        if isinstance(e, (ModIndex, TorchMod, TorchPythonMod)):       # (non-negative operands)
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
