"""C++ expressions for the loop IR's ops: ``CppOps`` (the ``Ops`` protocol of ``ir.py``) writes
one C++ statement per op into the kernel body; the C types of torch dtypes, constants written
with torch's semantics (NaN, infinities, integer limits), and the reduction accumulators.
``cpp.py`` writes the kernels around them.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING

import sympy
import torch

from .index import index_printer, simplify_index
from .ir import Ops
from .sizes import FloatArg, SymbolicUnsupported

if TYPE_CHECKING:
    from .cpp import CppKernelWriter

LANES = 16
TILE = 16        # a tile of a transposing pointwise nest is TILE x TILE elements

STORAGE_CTYPE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "_Float16", torch.bfloat16: "uint16_t",
    torch.int8: "int8_t", torch.uint8: "uint8_t", torch.int16: "int16_t", torch.int32: "int32_t",
    torch.int64: "int64_t", torch.bool: "bool",
}


def value_ctype(dtype: torch.dtype) -> str:
    """The C type a value of ``dtype`` is computed in (half types compute in float)."""
    if dtype in (torch.float16, torch.bfloat16):
        return "float"
    return STORAGE_CTYPE[dtype]


# a sympy index expression as C (all variables are non-negative int64_t)
cexpr = index_printer("/", "xc_imin", "xc_imax")


def cconst(value, dtype: torch.dtype) -> str:
    if isinstance(value, FloatArg):          # a symbolic float (a double argument), as a literal converts
        if dtype == torch.float64:
            return f"({value.name})"
        if dtype == torch.float32:
            return f"((float)({value.name}))"
        raise SymbolicUnsupported(f"a symbolic float ({value.name}) as a {dtype} constant")
    if isinstance(value, sympy.Basic) and not value.is_Number:     # a symbolic size used as a value
        ct = "bool" if dtype == torch.bool else value_ctype(dtype)
        return f"(({ct})({cexpr(value)}))"
    if dtype == torch.bool:
        return "true" if value else "false"
    if not dtype.is_floating_point:
        i = int(value)
        return f"(({STORAGE_CTYPE[dtype]}){i}LL)" if i >= 0 else f"(({STORAGE_CTYPE[dtype]})({i}LL))"
    v = float(value)
    if dtype in (torch.float16, torch.bfloat16):
        v = float(torch.tensor(v, dtype=dtype).item())
    suffix = "" if dtype == torch.float64 else "f"
    if math.isnan(v):
        return f"__builtin_nan{suffix}(\"\")"
    if math.isinf(v):
        return f"{'-' if v < 0 else ''}__builtin_inf{suffix}()"
    return repr(v) + suffix if "e" in repr(v) or "." in repr(v) else f"{repr(v)}.0{suffix}"


# pointwise op -> C format ({0}, {1}: argument variables)
CPP_OPS = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}",
    "neg": "-{0}", "floordiv": "xc_floordiv({0}, {1})", "truncdiv": "xc_truncdiv({0}, {1})",
    "remainder": "xc_remainder({0}, {1})", "fmod": "xc_fmod({0}, {1})", "pow": "xc_pow({0}, {1})",
    "minimum": "xc_minimum({0}, {1})", "maximum": "xc_maximum({0}, {1})", "atan2": "xc_atan2({0}, {1})",
    "hypot": "xc_hypot({0}, {1})", "copysign": "xc_copysign({0}, {1})",
    "bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}", "bitwise_xor": "{0} ^ {1}",
    "bitwise_not": "~{0}", "lshift": "xc_lshift({0}, {1})", "rshift": "xc_rshift({0}, {1})",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
    "ge": "{0} >= {1}", "logical_and": "{0} && {1}", "logical_or": "{0} || {1}",
    "logical_xor": "{0} != {1}", "logical_not": "!{0}", "isnan": "{0} != {0}",
    "isinf": "xc_isinf({0})", "signbit": "xc_signbit({0})", "square": "{0} * {0}",
    "abs": "xc_abs({0})", "reciprocal": "xc_reciprocal({0})", "sign": "xc_sign({0})",
    "relu": "xc_relu({0})", "sigmoid": "xc_sigmoid({0})", "sqrt": "xc_sqrt({0})", "rsqrt": "xc_rsqrt({0})",
    "floor": "xc_floor({0})", "ceil": "xc_ceil({0})", "trunc": "xc_trunc({0})", "round": "xc_round({0})",
}
for _f in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos",
           "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "lgamma"):
    CPP_OPS[_f] = f"xc_{_f}({{0}})"
CPP_OPS["erf_approx"] = "xc_erf_approx({0})"


@dataclasses.dataclass(frozen=True)
class CV:
    """A C value: a variable name or literal, and its dtype."""

    expr: str
    dtype: torch.dtype

    def __str__(self):
        return self.expr


class Line(str):
    """A generated statement that computes a value (no store): ``deps`` are the loop variables
    it depends on, so a pointwise kernel can run it in the outermost loop that allows."""

    deps: frozenset

    def __new__(cls, text: str, deps: frozenset):
        s = super().__new__(cls, text)
        s.deps = deps
        return s


IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclasses.dataclass
class Acc:
    name: str
    rtype: str
    value: CV
    rindex: str
    dtype: torch.dtype          # accumulator dtype


def acc_identity(rtype: str, dtype: torch.dtype) -> str:
    ct = value_ctype(dtype)
    if rtype in ("sum", "welford"):
        return cconst(0, dtype)
    if rtype == "prod":
        return cconst(1, dtype)
    if rtype == "any":
        return "false"
    if rtype == "all":
        return "true"
    lowest = rtype in ("max", "argmax")
    if dtype == torch.bool:
        return "false" if lowest else "true"
    if dtype.is_floating_point:
        return ("-" if lowest else "") + f"std::numeric_limits<{ct}>::infinity()"
    return f"std::numeric_limits<{ct}>::{'lowest' if lowest else 'max'}()"


COMBINE = {"sum": "{a} + {v}", "prod": "{a} * {v}", "any": "{a} || {v}", "all": "{a} && {v}",
            "max": "({a} != {a} || {a} > {v}) ? {a} : {v}", "min": "({a} != {a} || {a} < {v}) ? {a} : {v}"}


class CppOps(Ops):
    """Turns ops calls into C statements in the writer's current block."""

    def __init__(self, w: "CppKernelWriter"):
        self.w = w

    def load(self, name, index):
        w = self.w
        if name in w.locals:
            return w.locals[name]
        dtype = w.buffers[name].dtype
        ptr = w.param(name, write=False)
        expr = w.tile_load(name, ptr, index) if w.tiled else None
        expr = expr or f"{ptr}[{w.index(name, index)}]"
        if dtype == torch.float16:
            expr = f"xc_h2f({expr})"
        elif dtype == torch.bfloat16:
            expr = f"xc_bf2f({expr})"
        return w.emit(expr, dtype)

    def store(self, name, index, value):
        w = self.w
        # later reads in this kernel see the stored value: rounded to the buffer's dtype
        # (a masked_fill of -2 into a bool buffer reads back as true, not -2)
        w.locals[name] = self.to_dtype(value, w.buffers[name].dtype)
        if name in w.stores:
            ptr = w.param(name, write=True)
            w.line(f"{ptr}[{w.index(name, index)}] = {w.convert(value, w.buffers[name].dtype)};")

    def store_reduction(self, name, index, value):
        self.w.pending.append((name, index, value))

    def reduction(self, rtype, value, rindex, src_dtype, dtype):
        w = self.w
        acc = Acc(f"acc{len(w.all_accs)}", rtype, value, cexpr(rindex), src_dtype)
        w.accs.append(acc)
        w.all_accs.append(acc)
        if rtype == "welford":
            return CV(f"{acc.name}_mean", src_dtype), CV(f"{acc.name}_m2", src_dtype)
        if rtype in ("argmax", "argmin"):
            return CV(f"{acc.name}_idx", torch.int64)
        return CV(acc.name, dtype)

    def constant(self, value, dtype):
        return CV(cconst(value, dtype), dtype)

    def index_expr(self, expr, dtype):
        e = simplify_index(sympy.expand(expr), self.w.nest.ranges)
        return self.w.emit(f"({value_ctype(dtype)})({cexpr(e)})", dtype)

    def to_dtype(self, x, dtype):
        if x.dtype == dtype:
            return x
        return self.w.emit(self.w.convert_value(x, dtype), dtype)

    def where(self, cond, a, b):
        return self.w.emit(f"{cond} ? {a} : {b}", a.dtype)

    def indirect_indexing(self, x, size, check=None):
        w = self.w
        name = f"ind{w.counter}"
        w.counter += 1
        raw = x if x.dtype == torch.int64 else w.emit(f"(int64_t)({x})", torch.int64)
        if check is not None:
            # the range of indices seen: two vectorizable min/max reductions, tested once after
            # the loops; the load below is clamped, so it stays in bounds either way
            k = w.check_site(check)
            w.value_line(f"xc_hi{k} = {raw} > xc_hi{k} ? {raw} : xc_hi{k}; "
                         f"xc_lo{k} = {raw} < xc_lo{k} ? {raw} : xc_lo{k};", None, str(raw))
        w.value_line(f"int64_t {name} = xc_index({raw}, {cexpr(size)});", name, str(raw))
        return sympy.Symbol(name, integer=True, nonnegative=True)

    def pointwise(self, op, *args):
        dt = args[0].dtype
        if op in ("isnan", "isinf") and not dt.is_floating_point:
            return CV("false", torch.bool)
        if op == "floordiv" and dt == torch.bool:
            raise NotImplementedError("floordiv on bool")
        fmt = CPP_OPS.get(op)
        if fmt is None:
            raise NotImplementedError(f"no C++ for op {op}")
        out_dt = torch.bool if op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                                      "logical_xor", "logical_not", "isnan", "isinf", "signbit") else dt
        expr = fmt.format(*[str(a) for a in args])
        if dt == torch.float16 and out_dt == dt:
            expr = f"xc_round_h({expr})"
        elif dt == torch.bfloat16 and out_dt == dt:
            expr = f"xc_round_bf({expr})"
        elif out_dt != torch.bool and dt in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.bool):
            expr = f"({value_ctype(out_dt)})({expr})"  # C promotes small ints to int
        return self.w.emit(expr, out_dt)
