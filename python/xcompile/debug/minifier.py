"""The minifier: ``XCOMPILE_REPRO_AFTER`` / ``XCOMPILE_REPRO_LEVEL`` (torch's TORCHDYNAMO_REPRO_*).

``config.repro_after`` picks which compiles are checked:

- ``"dynamo"``: the backend's compile of each graph the frontend captured (convert_frame calls
  ``repro_backend`` for the backend it will call);
- ``"aot"``: the compile of each AOT forward, backward and inference graph (aot_compile, and
  the inductor backend's inference path, call ``repro_compilers`` for their graph compilers).

``config.repro_level``: 1 writes the failing graph as a repro without minifying it; 2 (default)
minifies a graph whose compile, or a call of whose compiled form, raised (with after="dynamo" a
backward graph an AOT backend compiles at the first backward is not covered: level 3, or
after="aot", sees it); 3 also compiles a copy of each graph and runs it, forward and backward,
on generated inputs when the graph is compiled; 4 also compares those results with an eager run
(float64 reference, ``repro_code.same``; forward outputs only) and treats a mismatch as the
failure (raising ``AccuracyError``). Levels 3 and 4 compile each graph twice (the copy, then
the graph itself), as torch's do, and skip graphs with symbolic sizes or meta tensors.

Minifying is delta debugging over the graph's call nodes: a candidate keeps a subset of them;
values it no longer computes become inputs (their shapes, strides and dtypes are those of an
eager run of the whole graph), and the values later nodes (or the graph's output) read become
its outputs. The tail is cut first, then the head, then chunks from the middle; the smallest
candidate that still fails the same way (the same exception type, or still a mismatch) is
written as ``repro.py`` under ``config.repro_dir`` (see repro_code.py for what it runs). The
search stops after ``config.repro_max_attempts`` candidates or ``config.repro_timeout`` seconds.

Everything the minifier runs works on copies with random values (never the program's
parameters or inputs), under a saved RNG state and the grad mode of the compile; a failure of
the minifier itself is a warning, and the program's own exception is raised as it would be.
"""
from __future__ import annotations

import collections
import copy
import functools
import itertools
import os
import time
import warnings
from typing import Any, Callable

import torch
import torch.fx

from .. import _C, config
from ..backends.registry import list_backends, lookup_backend
from ..stats import counters
from .repro_code import Outcome, T, check, copy_graph, generate, repro_source, resolve, spec_of

AFTER = ("dynamo", "aot")
LEVELS = (1, 2, 3, 4)
_CALLS = ("call_function", "call_method", "call_module")

# The path of the last repro written (tests and tools read it; the warning names it too).
last_repro_path: str | None = None

_ACTIVE = False                   # a minification is running: compiles it makes are not checked
_CONTEXT: dict = {}               # while a dynamo-level backend call runs under after="aot"
_RUN_DIRS: dict[str, str] = {}


class AccuracyError(RuntimeError):
    """Level 4: a compiled graph's results differ from eager's."""


def settings() -> tuple[str | None, int]:
    """(after, level) from the config; a clear error for values the minifier does not know."""
    after, level = config.repro_after, config.repro_level
    if after is None or after == "":
        return None, 2
    if after not in AFTER:
        raise ValueError(f"xcompile.config.repro_after (XCOMPILE_REPRO_AFTER) is {after!r}; "
                         f"use one of {', '.join(map(repr, AFTER))} or None")
    if isinstance(level, str) and level.strip().isdigit():
        level = int(level)
    if isinstance(level, bool) or level not in LEVELS:
        raise ValueError(f"xcompile.config.repro_level (XCOMPILE_REPRO_LEVEL) is {level!r}; use 1 (dump), "
                         "2 (minify backend exceptions), 3 (also run every compiled graph) or 4 (accuracy)")
    return after, int(level)


# -- hooks ----------------------------------------------------------------------------------

def repro_backend(backend: Callable, name: str, knobs: dict | None = None) -> Callable:
    """What convert_frame calls instead of ``backend`` while ``config.repro_after`` is set."""
    after, level = settings()
    knobs = dict(knobs or {})
    if after == "dynamo":
        return functools.partial(_compile_dynamo, backend, name, knobs, level)
    return functools.partial(_with_context, backend, name, knobs)


