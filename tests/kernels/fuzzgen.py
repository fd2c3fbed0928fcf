"""Seeded random programs for the kernel fuzzer (tests/kernels/test_fuzz.py).

``generate(seed)`` builds a small program: input specs (shape, dtype, layout) and a list of
source lines, each one op over a pool of live tensors; the program is grown by running each
candidate line eagerly on example inputs and keeping only lines that run (so shapes and dtypes
always fit), plus now and then one line that eager rejects (the compiled program must raise
the same exception type).  ``run_case(prog)`` compiles it with ``xcompile.compile(backend=
"inductor")`` under ``torch.no_grad()`` and compares with eager on fresh inputs: values,
dtypes, shapes, strides, aliasing of outputs with inputs and with each other, mutated inputs,
exception types, and no recompile on the second call.  Deterministic per seed.
"""
from __future__ import annotations

import random

import torch

DIMS = (1, 2, 3, 5, 8, 17)
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int32, torch.int64)
DTYPES = FLOATS + INTS + (torch.bool,)
FLOAT_W = (torch.float32,) * 5 + (torch.float64, torch.float16, torch.bfloat16)
LAYOUTS = ("contig", "contig", "transposed", "sliced", "expanded", "channels_last")


class Prog:
    def __init__(self, seed, specs, lines, outs, raises=False):
        self.seed, self.specs, self.lines, self.outs, self.raises = seed, specs, lines, outs, raises

    def source(self, lines=None, outs=None):
        lines = self.lines if lines is None else lines
        outs = self.outs if outs is None else outs
        args = ", ".join(f"a{i}" for i in range(len(self.specs)))
        body = "".join(f"    {ln}\n" for ln in lines)
        ret = ", ".join(outs) + ("," if len(outs) == 1 else "")
        return f"def f({args}):\n{body}    return ({ret})\n"

    def fn(self, lines=None, outs=None):
        ns = {"torch": torch}
        exec(compile(self.source(lines, outs), f"<fuzz {self.seed}>", "exec"), ns)  # noqa: S102
        return ns["f"]

    def __repr__(self):
        return f"# seed {self.seed}\n# inputs {self.specs}\n{self.source()}"


# -- inputs -----------------------------------------------------------------------------

def make_input(spec, gen: torch.Generator) -> torch.Tensor:
    shape, dtype, layout = spec
    def values(shp):
        if dtype == torch.bool:
            return torch.rand(shp, generator=gen) > 0.5
        if dtype in INTS:
            return torch.randint(-9, 10, shp, generator=gen, dtype=dtype)
        return torch.randn(shp, generator=gen, dtype=torch.float64).to(dtype)
    if layout == "transposed" and len(shape) >= 2:
        return values(shape[:-2] + (shape[-1], shape[-2])).transpose(-1, -2)
    if layout == "sliced" and len(shape) >= 1:
        big = values((shape[0] * 2 + 1,) + tuple(shape[1:]))
        return big[1::2]
    if layout == "expanded" and len(shape) >= 1:
        small = values((1,) + tuple(shape[1:]))
        return small.expand(shape)
    if layout == "channels_last" and len(shape) == 4:
        return values(shape).contiguous(memory_format=torch.channels_last)
    return values(shape)


def make_inputs(specs, seed):
    gen = torch.Generator().manual_seed(seed)
    return [make_input(s, gen) for s in specs]


def _rand_shape(rng, ndim=None):
    ndim = rng.choice((0, 1, 2, 2, 3, 3, 4)) if ndim is None else ndim
    shape = [rng.choice(DIMS) for _ in range(ndim)]
    if ndim and rng.random() < 0.04:
        shape[rng.randrange(ndim)] = 0
    return tuple(shape)


def _bshape(rng, shape):
    """A shape that broadcasts with ``shape``."""
    out = [1 if rng.random() < 0.3 else d for d in shape]
    k = rng.randrange(len(out) + 1)
    return tuple(out[k:]) if rng.random() < 0.3 else tuple(out)


# -- op templates: each returns an expression over pool names, or None -----------------------

def _fl(rng, pool, env):
    c = [n for n in pool if env[n].dtype.is_floating_point]
    return rng.choice(c) if c else None


def _any(rng, pool, env):
    return rng.choice(pool)


def _nd(rng, pool, env, k=1):
    c = [n for n in pool if env[n].dim() >= k]
    return rng.choice(c) if c else None


def _dim(rng, t):
    return rng.randrange(-t.dim(), t.dim()) if t.dim() else 0


