"""Seeded random Python programs for the frontend (tests/programs/test_programs.py).

``make_program(seed)`` writes a small module of Python source: helper functions (module level,
closures over a builder's locals, functions and lambdas defined inside the compiled function,
``@torch.no_grad()`` ones, ``*args`` ones) and a function ``f`` whose body mixes

* tensor work (pointwise, broadcasting, reductions, views, matmul, stack/cat, creation ops),
* control flow on tensor values (``if x.sum() > 0:``, ``.item()``, ``int(...)``, ``.tolist()``,
  ``bool(...)``: graph breaks without ``print``), on Python arguments and on shapes, loops over
  ranges, lists, dicts and ``enumerate``/``zip``, ``while`` loops,
* containers (lists, dicts, tuples: built, indexed, appended, updated, unpacked, comprehensions,
  a list argument that the program appends to),
* in-place mutation of inputs, of views of inputs (``a0[0]``, ``a0.t()``, slices, ``view(-1)``),
  of intermediates and of views of them (``add_``, ``mul_``, ``relu_``, ``+=``, ``__setitem__``,
  masked ``__setitem__``), a module global the program writes,
* ``with torch.no_grad()`` / ``torch.enable_grad()`` / ``torch.set_grad_enabled(flag)`` blocks with
  graph breaks inside them, ``torch.set_grad_enabled(False)`` ... ``(True)`` stretches,
  ``try``/``except`` blocks,

and a list of calls: fresh random values each time, a changed shape, changed Python scalar
arguments (``n``, ``alpha``, ``flag``), aliased inputs (the same tensor passed twice,
overlapping views of one base, a row of another input), leaves that require grad, non-leaf
inputs, non-contiguous inputs and calls made under ``torch.no_grad()``.

Every statement is tried eagerly, with a backward pass, on every call of the program while it
is generated (a shape model picks operands that fit, the eager run has the last word), so a
generated program runs in eager unless a branch on fresh random values goes another way.
Deterministic per seed; ``Program.source()`` is readable, runnable Python.
"""
from __future__ import annotations

import copy
import linecache
import random
from dataclasses import dataclass
from itertools import zip_longest

import torch

# ------------------------------------------------------------------------------ the program


@dataclass
class Block:
    """A compound statement: ``head`` (e.g. ``"if v3.sum() > 0:"``), its body, and the ``else``
    body of an ``if`` (or the ``except`` body of a ``try``) when there is one."""

    head: str
    body: list
    orelse: list | None = None
    else_head: str = "else:"


def _emit(nodes: list, indent: int, out: list) -> None:
    pad = "    " * indent
    if not nodes:
        out.append(pad + "pass")
    for n in nodes:
        if isinstance(n, Block):
            out.append(pad + n.head)
            _emit(n.body, indent + 1, out)
            if n.orelse is not None:
                out.append(pad + n.else_head)
                _emit(n.orelse, indent + 1, out)
        else:
            out.extend(pad + ln for ln in n.split("\n"))


@dataclass
class Helper:
    name: str
    where: str            # "module" | "closure" (defined in make(), before f)
    nodes: list           # its full text as nodes (head block with body)


@dataclass
class Param:
    name: str
    kind: str             # "tensor" | "list" | "int" | "float" | "bool"
    shape: tuple = ()     # symbolic ("B", "D", ints) for tensors and list elements
    mutable: bool = False  # the program writes it in place (never a leaf that requires grad)
    default: object = None


@dataclass
class Call:
    B: int
    D: int
    scalars: dict                 # name -> value for int/float/bool params
    kinds: dict                   # tensor param name -> plain|leaf|nonleaf|noncontig
    alias: str = "none"           # none|same|overlap|row|disjoint (a0 with a1)
    grad: bool = True             # grad mode at the call site
    kw: bool = False              # Python scalars passed as keyword arguments
    omit: tuple = ()              # params left to their defaults

    def describe(self) -> str:
        s = ", ".join(f"{k}={v!r}" for k, v in self.scalars.items() if k not in self.omit)
        kinds = ", ".join(f"{k}:{v}" for k, v in self.kinds.items())
        return (f"B={self.B} D={self.D} {s} [{kinds}] alias={self.alias} grad={self.grad}"
                + (" kwargs" if self.kw else "") + (f" defaults={list(self.omit)}" if self.omit else ""))


@dataclass
class Program:
    seed: int
    params: list
    helpers: list
    closure_vars: list            # lines in make() before the closures and f
    body: list
    ret: str
    calls: list
    dtype: torch.dtype = torch.float32
    uses_global: bool = False
    need_box: bool = False
    need_counter: bool = False

    def signature(self) -> str:
        parts = []
        for p in self.params:
            parts.append(p.name if p.default is None else f"{p.name}={p.default!r}")
        return ", ".join(parts)

    def source(self) -> str:
        out: list[str] = ["import math", "import torch", "import xcompile", ""]
        if self.uses_global:
            out += ["G = {'n': 0}", ""]
        if self.need_box:
            out += ["class Box:", "    def __init__(self, t, k):", "        self.t = t", "        self.k = k", "",
                    "    def scaled(self):", "        return self.t * self.k", "",
                    "    def bump(self, u):", "        self.t = self.t + u", "        self.k = self.k + 1", ""]
        for h in self.helpers:
            if h.where == "module":
                _emit(h.nodes, 0, out)
                out.append("")
        out.append("def make():")
        if self.need_counter:
            out.append("    state = {'calls': 0}")
        for ln in self.closure_vars:
            out.append("    " + ln)
        for h in self.helpers:
            if h.where == "closure":
                _emit(h.nodes, 1, out)
        out.append(f"    def f({self.signature()}):")
        _emit(self.body + [f"return {self.ret}"], 2, out)
        out.append("    return f")
        return "\n".join(out) + "\n"

    def load(self):
        """A fresh copy of the program (its own globals and closures): (f, namespace)."""
        src = self.source()
        # a plain file name: code from "<...>" files counts as library code that runs eagerly
        # (only f itself, handed to compile(), would be compiled); linecache shows its lines
        name = f"program_{self.seed}.py"
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        ns: dict = {"__name__": f"program_{self.seed}"}
        exec(compile(src, name, "exec"), ns)  # noqa: S102  (a program made by the test)
        return ns["make"](), ns

    def replace(self, **kw) -> "Program":
        p = copy.copy(self)
        for k, v in kw.items():
            setattr(p, k, v)
        return p

    def __repr__(self) -> str:
        calls = "\n".join(f"# call {i}: {c.describe()}" for i, c in enumerate(self.calls))
        return f"# seed {self.seed}, dtype {self.dtype}\n{calls}\n{self.source()}"


# ------------------------------------------------------------------------------ inputs


def _concrete(shape, call: Call) -> tuple:
    dims = {"B": call.B, "D": call.D}
    return tuple(dims[d] if isinstance(d, str) else d for d in shape)