def repro_compilers(fw_compiler: Callable, bw_compiler: Callable, inference_compiler: Callable) -> tuple:
    """aot_compile's graph compilers, each checked where ``config.repro_after == "aot"``."""
    return (repro_compiler(fw_compiler, "forward"), repro_compiler(bw_compiler, "backward"),
            repro_compiler(inference_compiler, "inference"))


def repro_compiler(compiler: Callable, kind: str = "inference") -> Callable:
    """One ATen graph compiler ``(gm, example_inputs, **kw)``, checked where ``repro_after == "aot"``."""
    after, level = settings()
    if after != "aot" or getattr(compiler, "_xc_repro", False):
        return compiler
    return _aot_compiler(compiler, level, kind)


def _with_context(backend, name, knobs, gm, example_inputs):
    old = dict(_CONTEXT)
    _CONTEXT.update(backend=name, knobs=knobs)
    try:
        return backend(gm, example_inputs)
    finally:
        _CONTEXT.clear()
        _CONTEXT.update(old)


def _compile_dynamo(backend, name, knobs, level, gm, example_inputs):
    if _ACTIVE:
        return backend(gm, example_inputs)
    subject = _guarded(lambda: _dynamo_subject(gm, example_inputs, backend, name, knobs))
    if subject is None:
        return backend(gm, example_inputs)
    return _debug_compile(subject, level, lambda: backend(gm, example_inputs))


def _aot_compiler(compiler: Callable, level: int, kind: str) -> Callable:
    @functools.wraps(compiler)
    def compile_graph(gm, example_inputs, **kwargs):
        if _ACTIVE:
            return compiler(gm, example_inputs, **kwargs)
        subject = _guarded(lambda: _aot_subject(gm, example_inputs, compiler, kwargs, kind))
        if subject is None:
            return compiler(gm, example_inputs, **kwargs)
        return _debug_compile(subject, level, lambda: compiler(gm, example_inputs, **kwargs))

    compile_graph._xc_repro = True  # type: ignore[attr-defined]
    return compile_graph


def _debug_compile(subject: "Subject", level: int, compile_real: Callable):
    if level >= 3:
        out = _guarded(lambda: _untraced_call(subject.check_full, level >= 4))
        if out is not None and out.failed:
            path = _report(subject, out, level)
            if out.kind == "mismatch":
                raise AccuracyError(f"xcompile minifier: {subject.what()} gives wrong results: {out.detail}"
                                    + (f"\nrepro: {path}" if path else ""))
            assert out.exc is not None
            raise out.exc
    try:
        compiled = compile_real()
    except Exception as e:
        _report(subject, Outcome("compile_error", e), level)
        raise
    if callable(compiled):
        return _RunChecked(compiled, subject, level)
    return compiled


class _RunChecked:
    """A compiled graph whose first exception when run is reported (then raised as it was)."""

    def __init__(self, compiled: Callable, subject: "Subject", level: int):
        self._compiled = compiled
        self._subject: Subject | None = subject
        self._level = level

    def __call__(self, *args, **kwargs):
        try:
            return self._compiled(*args, **kwargs)
        except Exception as e:
            subject, self._subject = self._subject, None
            if subject is not None:
                _report(subject, Outcome("run_error", e), self._level)
            raise

    def __getattr__(self, name):               # what the compiled callable carries (not set up: copies)
        if name.startswith("__") or name in ("_compiled", "_subject", "_level"):
            raise AttributeError(name)
        return getattr(self._compiled, name)


# -- the graph under test -------------------------------------------------------------------

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


def _symbolic(v) -> bool:
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(v, torch.Tensor):
        return v.device.type == "meta" or any(isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride()))
    return False


def _checkable(gm: torch.fx.GraphModule, example_inputs) -> bool:
    """Whether a compile of a copy on generated values stands for this one: not for symbolic sizes
    (the copy would be static) or meta tensors (no values to run on)."""
    vals = list(example_inputs) + [n.meta.get("example_value", n.meta.get("val"))
                                   for n in gm.graph.nodes if n.op == "placeholder"]
    return not any(_symbolic(v) for v in vals)


