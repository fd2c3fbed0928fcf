"""What a minifier repro runs, and the text of one.

The minifier (``debug/minifier.py``) and the ``repro.py`` files it writes share this module, so
a repro checks a graph exactly as the minifier did:

- ``T``: the metadata of one tensor (shape, stride, dtype, device, requires_grad, the value range
  of integer tensors, whether it is a parameter); ``rand_strided`` makes a random tensor from it;
  ``generate`` makes a graph's attributes and inputs from their specs after one seed.
- ``check``: eager run, compile, compiled run (with a backward where outputs require grad) and,
  for accuracy, the comparison against a float64 eager run (``same``); returns an ``Outcome``.
- ``run_repro``: what a repro's ``main`` calls; raises the backend's exception, or prints the
  mismatch and exits with status 1.
- ``repro_source``: the text of a repro for one graph.
"""
from __future__ import annotations

import contextlib
import importlib
import math
import sys
import warnings
from typing import Any, Callable, NamedTuple

import torch
import torch.fx
from torch.fx.node import _get_qualified_name


class T(NamedTuple):
    """Metadata of one tensor: what ``rand_strided`` needs to make a stand-in."""
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    device: str = "cpu"
    requires_grad: bool = False
    low: int | None = None          # integer tensors: values in [low, high)
    high: int | None = None
    param: bool = False             # an attribute that is an nn.Parameter

    def code(self) -> str:
        extra = ""
        if self.requires_grad:
            extra += ", requires_grad=True"
        if self.low is not None:
            extra += f", low={self.low}, high={self.high}"
        if self.param:
            extra += ", param=True"
        return f"T({tuple(self.shape)!r}, {tuple(self.stride)!r}, {self.dtype}, {self.device!r}{extra})"


def _int(v) -> int:
    if isinstance(v, torch.SymInt):
        hint = getattr(v.node, "hint", None)
        if hint is None:
            raise ValueError(f"symbolic size {v} has no example value")
        return int(hint)
    return int(v)


def spec_of(t: torch.Tensor, *, ranges: bool = True, requires_grad: bool | None = None) -> T:
    """The ``T`` of a tensor (real or fake); ``ranges``: read the values of a real integer tensor."""
    low = high = None
    if ranges and not t.is_floating_point() and not t.is_complex() and t.dtype is not torch.bool \
            and t.numel() and not isinstance(t, torch._subclasses.FakeTensor) and t.device.type != "meta":
        low, high = int(t.min()), int(t.max()) + 1
    rg = t.requires_grad if requires_grad is None else requires_grad
    return T(tuple(_int(s) for s in t.shape), tuple(_int(s) for s in t.stride()), t.dtype, str(t.device),
             bool(rg), low, high, isinstance(t, torch.nn.Parameter))


def _storage_size(shape, stride) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def rand_strided(spec: T) -> torch.Tensor:
    """A random tensor with ``spec``'s shape, strides and dtype (randn for floating types, ints in
    [low, high) (default [0, 2)) for integer types, random bools)."""
    n = _storage_size(spec.shape, spec.stride)
    if spec.dtype.is_floating_point or spec.dtype.is_complex:
        buf = torch.randn(n, dtype=spec.dtype, device=spec.device)
    elif spec.dtype is torch.bool:
        buf = torch.randint(0, 2, (n,), device=spec.device).bool()
    else:
        low = 0 if spec.low is None else spec.low
        high = low + 2 if spec.high is None else max(spec.high, low + 1)
        buf = torch.randint(low, high, (n,), dtype=spec.dtype, device=spec.device)
    t = torch.as_strided(buf, spec.shape, spec.stride)
    if spec.requires_grad and (spec.dtype.is_floating_point or spec.dtype.is_complex):
        t.requires_grad_(True)
    return t


def make_value(spec):
    return rand_strided(spec) if isinstance(spec, T) else spec


def generate(attrs: dict, inputs: list, seed: int) -> tuple[torch.nn.Module, list]:
    """After ``torch.manual_seed(seed)``: a module holding the attributes (parameters, buffers or
    constants), then the inputs, in order."""
    torch.manual_seed(seed)
    root = torch.nn.Module()
    for name, spec in attrs.items():
        v = make_value(spec)
        if isinstance(spec, T) and spec.param:
            root.register_parameter(name, torch.nn.Parameter(v.detach(), requires_grad=spec.requires_grad))
        elif isinstance(v, torch.Tensor):
            root.register_buffer(name, v)
        else:
            setattr(root, name, v)
    return root, [make_value(s) for s in inputs]


# -- copies -----------------------------------------------------------------------------------