def make_args(prog: Program, call: Call, seed: int):
    """Fresh arguments for one call: (args, kwargs, leaves, inputs) where ``leaves`` are the
    tensors whose ``.grad`` is compared and ``inputs`` every argument, for the after-call check."""
    g = torch.Generator().manual_seed(seed)
    dt = prog.dtype
    leaves: list = []

    def rand(shape):
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dt)

    def one(kind, shape):
        if kind == "leaf":
            t = rand(shape).requires_grad_()
            leaves.append(t)
            return t
        if kind == "nonleaf":
            leaf = rand(shape).requires_grad_()
            leaves.append(leaf)
            return leaf * 1
        if kind == "noncontig" and len(shape) >= 2:
            return rand(shape[:-2] + (shape[-1], shape[-2])).transpose(-1, -2)
        if kind == "noncontig" and len(shape) == 1:
            return rand((shape[0] * 2,))[::2]
        return rand(shape)

    vals: dict = {}
    tensors = [p for p in prog.params if p.kind == "tensor"]
    for p in prog.params:
        if p.kind == "tensor":
            vals[p.name] = one(call.kinds[p.name], _concrete(p.shape, call))
        elif p.kind == "list":
            vals[p.name] = [one("plain", _concrete(p.shape, call)) for _ in range(2)]
        else:
            vals[p.name] = call.scalars[p.name]
    if call.alias != "none" and len(tensors) >= 2:
        p0, p1 = tensors[0], tensors[1]
        s0 = _concrete(p0.shape, call)
        kind = call.kinds[p0.name]
        if call.alias == "same":
            vals[p1.name] = vals[p0.name]
        elif call.alias == "row":
            vals[p1.name] = vals[p0.name][1] if len(p1.shape) == len(p0.shape) - 1 else vals[p0.name][:, 0]
        elif call.alias in ("overlap", "disjoint"):
            n = s0[0] + 1 if call.alias == "overlap" else 2 * s0[0]
            base = one(kind if kind != "noncontig" else "plain", (n,) + s0[1:])
            vals[p0.name] = base[: s0[0]]
            vals[p1.name] = base[n - s0[0]:]
    args, kwargs = [], {}
    for p in prog.params:
        if p.name in call.omit:
            continue
        if call.kw and p.kind in ("int", "float", "bool"):
            kwargs[p.name] = vals[p.name]
        else:
            args.append(vals[p.name])
    return args, kwargs, leaves


# ------------------------------------------------------------------------------ shapes


def bcast(a: tuple, b: tuple):
    out = []
    for x, y in zip_longest(reversed(a), reversed(b)):
        if x is None:
            out.append(y)
        elif y is None or x == y:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            return None
    return tuple(reversed(out))


def _minus1(d):
    return d - 1 if isinstance(d, int) else f"{d}-1"


def _big(d) -> bool:
    """At least 2 in every call (B and D are), so [0], [1] and [1:] are safe."""
    return isinstance(d, str) or d >= 2


# ------------------------------------------------------------------------------ values


@dataclass
class T:
    shape: tuple
    mutable: bool = True      # may be written in place
    inp: bool = False         # an argument (or a view of one)


@dataclass
class Py:
    kind: str                 # int | float | bool


@dataclass
class Lst:
    elem: tuple
    n: int
    emut: bool = True         # every element may be written in place


@dataclass
class Dct:
    elem: tuple
    keys: list
    emut: bool = True


@dataclass
class Tup:
    elem: tuple
    n: int
    emut: bool = True


@dataclass
class FList:                  # a Python list of floats (from .tolist())
    n: int


@dataclass
class Shape:                  # a torch.Size read from a tensor (symbolic once sizes turn dynamic)
    pass


UNARY = (
    "torch.sin({x})", "{x}.cos()", "torch.tanh({x})", "{x}.sigmoid()", "{x}.relu()", "{x}.abs()",
    "-{x}", "{x} * 2", "{x} + 1", "{x}.clamp(-0.5, 0.5)", "{x} * {x}", "torch.nn.functional.gelu({x})",
    "{x}.square()", "{x} / 2", "1 - {x}", "torch.where({x} > 0, {x}, {x} * 0.1)", "{x}.clone()",
    "{x}.detach()", "{x}.contiguous()", "torch.nn.functional.leaky_relu({x}, 0.2)", "{x}.exp()",
    "torch.atan({x})", "{x}.neg()", "({x} + 0.5).floor()", "torch.nn.functional.silu({x})",
)
UNARY_ND = ("{x}.softmax(-1)", "{x}.cumsum(0)", "{x}.flip(0)", "torch.nn.functional.normalize({x}, dim=-1)")
BINARY = (
    "{x} + {y}", "{x} - {y}", "{x} * {y}", "torch.maximum({x}, {y})", "torch.where({x} > {y}, {x}, {y})",
    "{x} / ({y}.abs() + 1)", "torch.add({x}, {y}, alpha=0.5)", "{x} * {y}.sigmoid()",
    "torch.lerp({x}, {y}, 0.25)", "torch.minimum({x}, {y})",
)
WITH_SCALAR = ("{x} * {s}", "{x} + {s}", "{x} - {s}", "{x} * ({s} + 1)", "{x} / (abs({s}) + 1)",
               "torch.clamp({x}, max={s})", "{x}.mul({s})")
INPLACE_SELF = ("{x}.mul_(2)", "{x}.add_(1)", "{x}.relu_()", "{x}.clamp_(min=-0.5)", "{x}.zero_()",
                "{x}.fill_(0.5)", "{x}.sigmoid_()", "{x}.neg_()", "{x}.div_(2)", "{x} *= 2",
                "{x} += 1", "torch.relu_({x})", "{x}.sin_()", "{x}.abs_()")
INPLACE_OTHER = ("{x}.add_({y})", "{x}.mul_({y})", "{x}.sub_({y})", "{x} += {y}", "{x} -= {y}",
                 "{x}.copy_({y})", "{x}.add_({y}, alpha=0.5)", "{x}.addcmul_({y}, {y})",
                 "{x}.mul_({y}.sigmoid())", "{x}.lerp_({y}, 0.5)")
INPLACE_SCALAR = ("{x}.mul_({s})", "{x}.add_({s})", "{x} *= {s}", "{x}.clamp_(max={s})")
AUG = ("{x} +=", "{x} -=", "{x} *=")