def _scalar(rng):
    return rng.choice(("2", "0.5", "-1.5", "3", "True", "1e-3", "-2"))


UNARY = ("torch.neg", "torch.abs", "torch.exp", "torch.sin", "torch.tanh", "torch.sigmoid",
         "torch.relu", "torch.sqrt", "torch.log", "torch.rsqrt", "torch.floor", "torch.ceil",
         "torch.round", "torch.trunc", "torch.sign", "torch.square", "torch.reciprocal",
         "torch.nn.functional.gelu", "torch.nn.functional.silu", "torch.erf", "torch.log1p",
         "torch.expm1", "torch.isnan", "torch.logical_not", "torch.bitwise_not", "torch.cos",
         "torch.atan", "torch.sinh")
BINARY = ("torch.add", "torch.sub", "torch.mul", "torch.div", "torch.maximum", "torch.minimum",
          "torch.eq", "torch.ne", "torch.lt", "torch.ge", "torch.logical_and", "torch.logical_or",
          "torch.bitwise_and", "torch.bitwise_xor", "torch.atan2", "torch.fmod", "torch.remainder",
          "torch.floor_divide", "torch.hypot", "torch.copysign")


# no Triton for these yet (tl has no atan; see the findings)
NO_TRITON = ("torch.atan", "torch.atan2")


def op_unary(rng, pool, env):
    return f"{rng.choice(UNARY)}({_any(rng, pool, env)})"


def op_binary(rng, pool, env):
    a = _any(rng, pool, env)
    same = [n for n in pool if _broadcasts(env[n].shape, env[a].shape)]
    b = rng.choice(same)
    if rng.random() < 0.5:
        a, b = b, a
    return f"{rng.choice(BINARY)}({a}, {b})"


def _broadcasts(s1, s2):
    try:
        torch.broadcast_shapes(s1, s2)
        return True
    except RuntimeError:
        return False


def op_scalar(rng, pool, env):
    a, s = _any(rng, pool, env), _scalar(rng)
    form = rng.choice(("{a} + {s}", "{a} * {s}", "{s} - {a}", "{a} / {s}", "{a} ** 2", "{a} > {s}",
                       "torch.pow({a}, {s})", "{s} ** {a}", "{a} // {s}", "torch.clamp({a}, -0.5, {s})",
                       "torch.clamp({a}, min=-1)", "{a} % {s}", "torch.where({a} > 0, {a}, {s})"))
    return form.format(a=a, s=s)


def op_where(rng, pool, env):
    a = _any(rng, pool, env)
    b = rng.choice([n for n in pool if _broadcasts(env[n].shape, env[a].shape)])
    c = rng.choice([n for n in pool if _broadcasts(env[n].shape, env[a].shape)])
    return f"torch.where({c} > 0, {a}, {b})" if env[c].dtype != torch.bool else f"torch.where({c}, {a}, {b})"


def op_cast(rng, pool, env):
    a = _any(rng, pool, env)
    dt = rng.choice(DTYPES)
    if env[a].dtype.is_floating_point and not dt.is_floating_point and dt != torch.bool:
        return f"torch.nan_to_num({a}).clamp(-1000, 1000).to({dt})"
    return f"{a}.to({dt})"


def op_reduce(rng, pool, env):
    a = _nd(rng, pool, env)
    if a is None:
        return None
    t = env[a]
    fn = rng.choice(("sum", "mean", "amax", "amin", "var", "std", "prod", "argmax", "any", "all",
                     "sum", "amax", "argmin", "logsumexp"))
    kd = rng.choice((True, False))
    if fn in ("argmax", "argmin", "prod", "any", "all", "logsumexp") or rng.random() < 0.5:
        if fn in ("any", "all", "argmax", "argmin", "prod") and rng.random() < 0.2:
            return f"torch.{fn}({a})"
        return f"torch.{fn}({a}, {_dim(rng, t)}, keepdim={kd})"
    dims = sorted(set(_dim(rng, t) % t.dim() for _ in range(rng.randrange(1, t.dim() + 1))))
    return f"torch.{fn}({a}, {tuple(dims)}, keepdim={kd})"


def op_norm(rng, pool, env):
    a = _nd(rng, pool, env)
    if a is None:
        return None
    t = env[a]
    k = rng.randrange(3)
    if k == 0:
        return f"torch.softmax({a}, {_dim(rng, t)})"
    if k == 1:
        return f"torch.log_softmax({a}, {_dim(rng, t)}, dtype={rng.choice(('None', 'torch.float32')) })"
    n = rng.randrange(1, min(t.dim(), 2) + 1)
    return f"torch.nn.functional.layer_norm({a}, {tuple(t.shape[-n:])})"


