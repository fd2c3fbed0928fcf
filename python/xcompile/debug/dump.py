"""The debug dump (torch's ``TORCH_COMPILE_DEBUG=1``): ``XCOMPILE_DEBUG=1`` or
``xcompile.config.debug_dir = "path"`` writes, per compiled frame, a folder of readable files:

    <debug_dir or ./xcompile_debug>/run_<time>-pid_<pid>/<NNN>_<function>/
        frame.txt             the function, backend, outcome (graph break, eager), recompile reason
        bytecode.txt          the source and bytecode (dis); for a graph break, the replacement
                              runner's generated source and each resume function's bytecode
        graph.py              the captured FX graph (print_readable)
        graph_inputs.txt      the graph's inputs: their sources, shapes, strides, dtypes
        guards.txt            the cache entry's guard tree (as XCOMPILE_LOGS=guards prints it)
        aot_forward.py        AOT backends: the partitioned forward / backward graphs (the
        aot_backward.py       backward goes here too when it is compiled at the first .backward())
        aot_inference.py      the inference graph (no grad)
        partition.txt         the partition's choice: what is saved, what is recomputed
        [<graph>_]aten_graph.py          the kernel generator: the ATen graph it got,
        [<graph>_]loop_ir_<pass>.txt     the loop IR after lower / fuse / plan,
        [<graph>_]kernel<N>.cpp|.py      each generated kernel (C++ or Triton),
        [<graph>_]wrapper.py             and the generated wrapper that launches them
        timings.txt           the compile phases' durations for this frame (debug/timing.py)

``<graph>`` is ``forward``, ``backward`` or ``inference`` for graphs an AOT backend hands to the
kernel generator, nothing for a graph compiled directly. A name already written in a folder
(a second graph of the same kind) gets ``_2``, ``_3``, ... The run folder's path is printed
once (stderr). Off, the compiler makes one config check per compiled frame
(``frame(...)``) and the hooks return at once; nothing runs on the call path of compiled code.
Writing never breaks a compile: a folder that cannot be made or written is one warning and
the dump stops for that folder.
"""
from __future__ import annotations

import contextlib
import datetime
import dis
import functools
import inspect
import io
import os
import re
import sys
import threading
import types
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from .. import config, log
from . import timing

_NULL = contextlib.nullcontext()
_local = threading.local()
_ACTIVE = 0                    # views pushed (all threads): 0 means every hook returns at once
_LOCK = threading.RLock()


def on() -> bool:
    """Whether the dump is on (the config check made once per compiled frame)."""
    return bool(config.debug) or config.debug_dir is not None


def _warn_once(key: str, msg: str) -> None:
    warned = _WARNED
    if key not in warned:
        warned.add(key)
        warnings.warn(f"xcompile debug dump: {msg}", RuntimeWarning, stacklevel=3)


_WARNED: set[str] = set()