class Gen:
    """Writes statements into ``nodes`` over the environment ``env`` (name -> value)."""

    def __init__(self, prog_state: "_State", env: dict, *, nograd=False, frozen=(), depth=0,
                 in_helper=False, prefix="v"):
        self.st = prog_state
        self.rng = prog_state.rng
        self.env = env
        self.nograd = nograd          # inside torch.no_grad(): leaves may be written in place
        self.frozen = set(frozen)     # names this scope may not rebind (a closure's free variables)
        self.depth = depth
        self.in_helper = in_helper
        self.prefix = prefix

    # -- helpers ------------------------------------------------------------------------
    def fresh(self, prefix=None) -> str:
        self.st.counter += 1
        return f"{prefix or self.prefix}{self.st.counter}"

    def names(self, cls, pred=None) -> list:
        return [n for n, v in self.env.items() if isinstance(v, cls) and (pred is None or pred(v))]

    def tensor(self, pred=None):
        ns = self.names(T, pred)
        if not ns:
            return None
        # later names more often: the program reads like a chain of work
        w = [1 + i for i in range(len(ns))]
        return self.rng.choices(ns, weights=w)[0]

    def scalar(self):
        ns = self.names(Py, lambda v: v.kind in ("int", "float"))
        consts = ["0.5", "2", "-1.5", "3"]
        if ns and self.rng.random() < 0.7:
            return self.rng.choice(ns)
        return self.rng.choice(consts)

    def writable(self, name) -> bool:
        v = self.env[name]
        return isinstance(v, T) and (v.mutable or self.nograd)

    # -- expressions -------------------------------------------------------------------
    def expr(self, x=None, depth=0):
        """(source, shape) of a tensor expression."""
        rng = self.rng
        x = x or self.tensor()
        sx = self.env[x].shape
        r = rng.random()
        if r < 0.32:
            if len(sx) >= 1 and rng.random() < 0.15:
                return rng.choice(UNARY_ND).format(x=x), sx
            return rng.choice(UNARY).format(x=x), sx
        if r < 0.55:
            ys = self.names(T, lambda v: bcast(sx, v.shape) is not None)
            y = rng.choice(ys)
            return rng.choice(BINARY).format(x=x, y=y), bcast(sx, self.env[y].shape)
        if r < 0.65:
            return rng.choice(WITH_SCALAR).format(x=x, s=self.scalar()), sx
        if r < 0.77:
            return self.reduce(x, sx)
        if r < 0.88:
            return self.view(x, sx)
        if r < 0.95:
            m = self.matmul(x, sx)
            if m:
                return m
            return rng.choice(UNARY).format(x=x), sx
        return self.create(x, sx)

    def reduce(self, x, sx):
        rng = self.rng
        if not sx or rng.random() < 0.25:
            return rng.choice(("{x}.sum()", "{x}.mean()", "{x}.amax()", "{x}.norm()")).format(x=x), ()
        d = rng.randrange(len(sx))
        kind = rng.randrange(6)
        if kind == 0:
            return f"{x}.sum({d})", sx[:d] + sx[d + 1:]
        if kind == 1:
            return f"{x}.mean({d}, keepdim=True)", sx[:d] + (1,) + sx[d + 1:]
        if kind == 2:
            return f"{x}.amax({d})", sx[:d] + sx[d + 1:]
        if kind == 3:
            return f"{x}.logsumexp({d})", sx[:d] + sx[d + 1:]
        if kind == 4:
            return f"torch.max({x}, {d}).values", sx[:d] + sx[d + 1:]
        return f"{x}.sum(-1, keepdim=True)", sx[:-1] + (1,)

    def view(self, x, sx):
        rng = self.rng
        opts = []
        if len(sx) == 2:
            opts += [(f"{x}.t()", (sx[1], sx[0])), (f"{x}[:, 0]", (sx[0],))]
            if _big(sx[1]):
                opts += [(f"{x}[:, 1:]", (sx[0], _minus1(sx[1])))]
            if sx[0] == sx[1]:
                opts += [(f"{x}.diagonal()", (sx[0],))]
        if len(sx) >= 2:
            opts += [(f"{x}.transpose(0, 1)", (sx[1], sx[0]) + sx[2:])]
        if len(sx) >= 1:
            opts += [(f"{x}[0]", sx[1:]), (f"{x}.unsqueeze(0)", (1,) + sx), (f"{x}.flatten()", ("*".join(map(str, sx)),)),  # noqa: E501
                     (f"{x}.narrow(0, 0, 1)", (1,) + sx[1:]), (f"{x}[-1]", sx[1:])]
            if _big(sx[0]):
                opts += [(f"{x}[1:]", (_minus1(sx[0]),) + sx[1:]), (f"{x}[1]", sx[1:])]
        if len(sx) >= 1 and all(_big(d) for d in sx):
            opts += [(f"{x}.view(-1)", ("*".join(map(str, sx)),))]
        if not sx:
            opts += [(f"{x}.unsqueeze(0)", (1,)), (f"{x}.expand(3)", (3,))]
        if 1 in sx:
            opts += [(f"{x}.squeeze()", tuple(d for d in sx if d != 1))]
        return rng.choice(opts)

    def matmul(self, x, sx):
        rng = self.rng
        if len(sx) != 2:
            return None
        cands = []
        for y, v in self.env.items():
            if not isinstance(v, T):
                continue
            sy = v.shape
            if len(sy) == 2 and sy[0] == sx[1]:
                cands.append((f"{x} @ {y}", (sx[0], sy[1])))
            if len(sy) == 2 and sy[1] == sx[1]:
                cands.append((f"{x} @ {y}.t()", (sx[0], sy[0])))
                cands.append((f"torch.mm({x}.t(), {y})" if sy[0] == sx[0] else f"{x} @ {y}.t()",
                              (sx[1], sy[1]) if sy[0] == sx[0] else (sx[0], sy[0])))
            if len(sy) == 1 and sy[0] == sx[1]:
                cands.append((f"{x} @ {y}", (sx[0],)))
            if len(sy) == 1 and sy[0] == sx[0]:
                cands.append((f"{y} @ {x}", (sx[1],)))
        return rng.choice(cands) if cands else None

    def create(self, x, sx):
        rng = self.rng
        opts = [(f"torch.zeros_like({x})", sx), (f"torch.ones_like({x}) * 0.5", sx),
                (f"torch.full_like({x}, {self.scalar()})", sx), (f"{x}.new_ones({x}.shape)", sx)]
        same = self.names(T, lambda v: v.shape == sx)
        y = rng.choice(same)
        opts += [(f"torch.stack([{x}, {y}])", (2,) + sx), (f"torch.stack([{x}, {y}]).sum(0)", sx)]
        if sx:
            opts += [(f"torch.cat([{x}, {y}], 0)", (f"2*{sx[0]}",) + sx[1:]),
                     (f"torch.arange({x}.shape[-1], dtype={x}.dtype)", (sx[-1],)),
                     (f"torch.linspace(-1, 1, {x}.shape[0], dtype={x}.dtype)", (sx[0],))]
        return rng.choice(opts)

    def cond(self):
        """A condition: on tensor values (a graph break), on Python values, on shapes, on modes."""
        rng = self.rng
        x = self.tensor()
        r = rng.random()
        pys = self.names(Py)
        if r < 0.45:
            y = self.tensor()
            return rng.choice((
                # two reductions are compared with a margin: x and y may be one value computed twice
                # (eager gives equal bits, compiled kernels may not: a tie is no test of a compiler)
                f"{x}.sum() > 0", f"{x}.mean() > {y}.mean() + 0.01", f"({x} > 0).any()", f"({x} > -2).all()",
                f"{x}.max().item() > 0.5", f"{x}.sum() + 0.01 < {y}.sum()", f"bool({x}.abs().sum() > 3)",
                f"float({x}.mean()) > 0", f"{x}.numel() > 0 and {x}.sum() > 0"))
        if r < 0.7 and pys:
            p = rng.choice(pys)
            k = self.env[p].kind
            if k == "bool":
                return rng.choice((p, f"not {p}"))
            if k == "int":
                return rng.choice((f"{p} % 2 == 0", f"{p} > 1", f"{p} >= 2 and {x}.sum() > 0"))
            return rng.choice((f"{p} > 0", f"{p} < 0.3"))
        return rng.choice((f"{x}.shape[0] > 2", f"{x}.dim() == 2", f"{x}.requires_grad",
                           "torch.is_grad_enabled()", f"{x}.is_contiguous()", f"{x}.numel() > 6",
                           f"{x}.dtype == torch.float32"))

    # -- statements --------------------------------------------------------------------
    def stmt(self) -> list:
        """One statement (maybe compound); updates env; returns nodes."""
        rng = self.rng
        kinds = [
            ("assign", 26), ("inplace", 12), ("setitem", 5), ("item", 7), ("if_tensor", 8),
            ("ternary", 2), ("list", 5), ("dict", 3), ("tuple", 2), ("container_op", 6),
            ("loop", 5), ("while", 1), ("helper", 7), ("nograd", 6), ("set_grad", 3),
            ("grad_stretch", 1), ("global", 1), ("try", 1), ("break", 1), ("compare_py", 1),
            ("obj", 3), ("counter", 1), ("misc", 4), ("raise", 1), ("data", 1), ("ints", 4),
        ]
        if self.depth >= 2:
            kinds = [k for k in kinds if k[0] in ("assign", "inplace", "setitem", "item", "container_op")]
        names, weights = zip(*kinds)
        kind = rng.choices(names, weights=weights)[0]
        return getattr(self, "s_" + kind)()

    def s_assign(self):
        src, shape = self.expr()
        name = self.fresh()
        mutable = True
        # a view of something keeps its writability (a view of a leaf that requires grad is not)
        base = src.split(".")[0].split("[")[0]
        if base in self.env and isinstance(self.env[base], T) and _is_view_expr(src, base):
            mutable = self.env[base].mutable
        self.env[name] = T(shape, mutable)
        return [f"{name} = {src}"]

    def _target(self, writable_only=True):
        """A tensor to write in place, and (expression, shape): itself or a view of it."""
        rng = self.rng
        ns = [n for n in self.names(T) if self.writable(n) or not writable_only]
        if not ns:
            return None
        # prefer arguments and intermediates alike
        x = rng.choice(ns)
        sx = self.env[x].shape
        opts = [(x, sx)] * 3
        if len(sx) >= 1:
            opts += [(f"{x}[0]", sx[1:])]
            if _big(sx[0]):
                opts += [(f"{x}[1:]", (_minus1(sx[0]),) + sx[1:]), (f"{x}[::2]", (f"ceil({sx[0]}/2)",) + sx[1:])]
        if len(sx) == 2:
            opts += [(f"{x}.t()", (sx[1], sx[0])), (f"{x}[:, 1]", (sx[0],)), (f"{x}[:, :1]", (sx[0], 1))]
            if rng.random() < 0.3:
                opts += [(f"{x}.view(-1)", ("*".join(map(str, sx)),))]
        return x, rng.choice(opts)

    def s_inplace(self):
        rng = self.rng
        t = self._target()
        if t is None:
            return self.s_assign()
        x, (tx, sx) = t
        r = rng.random()
        if r < 0.4:
            tmpl = rng.choice(INPLACE_SELF)
            line = tmpl.format(x=tx)
        elif r < 0.85:
            ys = self.names(T, lambda v: bcast(sx, v.shape) == sx)
            if not ys:
                line = rng.choice(INPLACE_SELF).format(x=tx)
            else:
                line = rng.choice(INPLACE_OTHER).format(x=tx, y=rng.choice(ys))
        else:
            line = rng.choice(INPLACE_SCALAR).format(x=tx, s=self.scalar())
        if "=" in line and (tx.endswith(")") or (tx == x and x in self.frozen)):
            line = f"{tx}.add_(1)"      # `a.t() += 1` is a syntax error; `a += 1` rebinds a
        # `a[i] += 1` is a setitem on `a`; fine for a frozen name too
        return [line]

    def s_setitem(self):
        rng = self.rng
        ns = [n for n in self.names(T, lambda v: len(v.shape) >= 1) if self.writable(n)]
        if not ns:
            return self.s_inplace()
        x = rng.choice(ns)
        sx = self.env[x].shape
        opts = []
        for idx, sub in ((f"{x}[0]", sx[1:]), (f"{x}[-1]", sx[1:]), (f"{x}[:, 0]", (sx[0],) if len(sx) == 2 else None),
                         (f"{x}[1:]", (_minus1(sx[0]),) + sx[1:] if _big(sx[0]) else None)):
            if sub is None:
                continue
            ys = self.names(T, lambda v: bcast(sub, v.shape) == sub)
            opts.append(f"{idx} = {self.scalar()}")
            opts.append(f"{idx} += 1")
            if ys:
                y = rng.choice(ys)
                opts.append(f"{idx} = {y}")
                opts.append(f"{idx} *= {y}")
        masks = self.names(T, lambda v: v.shape == sx)
        m = rng.choice(masks)
        opts.append(f"{x}[{m} > 0] = 0")
        opts.append(f"{x}[{m} < 0] *= 2")
        opts.append(f"{x}[...] = {rng.choice(masks)}")
        return [rng.choice(opts)]

    def s_item(self):
        rng = self.rng
        x = self.tensor()
        name = self.fresh("s")
        r = rng.random()
        if r < 0.35:
            self.env[name] = Py("float")
            return [f"{name} = {x}.{rng.choice(('sum', 'mean', 'max', 'min'))}().item()"]
        if r < 0.5:
            self.env[name] = Py("float")
            return [f"{name} = float({x}.mean())"]
        if r < 0.7:
            self.env[name] = Py("int")
            return [rng.choice((f"{name} = int(({x} > 0).sum())", f"{name} = ({x} > 0).sum().item()",
                                f"{name} = {x}.argmax().item()"))]
        if r < 0.8:
            self.env[name] = Py("bool")
            return [f"{name} = bool(({x} > 0).any())"]
        if r < 0.9:
            self.env[name] = Py("int")
            return [rng.choice((f"{name} = {x}.shape[0]", f"{name} = {x}.numel()", f"{name} = len({x})"
                                if self.env[x].shape else f"{name} = {x}.dim()"))]
        ones = self.names(T, lambda v: len(v.shape) == 1)
        if not ones:
            self.env[name] = Py("float")
            return [f"{name} = {x}.sum().item()"]
        y = rng.choice(ones)
        lname = self.fresh("l")
        self.env[lname] = FList(2)
        self.env[name] = Py("float")
        return [f"{lname} = {y}.tolist()", f"{name} = {rng.choice(('sum', 'max', 'min'))}({lname}) + {lname}[0]"]

    def s_compare_py(self):
        pys = self.names(Py, lambda v: v.kind in ("int", "float"))
        if len(pys) < 1:
            return self.s_item()
        a = self.rng.choice(pys)
        b = self.scalar()
        name = self.fresh("s")
        self.env[name] = Py("float")
        return [f"{name} = {a} * 2 + {b}" if self.rng.random() < 0.5 else f"{name} = max({a}, {b}) - min({a}, 1)"]

    def _branch(self, gen_kw=None):
        """Sub-generator over a copy of env whose new names stay inside the block."""
        return Gen(self.st, dict(self.env), nograd=self.nograd, frozen=self.frozen, depth=self.depth + 1,
                   in_helper=self.in_helper, prefix=self.prefix, **(gen_kw or {}))

    def _same_shape_pair(self, x):
        """Two expressions of the same shape as each other, over x."""
        rng = self.rng
        sx = self.env[x].shape
        a = rng.choice(UNARY).format(x=x)
        b = rng.choice(UNARY + WITH_SCALAR).format(x=x, s=self.scalar())
        return a, b, sx

    def s_if_tensor(self):
        rng = self.rng
        cond = self.cond()
        x = self.tensor()
        a, b, sx = self._same_shape_pair(x)
        name = self.fresh()
        body, orelse = [], []
        for side, e in ((body, a), (orelse, b)):
            g = self._branch()
            for _ in range(rng.randrange(0, 3)):
                side.extend(g.stmt())
            side.append(f"{name} = {e}")
        self.env[name] = T(sx, True)
        if rng.random() < 0.2:          # no else: a default before the if
            return [f"{name} = {a}", Block(f"if {cond}:", orelse)]
        return [Block(f"if {cond}:", body, orelse)]

    def s_ternary(self):
        x = self.tensor()
        a, b, sx = self._same_shape_pair(x)
        name = self.fresh()
        self.env[name] = T(sx, True)
        return [f"{name} = {a} if {self.cond()} else {b}"]

    def s_list(self):
        rng = self.rng
        x = self.tensor()
        sx = self.env[x].shape
        same = self.names(T, lambda v: v.shape == sx)
        k = rng.randint(2, 3)
        elems = [rng.choice(same) for _ in range(k)]
        name = self.fresh("lst")
        self.env[name] = Lst(sx, k, all(self.env[e].mutable for e in elems))
        if rng.random() < 0.25:
            src = rng.choice(UNARY).format(x="t")
            return [f"{name} = [{src} for t in [{', '.join(elems)}]]"]
        return [f"{name} = [{', '.join(elems)}]"]

    def s_dict(self):
        rng = self.rng
        x = self.tensor()
        sx = self.env[x].shape
        same = self.names(T, lambda v: v.shape == sx)
        keys = rng.sample(["a", "b", "c", "w"], rng.randint(1, 3))
        name = self.fresh("d")
        vals = [rng.choice(same) for _ in keys]
        self.env[name] = Dct(sx, keys, all(self.env[e].mutable for e in vals))
        if rng.random() < 0.2:
            return [f"{name} = dict({', '.join(f'{k}={e}' for k, e in zip(keys, vals))})"]
        return [f"{name} = {{{', '.join(f'{k!r}: {e}' for k, e in zip(keys, vals))}}}"]

    def s_tuple(self):
        rng = self.rng
        x = self.tensor()
        sx = self.env[x].shape
        same = self.names(T, lambda v: v.shape == sx)
        k = rng.randint(2, 3)
        name = self.fresh("tp")
        vals = [rng.choice(same) for _ in range(k)]
        self.env[name] = Tup(sx, k, all(self.env[e].mutable for e in vals))
        return [f"{name} = ({', '.join(vals)},)"]

    def s_container_op(self):
        rng = self.rng
        conts = self.names((Lst, Dct, Tup))
        if not conts:
            return rng.choice((self.s_list, self.s_dict, self.s_tuple))()
        c = rng.choice(conts)
        v = self.env[c]
        same = self.names(T, lambda t: t.shape == v.elem)
        name = self.fresh()
        if isinstance(v, Lst):
            opts = [
                (f"{name} = {c}[-1]", True), (f"{name} = {c}[0] * {c}[1]", False),
                (f"{name} = torch.stack({c}).sum(0)", False), (f"{name} = sum({c})", False),
                (f"{name} = {c}[len({c}) - 1] + {c}[0]", False),
            ]
            r = rng.random()
            if r < 0.25:
                v.n += 1
                return [f"{c}.append({rng.choice(same)})"]
            if r < 0.35:
                return [f"{c}[0] = {rng.choice(same)}"]
            if r < 0.42:
                name2 = self.fresh()
                self.env[name] = T(v.elem, v.emut)
                self.env[name2] = T(v.elem, v.emut)
                return [f"{name}, {name2}, *_ = {c}"]
            if r < 0.48 and v.n >= 3 and self.depth == 0:
                v.n -= 1
                self.env[name] = T(v.elem, True)
                return [f"{name} = {c}.pop()"]
            if r < 0.55:
                self.env[name] = T(v.elem, True)
                return [f"{name} = {c}[-2:][0] + 1"]
            src, view = rng.choice(opts)
            self.env[name] = T(v.elem, v.emut if view else True)
            return [src]
        if isinstance(v, Dct):
            r = rng.random()
            if r < 0.25:
                k = rng.choice(["a", "b", "c", "e", "w"])
                if k not in v.keys:
                    v.keys.append(k)
                return [f"{c}[{k!r}] = {rng.choice(same)}"]
            k = rng.choice(v.keys)
            if r < 0.45:
                self.env[name] = T(v.elem, True)
                return [f"{name} = {c}[{k!r}] * 2"]
            if r < 0.6:
                self.env[name] = T(v.elem, True)
                return [f"{name} = {c}.get('zz', {rng.choice(same)}) + {c}.get({k!r})"]
            if r < 0.75:
                self.env[name] = T(v.elem, True)
                return [f"{name} = sum({c}.values())"]
            if r < 0.85:
                d2 = self.fresh("d")
                self.env[d2] = Dct(v.elem, list(v.keys))
                return [f"{d2} = {{k: t * 2 for k, t in {c}.items()}}"]
            self.env[name] = T(v.elem, True)
            return [f"{name} = {c}[{k!r}] + len({c})"]
        # tuple
        r = rng.random()
        if r < 0.5:
            names = [self.fresh() for _ in range(v.n)]
            for nm in names:
                self.env[nm] = T(v.elem, v.emut)
            return [f"{', '.join(names)} = {c}"]
        self.env[name] = T(v.elem, True)
        return [f"{name} = {c}[1] - {c}[0]"]

    def _acc(self, sx):
        """Initial accumulator of shape sx, and its name."""
        rng = self.rng
        acc = self.fresh("acc")
        same = self.names(T, lambda v: v.shape == sx)
        init = rng.choice((f"torch.zeros_like({rng.choice(same)})", f"{rng.choice(same)} * 0",
                           f"{rng.choice(same)}.clone()", f"{rng.choice(same)} + 0"))
        self.env[acc] = T(sx, True)
        return acc, init

    def s_loop(self):
        rng = self.rng
        lists = self.names((Lst, Dct, Tup))
        r = rng.random()
        x = self.tensor()
        sx = self.env[x].shape
        pys = self.names(Py, lambda v: v.kind == "int")
        if lists and r < 0.45:
            c = rng.choice(lists)
            v = self.env[c]
            sx = v.elem
            acc, init = self._acc(sx)
            if isinstance(v, Dct):
                head = rng.choice((f"for k, t in {c}.items():", f"for t in {c}.values():"))
            elif rng.random() < 0.3:
                head = f"for i, t in enumerate({c}):"
            elif rng.random() < 0.2:
                head = f"for t, u in zip({c}, reversed({c})):" if isinstance(v, Lst) else f"for t in {c}:"
            else:
                head = f"for t in {c}:"
            g = self._branch()
            del g.env[c]                      # never grown while it is iterated
            g.env["t"] = T(sx, v.emut)
            g.frozen |= {acc}
            body = []
            for _ in range(rng.randrange(0, 2)):
                body.extend(g.stmt())
            e, se = g.expr("t")
            if bcast(sx, se) != sx:
                e = rng.choice(UNARY).format(x="t")
            body.append(f"{acc} = {acc} {rng.choice(('+', '*', '-'))} {e}")
            return [f"{acc} = {init}", Block(head, body)]
        if r < 0.75 and len(sx) >= 1 and isinstance(sx[0], str) and rng.random() < 0.5:
            acc, init = self._acc(sx[1:]) if self.names(T, lambda v: v.shape == sx[1:]) else (None, None)
            if acc is None:
                return self.s_assign()
            body = [f"{acc} = {acc} + {x}[i] * {rng.choice(('i', '0.5', '(i + 1)'))}"]
            if rng.random() < 0.3:
                body.insert(0, Block(f"if {x}[i].sum() > 0:", [f"{acc} = {acc} * 2"]))
            return [f"{acc} = {init}", Block(f"for i in range({x}.shape[0]):", body)]
        acc, init = self._acc(sx)
        n = rng.choice(pys) if pys else str(rng.randint(1, 3))
        g = self._branch()
        g.env["i"] = Py("int")
        body = []
        for _ in range(rng.randrange(0, 2)):
            body.extend(g.stmt())
        e, se = g.expr(x)
        if bcast(sx, se) != sx:
            e = rng.choice(UNARY).format(x=x)
        body.append(f"{acc} = {acc} * 0.5 + {e}")
        return [f"{acc} = {init}", Block(f"for i in range({n}):", body)]

    def s_while(self):
        rng = self.rng
        x = self.tensor()
        sx = self.env[x].shape
        acc, init = self._acc(sx)
        i = self.fresh("i")
        pys = self.names(Py, lambda v: v.kind == "int")
        n = rng.choice(pys) if pys else "2"
        cond = rng.choice((f"{i} < {n}", f"{i} < 3 and {acc}.abs().sum() < 100"))
        return [f"{acc} = {init}", f"{i} = 0",
                Block(f"while {cond}:", [f"{acc} = {acc} + {rng.choice(UNARY).format(x=x)}", f"{i} += 1"])]

    def s_nograd(self):
        rng = self.rng
        head = rng.choice(("with torch.no_grad():",) * 3 + ("with torch.set_grad_enabled(False):",))
        g = Gen(self.st, self.env, nograd=True, frozen=self.frozen, depth=self.depth + 1,
                in_helper=self.in_helper, prefix=self.prefix)
        body = []
        n = rng.randint(1, 3)
        brk = rng.randrange(n + 1)
        for i in range(n):
            if i == brk:
                body.extend(g.s_item() if rng.random() < 0.5 else g.s_if_tensor())
            body.extend(g.stmt() if rng.random() < 0.6 else g.s_inplace())
        if rng.random() < 0.25 and self.depth == 0:
            inner = Gen(self.st, self.env, nograd=False, frozen=self.frozen, depth=self.depth + 2,
                        in_helper=self.in_helper, prefix=self.prefix)
            body.append(Block("with torch.enable_grad():", inner.stmt() + inner.s_item()))
        return [Block(head, body)]

    def s_set_grad(self):
        rng = self.rng
        bools = self.names(Py, lambda v: v.kind == "bool")
        flag = rng.choice(bools) if bools else rng.choice(("True", "False"))
        g = Gen(self.st, self.env, nograd=False, frozen=self.frozen, depth=self.depth + 1,
                in_helper=self.in_helper, prefix=self.prefix)
        body = []
        for _ in range(rng.randint(1, 2)):
            body.extend(g.stmt())
        if rng.random() < 0.6:
            body.extend(g.s_item() if rng.random() < 0.5 else g.s_if_tensor())
        return [Block(f"with torch.set_grad_enabled({flag}):", body)]

    def s_grad_stretch(self):
        g = Gen(self.st, self.env, nograd=True, frozen=self.frozen, depth=self.depth + 1,
                in_helper=self.in_helper, prefix=self.prefix)
        body = g.stmt() + g.s_item() + g.stmt()
        tail = [] if self.rng.random() < 0.15 else ["torch.set_grad_enabled(True)"]
        return ["torch.set_grad_enabled(False)"] + body + tail

    def s_global(self):
        self.st.uses_global = True
        x = self.tensor()
        r = self.rng.random()
        return ["G['n'] += 1" if r < 0.4 else f"G['t'] = {x}.detach()" if r < 0.7 else "G['s'] = G['n'] * 2"]

    def _int_source(self) -> str:
        """An int that changes between calls: the argument ``n``, or a size."""
        x = self.tensor(lambda v: len(v.shape) >= 1)
        sizes = [f"{x}.shape[0]", f"{x}.size(-1)", f"len({x})"] if x is not None else []
        ints = self.names(Py, lambda v: v.kind == "int")
        return self.rng.choice(sizes + ints * 2 or ["3"])

    def s_ints(self):
        """Python ints from sizes and int arguments (symbolic once they change between calls):
        sets, dict keys, ``in`` tests, sums over tensors' sizes, a returned ``torch.Size``."""
        rng = self.rng
        a, b = self._int_source(), self._int_source()
        name = self.fresh("k")
        self.env[name] = Py("int")
        r = rng.random()
        if r < 0.2:
            s = self.fresh("set")
            return [f"{s} = {{1, {a} // 2, {b}}}", f"{s}.add(abs({a} - 2))", f"{s} |= {{3, {b} - 1}}",
                    f"{name} = len({s}) + sorted({s})[-1]"]
        if r < 0.3:
            return [f"{name} = len({{{a}, {b}, {a} - 0, 2}}) + int({a} in ({b}, 2)) + [{a}, {b}].count({b})"]
        if r < 0.4:
            d = self.fresh("d")
            return [f"{d} = {{{a}: 1, 2: 2}}", f"{d}[{b}] = 3", f"{name} = len({d}) + {d}.get(3, 0) + ({a} - 1 in {d})"]
        if r < 0.55:
            ts = self.names(T, lambda v: len(v.shape) >= 1)[-3:]
            body = [f"{name} = 0", Block(f"for t_ in ({''.join(t + ', ' for t in ts)}):",
                                         [f"{name} += t_.size(-1)"])]
            return body if ts else [f"{name} = {a} + {b}"]
        if r < 0.75:
            x = self.tensor()
            sh = self.fresh("sh")
            self.env[sh] = Shape()
            return [f"{sh} = {rng.choice((f'{x}.shape', f'({x} * 2).shape', f'{x}.shape[1:]', f'{x}.size()'))}",
                    f"{name} = {a} * 2 - {b}"]
        x = self.tensor()
        v = self.fresh()
        self.env[v] = T(self.env[x].shape, True)
        return [f"{name} = {a} // 2 + {b}", f"{v} = {x} * {name}"]

    def s_try(self):
        x = self.tensor()
        name = self.fresh()
        sx = self.env[x].shape
        a = self.rng.choice(UNARY).format(x=x)
        self.env[name] = T(sx, True)
        r = self.rng.random()
        if r < 0.3 and sx:
            # fails only at run time, for some calls: an index past the end (its bound is data)
            k = self._int_source()
            body = [f"{name} = {x}[torch.arange({x}.shape[0]) + ({k}) % 3]"]
            return [Block("try:", body, [f"{name} = {x} * 3"], else_head="except (IndexError, RuntimeError):")]
        ys = [n for n in self.names(T, lambda v: v.shape == sx and len(sx) >= 1) if n != x and self.writable(n)]
        if r < 0.45 and ys:
            # writes y at tensor indices from x: raises when x and y share memory (aliased calls)
            y = self.rng.choice(ys)
            body = [f"{y}[torch.arange({y}.shape[0]).flip(0)] = {x}", f"{name} = {a}"]
            return [Block("try:", body, [f"{name} = {x} * 3"], else_head="except RuntimeError:")]
        bad = r < 0.7
        body = [f"{name} = {a}"] + ([f"{name} = {name} @ torch.ones(7, 7, dtype={x}.dtype)"] if bad else [])
        return [Block("try:", body, [f"{name} = {x} * 3"], else_head="except RuntimeError:")]

    def s_break(self):
        return ["xcompile.graph_break()"]

    def s_obj(self):
        """A small user class: built, read, written, its method called."""
        rng = self.rng
        self.st.need_box = True
        x = self.tensor()
        sx = self.env[x].shape
        b = self.fresh("box")
        name = self.fresh()
        self.env[name] = T(sx, True)
        out = [f"{b} = Box({x}, {self.scalar()})"]
        r = rng.random()
        if r < 0.3:
            out.append(f"{name} = {b}.scaled() + {b}.t")
        elif r < 0.55:
            out += [f"{b}.t = {b}.t * 2", f"{name} = {b}.scaled()"]
        elif r < 0.75:
            out += [f"{b}.bump({rng.choice(self.names(T, lambda v: v.shape == sx))})", f"{name} = {b}.t + {b}.k"]
        else:
            out += [f"{name} = {b}.t if isinstance({b}, Box) and hasattr({b}, 'k') else {x}",
                    f"{name} = {name} * getattr({b}, 'k', 1.0)"]
        return out

    def s_counter(self):
        """State kept across calls in a closure cell: later calls see what earlier ones left."""
        self.st.need_counter = True
        x = self.tensor()
        name = self.fresh()
        self.env[name] = T(self.env[x].shape, True)
        return ["state['calls'] += 1", f"{name} = {x} * state['calls']"]

    def s_misc(self):
        rng = self.rng
        x = self.tensor()
        sx = self.env[x].shape
        name = self.fresh()
        pys = self.names(Py, lambda v: v.kind in ("int", "float"))
        lists = self.names(Lst)
        r = rng.random()
        self.env[name] = T(sx, True)
        if r < 0.12 and len(sx) == 2:
            r_, c_ = self.fresh("r"), self.fresh("c")
            self.env[r_] = self.env[c_] = Py("int")
            return [f"{r_}, {c_} = {x}.shape", f"{name} = {x} * ({r_} - {c_})"]
        if r < 0.22:
            p = rng.choice(pys) if pys else x + ".dim()"
            if pys and self.env[p].kind == "float":
                # a float computed from tensors may differ from eager's in its last bits (a
                # reduction in another order, as under torch.compile), and str() shows every
                # bit: its length is a discontinuous function of a rounded value (seed 3461)
                p = f"round({p}, 3)"
            return [f"{name} = {x} * len(str({p}))"]
        if r < 0.32 and pys:
            self.env[name] = T(sx, True)
            return [f"{name} = {x} * math.sqrt(abs({rng.choice(pys)}) + 1)"]
        if r < 0.42:
            return [Block(f"if (k := {x}.dim()) > 1:", [f"{name} = {x} * k"], [f"{name} = {x} + k"])]
        if r < 0.52 and lists:
            c = rng.choice(lists)
            if self.env[c].elem != sx:
                self.env[name] = T(self.env[c].elem, True)
            return [f"{name} = {c}[0] * 2 if any(t.sum() > 0 for t in {c}) else {c}[-1]"]
        if r < 0.6:
            return [f"{name} = {x}.T.t() * 1" if len(sx) == 2 else f"{name} = {x}.mT.mT + 0" if len(sx) > 2
                    else f"{name} = {x} + 0"]
        if r < 0.7:
            d = self.fresh("kw")
            return [f"{d} = {{'alpha': 0.5}}", f"{name} = torch.add({x}, {x}, **{d})"]
        if r < 0.8:
            return [f"{name} = {x} if type({x}) is torch.Tensor and {x}.ndim == {len(sx)} else {x} * 0"]
        if r < 0.9:
            tmp = self.fresh()
            return [f"{tmp} = {x} * 3", f"{name} = {tmp} - 1", f"del {tmp}"]
        return [f"{name} = torch.where({x} > {x}.mean(), {x}, torch.zeros_like({x})).contiguous()"]

    def s_raise(self):
        """An exception raised and caught inside the program."""
        x = self.tensor()
        name = self.fresh()
        self.env[name] = T(self.env[x].shape, True)
        cond = self.cond()
        return [Block("try:", [Block(f"if {cond}:", ["raise ValueError('big')"]), f"{name} = {x} + 1"],
                      [f"{name} = {x} - 1"], else_head="except ValueError:")]

    def s_data(self):
        """Writes through .data (bypasses autograd; allowed on leaves too)."""
        x = self.tensor(lambda v: v.inp)
        if x is None or self.depth or self.in_helper or self.st.prog.body:
            # only before anything read it: a write through .data after autograd saved the tensor
            # changes what backward computes in eager, which no compiler promises to follow
            return self.s_inplace()
        return [self.rng.choice((f"{x}.data.mul_(0.5)", f"{x}.data[0] = 1.0" if self.env[x].shape else f"{x}.data.add_(1)"))]  # noqa: E501

    def s_helper(self):
        return self.st.helper(self)


