"""The minifier's search (debug/minifier.py): the graph under test (``Subject``) and delta
debugging over its call nodes.

``minify(subject, target)`` cuts the tail, then the head, then chunks from the middle of the
graph's call nodes; values a candidate no longer computes become inputs with the shapes, strides,
dtypes and integer ranges an eager run of the whole graph gave them (scalars become literals,
``Const``). A candidate counts when it still fails the same way (the same exception type, or still
a mismatch) while eager runs it fine. Attempts and time are capped (``config.repro_max_attempts``,
``config.repro_timeout``).
"""
from __future__ import annotations

import time
import warnings
from typing import Callable

import torch
import torch.fx

from .. import config
from .repro_code import Outcome, T, check, generate, spec_of

CALLS = ("call_function", "call_method", "call_module")


class Const:
    """A value a cut node stands for that is written into the graph as a literal."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Subject:
    """One graph, its attributes' and inputs' metadata, and how to compile it."""

    def __init__(self, graph: torch.fx.Graph, attrs: dict, inputs: list, compile_fn: Callable,
                 compiler_lines: list[str], *, after: str, label: str, grad: bool, knobs: dict, meta: dict):
        self.graph = graph
        self.attrs = attrs
        self.inputs = inputs
        self.compile_fn = compile_fn
        self.compiler_lines = compiler_lines
        self.after = after
        self.label = label
        self.grad = grad
        self.knobs = knobs
        self.meta = meta
        self.seed = 0
        self.tol = float(config.repro_tolerance)
        self.checkable = True

    def what(self) -> str:
        return f"the {self.label}"

    def run(self, graph: torch.fx.Graph, attrs: dict, inputs: list, accuracy: bool) -> Outcome:
        with torch.random.fork_rng(devices=[]):
            root, values = generate(attrs, inputs, self.seed)
        return check(graph, root, values, self.compile_fn, accuracy=accuracy, tol=self.tol, grad=self.grad,
                     seed=self.seed, meta=self.meta)

    def full(self, keep_meta: bool = False) -> tuple[torch.fx.Graph, dict, list]:
        """The whole graph; without the tracer's metadata (``keep_meta``: with it), as a repro has it."""
        g = torch.fx.Graph()
        env: dict = {}
        for n in self.graph.nodes:
            if n.op == "output":
                g.output(torch.fx.node.map_arg(n.args[0], lambda a: env[a]))
            else:
                env[n] = g.node_copy(n, lambda a: env[a])
                env[n].meta = dict(n.meta) if keep_meta else {}
        return g, dict(self.attrs), list(self.inputs)

    def check_full(self, accuracy: bool) -> Outcome:
        """Levels 3 and 4: the whole graph (with its metadata, as the backend gets it) compiled
        and run on generated values ("ok" where such a run would not stand for the real one)."""
        if not self.checkable:
            return Outcome("ok")
        g, attrs, inputs = self.full(keep_meta=True)
        return self.run(g, attrs, inputs, accuracy)


# -- minifying -------------------------------------------------------------------------------

def _value_spec(v):
    if isinstance(v, torch.Tensor):
        return spec_of(v) if v.device.type != "meta" else spec_of(v, ranges=False)
    if isinstance(v, (torch.SymInt, torch.SymFloat)):
        hint = getattr(v.node, "hint", None)
        return Const(hint) if hint is not None else None
    if v is None or isinstance(v, (bool, int, float, torch.dtype, torch.device)):
        return Const(v)
    if isinstance(v, (tuple, list, torch.Size)) and all(isinstance(x, (bool, int, float)) for x in v):
        return Const(v)
    return None


def _node_specs(subject: Subject) -> dict:
    """Each node's value, as a spec: from an eager run on generated values (integer ranges and
    all), else from the frontend's / tracer's example values."""
    specs: dict = {}
    for n in subject.graph.nodes:
        v = n.meta.get("val", n.meta.get("example_value"))
        if v is not None:
            specs[n] = _value_spec(v) if not isinstance(v, torch.Tensor) else spec_of(v, ranges=False)
    g, attrs, inputs = subject.full()
    try:
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            root, values = generate(attrs, inputs, subject.seed)
            with torch.set_grad_enabled(subject.grad):
                interp = torch.fx.Interpreter(torch.fx.GraphModule(root, g), garbage_collect_values=False)
                interp.run(*values)
        by_name = {n.name: v for n, v in interp.env.items()}
        for n in subject.graph.nodes:
            if n.name in by_name and n.op != "output":
                specs[n] = _value_spec(by_name[n.name])
    except Exception:  # noqa: BLE001 - the example values' metadata will do
        pass
    return specs