def clone_input(t, dtype: torch.dtype | None = None):
    """A copy with the same strides (overlapping ones too) and requires_grad, as a leaf."""
    if not isinstance(t, torch.Tensor):
        return t
    with torch.no_grad():
        n = _storage_size(t.shape, t.stride())
        flat = t.detach().as_strided((n,), (1,), t.storage_offset()).clone()
        if dtype is not None:
            flat = flat.to(dtype)
        out = flat.as_strided(t.shape, t.stride())
    if t.requires_grad and (out.is_floating_point() or out.is_complex()):
        out.requires_grad_(True)
    return out


def copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    g = torch.fx.Graph()
    out = g.graph_copy(graph, {})
    g.output(out)
    return g


def _fp64(dtype: torch.dtype) -> torch.dtype | None:
    return torch.float64 if dtype.is_floating_point else None


def clone_root(root: torch.nn.Module, fp64: bool = False) -> torch.nn.Module:
    out = torch.nn.Module()
    for name, p in root.named_parameters(recurse=False):
        c = clone_input(p.detach(), _fp64(p.dtype) if fp64 else None)
        out.register_parameter(name, torch.nn.Parameter(c, requires_grad=p.requires_grad))
    for name, b in root.named_buffers(recurse=False):
        out.register_buffer(name, clone_input(b, _fp64(b.dtype) if fp64 else None))
    for name, v in vars(root).items():
        if not name.startswith("_") and name != "training":
            setattr(out, name, v)
    return out


def clone_inputs(inputs: list, fp64: bool = False) -> list:
    return [clone_input(t, _fp64(t.dtype) if fp64 else None) if isinstance(t, torch.Tensor) else t
            for t in inputs]


# -- running ------------------------------------------------------------------------------------

def _leaves(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _leaves(o)]
    return [out]


def run_fwd_maybe_bwd(fn: Callable, inputs: list, backward: bool = True) -> list:
    """Call ``fn(*inputs)``; where outputs require grad, run a backward from the sum of them."""
    outs = _leaves(fn(*inputs))
    if backward:
        diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None]
        if diff:
            torch.autograd.backward([o.sum() if not o.is_complex() else o.abs().sum() for o in diff])
    return outs


@contextlib.contextmanager
def isolated(seed: int, grad: bool):
    """Runs that leave the RNG, the grad mode and the warnings filters as they were."""
    with torch.random.fork_rng(devices=[]), torch.set_grad_enabled(grad), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        yield


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


def same(ref, res, fp64_ref=None, tol: float = 1e-3) -> tuple[bool, str]:
    """Whether ``res`` (compiled) matches ``ref`` (eager), as torch's ``same``: close within
    ``tol``, or, with a float64 reference, no further from it than eager is (times 2, + tol/10).
    Returns (ok, what differs)."""
    ref_l, res_l = _leaves(ref), _leaves(res)
    fp_l = _leaves(fp64_ref) if fp64_ref is not None else [None] * len(ref_l)
    if len(ref_l) != len(res_l):
        return False, f"{len(res_l)} outputs, eager has {len(ref_l)}"
    for i, (a, b, f) in enumerate(zip(ref_l, res_l, fp_l)):
        if not isinstance(a, torch.Tensor):
            if isinstance(a, float) and isinstance(b, (int, float)):
                if not math.isclose(a, b, rel_tol=tol, abs_tol=tol) and not (math.isnan(a) and math.isnan(b)):
                    return False, f"output {i}: {b!r} != eager {a!r}"
            elif a != b:
                return False, f"output {i}: {b!r} != eager {a!r}"
            continue
        if not isinstance(b, torch.Tensor):
            return False, f"output {i}: {type(b).__name__}, eager returns a tensor"
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, (f"output {i}: shape {tuple(b.shape)} dtype {b.dtype}, "
                           f"eager: shape {tuple(a.shape)} dtype {a.dtype}")
        a, b = a.detach(), b.detach()
        if not (a.is_floating_point() or a.is_complex()):
            if not torch.equal(a, b):
                return False, f"output {i}: {int((a != b).sum())} of {a.numel()} elements differ"
            continue
        if torch.allclose(a, b, atol=tol, rtol=tol, equal_nan=True):
            continue
        if isinstance(f, torch.Tensor) and f.shape == a.shape and not a.is_complex():
            f = f.detach()
            ref_err, res_err = _rmse(f, a), _rmse(f, b)
            if res_err <= 2.0 * ref_err + tol / 10.0:
                continue
            return False, (f"output {i}: RMSE against float64 {res_err:.6g}, eager's {ref_err:.6g} "
                           f"(max abs difference to eager {float((a - b).abs().max()):.6g})")
        return False, f"output {i}: max abs difference to eager {float((a - b).abs().max()):.6g}"
    return True, ""