def _is_view_expr(src: str, base: str) -> bool:
    rest = src[len(base):]
    return any(rest.startswith(p) for p in ("[", ".t()", ".transpose", ".unsqueeze", ".flatten", ".narrow",
                                            ".view", ".squeeze", ".diagonal", ".expand", ".detach"))


# ------------------------------------------------------------------------------ helpers


class _State:
    def __init__(self, rng, prog: Program):
        self.rng = rng
        self.prog = prog
        self.counter = 0
        self.nhelpers = 0
        self.uses_global = False
        self.need_box = False
        self.need_counter = False

    def helper(self, caller: Gen) -> list:
        """Define a helper (module level, closure, nested def, lambda, no_grad, *args) and call it."""
        rng = self.rng
        env = caller.env
        x = caller.tensor()
        sx = env[x].shape
        ys = caller.names(T, lambda v: bcast(sx, v.shape) == sx)
        y = rng.choice(ys)
        self.nhelpers += 1
        h = f"h{self.nhelpers}"
        kind = rng.choices(("module", "closure", "nested", "lambda", "nograd", "varargs", "tuple_ret"),
                           weights=(5, 3, 3, 2, 2, 1, 2))[0]
        out = caller.fresh()
        if kind == "lambda":
            caller.env[out] = T(sx, True)
            e = rng.choice(UNARY + WITH_SCALAR).format(x="t", s=caller.scalar())
            return [f"{h} = lambda t: {e}", f"{out} = {h}({x})"]
        if kind == "varargs":
            caller.env[out] = T(sx, True)
            self.prog.helpers.append(Helper(h, "module", [Block(f"def {h}(*ts, scale=1.0):", [
                "acc = ts[0]", Block("for t in ts[1:]:", ["acc = acc + t * scale"]), "return acc"])]))
            return [f"{out} = {h}({x}, {y}, {y}, scale={caller.scalar()})"]
        # a generated body over (x, y) and maybe a scalar; may break and write its arguments
        henv = {"x": T(sx, env[x].mutable), "y": T(env[y].shape, env[y].mutable)}
        frozen = set()
        if kind == "nested":
            # a closure over the caller's locals, defined inside f: reads them, never rebinds them
            for n, v in env.items():
                if n not in henv:
                    henv[n] = copy.copy(v)
            frozen = set(env)
        if kind == "closure":
            k = f"k{self.nhelpers}"
            self.prog.closure_vars.append(f"{k} = {rng.choice((0.5, 1.5, -2.0, 3))}")
            henv[k] = Py("float")
        g = Gen(self, henv, nograd=caller.nograd and kind == "nested" or kind == "nograd",
                frozen=frozen, depth=caller.depth + 1, in_helper=True, prefix="u")
        body = []
        for _ in range(rng.randint(1, 3)):
            body.extend(g.stmt())
        if rng.random() < 0.35:
            body.extend(g.s_if_tensor() if rng.random() < 0.5 else g.s_item())
        rets = [n for n in g.names(T, lambda v: v.shape == sx) if n not in ("x", "y") or rng.random() < 0.2]
        r = rng.choice(rets) if rets else "x"
        if kind == "tuple_ret":
            r2 = g.tensor()
            out2 = caller.fresh()
            body.append(f"return {r}, {r2}")
            caller.env[out] = T(sx, True)
            caller.env[out2] = T(henv[r2].shape, True)
            call = f"{out}, {out2} = {h}({x}, y={y})"
        else:
            body.append(f"return {r}")
            caller.env[out] = T(sx, True)
            call = f"{out} = {h}({x}, {y})"
        head = f"def {h}(x, y):"
        if kind == "nested":
            return [Block(head, body), call]
        if kind == "nograd":
            self.prog.helpers.append(Helper(h, "module", ["@torch.no_grad()", Block(head, body)]))
            caller.env[out].mutable = True
            return [call]
        self.prog.helpers.append(Helper(h, "closure" if kind == "closure" else "module", [Block(head, body)]))
        return [call]


