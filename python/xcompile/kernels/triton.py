"""Triton emitter: one ``@triton.jit`` kernel per fused group.

Pointwise groups index a flat ``xindex`` block; reduction groups a ``[XBLOCK, RBLOCK]``
tile, persistent (the whole row in one block) for short rows and looped for long ones.
Masks cover the ragged edges.  Block sizes come from simple heuristics.  The same code runs
on the CPU under ``TRITON_INTERPRET=1`` (tests) and on NVIDIA GPUs.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re

import sympy
import torch

from .. import config
from .cache import load_python_module
from .fusion import Group
from .index import index_printer, simplify_index
from .ir import Ops
from .loops import node_indices, plan_loops
from .sizes import hint, is_symbolic, known

TL_DTYPE = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.int16: "tl.int16",
    torch.int32: "tl.int32", torch.int64: "tl.int64", torch.bool: "tl.int1",
}

# helpers built from tl.math primitives, so they also run under TRITON_INTERPRET=1
PRELUDE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _expm1(x):
    u = tl.exp(x)
    return tl.where(u == 1.0, x, tl.where(u - 1.0 == -1.0, -1.0, (u - 1.0) * x / tl.log(u)))


@triton.jit
def _log1p(x):
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * x / (u - 1.0))


@triton.jit
def _tanh(x):
    e = _expm1(2.0 * tl.abs(x))
    t = e / (e + 2.0)
    t = tl.where(tl.abs(x) > 20.0, 1.0, t)
    return tl.where(x < 0, -t, t)


@triton.jit
def _bf16_rne(x):
    # float32 -> bfloat16, rounding to nearest even (the interpreter's own cast truncates)
    u = x.to(tl.uint32, bitcast=True)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    r = tl.where(x != x, 0x7FC0, r)
    return r.to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def _pow(x, y):
    # x ** y for floats as C's pow: |x| ** y by exp2/log2, the sign for negative x and integer y
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    yint = tl.floor(y) == y
    odd = yint & (tl.floor(y * 0.5) * 2.0 != y)
    r = tl.where(x < 0, tl.where(yint, tl.where(odd, -r, r), float('nan')), r)
    return tl.where(y == 0, 1.0, tl.where(x == 1, 1.0, r))


@triton.jit
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _rint(x):
    r = tl.floor(x + 0.5)
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0
    return tl.where((r - x == 0.5) & odd, r - 1.0, r)


@triton.jit
def _max_combine(a, b):
    return tl.where((a != a) | (a > b), a, b)


@triton.jit
def _min_combine(a, b):
    return tl.where((a != a) | (a < b), a, b)


@triton.jit
def _sum_combine(a, b):
    return a + b


@triton.jit
def _prod_combine(a, b):
    return a * b


@triton.jit
def _argmax_combine(a, ai, b, bi):
    an = a != a
    bn = b != b
    take = tl.where(an, bn & (bi < ai), bn | (b > a) | ((b == a) & (bi < ai)))
    return tl.where(take, b, a), tl.where(take, bi, ai)


@triton.jit
def _argmin_combine(a, ai, b, bi):
    an = a != a
    bn = b != b
    take = tl.where(an, bn & (bi < ai), bn | (b < a) | ((b == a) & (bi < ai)))
    return tl.where(take, b, a), tl.where(take, bi, ai)


@triton.jit
def _welford_combine(m1, s1, w1, m2, s2, w2):
    w = w1 + w2
    frac = tl.where(w == 0.0, 0.0, w2 / tl.where(w == 0.0, 1.0, w))
    d = m2 - m1
    # an empty side contributes nothing (d * d * 0 is NaN when the other side's mean is huge)
    mean = tl.where(w1 == 0.0, m2, tl.where(w2 == 0.0, m1, m1 + d * frac))
    m2_ = tl.where(w1 == 0.0, s2, tl.where(w2 == 0.0, s1, s1 + s2 + d * d * w1 * frac))
    return mean, m2_, w
'''

TRITON_OPS = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}", "neg": "-{0}",
    "minimum": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "maximum": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}", "bitwise_xor": "{0} ^ {1}", "bitwise_not": "~{0}",
    "lshift": "{0} << {1}", "rshift": "{0} >> {1}",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
    "ge": "{0} >= {1}", "logical_and": "{0} & {1}", "logical_or": "{0} | {1}", "logical_xor": "{0} ^ {1}",
    "logical_not": "{0} == 0", "isnan": "{0} != {0}", "square": "{0} * {0}",
    "abs": "tl.abs({0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})", "exp": "tl.exp({0})",
    "exp2": "tl.exp2({0})", "log": "tl.log({0})", "log2": "tl.log2({0})", "log10": "tl.log({0}) * 0.4342944819032518",
    "sin": "tl.sin({0})", "cos": "tl.cos({0})", "tan": "tl.sin({0}) / tl.cos({0})", "erf": "tl.erf({0})",
    "erf_approx": "tl.erf({0})",
    "erfc": "1.0 - tl.erf({0})", "sigmoid": "tl.sigmoid({0})", "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
    "trunc": "_trunc({0})", "round": "_rint({0})", "expm1": "_expm1({0})", "log1p": "_log1p({0})",
    "tanh": "_tanh({0})", "sinh": "0.5 * (tl.exp({0}) - tl.exp(-{0}))", "cosh": "0.5 * (tl.exp({0}) + tl.exp(-{0}))",
    "asinh": "tl.log({0} + tl.sqrt({0} * {0} + 1.0))", "acosh": "tl.log({0} + tl.sqrt({0} * {0} - 1.0))",
    "atanh": "0.5 * _log1p(2.0 * {0} / (1.0 - {0}))",
    "isinf": "tl.abs({0}) == float('inf')",
    "hypot": "tl.sqrt({0} * {0} + {1} * {1})",
}


@dataclasses.dataclass(frozen=True)
class TV:
    expr: str
    dtype: torch.dtype

    def __str__(self):
        return self.expr


# the signed integer of a float's width (its sign bit is the float's)
_SIGNED = {torch.float64: "tl.int64", torch.float32: "tl.int32", torch.float16: "tl.int16",
           torch.bfloat16: "tl.int16"}


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# Under TRITON_INTERPRET a runtime int (a size argument, or arithmetic on one) is a tensor over a
# 1-element array, and a loop's ``range`` reads it through tensor.__index__: triton 3.6 (torch
# 2.11's) does ``int(data)``, which NumPy 2.5 refuses for an array of one dimension ("only
# 0-dimensional arrays can be converted to Python scalars"; triton 3.9 squeezes it first). The
# interpreted kernels read the bound's one element themselves. Not in compiled kernels.
INTERPRET_PRELUDE = '''

def _interpret_index(n):
    return int(n.handle.data.reshape(-1)[0]) if isinstance(n, tl.tensor) else n
'''


# a sympy index expression as Python/Triton
pexpr = index_printer("//", "tl.minimum", "tl.maximum")


def tconst(value, dtype: torch.dtype) -> str:
    if isinstance(value, sympy.Basic) and not value.is_Number:     # a symbolic size used as a value
        return f"tl.full([], {pexpr(value)}, {TL_DTYPE[dtype]})"
    if dtype == torch.bool:
        return f"tl.full([], {1 if value else 0}, tl.int1)"   # a tensor: casts (.to) work on it
    if dtype.is_floating_point:
        v = float(value)
        lit = "float('nan')" if math.isnan(v) else (f"float('{'-' if v < 0 else ''}inf')" if math.isinf(v) else repr(v))
        if dtype == torch.float32:
            return lit
        return f"tl.full([], {lit}, {TL_DTYPE[dtype]})"
    return f"tl.full([], {int(value)}, {TL_DTYPE[dtype]})"


def _is_literal(expr: str) -> bool:
    """A float32 constant as ``tconst`` writes it: a bare Python float."""
    try:
        float(expr)
        return True
    except ValueError:
        return expr.startswith("float(")


class TritonOps(Ops):
    def __init__(self, w: "TritonKernelWriter"):
        self.w = w

    def load(self, name, index):
        w = self.w
        if name in w.locals:
            return w.locals[name]
        ptr = w.param(name)
        idx = w.index(name, index)
        dtype = w.buffers[name].dtype
        return w.emit(f"tl.load({ptr} + {idx}, {w.mask}, other=0)", dtype)

    def store(self, name, index, value):
        w = self.w
        # later reads in this kernel see the stored value: rounded to the buffer's dtype
        w.locals[name] = self.to_dtype(value, w.buffers[name].dtype)
        if name in w.stores:
            ptr = w.param(name)
            v = w.locals[name].expr
            w.line(f"tl.store({ptr} + {w.index(name, index)}, {v}, {w.mask})")

    def store_reduction(self, name, index, value):
        self.w.pending.append((name, index, value))

    def reduction(self, rtype, value, rindex, src_dtype, dtype):
        return self.w.reduce(rtype, value, rindex, src_dtype, dtype)

    def constant(self, value, dtype):
        return TV(tconst(value, dtype), dtype)

    def index_expr(self, expr, dtype):
        e = simplify_index(sympy.expand(expr), self.w.nest.ranges)
        return self.w.emit(f"({pexpr(e)} + {self.w.zero}).to({TL_DTYPE[dtype]})", dtype)

    def to_dtype(self, x, dtype):
        if x.dtype == dtype:
            return x
        if x.dtype == torch.float32 and _is_literal(x.expr):
            x = TV(f"tl.full([], {x.expr}, tl.float32)", x.dtype)   # a Python float has no .to()
        if dtype == torch.bool:
            return self.w.emit(f"{x} != 0", dtype)
        if torch.bfloat16 in (x.dtype, dtype) and _interpret():
            # TRITON_INTERPRET casts bfloat16 right only from/to float32, and float32 -> bfloat16
            # truncates: go through float32 and round to nearest even as eager does
            f = x if x.dtype == torch.float32 else self.w.emit(f"({x}).to(tl.float32)", torch.float32)
            if dtype == torch.bfloat16:
                return self.w.emit(f"_bf16_rne({f})", dtype)
            return f if dtype == torch.float32 else self.w.emit(f"({f}).to({TL_DTYPE[dtype]})", dtype)
        return self.w.emit(f"({x}).to({TL_DTYPE[dtype]})", dtype)

    def where(self, cond, a, b):
        return self.w.emit(f"tl.where({cond}, {a}, {b})", a.dtype)

    def indirect_indexing(self, x, size, check=None):
        w = self.w
        name = f"ind{w.counter}"
        w.counter += 1
        w.line(f"{name} = ({x}).to(tl.int64)")
        if check is not None:
            # a bad index (in an active lane) is written to the error buffer: a flag and the index
            k = w.check_site(check)
            bad = f"bad{w.counter}"
            w.counter += 1
            w.line(f"{bad} = (({name} < {pexpr(check.low)}) | ({name} >= {pexpr(size)})) & ({w.mask})")
            w.line(f"tl.store(xc_err + {2 * k} + 0 * {bad}.to(tl.int64), 1 + 0 * {name}, {bad})")
            w.line(f"tl.store(xc_err + {2 * k + 1} + 0 * {bad}.to(tl.int64), {name}, {bad})")
        w.line(f"{name} = tl.where({name} < 0, {name} + {pexpr(size)}, {name})")
        w.line(f"{name} = tl.minimum(tl.maximum({name}, 0), {pexpr(sympy.sympify(size) - 1)})")
        return sympy.Symbol(name, integer=True, nonnegative=True)

    def pointwise(self, op, *args):
        w = self.w
        dt = args[0].dtype
        a = [str(x) for x in args]
        if op in ("isnan", "isinf") and not dt.is_floating_point:
            return w.emit(f"{w.zero} != 0", torch.bool)
        if dt == torch.bool and op in ("add", "mul", "maximum", "minimum"):  # 1-bit arithmetic wraps
            op = "logical_or" if op in ("add", "maximum") else "logical_and"
        special = {
            "relu": lambda: f"tl.where({a[0]} < 0, {tconst(0, dt)}, {a[0]})",
            "reciprocal": lambda: f"{tconst(1, dt)} / {a[0]}",
            "sign": lambda: f"(({a[0]} > 0).to({TL_DTYPE[dt]}) - ({a[0]} < 0).to({TL_DTYPE[dt]}))",  # NaN -> 0
            "signbit": lambda: f"{a[0]} < 0",
            "copysign": lambda: (f"tl.where(({a[1]}).to({_SIGNED[dt]}, bitcast=True) < 0, "
                                 f"-tl.abs({a[0]}), tl.abs({a[0]}))"),
            "floordiv": lambda: (f"tl.floor({a[0]} / {a[1]})" if dt.is_floating_point else
                                 f"tl.where((({a[0]} % {a[1]}) != 0) & (({a[0]} < 0) != ({a[1]} < 0)), "
                                 f"{a[0]} // {a[1]} - 1, {a[0]} // {a[1]})"),
            "truncdiv": lambda: f"{a[0]} // {a[1]}",
            "remainder": lambda: (f"{a[0]} - {a[1]} * tl.floor({a[0]} / {a[1]})" if dt.is_floating_point else
                                  f"tl.where((({a[0]} % {a[1]}) != 0) & ((({a[0]} % {a[1]}) < 0) != ({a[1]} < 0)), "
                                  f"({a[0]} % {a[1]}) + {a[1]}, {a[0]} % {a[1]})"),
            "fmod": lambda: (f"{a[0]} - {a[1]} * _trunc({a[0]} / {a[1]})" if dt.is_floating_point else
                             f"{a[0]} % {a[1]}"),
            "pow": lambda: f"_pow({a[0]}, {a[1]})",
        }
        if op in special:
            expr = special[op]()
        elif op in ("floor", "ceil", "trunc", "round") and not dt.is_floating_point:
            return args[0]
        else:
            fmt = TRITON_OPS.get(op)
            if fmt is None:
                raise NotImplementedError(f"no Triton for op {op}")
            expr = fmt.format(*a)
        out_dt = torch.bool if op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                                      "logical_xor", "logical_not", "isnan", "isinf", "signbit") else dt
        if out_dt == dt and dt in (torch.float16, torch.bfloat16) and op not in ("neg", "abs"):
            expr = (f"_bf16_rne(({expr}).to(tl.float32))" if dt == torch.bfloat16 and _interpret() else
                    f"(({expr}).to(tl.float32)).to({TL_DTYPE[dt]})")
        return w.emit(expr, out_dt)


class TritonKernelWriter:
    def __init__(self, group: Group, buffers: dict):
        self.group = group
        self.buffers = buffers
        self.nest = plan_loops(group, buffers)
        self.size_names: frozenset[str] = frozenset()    # the graph's size symbols (dynamic shapes)
        self.size_params: list[str] = []
        self.stores = set(group.stores)
        self.params: dict[str, bool] = {}
        self.locals: dict = {}
        self.cse: dict = {}
        self.block: list[str] = []
        self.pending: list = []
        self.counter = 0
        self.ops = TritonOps(self)
        self.mask = "xmask"
        self.zero = "0 * xindex"
        self.reduce_ctx: dict = {}
        self.checks: list = []         # IndexCheck per check site (slots 2k, 2k+1 of xc_err)

    def check_site(self, check) -> int:
        if check not in self.checks:
            self.checks.append(check)
        return self.checks.index(check)

    def param(self, name: str) -> str:
        if name not in self.params:
            self.params[name] = name in self.stores
        return name

    def index(self, name: str, index) -> str:
        flat = simplify_index(sympy.expand(self.buffers[name].layout.flat_index(index)), self.nest.ranges)
        s = pexpr(flat)
        return s if flat.free_symbols else f"({s} + {self.zero})"

    def line(self, text: str) -> None:
        self.block.append(text)

    def emit(self, expr: str, dtype) -> TV:
        key = f"{expr}:{dtype}"
        if key in self.cse:
            return self.cse[key]
        name = f"tmp{self.counter}"
        self.counter += 1
        self.line(f"{name} = {expr}")
        v = TV(name, dtype)
        self.cse[key] = v
        return v

    # -- reductions --------------------------------------------------------------------------------
    def reduce(self, rtype, value, rindex, src_dtype, dtype):
        ctx = self.reduce_ctx
        k = len(ctx["accs"])
        acc = f"acc{self.counter}_{k}"
        self.counter += 1
        ctx["accs"].append((acc, rtype, value, pexpr(rindex), src_dtype))
        if rtype == "welford":
            return TV(f"{acc}_mean", src_dtype), TV(f"{acc}_m2", src_dtype)
        if rtype in ("argmax", "argmin"):
            return TV(f"{acc}_idx", torch.int64)
        return TV(acc, dtype)

    def _init(self, rtype, dtype) -> str:
        if rtype in ("sum", "welford", "any"):
            return "0"
        if rtype in ("prod", "all"):
            return "1"
        if dtype.is_floating_point:
            return "float('-inf')" if rtype in ("max", "argmax") else "float('inf')"
        info = torch.iinfo(dtype) if dtype != torch.bool else None
        if info is None:
            return "0" if rtype in ("max", "argmax") else "1"
        return str(info.min if rtype in ("max", "argmax") else info.max)

    def acc_dtype(self, rtype, dtype) -> str:
        if rtype in ("any", "all") or dtype == torch.bool:
            return "tl.int8"
        return TL_DTYPE[dtype]

    def finish(self, acc, rtype, dtype, persistent: bool) -> list[str]:
        """Reduce the [XBLOCK, RBLOCK] accumulator(s) along axis 1 into [XBLOCK, 1] values."""
        if rtype == "welford":
            return [f"{acc}_mean, {acc}_m2, {acc}_w = tl.reduce(({acc}_vm, {acc}_vm2, {acc}_vw), 1, _welford_combine)",
                    f"{acc}_mean = {acc}_mean[:, None]", f"{acc}_m2 = {acc}_m2[:, None]"]
        if rtype in ("argmax", "argmin"):
            return [f"{acc}_val, {acc}_idx = tl.reduce(({acc}_v, {acc}_vi), 1, _{rtype}_combine)",
                    f"{acc}_idx = {acc}_idx[:, None]"]
        comb = {"sum": "_sum_combine", "prod": "_prod_combine", "max": "_max_combine", "min": "_min_combine",
                "any": "_max_combine", "all": "_min_combine"}[rtype]
        out = [f"{acc} = tl.reduce({acc}_v, 1, {comb})[:, None]"]
        if rtype in ("any", "all"):
            out.append(f"{acc} = {acc} != 0")
        return out

    # -- the kernel ---------------------------------------------------------------------------------
    def generate(self) -> tuple[str, dict]:
        g, nest = self.group, self.nest
        xnumel, rnumel = nest.xnumel, nest.rnumel if g.is_reduction else 1
        max_persist = config.triton_persistent_rnumel
        # symbolic sizes: blocks sized by the first call's sizes (masks make any block right), a
        # persistent reduction only where every size fits one block
        persistent = known(sympy.sympify(rnumel) <= max_persist)
        # (a symbolic size counts as at least 4096: sizes grow, and a small block is slow there)
        hx, hr = (max(hint(n), 4096) if is_symbolic(n) else int(n) for n in (xnumel, rnumel))
        if g.is_reduction:
            rblock = _pow2(hr) if persistent and not is_symbolic(rnumel) else \
                min(_pow2(hr), config.triton_rblock) if not persistent else _pow2(max_persist)
            xblock = max(1, min(_pow2(hx), max(1, 4096 // rblock), 64))
        else:
            rblock = 1
            xblock = min(_pow2(hx), 1024)
        lines = ["xoffset = tl.program_id(0) * XBLOCK"]
        if g.is_reduction:
            lines += ["xindex = xoffset + tl.arange(0, XBLOCK)[:, None]", f"xmask = xindex < {pexpr(xnumel)}",
                      "rbase = tl.arange(0, RBLOCK)[None, :]"]
        else:
            lines += ["xindex = xoffset + tl.arange(0, XBLOCK)", f"xmask = xindex < {pexpr(xnumel)}"]
        lines += _decompose("xindex", nest.xvars, nest.xsizes)
        xnodes = [n for n in g.nodes if g.level[n] == "x"]
        rnodes = [n for n in g.nodes if g.level[n] == "r"]
        phases = sorted({g.phase[n] for n in g.nodes})
        for p in range(max(phases) + 1 if phases else 1):
            self.block = []
            self.mask, self.zero = "xmask", "0 * xindex"
            for n in xnodes:
                if g.phase[n] == p:
                    idx, ridx = node_indices(g, nest, n)
                    n.run(self.ops, idx, ridx)
            lines += self.block
            loop_nodes = [n for n in rnodes if g.phase[n] == p]
            if loop_nodes:
                lines += self.reduction_loop(loop_nodes, rnumel, persistent)
        used = {i for ln in lines for i in re.findall(r"[A-Za-z_]\w*", ln)}
        self.size_params = sorted(used & self.size_names)     # symbolic sizes: int arguments
        params = list(self.params) + self.size_params
        kparams = params + (["xc_err"] if self.checks else [])
        sig = ", ".join(kparams + ["XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"])
        body = "\n".join("    " + ln for ln in lines)
        grid = -(-xnumel // xblock) if not is_symbolic(xnumel) else f"(({pexpr(xnumel)}) + {xblock - 1}) // {xblock}"
        nw = 4 if rblock * xblock <= 2048 else 8
        launch = f"kernel[({grid},)]({', '.join(kparams)}, XBLOCK={xblock}, RBLOCK={rblock}, num_warps={nw})"
        if not self.checks:
            src = (f"@triton.jit\ndef kernel({sig}):\n{body}\n\n\n"
                   f"def launch({', '.join(params)}):\n    {launch}\n")
        else:
            # returns None, or (check site, bad index); reading the flags waits for the kernel
            nsites = len(self.checks)
            src = (f"@triton.jit\ndef kernel({sig}):\n{body}\n\n\n"
                   f"def launch({', '.join(params)}):\n"
                   f"    xc_err = torch.zeros({2 * nsites}, dtype=torch.int64, device={params[0]}.device)\n"
                   f"    {launch}\n"
                   f"    if xc_err[0::2].any():\n"
                   f"        e = xc_err.tolist()\n"
                   f"        k = e[0::2].index(1)\n"
                   f"        return k, e[2 * k + 1]\n")
        return src, dict(self.params)

    def reduction_loop(self, nodes, rnumel: int, persistent: bool) -> list[str]:
        g, nest = self.group, self.nest
        saved_locals, saved_cse = dict(self.locals), dict(self.cse)
        self.block, self.pending = [], []
        self.reduce_ctx = {"accs": []}
        self.mask, self.zero = "xmask & rmask", "0 * rindex"
        for n in nodes:
            idx, ridx = node_indices(g, nest, n)
            n.run(self.ops, idx, ridx)
        inner, accs, pending = self.block, self.reduce_ctx["accs"], self.pending
        self.locals, self.cse = saved_locals, saved_cse
        head = ["rindex = rbase" if persistent else "rindex = roffset + rbase", f"rmask = rindex < {pexpr(rnumel)}"]
        head += _decompose("rindex", nest.rvars, nest.rsizes)
        out = []
        for acc, rtype, value, rindex, sdt in accs:
            adt = self.acc_dtype(rtype, sdt)
            init = self._init(rtype, sdt)
            if rtype == "welford":
                out.append(f"{acc}_vm = tl.zeros([XBLOCK, RBLOCK], {adt}); "
                           f"{acc}_vm2 = tl.zeros([XBLOCK, RBLOCK], {adt}); "
                           f"{acc}_vw = tl.zeros([XBLOCK, RBLOCK], {adt})")
            else:
                out.append(f"{acc}_v = tl.full([XBLOCK, RBLOCK], {init}, {adt})")
                if rtype in ("argmax", "argmin"):
                    out.append(f"{acc}_vi = tl.zeros([XBLOCK, RBLOCK], tl.int64)")
        updates = []
        for acc, rtype, value, rindex, sdt in accs:
            m = "xmask & rmask"
            if rtype == "welford":
                updates += [f"{acc}_nw = {acc}_vw + 1.0", f"{acc}_d = {value} - {acc}_vm",
                            f"{acc}_nm = {acc}_vm + {acc}_d / {acc}_nw",
                            f"{acc}_vm2 = tl.where({m}, {acc}_vm2 + {acc}_d * ({value} - {acc}_nm), {acc}_vm2)",
                            f"{acc}_vm = tl.where({m}, {acc}_nm, {acc}_vm)",
                            f"{acc}_vw = tl.where({m}, {acc}_nw, {acc}_vw)"]
            elif rtype in ("argmax", "argmin"):
                cmp = ">" if rtype == "argmax" else "<"
                nan_first = f"(({value} != {value}) & ({acc}_v == {acc}_v))"
                updates += [f"{acc}_take = {m} & (({value} {cmp} {acc}_v) | {nan_first})",
                            f"{acc}_v = tl.where({acc}_take, {value}, {acc}_v)",
                            f"{acc}_vi = tl.where({acc}_take, ({rindex} + 0 * rindex).to(tl.int64), {acc}_vi)"]
            else:
                comb = {"sum": "{a} + {v}", "prod": "{a} * {v}", "max": "_max_combine({a}, {v})",
                        "min": "_min_combine({a}, {v})", "any": "tl.maximum({a}, ({v}).to(tl.int8))",
                        "all": "tl.minimum({a}, ({v}).to(tl.int8))"}[rtype]
                updates.append(f"{acc}_v = tl.where({m}, " + comb.format(a=f"{acc}_v", v=value) + f", {acc}_v)")
        body = head + inner + updates
        if persistent:
            out += body
        else:
            bound = pexpr(rnumel)
            if _interpret() and not isinstance(rnumel, (int, sympy.Integer)):
                bound = f"_interpret_index({bound})"
            out += [f"for roffset in range(0, {bound}, RBLOCK):"] + ["    " + ln for ln in body]
        for acc, rtype, value, rindex, sdt in accs:
            out += self.finish(acc, rtype, sdt, persistent)
        self.block = []
        self.mask, self.zero = "xmask", "0 * xindex"
        for name, index, value in pending:
            self.ops.store(name, index, value)
        return out + self.block


def _pow2(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def _decompose(flat: str, vars_, sizes) -> list[str]:
    out = []
    stride = 1
    for i in reversed(range(len(vars_))):
        e = flat if stride == 1 else f"({flat} // {pexpr(stride)})"
        out.append(f"{vars_[i]} = {e} % {pexpr(sizes[i])}" if i > 0 else f"{vars_[i]} = {e}")
        stride *= sizes[i]
    return out


def build_triton_kernel(group: Group, buffers: dict, size_names: frozenset[str] = frozenset()):
    """(launch function taking tensors then the size symbols it names, [(buffer, written)],
    source, [IndexCheck per site]: with checks, the launch returns None or (site, bad index),
    the size symbols)."""
    w = TritonKernelWriter(group, buffers)
    w.size_names = size_names
    src, params = w.generate()
    # triton reads TRITON_INTERPRET when the module is imported: keep the two kinds apart
    interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    source = PRELUDE + (INTERPRET_PRELUDE if interpret else "") + "\n\n" + src
    mod = load_python_module(source, "triton-interpret" if interpret else "triton")
    return mod.launch, list(params.items()), src, list(w.checks), w.size_params