def _build(subject: Subject, keep: list, specs: dict):
    """The candidate graph computing ``keep`` (call nodes of subject.graph), or None."""
    keepset = set(keep)
    placeholders = [n for n in subject.graph.nodes if n.op == "placeholder"]
    used_ph, used_attr, cut, consts = set(), set(), [], {}
    for k in keep:
        for i in k.all_input_nodes:
            if i in keepset:
                continue
            if i.op == "placeholder":
                used_ph.add(i)
            elif i.op == "get_attr":
                used_attr.add(i)
            elif i not in consts and i not in cut:
                s = specs.get(i)
                if isinstance(s, T):
                    cut.append(i)
                elif isinstance(s, Const):
                    consts[i] = s.value
                else:
                    return None
    g = torch.fx.Graph()
    env: dict = dict(consts)
    inputs: list = []
    for i, p in enumerate(placeholders):
        if p in used_ph:
            env[p] = g.placeholder(p.name)
            inputs.append(subject.inputs[i])
    for c in sorted(cut, key=_position(subject.graph)):
        env[c] = g.placeholder(c.name)
        inputs.append(specs[c])
    attrs = {}
    for a in subject.graph.nodes:
        if a in used_attr:
            env[a] = g.get_attr(a.target)
            attrs[a.target] = subject.attrs[a.target]
    for k in keep:
        env[k] = g.node_copy(k, lambda a: env[a])
        env[k].meta = {}
    outs = [k for k in keep if isinstance(specs.get(k), T)
            and (not k.users or any(u not in keepset for u in k.users))]
    if not outs:
        tensors = [k for k in keep if isinstance(specs.get(k), T)]
        outs = tensors[-1:]
    g.output(tuple(env[k] for k in outs))
    return g, attrs, inputs


def _position(graph: torch.fx.Graph) -> Callable:
    order = {n: i for i, n in enumerate(graph.nodes)}
    return order.__getitem__


class _Budget(Exception):
    pass


def _same_failure(target: Outcome, out: Outcome) -> bool:
    if target.kind == "mismatch":
        return out.kind == "mismatch"
    return out.exc is not None and out.kind != "eager_error" and type(out.exc) is type(target.exc)


def minify(subject: Subject, target: Outcome) -> tuple[tuple, str] | None:
    t0 = time.monotonic()
    accuracy = target.kind == "mismatch"
    full = subject.full()
    first = subject.run(full[0], full[1], full[2], accuracy)
    if first.kind == "eager_error" and target.exc is not None and type(first.exc) is type(target.exc):
        return None                     # the graph raises this when run eagerly: not the backend's doing
    if not _same_failure(target, first):
        return full, (f"not minified: the whole graph on generated inputs gives {first.describe()}"
                      if first.kind != "ok" else "not minified: the failure did not reproduce on generated inputs")
    specs = _node_specs(subject)
    calls = [n for n in subject.graph.nodes if n.op in CALLS]
    best: list = calls
    best_graph = None
    tried: dict = {}
    attempts = 0

    def fails(keep: list) -> bool:
        nonlocal best, best_graph, attempts
        if not keep:
            return False
        key = tuple(n.name for n in keep)
        if key in tried:
            return tried[key]
        if attempts >= config.repro_max_attempts or time.monotonic() - t0 > config.repro_timeout:
            raise _Budget
        attempts += 1
        cand = _build(subject, keep, specs)
        ok = cand is not None and _same_failure(target, subject.run(cand[0], cand[1], cand[2], accuracy))
        tried[key] = ok
        if ok and len(keep) < len(best) or (ok and best_graph is None):
            best, best_graph = keep, cand
        return ok

    stopped = ""
    try:
        s = list(calls)
        if not fails(s):
            return full, "not minified: the graph rebuilt from its call nodes does not fail the same way"
        lo, hi = 0, len(s)                          # truncate the tail: s[:hi] fails
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if fails(s[:mid]):
                hi = mid
            else:
                lo = mid
        s = s[:hi]
        lo, hi = 0, len(s) - 1                      # cut the head: s[lo:] fails
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fails(s[mid:]):
                lo = mid
            else:
                hi = mid - 1
        s = s[lo:]
        n = 2                                       # delta debugging: remove chunks
        while len(s) >= 2:
            chunk = -(-len(s) // n)
            for i in range(0, len(s), chunk):
                cand = s[:i] + s[i + chunk:]
                if fails(cand):
                    s = cand
                    n = max(n - 1, 2)
                    break
            else:
                if n >= len(s):
                    break
                n = min(len(s), 2 * n)
    except _Budget:
        stopped = f" (stopped at the limit: config.repro_max_attempts={config.repro_max_attempts}, " \
                  f"repro_timeout={config.repro_timeout})"
    assert best_graph is not None
    info = (f"minified from {len(calls)} to {len(best)} call nodes in {attempts} attempts, "
            f"{time.monotonic() - t0:.1f} s{stopped}")
    return best_graph, info