class Outcome(NamedTuple):
    """``kind``: "ok", "eager_error" (the graph fails eagerly: nothing to blame the backend for),
    "compile_error", "run_error" or "mismatch"."""
    kind: str
    exc: BaseException | None = None
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind in ("compile_error", "run_error", "mismatch")

    def describe(self) -> str:
        if self.exc is not None:
            return f"{type(self.exc).__name__}: {self.exc}"
        return self.detail or self.kind


def check(graph: torch.fx.Graph, root: torch.nn.Module, inputs: list, compile_fn: Callable, *,
          accuracy: bool = False, tol: float = 1e-3, grad: bool = True, seed: int = 0,
          meta: dict | None = None) -> Outcome:
    """Run ``graph`` eagerly, compile it with ``compile_fn(gm, example_inputs)`` and run that
    (each on fresh copies of ``root``'s attributes and of ``inputs``); with ``accuracy``, compare."""
    def gm(fp64: bool = False) -> torch.fx.GraphModule:
        # a fresh graph each time: a backend may change the one it is given
        g = torch.fx.GraphModule(clone_root(root, fp64), copy_graph(graph))
        g.meta.update(meta or {})
        return g

    backward = grad and not accuracy
    with isolated(seed, grad):
        try:
            ref = run_fwd_maybe_bwd(gm(), clone_inputs(inputs), backward)
        except Exception as e:  # noqa: BLE001
            return Outcome("eager_error", e)
    with isolated(seed, grad):
        try:
            compiled = compile_fn(gm(), clone_inputs(inputs))
        except Exception as e:  # noqa: BLE001
            return Outcome("compile_error", e)
        try:
            res = run_fwd_maybe_bwd(compiled, clone_inputs(inputs), backward)
        except Exception as e:  # noqa: BLE001
            return Outcome("run_error", e)
    if not accuracy:
        return Outcome("ok")
    fp64_ref = None
    with isolated(seed, grad):
        try:
            fp64_ref = run_fwd_maybe_bwd(gm(fp64=True), clone_inputs(inputs, fp64=True), False)
        except Exception:  # noqa: BLE001 - compare with eager alone
            fp64_ref = None
    ok, detail = same(ref, res, fp64_ref, tol)
    return Outcome("ok") if ok else Outcome("mismatch", None, detail)


def run_repro(graph: torch.fx.Graph, attrs: dict, inputs: list, compile_fn: Callable, *,
              accuracy: bool = False, tol: float = 1e-3, grad: bool = True, seed: int = 0,
              meta: dict | None = None) -> None:
    """A repro's main: raises the backend's exception, or prints a mismatch and exits 1."""
    root, values = generate(attrs, inputs, seed)
    gm = torch.fx.GraphModule(root, graph)
    print(gm.code)
    out = check(graph, root, values, compile_fn, accuracy=accuracy, tol=tol, grad=grad, seed=seed, meta=meta)
    if out.kind == "eager_error":
        print("the graph fails eagerly on these inputs (not a backend failure):", file=sys.stderr)
        raise out.exc  # type: ignore[misc]
    if out.exc is not None:
        print(f"xcompile repro: the backend failed ({out.kind.replace('_', ' ')})", file=sys.stderr)
        raise out.exc
    if out.kind == "mismatch":
        print(f"xcompile repro: ACCURACY MISMATCH: {out.detail}")
        sys.exit(1)
    print("xcompile repro: no failure (the compiled graph ran and matched eager)" if accuracy
          else "xcompile repro: no failure (the backend compiled and ran the graph)")


# -- the text of a repro -----------------------------------------------------------------------

class Unrepresentable(Exception):
    """A graph holds something a repro cannot spell."""


def resolve(obj) -> tuple[str, str] | None:
    """(import line, expression) naming ``obj``, or None where it is not importable."""
    if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return "import torch", f"torch.ops.{obj}"
    candidates = []
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if mod and qual:
        candidates.append((mod, qual))
    try:
        name = _get_qualified_name(obj)
        m, _, q = name.rpartition(".")
        candidates.append((m, q))
        candidates.append((name.split(".")[0], ".".join(name.split(".")[1:])))
    except Exception:  # noqa: BLE001
        pass
    for mod, qual in candidates:
        mod = "operator" if mod == "_operator" else mod
        if not mod or not qual or "<" in qual or mod == "__main__":
            continue
        try:
            target: Any = importlib.import_module(mod)
            for part in qual.split("."):
                target = getattr(target, part)
        except Exception:  # noqa: BLE001
            continue
        if target is obj or (getattr(target, "__func__", None) is not None
                             and getattr(target, "__func__", None) is getattr(obj, "__func__", object())):
            return f"import {mod}", f"{mod}.{qual}"
    return None


