"""Seeded random training programs, run eagerly and compiled, compared (tests/aot/test_fuzz_training.py).

``make_program(seed)`` builds a Python function from a seeded RNG: a list of op steps over a
pool of live tensors (differentiable pointwise ops, reductions, matmul, softmax, layer_norm,
views, cat/split, index/gather, where/masked_fill, dropout, detach, no_grad regions, in-place
ops on intermediates, on views of them and on inputs that do not require grad), then a return
of some of them (inputs, views of inputs, aliases of one another, integer and no-grad outputs).
Each step is tried on real tensors while generating, so the shapes always fit; now and then a
step that raises is kept as the last one (the compiled function must raise the same type).

``check(program, backend)`` runs eager and ``xcompile.compile(fn, backend=...)`` on the same
fresh inputs twice (second time with new values, same shapes: no recompile allowed) and
compares outputs (values, dtypes, shapes, strides, requires_grad, aliasing of inputs and of
one another), inputs written in place, and after ``backward`` (with retain_graph, sometimes
twice) the grads of every leaf and of non-leaf inputs. Returns None or a message.
"""
from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import xcompile
from xcompile import config
from xcompile.aot.api import aot_compile
from xcompile.testing import CompileCounterWithBackend

DIMS = (1, 2, 3, 5, 8, 17)
TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float64: dict(atol=1e-9, rtol=1e-7)}


@dataclass
class InputSpec:
    shape: tuple
    dtype: torch.dtype
    kind: str            # "leaf_rg" | "leaf" | "view_rg" (a view/non-leaf of a leaf that requires grad) | "int"


@dataclass
class Program:
    seed: int
    inputs: list[InputSpec]
    steps: list[str]                 # source lines (may be multi-line blocks)
    returns: list[str]
    dtype: torch.dtype
    backward_twice: bool = False
    meta: dict = field(default_factory=dict)

    def source(self) -> str:
        args = ", ".join(f"x{i}" for i in range(len(self.inputs)))
        body = "\n".join(textwrap.indent(s, "    ") for s in self.steps)
        ret = ", ".join(self.returns) + ("," if len(self.returns) == 1 else "")
        return f"def f({args}):\n{body}\n    return ({ret})\n"

    def function(self):
        ns = {"torch": torch, "F": F}
        exec(compile(self.source(), f"<fuzz {self.seed}>", "exec"), ns)  # noqa: S102  (a program made by the test)
        return ns["f"]

    def with_steps(self, steps, returns=None) -> "Program":
        return Program(self.seed, self.inputs, list(steps), list(returns or self.returns), self.dtype,
                       self.backward_twice, dict(self.meta))


# ------------------------------------------------------------------------------------- inputs

def make_inputs(specs: list[InputSpec], seed: int):
    """(args, leaves): fresh values; leaves are the tensors whose .grad is compared."""
    g = torch.Generator().manual_seed(seed)
    args, leaves = [], []
    for s in specs:
        if s.kind == "int":
            args.append(torch.randint(0, 5, s.shape, generator=g))
            continue
        v = torch.randn(s.shape, dtype=s.dtype, generator=g)
        if s.kind == "leaf":
            args.append(v)
        elif s.kind == "leaf_rg":
            v.requires_grad_(True)
            args.append(v)
            leaves.append(v)
        else:                         # a non-leaf input: a view or a product of a leaf
            leaf = torch.randn((2,) + tuple(s.shape), dtype=s.dtype, generator=g).requires_grad_(True)
            leaves.append(leaf)
            x = leaf[1] if len(s.shape) % 2 else leaf[0] * 1.5
            x.retain_grad()
            args.append(x)
    return args, leaves


def _rand_shape(rng: random.Random) -> tuple:
    return tuple(rng.choice(DIMS) for _ in range(rng.randint(1, 3)))


# ----------------------------------------------------------------------------------- ops