def op_view(rng, pool, env):
    a = _any(rng, pool, env)
    t = env[a]
    d = t.dim()
    choices = ["{a}.unsqueeze({u})", "{a}.reshape(-1)", "{a}.flatten()", "{a}.squeeze()"]
    if d >= 1:
        choices += ["{a}[{lo}::{st}]", "{a}.select({dim}, {idx})", "{a}.narrow({dim}, 0, 1)",
                    "{a}.expand(2, *{a}.shape)", "{a}.flip({dim})", "{a}.view(-1)",
                    "{a}.unfold({dim}, 1, 1)", "{a}.squeeze({dim})", "{a}.contiguous()",
                    "{a}[..., {lo}::{st}]", "{a}.movedim({dim}, 0)"]
    if d >= 2:
        choices += ["{a}.t()" if d == 2 else "{a}.transpose(0, -1)", "{a}.permute({perm})",
                    "{a}.flatten(0, 1)", "{a}.transpose(-1, -2)", "{a}.reshape({rs})",
                    "{a}.mT.contiguous()", "{a}[:, None]"]
    form = rng.choice(choices)
    dim = _dim(rng, t)
    sz = t.shape[dim] if d else 1
    perm = list(range(d)); rng.shuffle(perm)  # noqa: E702
    rs = f"{t.shape[0]}, -1" if d else "-1"
    return form.format(a=a, u=rng.randrange(-d - 1, d + 1), lo=rng.randrange(0, 2), st=rng.choice((1, 2, 3)),
                       dim=dim, idx=rng.randrange(-sz, sz) if sz else 0, perm=tuple(perm), rs=rs)


def op_cat(rng, pool, env):
    a = _nd(rng, pool, env)
    if a is None:
        return None
    t = env[a]
    k = rng.randrange(5)
    dim = _dim(rng, t)
    if k == 0:
        others = [n for n in pool if env[n].dim() == t.dim() and all(
            x == y for i, (x, y) in enumerate(zip(env[n].shape, t.shape)) if i != dim % t.dim())]
        bs = [rng.choice(others) for _ in range(rng.randrange(1, 3))]
        return f"torch.cat([{a}, {', '.join(bs)}], {dim})"
    if k == 1:
        others = [n for n in pool if env[n].shape == t.shape]
        return f"torch.stack([{a}, {rng.choice(others)}], {rng.randrange(-t.dim() - 1, t.dim() + 1)})"
    if k == 2:
        return f"torch.split({a}, {rng.choice((1, 2, 3))}, {dim})[{rng.choice((0, -1))}]"
    if k == 3:
        return f"torch.chunk({a}, {rng.choice((2, 3))}, {dim})[{rng.choice((0, -1))}]"
    return f"torch.cat([{a}], {dim})"


def op_index(rng, pool, env):
    a = _nd(rng, pool, env)
    if a is None:
        return None
    t = env[a]
    dim = _dim(rng, t)
    n = t.shape[dim]
    k = rng.randrange(5)
    idx = [rng.randrange(-n, n) if n else 0 for _ in range(rng.randrange(1, 4))]
    if k == 0:
        return f"torch.index_select({a}, {dim}, torch.tensor({[i % n if n else 0 for i in idx]}))"
    if k == 1:
        return f"{a}[torch.tensor({idx})]" if t.shape[0] else None
    if k == 2:
        m = _any(rng, pool, env)
        if env[m].dtype == torch.bool and _broadcasts(env[m].shape, t.shape):
            return f"{a}.masked_fill({m}, {_scalar(rng)})"
        return f"{a}.masked_fill({a} > 0, {_scalar(rng)})"
    if k == 3:
        ishape = list(t.shape); ishape[dim] = rng.choice((1, 2, 3))  # noqa: E702
        return (f"torch.gather({a}, {dim}, torch.randint(0, {max(n, 1)}, {tuple(ishape)}, "
                f"generator=torch.Generator().manual_seed({rng.randrange(99)})))") if n else None
    return f"{a}[{a} > 0]"