def literal(v, names: dict, imports: set) -> str:
    """Python source for an FX argument (nodes by their names)."""
    if isinstance(v, torch.fx.Node):
        return names[v]
    if v is None or isinstance(v, (bool, str)):
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            return f"float({str(v)!r})"
        return repr(v)
    if isinstance(v, complex):
        return repr(v)
    if isinstance(v, torch.Size):
        return f"torch.Size([{', '.join(literal(x, names, imports) for x in v)}])"
    if isinstance(v, tuple):
        inner = ", ".join(literal(x, names, imports) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return f"[{', '.join(literal(x, names, imports) for x in v)}]"
    if isinstance(v, dict):
        items = (f"{literal(k, names, imports)}: {literal(x, names, imports)}" for k, x in v.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(v, slice):
        return f"slice({literal(v.start, names, imports)}, {literal(v.stop, names, imports)}, " \
               f"{literal(v.step, names, imports)})"
    if v is Ellipsis:
        return "..."
    if isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
        return str(v)
    if isinstance(v, torch.device):
        return f"torch.device({str(v)!r})"
    if isinstance(v, torch.Tensor) and not isinstance(v, torch._subclasses.FakeTensor) and v.numel() <= 64 \
            and v.device.type != "meta":
        return f"torch.tensor({v.tolist()!r}, dtype={v.dtype}).reshape({tuple(v.shape)!r})"
    r = resolve(v)
    if r is not None:
        imports.add(r[0])
        return r[1]
    raise Unrepresentable(f"cannot write {type(v).__name__} {v!r:.80} into a repro")


def graph_source(graph: torch.fx.Graph) -> tuple[str, set]:
    """The body of ``make_graph()`` that rebuilds ``graph`` node by node, and its imports."""
    names: dict = {}
    imports: set = set()
    lines = ["g = torch.fx.Graph()"]
    for n in graph.nodes:
        var = n.name
        names[n] = var
        if n.op == "placeholder":
            lines.append(f"{var} = g.placeholder({n.target!r})")
        elif n.op == "get_attr":
            lines.append(f"{var} = g.get_attr({n.target!r})")
        elif n.op == "output":
            lines.append(f"g.output({literal(n.args[0], names, imports)})")
        else:
            if n.op == "call_function":
                target = literal(n.target, names, imports) if not isinstance(n.target, str) else repr(n.target)
            else:
                target = repr(n.target)
            lines.append(f"{var} = g.create_node({n.op!r}, {target}, {literal(tuple(n.args), names, imports)}, "
                         f"{literal(dict(n.kwargs), names, imports)}, name={var!r})")
    lines.append("return g")
    return "\n".join(lines), imports


def spec_source(spec) -> str:
    if isinstance(spec, T):
        return spec.code()
    return literal(spec, {}, set())


def repro_source(*, graph: torch.fx.Graph, attrs: dict, inputs: list, compiler_lines: list[str],
                 header: list[str], accuracy: bool, tol: float, grad: bool, seed: int,
                 knobs: dict, meta: dict) -> str:
    """The text of a repro.py. ``compiler_lines`` define ``compile_fn(gm, example_inputs)``."""
    try:
        body, imports = graph_source(graph)
        make_graph = "def make_graph():\n" + "\n".join("    " + ln for ln in body.splitlines())
    except Unrepresentable as e:
        make_graph = f"def make_graph():\n    raise NotImplementedError({str(e)!r})"
        imports = set()
        header = header + [f"NOTE: {e}"]
    root = torch.nn.Module()
    for k in attrs:
        setattr(root, k, torch.nn.Parameter(torch.empty(0)))
    code = torch.fx.GraphModule(root, graph).code
    attr_lines = "\n".join(f"    {k!r}: {spec_source(s)}," for k, s in attrs.items())
    input_lines = "\n".join(f"    {spec_source(s)}," for s in inputs)
    knob_lines = ", ".join(f"{k}={v!r}" for k, v in sorted(knobs.items()))
    out = ['"""xcompile minifier repro.', "", *header, "", "The graph (as FX prints it):", "",
           *("    " + ln for ln in code.strip().splitlines()), '"""',
           "import math  # noqa: F401", "", "import torch", "import torch.fx", "", "import xcompile",
           "from xcompile.debug.repro_code import T, run_repro",
           *sorted(i for i in imports if i not in ("import torch",)), "",
           *compiler_lines, "", "", make_graph, "", "",
           f"ATTRS = {{\n{attr_lines}\n}}" if attrs else "ATTRS: dict = {}",
           f"INPUTS = [\n{input_lines}\n]" if inputs else "INPUTS: list = []",
           f"META = {meta!r}", "", "",
           "def main():",
           f"    with xcompile.config.patch({knob_lines}):",
           f"        run_repro(make_graph(), ATTRS, INPUTS, compile_fn, accuracy={accuracy!r}, tol={tol!r},",
           f"                  grad={grad!r}, seed={seed!r}, meta=META)", "", "",
           'if __name__ == "__main__":', "    main()", ""]
    return "\n".join(out)