def _floats(env):
    return [n for n, t in env.items() if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _intermediates(env, names):
    return [n for n in names if n.startswith("t")]


def _gen_step(rng: random.Random, env: dict, new: str, dtype) -> str | None:
    fl = _floats(env)
    if not fl:
        return None
    a = rng.choice(fl)
    ta = env[a]
    d = ta.dim()
    dim = rng.randrange(d) - d if d else 0
    same = [n for n in fl if env[n].shape == ta.shape and n != a]
    b = rng.choice(same) if same and rng.random() < 0.8 else rng.choice(fl)
    kind = rng.choice(["unary"] * 4 + ["binary"] * 4 + ["reduce"] * 2 + ["matmul", "softmax", "layer_norm",
                      "view"] + ["view"] * 3 + ["cat", "split", "index", "gather", "where", "masked_fill",
                      "dropout", "detach", "no_grad", "inplace", "inplace_view", "inplace_input", "int",
                      "to_dtype", "clone", "expand"])
    if kind == "unary":
        op = rng.choice(["{a}.sin()", "torch.tanh({a})", "{a}.relu()", "torch.sigmoid({a})", "{a} * 0.5",
                         "{a}.abs()", "-{a}", "{a}.pow(2)", "F.gelu({a})", "{a}.clamp(-0.5, 0.5)",
                         "{a} + 1", "torch.exp({a}.tanh())", "{a}.cos()"])
        return f"{new} = " + op.format(a=a)
    if kind == "binary":
        op = rng.choice(["{a} + {b}", "{a} * {b}", "{a} - {b}", "torch.maximum({a}, {b})", "{a} / ({b}.abs() + 1)",
                         "torch.add({a}, {b}, alpha=0.5)", "torch.lerp({a}, {b}, 0.3)"])
        return f"{new} = " + op.format(a=a, b=b)
    if kind == "reduce":
        if d == 0:
            return f"{new} = {a}.sum()"
        op = rng.choice([f"{a}.sum({dim})", f"{a}.sum({dim}, keepdim=True)", f"{a}.mean({dim})", f"{a}.sum()",
                         f"{a}.amax({dim})", f"{a}.max({dim}).values", f"{a}.var({dim})" if ta.shape[dim] > 1 else
                         f"{a}.mean()", f"{a}.norm()", f"{a}.logsumexp({dim})", f"{a}.prod({dim})"])
        return f"{new} = {op}"
    if kind == "matmul":
        if d == 0:
            return None
        if d == 1:
            return f"{new} = {a} @ {a}" if rng.random() < 0.5 else f"{new} = torch.outer({a}, {a})"
        mats = [n for n in fl if env[n].dim() >= 1 and env[n].shape[0 if env[n].dim() == 1 else -2] == ta.shape[-1]]
        if mats and rng.random() < 0.6:
            return f"{new} = {a} @ {rng.choice(mats)}"
        return f"{new} = {a} @ {a}.transpose(-1, -2)" if rng.random() < 0.5 else f"{new} = {a}.mT @ {a}"
    if kind == "softmax":
        if d == 0:
            return None
        return f"{new} = " + rng.choice([f"{a}.softmax({dim})", f"F.log_softmax({a}, {dim})",
                                         f"torch.softmax({a}, dim={dim})"])
    if kind == "layer_norm":
        if d == 0:
            return None
        if rng.random() < 0.5:
            return f"{new} = F.layer_norm({a}, {a}.shape[-1:])"
        ws = [n for n in fl if env[n].shape == ta.shape[-1:]]
        if ws:
            w = rng.choice(ws)
            return f"{new} = F.layer_norm({a}, {a}.shape[-1:], {w}, {rng.choice(ws)})"
        return f"{new} = F.layer_norm({a}, {a}.shape[-1:])"
    if kind == "view":
        if d == 0:
            return f"{new} = {a}.unsqueeze(0)"
        k = ta.shape[dim]
        opts = [f"{a}.transpose(0, -1)", f"{a}.unsqueeze({rng.randrange(d + 1)})", f"{a}[..., :{max(1, k // 2)}]",
                f"{a}.narrow({dim}, {k // 3}, {max(1, k - k // 3 - 1)})" if k > 1 else f"{a}.squeeze({dim})",
                f"{a}.permute({', '.join(map(str, rng.sample(range(d), d)))})", f"{a}[{rng.randrange(ta.shape[0])}]",
                f"{a}.flatten()", f"{a}.reshape(-1)", f"{a}.view(-1)", f"{a}.unflatten({dim}, ({k}, 1))",
                f"{a}.select({dim}, {rng.randrange(k)})", f"{a}[::2]", f"{a}.diagonal()" if d >= 2 else f"{a}[1:]",
                f"{a}.mT" if d >= 2 else f"{a}.T", f"{a}.contiguous()"]
        return f"{new} = {rng.choice(opts)}"
    if kind == "cat":
        if d == 0:
            return None
        cd = rng.randrange(d)
        ok = [n for n in fl if env[n].dim() == d and all(env[n].shape[i] == ta.shape[i] for i in range(d) if i != cd)]
        return f"{new} = torch.cat([{a}, {rng.choice(ok)}], {cd})" if rng.random() < 0.8 else \
            f"{new} = torch.stack([{a}, {b}], {rng.randrange(d + 1)})"
    if kind == "split":
        if d == 0:
            return None
        k = ta.shape[dim]
        j = rng.randrange(2)
        return f"{new} = " + rng.choice([f"{a}.split({max(1, k // 2)}, {dim})[{j if k > 1 else 0}]",
                                         f"{a}.chunk(2, {dim})[0]", f"{a}.unbind({dim})[0]",
                                         f"torch.split({a}, [1, {k - 1}], {dim})[{j}]" if k > 1 else f"{a} * 1"])
    if kind == "index":
        if d == 0:
            return None
        n0 = ta.shape[0]
        idx = f"(torch.arange({rng.choice(DIMS)}) * {rng.randint(1, 3)}) % {n0}"
        return f"{new} = " + rng.choice([f"{a}[{idx}]", f"{a}.index_select(0, {idx})",
                                         f"{a}[{a}.detach() > 0]" if rng.random() < 0.2 else f"{a}[[0, -1]]",
                                         f"torch.index_add({a}, 0, torch.tensor([0]), {a}[:1])"])
    if kind == "gather":
        if d == 0:
            return None
        shape = list(ta.shape)
        return (f"{new} = {a}.gather({dim}, (torch.arange({ta.numel()}).reshape({tuple(shape)}) * 7) "
                f"% {ta.shape[dim]})")
    if kind == "where":
        return f"{new} = torch.where({a} > 0, {a}, {b})" if rng.random() < 0.7 else \
            f"{new} = torch.where({b} < 0.2, {a}, 0.0)"
    if kind == "masked_fill":
        fill = rng.choice(["0.0", "-1.0", "float('-inf')"])
        return f"{new} = {a}.masked_fill({a} < 0, {fill})" if rng.random() < 0.9 \
            else f"{new} = {a}.masked_fill({b} > 0, 2.0)"
    if kind == "dropout":
        return f"{new} = F.dropout({a}, p={rng.choice([0.0, 0.3, 0.5])}, training={rng.random() < 0.8})"
    if kind == "detach":
        return f"{new} = {a}.detach()" + rng.choice(["", " * 2", ".sin()"])
    if kind == "no_grad":
        return f"with torch.no_grad():\n    {new} = {a} * 2\n    {new}.add_(1)" if rng.random() < 0.5 else \
            f"with torch.no_grad():\n    {new} = {a}.sin()"
    if kind == "inplace":
        ims = [n for n in _intermediates(env, fl)]
        if not ims:
            return None
        t = rng.choice(ims)
        others = [n for n in fl if env[n].shape == env[t].shape]
        op = rng.choice(["{t}.mul_(2)", "{t}.add_({o})", "{t}.relu_()", "{t}.sin_()", "{t}.mul_({o})",
                         "{t}.clamp_(min=-1)", "{t}.copy_({o})", "{t}.masked_fill_({t} > 1, 0.5)",
                         "{t}.sigmoid_()", "{t}.zero_()", "{t}.div_(2)"])
        return f"{new} = " + op.format(t=t, o=rng.choice(others))
    if kind == "inplace_view":
        ims = [n for n in _intermediates(env, fl) if env[n].dim() >= 1]
        if not ims:
            return None
        t = rng.choice(ims)
        v = rng.choice([f"{t}[0]", f"{t}[..., :1]", f"{t}.view(-1)[::2]" if env[t].is_contiguous() else f"{t}[-1:]",
                        f"{t}.transpose(0, -1)[0]"])
        src = [n for n in fl if n != t]
        op = rng.choice(["mul_(3)", "add_(1)", "zero_()", "exp_()", "fill_(0.25)",
                         f"copy_({rng.choice(src)}.sum())" if src else "mul_(2)"])
        return f"{new} = {v}\n{new}.{op}" if rng.random() < 0.5 else f"{v}.{op}\n{new} = {t} * 1"
    if kind == "inplace_input":
        ins = [n for n in fl if n.startswith("x")]
        if not ins:
            return None
        x = rng.choice(ins)
        others = [n for n in fl if env[n].shape == env[x].shape and n != x]
        op = rng.choice(["{x}.mul_(2)", "{x}.add_(1)", "{x}[0].fill_(3)" if env[x].dim() else "{x}.fill_(3)",
                         "{x}.add_({o})" if others else "{x}.sub_(1)"])
        return f"{new} = " + op.format(x=x, o=rng.choice(others) if others else x)
    if kind == "int":
        return f"{new} = " + rng.choice([f"{a}.argmax({dim})", f"({a} > 0).sum()", f"{a}.detach().long()",
                                         f"{a}.argsort({dim})", f"({a} > 0)"])
    if kind == "to_dtype":
        other = torch.float64 if dtype == torch.float32 else torch.float32
        return f"{new} = {a}.to({str(other)})" + rng.choice(["", " * 2"])
    if kind == "clone":
        return f"{new} = {a}.clone()" + rng.choice(["", ".t()" if d == 2 else "", ".contiguous()"])
    if kind == "expand":
        if d == 0:
            return f"{new} = {a}.expand(3) * 1"
        if ta.shape[0] == 1:
            return f"{new} = {a}.expand({rng.choice(DIMS)}, *{a}.shape[1:])"
        return f"{new} = {a}.unsqueeze(0).expand(2, *{a}.shape) + 0"
    return None


def make_program(seed: int, max_steps: int = 8) -> Program:
    rng = random.Random(seed)
    dtype = torch.float64 if rng.random() < 0.25 else torch.float32
    base = _rand_shape(rng)
    specs = []
    for _ in range(rng.randint(1, 3)):
        shape = base if rng.random() < 0.6 else (base[-1:] if rng.random() < 0.5 else _rand_shape(rng))
        kind = rng.choice(["leaf_rg", "leaf_rg", "leaf_rg", "leaf", "view_rg", "int"] if specs else
                          ["leaf_rg", "leaf_rg", "view_rg"])
        specs.append(InputSpec(tuple(shape), dtype, kind))
    args, _ = make_inputs(specs, seed)
    env = {f"x{i}": a for i, a in enumerate(args)}
    steps: list[str] = []
    raising = False
    n_steps = rng.randint(1, max_steps)
    tries = 0
    while len(steps) < n_steps and tries < n_steps * 6:
        tries += 1
        new = f"t{len(steps)}"
        try:
            line = _gen_step(rng, env, new, dtype)
        except (ValueError, IndexError):       # e.g. an index into a zero-size dim: draw again
            continue
        if line is None:
            continue
        trial = dict(env)
        try:
            with torch.random.fork_rng():
                exec(line, {"torch": torch, "F": F}, trial)  # noqa: S102  (a program made by the test)
        except Exception:  # noqa: BLE001
            if rng.random() < 0.05:          # keep a raising step as the last one, now and then
                steps.append(line)
                raising = True
                break
            continue
        if new not in trial:
            continue
        env = trial
        steps.append(line)
    tensors = [n for n, t in env.items() if isinstance(t, torch.Tensor)]
    if raising:
        returns = [rng.choice(tensors)]
    else:
        outs = [n for n in tensors if n.startswith("t")] or tensors
        returns = rng.sample(outs, min(len(outs), rng.randint(1, 3)))
        if rng.random() < 0.2:
            returns.append(rng.choice(tensors))           # an input, or a repeat (a DUP output)
        if rng.random() < 0.15:
            r = rng.choice(returns)
            if env[r].dim() >= 1:
                returns.append(f"{r}[0]")                # a view of another output
    prog = Program(seed, specs, steps, returns, dtype, backward_twice=rng.random() < 0.3)
    prog.meta["raising"] = raising
    return prog


# --------------------------------------------------------------------------------- running

class Skip(Exception):
    pass


def _save_all(gm, example_inputs):
    return aot_compile(gm, example_inputs, partition="save_all")


BACKENDS = {"aot_eager": "aot_eager", "inductor": "inductor", "save_all": _save_all}


def _run(fn, prog: Program, seed: int):
    args, leaves = make_inputs(prog.inputs, seed)
    versions = [a._version for a in args]
    torch.manual_seed(seed + 7)
    try:
        outs = fn(*args)
    except Exception as e:  # noqa: BLE001
        return dict(error=e, args=args, leaves=leaves)
    return dict(outs=outs, args=args, leaves=leaves, error=None, versions=versions)


def _storage(t):
    return t.untyped_storage().data_ptr()


def _backward(side: dict, prog: Program, seed: int):
    g = torch.Generator().manual_seed(seed + 13)
    loss = None
    try:
        for o in side["outs"]:
            if isinstance(o, torch.Tensor) and o.requires_grad:
                w = torch.randn(o.shape, dtype=o.dtype, generator=g)
                term = (o * w).sum()
                loss = term if loss is None else loss + term.to(loss.dtype)
        if loss is None:
            return None
        loss.backward(retain_graph=True)
        if prog.backward_twice:
            loss.backward()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def _significant_strides(t):
    """Strides of the dims with more than one element (others do not change the layout)."""
    return tuple(st for n, st in zip(t.shape, t.stride()) if n > 1) if t.numel() > 1 else ()


def _compare_tensor(a, b, what: str, loose: bool = False) -> str | None:
    if type(a) is not type(b):
        return f"{what}: type {type(b).__name__} vs eager {type(a).__name__}"
    if not isinstance(a, torch.Tensor):
        return None
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{what}: {b.dtype}{tuple(b.shape)} vs eager {a.dtype}{tuple(a.shape)}"
    if _significant_strides(a) != _significant_strides(b):
        return f"{what}: stride {b.stride()} vs eager {a.stride()}"
    if a.requires_grad != b.requires_grad:
        return f"{what}: requires_grad {b.requires_grad} vs eager {a.requires_grad}"
    try:
        tol = TOL[torch.float32] if loose and a.dtype == torch.float64 else TOL.get(a.dtype, {})
        torch.testing.assert_close(b.detach(), a.detach(), equal_nan=True, **tol)
    except AssertionError as e:
        return f"{what}: values differ: {str(e).splitlines()[0:3]}"
    return None


def compare(prog: Program, fn_compiled, seed: int) -> str | None:
    fn = prog.function()
    loose = ".to(torch.float" in prog.source()      # float64 values computed in float32 on the way
    e = _run(fn, prog, seed)
    c = _run(fn_compiled, prog, seed)
    if e["error"] is not None or c["error"] is not None:
        if e["error"] is None:
            eb = _backward(e, prog, seed)
            if eb is not None and str(eb).splitlines()[0][:80] in str(c["error"]):
                # eager raises at backward (a saved tensor or a multi-output view written in place);
                # torch.compile, like us, when it traces the joint graph at compile time
                raise Skip("eager's backward error raised at compile time")
            return f"compiled raised {type(c['error']).__name__}: {c['error']}"[:600]
        if c["error"] is None:
            return f"eager raised {type(e['error']).__name__}, compiled did not"
        if not isinstance(c["error"], type(e["error"])):
            return f"compiled raised {type(c['error']).__name__} ({c['error']}), eager {type(e['error']).__name__}"[:600]  # noqa: E501
        return None
    eo, co = e["outs"], c["outs"]
    if len(eo) != len(co):
        return f"{len(co)} outputs vs eager {len(eo)}"
    for i, (a, b) in enumerate(zip(eo, co)):
        msg = _compare_tensor(a, b, f"output {i}", loose)
        if msg:
            return msg
    # aliasing: identity and shared storage with inputs and other outputs, as in eager
    for i, (a, b) in enumerate(zip(eo, co)):
        for k, (x, y) in enumerate(zip(e["args"], c["args"])):
            if (a is x) != (b is y):
                return f"output {i} is input {k}: {b is y} vs eager {a is x}"
            if (_storage(a) == _storage(x)) != (_storage(b) == _storage(y)):
                return f"output {i} shares storage with input {k}: {_storage(b) == _storage(y)} vs eager"
        for j in range(i):
            if (a is eo[j]) != (b is co[j]):
                return f"output {i} is output {j}: {b is co[j]} vs eager {a is eo[j]}"
            if (_storage(a) == _storage(eo[j])) != (_storage(b) == _storage(co[j])):
                return f"output {i} shares storage with output {j}: {_storage(b) == _storage(co[j])} vs eager"
    for k, (x, y) in enumerate(zip(e["args"], c["args"])):
        msg = _compare_tensor(x, y, f"input {k} after the call", loose)
        if msg:
            return msg
    be = _backward(e, prog, seed)
    bc = _backward(c, prog, seed)
    if be is not None:
        if bc is not None and type(bc) is not type(be):
            return f"backward raised {type(bc).__name__}, eager {type(be).__name__}"
        raise Skip(f"eager backward raised {type(be).__name__}")     # e.g. a saved tensor written in place
    if bc is not None:
        return f"compiled backward raised {type(bc).__name__}: {bc}"[:600]
    for k, (x, y) in enumerate(zip(e["leaves"], c["leaves"])):
        if x.grad is None and y.grad is not None and not y.grad.any():
            # a non-leaf input written in place and not used by the loss: eager never reaches its
            # leaf; the compiled node returns zeros for it (torch.compile does the same)
            continue
        if (x.grad is None) != (y.grad is None):
            return f"leaf {k}: grad is None {y.grad is None} vs eager {x.grad is None}"
        if x.grad is not None:
            msg = _compare_tensor(x.grad, y.grad, f"grad of leaf {k}", loose)
            if msg:
                return msg
    for k, (x, y) in enumerate(zip(e["args"], c["args"])):
        # a non-leaf input written in place: its retained grad is that of the new version, which
        # the compiled graph (torch.compile's too) does not use; leaf grads above still cover it
        if isinstance(x, torch.Tensor) and x.requires_grad and not x.is_leaf and x._version == e["versions"][k]:
            if (x.grad is None) != (y.grad is None):
                return f"non-leaf input {k}: grad is None {y.grad is None} vs eager {x.grad is None}"
            if x.grad is not None:
                msg = _compare_tensor(x.grad, y.grad, f"grad of non-leaf input {k}", loose)
                if msg:
                    return msg
    return None


def check(prog: Program, backend: str) -> str | None:
    """None when the compiled program matches eager on two calls without recompiling."""
    counter = CompileCounterWithBackend(BACKENDS[backend]) if isinstance(BACKENDS[backend], str) else None
    if counter is None:
        from xcompile.testing import CompileCounter

        class _C(CompileCounter):
            def __call__(self, gm, ex):
                super().__call__(gm, ex)
                return _save_all(gm, ex)
        counter = _C()
    xcompile.reset()
    with config.patch(fallback_random=True):
        try:
            compiled = xcompile.compile(prog.function(), backend=counter)
            msg = compare(prog, compiled, prog.seed)
            if msg:
                return msg
            frames = counter.frame_count
            msg = compare(prog, compiled, prog.seed + 100_000)
            if msg:
                return "second call: " + msg
            if counter.frame_count != frames:
                return f"recompiled on the second call ({frames} -> {counter.frame_count} graphs)"
        except Skip:
            return None
        except Exception as e:  # noqa: BLE001
            return f"harness crash {type(e).__name__}: {e}"[:600]
    return None


def minimise(prog: Program, backend: str) -> Program:
    """Drop steps (and then returns) while the program still fails."""
    def fails(p):
        try:
            p.function()
        except Exception:  # noqa: BLE001
            return False
        return check(p, backend) is not None
    cur = prog
    changed = True
    while changed:
        changed = False
        for i in range(len(cur.steps) - 1, -1, -1):
            cand = cur.with_steps(cur.steps[:i] + cur.steps[i + 1:])
            if fails(cand):
                cur, changed = cand, True
        if len(cur.returns) > 1:
            for i in range(len(cur.returns) - 1, -1, -1):
                cand = cur.with_steps(cur.steps, cur.returns[:i] + cur.returns[i + 1:])
                if len(cand.returns) and fails(cand):
                    cur, changed = cand, True
                    break
    return cur