def _fetch_attr(gm: torch.nn.Module, target: str):
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _attr_spec(v):
    if isinstance(v, torch.Tensor):
        return spec_of(v)
    return v


def _input_spec(v, requires_grad: bool | None = None):
    if isinstance(v, torch.Tensor):
        return spec_of(v, requires_grad=requires_grad)
    if isinstance(v, (torch.SymInt, torch.SymFloat)):        # its example value (unbacked: a guess)
        hint = getattr(v.node, "hint", None)
        return (int if isinstance(v, torch.SymInt) else float)(2 if hint is None else hint)
    return v


def _attrs(gm: torch.nn.Module, graph: torch.fx.Graph) -> dict:
    attrs: dict = {}
    for n in graph.nodes:
        if n.op == "get_attr":
            name = n.target.replace(".", "_")
            attrs[name] = _attr_spec(_fetch_attr(gm, n.target))
            n.target = name
    return attrs


def _dynamo_subject(gm, example_inputs, backend, name, knobs) -> Subject:
    graph = copy_graph(gm.graph)
    attrs = _attrs(gm, graph)
    inputs = [_input_spec(v) for v in example_inputs]

    def compile_fn(g, inputs):
        with config.patch(**knobs):
            return backend(g, inputs)

    subject = Subject(graph, attrs, inputs, compile_fn, _backend_lines(backend, name), after="dynamo",
                      label=f"graph given to backend {name!r}", grad=torch.is_grad_enabled(), knobs=knobs,
                      meta={})
    subject.checkable = _checkable(gm, example_inputs)
    return subject


def _aot_subject(gm, example_inputs, compiler, kwargs, kind) -> Subject:
    graph = copy_graph(gm.graph)
    attrs = _attrs(gm, graph)
    inputs = [_input_spec(v, requires_grad=False) for v in example_inputs]
    knobs = dict(_CONTEXT.get("knobs") or {})

    def compile_fn(g, inputs):
        with config.patch(**knobs):
            return compiler(g, inputs)

    meta = {k: v for k, v in gm.meta.items() if isinstance(v, (bool, int, float, str, type(None)))}
    label = f"AOT {kind} graph given to {getattr(compiler, '__qualname__', compiler)!r}"
    if _CONTEXT.get("backend"):
        label += f" (backend {_CONTEXT['backend']!r})"
    subject = Subject(graph, attrs, inputs, compile_fn, _compiler_lines(compiler), after="aot", label=label,
                      grad=False, knobs=knobs, meta=meta)
    subject.checkable = _checkable(gm, example_inputs)
    return subject


def _backend_lines(backend, name: str) -> list[str]:
    lines: list[str] = []
    registered = False
    try:
        registered = name in list_backends() and lookup_backend(name) is backend
    except Exception:  # noqa: BLE001
        pass
    if registered:
        mod = getattr(backend, "__module__", None) or ""
        if mod and mod != "__main__" and not mod.startswith("xcompile."):
            lines.append(f"import {mod}  # noqa: F401  (registers backend {name!r})")
        elif mod == "__main__":
            lines.append(f"# backend {name!r} was registered by the script that ran (__main__): "
                         "register it here before lookup_backend")
        lines.append(f"_backend = xcompile.lookup_backend({name!r})")
    else:
        r = resolve(backend)
        if r is not None:
            lines += [r[0], f"_backend = {r[1]}"]
        else:
            why = f"backend {name!r} cannot be imported: define it here as _backend"
            lines.append(f"raise NotImplementedError({why!r})")
    lines += ["", "", "def compile_fn(gm, example_inputs):", "    return _backend(gm, example_inputs)"]
    return lines