# ------------------------------------------------------------------------------ generation

SHAPES = ((3, 4), (2, 5), (4, 3), (5, 2), (2, 3), (3, 6))


def _calls(rng: random.Random, params: list) -> list:
    tensors = [p for p in params if p.kind == "tensor"]
    scal = [p for p in params if p.kind in ("int", "float", "bool")]

    def scalars():
        out = {}
        for p in scal:
            out[p.name] = (rng.choice((1, 2, 3)) if p.kind == "int" else
                           rng.choice((0.5, -1.25, 2.0, 0.1)) if p.kind == "float" else rng.random() < 0.5)
        return out

    def kinds():
        out = {}
        for p in tensors:
            opts = ["plain", "nonleaf", "noncontig", "plain"] if p.mutable else ["leaf", "leaf", "plain", "noncontig", "nonleaf"]  # noqa: E501
            out[p.name] = rng.choice(opts)
        return out

    def alias():
        if len(tensors) < 2 or rng.random() < 0.6:
            return "none"
        a, b = tensors[0], tensors[1]
        if a.shape == b.shape:
            return rng.choice(("same", "overlap", "disjoint", "overlap"))
        if len(b.shape) == len(a.shape) - 1:
            return "row"
        return "none"

    B, D = rng.choice(SHAPES)
    first = Call(B, D, scalars(), kinds(), alias())
    a = first.alias
    if a != "none":
        # both aliased parameters get the same kind (a base and its views)
        k = first.kinds[tensors[0].name]
        if tensors[0].mutable or tensors[1].mutable:
            k = "nonleaf" if k in ("leaf", "nonleaf") else "plain"
        first.kinds[tensors[0].name] = first.kinds[tensors[1].name] = k
    calls = [first, copy.deepcopy(first)]               # same shapes, fresh values
    B2, D2 = rng.choice([s for s in SHAPES if s != (B, D)])
    c = copy.deepcopy(first)
    c.B, c.D = B2, D2                                     # a new shape
    if rng.random() < 0.5:
        c.scalars = scalars()
    calls.append(c)
    c = copy.deepcopy(first)                              # changed Python values / alias / grad mode
    c.scalars = scalars()
    r = rng.random()
    if r < 0.25 and len(tensors) >= 2:
        c.alias = "none"
        c.kinds = kinds()
    elif r < 0.4:
        c.grad = False
    elif r < 0.55:
        c.kw = True
    elif r < 0.7 and any(p.default is not None for p in params):
        c.omit = tuple(p.name for p in params if p.default is not None)
    calls.append(c)
    if rng.random() < 0.3:
        calls.append(copy.deepcopy(calls[0]))           # back to the first: a cache hit
    if rng.random() < 0.7:
        # sizes and ints keep changing: the symbolic entry (made at the second distinct value)
        # serves values it was not traced with, ints equal to each other or to sizes among them
        used = {(c.B, c.D) for c in calls}
        for _ in range(2):
            c = copy.deepcopy(first)
            fresh = [s for s in SHAPES if s not in used] or list(SHAPES)
            c.B, c.D = rng.choice(fresh)
            used.add((c.B, c.D))
            c.scalars = {k: (rng.choice((0, 1, 2, 3, 4, 5, 6)) if type(v) is int else v) for k, v in scalars().items()}
            calls.append(c)
    return calls