def _safe(fn: Callable) -> Callable:
    """A hook never raises into the compile: what fails is one warning (per hook)."""
    @functools.wraps(fn)
    def hook(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - a debugging aid must not break the compile
            _warn_once(f"hook:{fn.__name__}", f"{fn.__name__} failed ({type(e).__name__}: {e}); "
                                              "the compile goes on")
            return None
    return hook


# -- the run folder (one per base directory and process) ------------------------------------------------

class _Run:
    def __init__(self, base: str):
        self.base = base
        self.path: Path | None = None
        self.failed = False
        self.count = 0

    def folder(self) -> Path | None:
        if self.failed:
            return None
        if self.path is None:
            stamp = datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S_%f")
            path = Path(self.base).absolute() / f"run_{stamp}-pid_{os.getpid()}"
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                self.failed = True
                _warn_once(f"run:{self.base}", f"cannot create {path} ({type(e).__name__}: {e}); "
                                               "nothing is written")
                return None
            self.path = path
            print(f"xcompile: debug dump in {path}", file=sys.stderr)
        return self.path

    def new_frame_folder(self, name: str) -> Path | None:
        run = self.folder()
        if run is None:
            return None
        with _LOCK:
            self.count += 1
            n = self.count
        folder = run / f"{n:03d}_{name}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.failed = True
            _warn_once(f"run:{self.base}", f"cannot create {folder} ({type(e).__name__}: {e}); "
                                           "nothing more is written")
            return None
        return folder


_RUNS: dict[str, _Run] = {}


def _run_for(base: str) -> _Run:
    with _LOCK:
        run = _RUNS.get(base)
        if run is None:
            run = _RUNS[base] = _Run(base)
        return run


def run_folder() -> Path | None:
    """The current run folder (None before anything was written, or when the dump is off)."""
    run = _RUNS.get(_base())
    return run.path if run is not None else None


def _base() -> str:
    return str(config.debug_dir) if config.debug_dir is not None else "xcompile_debug"


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# -- one frame's folder ------------------------------------------------------------------------------

class _Frame:
    """What is dumped for one compiled frame; its folder is made at the first file written."""

    def __init__(self, run: _Run, code: types.CodeType, backend: str):
        self.run, self.code, self.backend = run, code, backend
        self.folder: Path | None = None
        self.written: set[str] = set()
        self.times: list[tuple[str, float, str, bool]] = []  # (phase, seconds, graph label, after the frame)
        self.closed = False                 # the frame's compile ended (later: lazily compiled graphs)
        self.times_written = 0
        self.breaks: list = []
        self.recompile_reason: str | None = None
        self.runner: Any = None
        self.broken: Any = None
        self.outcome: str | None = None
        self.captured = False

    def path(self) -> Path | None:
        if self.folder is None and not self.run.failed:
            name = _UNSAFE.sub("_", self.code.co_qualname.replace("<locals>.", "")).strip("_") or "frame"
            self.folder = self.run.new_frame_folder(name[:80])
        return self.folder

    def write(self, name: str, text: str, unique: bool = True) -> None:
        folder = self.path()
        if folder is None:
            return
        if unique and name in self.written:
            stem, dot, ext = name.partition(".")
            k = 2
            while f"{stem}_{k}{dot}{ext}" in self.written:
                k += 1
            name = f"{stem}_{k}{dot}{ext}"
        self.written.add(name)
        try:
            (folder / name).write_text(text if text.endswith("\n") else text + "\n")
        except OSError as e:
            self.run.failed = True
            _warn_once(f"run:{self.run.base}", f"cannot write {folder / name} ({type(e).__name__}: {e}); "
                                               "nothing more is written")

    # -- written when the frame's compile ends ------------------------------------------------------
    def finish(self) -> None:
        self.closed = True
        if not self.captured:
            return
        self.write("frame.txt", self._frame_text(), unique=False)
        self.write("bytecode.txt", self._bytecode_text(), unique=False)
        self.write_times()

    def write_times(self) -> None:
        if not self.times or len(self.times) == self.times_written or self.folder is None and not self.captured:
            return
        self.times_written = len(self.times)
        width = max(len(t[0]) for t in self.times)
        lines = [f"compile phases of {self.code.co_qualname}, in the order they ended (seconds); "
                 "'backend' includes the aot.* and kernels.* phases inside it", ""]
        for phase, secs, label, after in self.times:
            notes = ([f"{label} graph"] if label else []) + (["compiled at a later call"] if after else [])
            lines.append(f"{phase:<{width}}  {secs:9.4f}" + (f"  ({', '.join(notes)})" if notes else ""))
        totals: dict[str, float] = {}
        for phase, secs, _, after in self.times:
            top = phase.split(".", 1)[0]
            if top in ("frontend", "guards", "backend") and not after:
                totals[top] = totals.get(top, 0.0) + secs
        late = sum(t[1] for t in self.times if t[3] and t[0].startswith(("kernels.", "aot.")))
        lines += ["", "totals: " + ", ".join(f"{k} {v:.4f}" for k, v in totals.items())
                  + (f"; compiled at later calls (the backward, new sizes) {late:.4f}" if late else "")]
        self.write("timings.txt", "\n".join(lines), unique=False)

    def _frame_text(self) -> str:
        c = self.code
        lines = [f"function: {c.co_qualname}", f"file:     {c.co_filename}:{c.co_firstlineno}",
                 f"backend:  {self.backend}", f"outcome:  {self._outcome()}"]
        if self.recompile_reason:
            lines.append(f"recompiled because: {self.recompile_reason}")
        for rec in self.breaks:
            lines += ["", rec.log_text(False) if hasattr(rec, "log_text") else str(rec)]
        return "\n".join(lines)

    def _outcome(self) -> str:
        if self.outcome:
            return self.outcome
        if self.breaks:
            return "runs eagerly (a graph break it cannot continue after); the frames it calls are compiled"
        return "no cache entry"

    def _bytecode_text(self) -> str:
        c = self.code
        parts = [f"# {c.co_qualname} ({c.co_filename}:{c.co_firstlineno})"]
        try:
            src = inspect.getsource(c)
        except (OSError, TypeError):
            src = None
        if src:
            parts += ["", "## source", "", src.rstrip()]
        parts += ["", "## original bytecode", "", _dis(c)]
        if self.broken is not None:
            rec = self.broken.record
            parts += ["", f"## graph break at {rec.where}: {rec.reason}"]
            source = getattr(self.runner, "__xcompile_source__", None) or self.broken.source_text
            parts += ["", "## replacement code (the runner the cache entry calls)", "", source.rstrip()]
            ns = getattr(self.runner, "__globals__", None) or {}
            own = {"__builtins__", self.runner.__name__}
            names = sorted(set(re.findall(r"[A-Za-z_]\w*", source)) & (ns.keys() - own))
            if names:
                parts += ["", "# the names it reads (the runner's globals):"]
                parts += [f"#   {n} = {_short_repr(ns[n])}" for n in names]
            for label, code in _resume_codes(self.runner):
                parts += ["", f"## {label} {code.co_name} (generated bytecode; compiled on its first call, "
                              f"in its own folder)",
                          f"# arguments: {', '.join(code.co_varnames[:code.co_argcount]) or '(none)'}"
                          + (f"; cells: {', '.join(code.co_freevars)}" if code.co_freevars else ""),
                          "", _dis(code)]
        return "\n".join(parts)


def _short_repr(v) -> str:
    if isinstance(v, types.FunctionType):
        return f"<function {v.__qualname__}>"
    if isinstance(v, types.CodeType):
        return f"<code {v.co_name}>"
    try:
        text = repr(v)
    except Exception:  # noqa: BLE001
        text = f"<{type(v).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."


def _dis(code: types.CodeType) -> str:
    out = io.StringIO()
    dis.dis(code, file=out)
    return out.getvalue().rstrip()


def _resume_codes(runner) -> list[tuple[str, types.CodeType]]:
    """The resume functions (and breaking-instruction stubs) the runner calls, from its globals."""
    ns = getattr(runner, "__globals__", None) or {}
    found: dict[int, tuple[str, types.CodeType]] = {}
    for value in list(ns.values()):
        code = value.__code__ if isinstance(value, types.FunctionType) else value
        if not isinstance(code, types.CodeType) or id(code) in found:
            continue
        if code.co_name.startswith("xcompile_resume_in_"):
            found[id(code)] = ("resume function", code)
        elif code.co_name.startswith("xcompile_break_at_"):
            found[id(code)] = ("breaking-instruction stub", code)
    return sorted(found.values(), key=lambda lc: (lc[0] != "resume function", lc[1].co_name))


# -- views: a frame and the graph being compiled in it ---------------------------------------------------

class Dump:
    """What the hooks write through: a frame's folder, and a label naming the graph compiled
    now (forward / backward / inference) for the kernel generator's files."""

    def __init__(self, frame: _Frame, label: str = ""):
        self.frame, self.label = frame, label

    def _name(self, name: str) -> str:
        return f"{self.label}_{name}" if self.label else name

    def within(self, label: str, fn: Callable) -> Callable:
        """``fn`` (a graph compiler) writing into this frame's folder, also when called later
        (the backward graph, compiled at the first .backward())."""
        view = Dump(self.frame, label)

        @functools.wraps(fn)
        def compile_with_dump(*args, **kwargs):
            with pushed(view):
                return fn(*args, **kwargs)
        return compile_with_dump

    # -- AOT -------------------------------------------------------------------------------------------
    def aot_compilers(self, fw: Callable, bw: Callable, inference: Callable) -> tuple[Callable, Callable, Callable]:
        return self.within("forward", fw), self.within("backward", bw), self.within("inference", inference)

    @_safe
    def aot_training(self, schema, part) -> None:
        saved = ", ".join(part.saved) or "(nothing)"
        head = f"# saved for the backward ({len(part.saved)}): {saved}\n"
        self.frame.write("aot_forward.py", "# AOT forward graph: outputs are (*user outputs, *saved)\n"
                         + head + _readable(part.fw_gm))
        self.frame.write("aot_backward.py", "# AOT backward graph: inputs are (*saved, *tangents)\n"
                         + head + _readable(part.bw_gm))
        self.frame.write("partition.txt", f"{part.describe()}\n\n{schema.summary()}")

    @_safe
    def aot_inference(self, schema, gm) -> None:
        self.frame.write("aot_inference.py", f"# AOT inference graph\n# {schema.summary()}\n" + _readable(gm))

    # -- the kernel generator --------------------------------------------------------------------------
    @_safe
    def loop_ir(self, pass_name: str, text: str, gm=None) -> None:
        """The loop IR after ``pass_name`` (``text``: kernels.ir.format_graph's), and the ATen graph."""
        if gm is not None:
            self.frame.write(self._name("aten_graph.py"), "# the ATen graph the kernel generator compiles "
                             "(after constant folding)\n" + _readable(gm))
        self.frame.write(self._name(f"loop_ir_{pass_name}.txt"), text)

    @_safe
    def kernel_output(self, schedule, plan, kernels: dict, wrapper_src: str, format_node: Callable) -> None:
        """The fused schedule and the plan (``format_node``: kernels.ir's), each kernel, the wrapper."""
        self.frame.write(self._name("loop_ir_fuse.txt"), _format_schedule(schedule, format_node))
        self.frame.write(self._name("loop_ir_plan.txt"), _format_plan(plan))
        for k in kernels.values():
            ext = "cpp" if k.kind == "cpp" else "py"
            name = k.name if k.name.startswith("kernel") else f"kernel_{k.name}"
            self.frame.write(self._name(f"{name}.{ext}"), k.source)
        self.frame.write(self._name("wrapper.py"), wrapper_src)


def _readable(gm) -> str:
    try:
        return gm.print_readable(print_output=False)
    except Exception:  # noqa: BLE001 - fall back to the plain code
        return gm.code


def _format_schedule(schedule, format_node: Callable) -> str:
    lines = [f"{len(schedule)} steps, in order (a group is one fused kernel; extern: an ATen call)"]
    for item in schedule:
        if hasattr(item, "xs"):         # a fusion.Group (else an ir.ExternNode)
            lines.append(f"{item.name}: x={list(item.xs)} r={list(item.rs)} stores={item.stores} "
                         f"fuses {', '.join(item.origins)}")
            lines += ["    " + ln for n in item.nodes for ln in format_node(n).splitlines()]
        else:
            lines.append("extern " + format_node(item))
    return "\n".join(lines)


def _format_plan(plan) -> str:
    lines = ["steps: what each allocates (reusing a dead buffer's memory: '<- buf') and frees after it"]
    for step in plan.steps:
        name = getattr(step.item, "name", None) or type(step.item).__name__
        allocs = ", ".join(b + (f" <- {r}" if r else "") for b, r in step.allocs)
        lines.append(f"{name}: alloc [{allocs}] free [{', '.join(step.frees)}]")
    lines.append(f"storage: {plan.storage}")
    return "\n".join(lines)


# -- the stack of views (per thread) ---------------------------------------------------------------------

def _stack() -> list[Dump]:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def current() -> Dump | None:
    """The view hooks write through now (None: the dump is off, or no frame is being compiled)."""
    if not _ACTIVE:
        return None
    s = _stack()
    return s[-1] if s else None


@contextlib.contextmanager
def pushed(view: Dump) -> Iterator[Dump]:
    global _ACTIVE
    _install_sink()
    s = _stack()
    s.append(view)
    with _LOCK:
        _ACTIVE += 1
    try:
        yield view
    finally:
        s.pop()
        with _LOCK:
            _ACTIVE -= 1
        if view.frame.closed:          # a graph compiled at a later call: its times join the frame's
            _safe(view.frame.write_times)()


class _Observer:
    """Told of graph breaks and recompiles (log.add_observer) while a frame is compiled."""

    def on_break(self, record) -> None:
        d = current()
        if d is not None:
            d.frame.captured = True
            d.frame.breaks.append(record)

    def on_graph(self, code, gm, guards) -> None:
        pass

    def on_recompile(self, code, reason) -> None:
        d = current()
        if d is not None and d.frame.code is code:
            d.frame.recompile_reason = reason


_OBSERVER = _Observer()


def frame(code: types.CodeType, backend: str) -> contextlib.AbstractContextManager:
    """Around one frame's compile (convert_frame): the one config check when the dump is off."""
    if not on():
        return _NULL
    return _frame_cm(code, backend)


@contextlib.contextmanager
def _frame_cm(code: types.CodeType, backend: str) -> Iterator[None]:
    f = _Frame(_run_for(_base()), code, backend)
    added = _OBSERVER not in log.observers()          # (a frame compiled inside another's compile)
    if added:
        log.add_observer(_OBSERVER)
    try:
        with pushed(Dump(f)):
            yield
    except BaseException as e:
        text = " ".join(str(e).split())
        f.outcome = f"the compile raised {type(e).__name__}: {text[:500]}"
        raise
    finally:
        if added:
            log.remove_observer(_OBSERVER)
        _safe(f.finish)()


def _sink(phase: str, seconds: float) -> None:
    d = current()
    if d is not None:
        d.frame.times.append((phase, seconds, d.label, d.frame.closed))


def _install_sink() -> None:
    if _sink not in timing.SINKS:
        timing.SINKS.append(_sink)


# -- the convert_frame hooks (each returns at once when the dump is off) ------------------------------------

@_safe
def graph(gm, captured) -> None:
    d = current()
    if d is None:
        return
    f = d.frame
    f.captured = True
    f.write("graph.py", _readable(gm))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    lines = [f"{len(captured.input_sources)} inputs (placeholder: where the value comes from: what it is)"]
    for i, (src, ex) in enumerate(zip(captured.input_sources, captured.example_inputs)):
        node = placeholders[i] if i < len(placeholders) else None
        traced = node.meta.get("example_value") if node is not None else None
        text = _describe_value(ex)
        if traced is not None and _describe_value(traced) != text:     # symbolic sizes
            text = f"{_describe_value(traced)} (this call: {text})"
        lines.append(f"{node.name if node is not None else f'input{i}'}: {_source_name(src)}: {text}")
    f.write("graph_inputs.txt", "\n".join(lines))


@_safe
def guards(guard) -> None:
    d = current()
    if d is not None:
        f = d.frame
        f.captured = True
        if f.outcome is None:
            f.outcome = "one graph, the whole frame"
        f.write("guards.txt", guard.dump(), unique=False)


@_safe
def runner(broken, runner_fn) -> None:
    d = current()
    if d is not None:
        f = d.frame
        f.captured = True
        f.broken, f.runner = broken, runner_fn
        f.outcome = f"graph break at {broken.record.where}; the cache entry runs the replacement code"


def _source_name(src) -> str:
    name = getattr(src, "name", None)
    if callable(name):
        name = name()
    return str(name) if name else str(src)


def _describe_value(v) -> str:
    if isinstance(v, torch.Tensor):
        dtype = str(v.dtype).replace("torch.", "")
        text = f"Tensor {dtype}[{', '.join(map(str, v.shape))}] stride=[{', '.join(map(str, v.stride()))}] " \
               f"device={v.device}"
        if v.requires_grad:
            text += " requires_grad"
        return text
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return f"{type(v).__name__} {v}"
    return f"{type(v).__name__} {v!r}"[:200]


__all__ = ["Dump", "current", "frame", "graph", "guards", "on", "run_folder", "runner"]