def op_inplace(rng, pool, env):
    a = _any(rng, pool, env)
    t = env[a]
    dst = a
    if t.dim() and rng.random() < 0.5:
        dst = rng.choice((f"{a}[1:]", f"{a}[..., ::2]", f"{a}.select(0, 0)", f"{a}.t()" if t.dim() == 2 else f"{a}[0]"))
    b = _any(rng, pool, env)
    form = rng.choice(("{d}.add_({b})", "{d}.mul_({s})", "{d}.copy_({b})", "{d}.masked_fill_({d} > 0, {s})",
                       "{d}.clamp_(min=0)", "{d}.zero_()", "{d}.sub_({b}, alpha=2)", "{d}.fill_({s})"))
    return form.format(d=dst, b=b, s=_scalar(rng)) + " if True else None"


def op_extern(rng, pool, env):
    a = _fl(rng, pool, env)
    if a is None:
        return None
    t = env[a]
    k = rng.randrange(3)
    g = f"torch.Generator().manual_seed({rng.randrange(99)})"
    if k == 0 and t.dim() in (1, 2):
        n = rng.choice(DIMS)
        return f"{a} @ torch.randn({t.shape[-1]}, {n}, generator={g}, dtype={t.dtype})"
    if k == 1 and t.dim() == 3:
        n = rng.choice(DIMS)
        return f"torch.bmm({a}, torch.randn({t.shape[0]}, {t.shape[2]}, {n}, generator={g}, dtype={t.dtype}))"
    if k == 2 and t.dim() == 4 and t.dtype in (torch.float32, torch.float64):
        c = t.shape[1]
        return (f"torch.nn.functional.conv2d({a}, torch.randn(3, {c}, 1, 1, generator={g}, dtype={t.dtype}), "
                f"padding={rng.choice((0, 1))})")
    return None


def op_bad(rng, pool, env):
    """A line eager rejects."""
    a = _any(rng, pool, env)
    t = env[a]
    return rng.choice((f"{a}.view(7, -1, 13)", f"torch.cat([{a}, {a}.unsqueeze(0)])",
                       f"{a} + torch.ones(4, 6, 7)", f"{a}.select(0, 99)" if t.dim() else f"{a}.sum(3)",
                       f"torch.index_select({a}.reshape(-1), 0, torch.tensor([1000]))"))


OPS = [(op_unary, 4), (op_binary, 5), (op_scalar, 4), (op_where, 2), (op_cast, 3), (op_reduce, 4),
       (op_norm, 2), (op_view, 5), (op_cat, 2), (op_index, 2), (op_inplace, 3), (op_extern, 1)]


def generate(seed: int, max_steps: int = 8, backend: str = "cpp") -> Prog:
    rng = random.Random(seed)
    n_in = rng.randrange(1, 4)
    specs = []
    base = _rand_shape(rng)
    for _ in range(n_in):
        shape = base if rng.random() < 0.5 else (_bshape(rng, base) if rng.random() < 0.7 else _rand_shape(rng))
        dtype = rng.choice(FLOAT_W) if rng.random() < 0.75 else rng.choice(INTS + (torch.bool,))
        layout = rng.choice(LAYOUTS)
        specs.append((tuple(shape), dtype, layout))
    env = {f"a{i}": t for i, t in enumerate(make_inputs(specs, seed))}
    pool = list(env)
    lines = []
    raises = False
    ops, weights = zip(*OPS)
    for step in range(rng.randrange(1, max_steps + 1)):
        for _attempt in range(8):
            expr = rng.choices(ops, weights)[0](rng, pool, env)
            if expr is None or (backend == "triton" and any(f"{n}(" in expr for n in NO_TRITON)):
                continue
            name = f"t{len(lines)}"
            line = f"{name} = {expr}"
            try:
                exec(line, {"torch": torch}, env)  # noqa: S102  (a program made by the test)
            except Exception:  # noqa: BLE001 - the line does not fit: try another
                env.pop(name, None)
                continue
            if not isinstance(env[name], torch.Tensor) or env[name].numel() > 20000:
                env.pop(name)
                continue
            lines.append(line)
            pool.append(name)
            break
    if rng.random() < 0.05:
        lines.append(f"t{len(lines)} = {op_bad(rng, pool, env)}")
        pool.append(f"t{len(lines) - 1}")
        raises = True
    made = [n for n in pool if n.startswith("t")]
    k = rng.randrange(1, 4)
    outs = rng.sample(made, min(k, len(made))) if made else []
    if raises and pool[-1] not in outs:
        outs.append(pool[-1])                          # a dead bad line may be dropped, as torch.compile does
    if rng.random() < 0.15 or not outs:
        outs.append(rng.choice(pool[:n_in]))
    return Prog(seed, specs, lines, outs, raises)