def _validate(prog: Program, env: dict, calls=None) -> bool:
    """Eager runs every call (forward and backward through every live tensor) without raising."""
    tensors = [n for n, v in env.items() if isinstance(v, T)]
    p = prog.replace(ret="(" + "".join(f"{n}, " for n in tensors) + ")")
    try:
        f, _ = p.load()
    except Exception:  # noqa: BLE001
        return False
    for i, call in enumerate(calls or prog.calls):
        args, kwargs, _ = make_args(p, call, 1000 + i)
        prev = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(call.grad)
            outs = f(*args, **kwargs)
            torch.set_grad_enabled(True)
            roots = [t.sum() for t in outs if isinstance(t, torch.Tensor) and t.requires_grad
                     and t.is_floating_point()]
            if roots:
                torch.autograd.backward(roots)
        except Exception:  # noqa: BLE001
            return False
        finally:
            torch.set_grad_enabled(prev)
    return True


def make_program(seed: int, n_stmts: int | None = None) -> Program:
    rng = random.Random(seed)
    params = [Param("a0", "tensor", ("B", "D"), mutable=rng.random() < 0.5)]
    params.append(Param("a1", "tensor", rng.choice((("B", "D"), ("B", "D"), ("D",), ("B", 1))),
                        mutable=rng.random() < 0.4))
    if rng.random() < 0.4:
        params.append(Param("a2", "tensor", rng.choice((("B",), ("D", "B"), (), ("B", "D"))), mutable=rng.random() < 0.3))  # noqa: E501
    if rng.random() < 0.2:
        params.append(Param("xs", "list", ("B", "D")))
    for name, kind in (("n", "int"), ("alpha", "float"), ("flag", "bool")):
        if rng.random() < 0.6:
            params.append(Param(name, kind))
    # defaults only on trailing scalar params
    for p in reversed(params):
        if p.kind not in ("int", "float", "bool") or rng.random() < 0.6:
            break
        p.default = {"int": 2, "float": 0.5, "bool": True}[p.kind]
    prog = Program(seed, params, [], [], [], "None", [], torch.float64 if rng.random() < 0.15 else torch.float32)
    prog.calls = _calls(rng, params)
    st = _State(rng, prog)
    env: dict = {}
    for p in params:
        if p.kind == "tensor":
            env[p.name] = T(p.shape, p.mutable, inp=True)
        elif p.kind == "list":
            env[p.name] = Lst(p.shape, 2)
        else:
            env[p.name] = Py(p.kind)
    n = n_stmts or rng.randint(4, 12)
    tries = 0
    while len(prog.body) < n and tries < 4 * n:
        tries += 1
        snap = (copy.deepcopy(env), list(prog.helpers), list(prog.closure_vars), st.counter, st.nhelpers,
                st.uses_global, st.need_box, st.need_counter)
        g = Gen(st, env)
        try:
            nodes = g.stmt()
        except (IndexError, ValueError):      # nothing fitting to pick
            nodes = None
        if nodes:
            prog.body.extend(nodes)
            prog.uses_global, prog.need_box, prog.need_counter = st.uses_global, st.need_box, st.need_counter
            if _validate(prog, env):
                continue
            del prog.body[len(prog.body) - len(nodes):]
        env.clear()
        env.update(snap[0])
        prog.helpers[:], prog.closure_vars[:] = snap[1], snap[2]
        st.counter, st.nhelpers, st.uses_global, st.need_box, st.need_counter = snap[3:]
        prog.uses_global, prog.need_box, prog.need_counter = st.uses_global, st.need_box, st.need_counter
    prog.ret = _returns(rng, env)
    return prog


def _returns(rng: random.Random, env: dict) -> str:
    tensors = [n for n, v in env.items() if isinstance(v, T)]
    inner = [n for n in tensors if not env[n].inp] or tensors
    k = rng.randint(1, 4)
    picks = []
    for _ in range(k):
        r = rng.random()
        if r < 0.6:
            picks.append(rng.choice(inner[-4:]))
        elif r < 0.75:
            picks.append(rng.choice(tensors))
        elif r < 0.82:
            ins = [n for n in tensors if env[n].inp and len(env[n].shape) >= 1]
            picks.append(f"{rng.choice(ins)}[0]" if ins else rng.choice(inner))
        else:
            other = [n for n, v in env.items() if isinstance(v, (Py, Lst, Dct, Tup, FList, Shape))]
            picks.append(rng.choice(other) if other else rng.choice(inner))
    r = rng.random()
    if r < 0.1:
        return picks[0]
    if r < 0.2:
        return "{" + ", ".join(f"'r{i}': {p}" for i, p in enumerate(picks)) + "}"
    if r < 0.27:
        return "[" + ", ".join(picks) + "]"
    return "(" + "".join(f"{p}, " for p in picks) + ")"