def _compiler_lines(compiler) -> list[str]:
    fn, kw = compiler, {}
    if isinstance(compiler, functools.partial):
        fn, kw = compiler.func, dict(compiler.keywords)
    r = resolve(fn)
    if r is None:
        why = f"the graph compiler {fn!r} cannot be imported: define it here as _compiler"
        lines = [f"raise NotImplementedError({why!r})"]
    else:
        lines = [r[0], f"_compiler = {r[1]}"]
    kws = "".join(f", {k}={v!r}" for k, v in kw.items() if isinstance(v, (bool, int, float, str, type(None))))
    return lines + ["", "", "def compile_fn(gm, example_inputs):",
                    f"    return _compiler(gm, example_inputs{kws})"]


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


def _minify(subject: Subject, target: Outcome) -> tuple[tuple, str] | None:
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
    calls = [n for n in subject.graph.nodes if n.op in _CALLS]
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


# -- reporting ------------------------------------------------------------------------------

def _guarded(fn: Callable):
    """``fn()``, or None (with a warning) where the minifier itself fails."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"xcompile minifier: internal error, checking skipped: {type(e).__name__}: {e}",
                      RuntimeWarning, stacklevel=3)
        return None


def _untraced_call(fn: Callable, *args):
    return _C.untraced(fn)(*args)


def _report(subject: Subject, outcome: Outcome, level: int) -> str | None:
    """Minify (level >= 2) and write the repro; warn with its path. Never raises."""
    global _ACTIVE, last_repro_path
    if _ACTIVE:
        return None
    saved = copy.deepcopy(dict(counters))
    _ACTIVE = True
    try:
        path = _untraced_call(_write_report, subject, outcome, level)
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"xcompile minifier: could not write a repro: {type(e).__name__}: {e}",
                      RuntimeWarning, stacklevel=3)
        return None
    finally:
        _ACTIVE = False
        counters.clear()
        counters.update(collections.defaultdict(collections.Counter, saved))
    if path is None:
        return None
    last_repro_path = path
    what = "gives wrong results" if outcome.kind == "mismatch" else \
        f"failed ({outcome.describe().splitlines()[0][:200]})"
    warnings.warn(f"xcompile minifier: {subject.what()} {what}; wrote a repro to {path}", RuntimeWarning,
                  stacklevel=3)
    if outcome.exc is not None:
        try:
            outcome.exc.add_note(f"xcompile minifier: repro written to {path}")
        except Exception:  # noqa: BLE001
            pass
    return path


def _run_dir() -> str:
    base = os.path.abspath(config.repro_dir or "xcompile_repro")
    if base not in _RUN_DIRS:
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S")
        _RUN_DIRS[base] = os.path.join(base, f"run_{stamp}-pid_{os.getpid()}", "minifier")
    return _RUN_DIRS[base]


def _write_report(subject: Subject, outcome: Outcome, level: int) -> str | None:
    if level == 1:
        cand, info = subject.full(), "level 1: the graph as it was given, not minified"
    else:
        found = _minify(subject, outcome)
        if found is None:
            return None
        cand, info = found
    graph, attrs, inputs = cand
    n_calls = sum(1 for n in graph.nodes if n.op in _CALLS)
    accuracy = outcome.kind == "mismatch"
    failure = outcome.describe().splitlines()
    header = [f"after={subject.after!r} level={level}: {subject.what()}",
              f"failure: {failure[0][:300] if failure else outcome.kind}",
              f"{info}; {n_calls} call nodes in this graph",
              "Run: python repro.py  (" + ("prints the mismatch and exits 1" if accuracy
                                            else "raises the backend's exception") + ")"]
    text = repro_source(graph=graph, attrs=attrs, inputs=inputs, compiler_lines=subject.compiler_lines,
                        header=header, accuracy=accuracy, tol=subject.tol, grad=subject.grad,
                        seed=subject.seed, knobs=_literal_knobs(subject.knobs), meta=subject.meta)
    d = _run_dir()
    os.makedirs(d, exist_ok=True)
    for i in itertools.count():
        path = os.path.join(d, "repro.py" if i == 0 else f"repro_{i}.py")
        if not os.path.exists(path):
            break
    with open(path, "w") as f:
        f.write(text)
    return path


def _literal_knobs(knobs: dict) -> dict:
    return {k: v for k, v in knobs.items() if isinstance(v, (bool, int, float, str, type(None)))}
