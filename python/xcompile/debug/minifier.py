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
from .minify_search import CALLS, Subject, minify
from .repro_code import Outcome, copy_graph, repro_source, resolve, spec_of

AFTER = ("dynamo", "aot")
LEVELS = (1, 2, 3, 4)

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
        found = minify(subject, outcome)
        if found is None:
            return None
        cand, info = found
    graph, attrs, inputs = cand
    n_calls = sum(1 for n in graph.nodes if n.op in CALLS)
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
