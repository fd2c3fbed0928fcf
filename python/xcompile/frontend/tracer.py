"""The symbolic interpreter: one ``Tracer`` per trace, one ``Frame`` per (inlined) Python frame.

A ``Frame`` holds everything CPython's frame would: decoded instructions, the next
instruction index, the value stack, locals, cells, the active ``with`` contexts and the
globals accessor.  ``Frame.step()`` runs exactly one instruction through the opcode table
(``HANDLERS``, filled by the ``ops_*`` modules), so the interpreter can stop before any
instruction and know its live stack and locals (what a graph break needs later).

Calls to Python functions are inlined: a child ``Frame`` runs to completion on the same
``Tracer`` (one graph, one guard set) and its return value is pushed on the caller's stack.
"""
from __future__ import annotations

import inspect
import linecache
import traceback
import types
from typing import Any, Callable

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from .. import config, shape_state
from ..bytecode.instructions import Instr, decode
from ..guards.build import GuardBuilder
from ..guards.sources import AttrSource, ClosureCellSource, ClosureSource, GlobalSource, ItemSource, LocalSource, Source
from ..guards.spec import GuardSet
from ..handlers import PENDING, raise_pending
from . import hub, rules, tracing_rules
from .exc import PythonError, Unsupported
from .graph_builder import GraphBuilder
from .shapes import ShapePolicy, produce_guards
from .side_effects import DELETED, SideEffects
from .try_regions import catching_offsets, may_raise_at_run_time
from .values import (
    NULL,
    CellValue,
    DictValue,
    FunctionValue,
    GeneratorValue,
    LazyValue,
    NestedFunctionValue,
    TupleValue,
    Value,
)
from .wrap import wrap

Handler = Callable[["Frame", Instr], None]
HANDLERS: dict[str, Handler] = {}

MAX_INLINE_DEPTH = 48


def handler(*opnames: str) -> Callable[[Handler], Handler]:
    """Register one handler for the given (normalized) opcode names."""
    def deco(fn: Handler) -> Handler:
        for name in opnames:
            assert name not in HANDLERS, f"two handlers for {name}"
            HANDLERS[name] = fn
        return fn
    return deco


class Globals:
    """How one frame reads its globals: the dict, the builtins, and the source of each name."""

    def __init__(self, f_globals: dict, f_builtins: dict, source_of: Callable[[str], Source | None]):
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self.source_of = source_of

    def load(self, tx: "Tracer", name: str) -> Value:
        stored = tx.side_effects.global_(self.f_globals, name)
        if stored is not None:                            # assigned earlier in this trace
            if stored is DELETED:
                raise PythonError.of(NameError(f"name {name!r} is not defined"))
            return stored
        if name in self.f_globals:
            return tx.wrap(self.f_globals[name], self.source_of(name))
        if name in self.f_builtins:
            obj = self.f_builtins[name]
            src = self.source_of(name)
            if isinstance(src, GlobalSource):
                # G[name] resolves globals-then-builtins in C++: the guard fails if a global of
                # that name appears later and shadows the builtin.
                tx.guards.identity(src, obj)
            return tx.wrap(obj, None)
        raise PythonError.of(NameError(f"name {name!r} is not defined"))

_DATA_DEPENDENT_HINT = ("Data-dependent control flow or shapes cannot be captured in one graph; the code from "
                        "here runs after a graph break (torch._check(...) can state a fact the trace needs).")


class Frame:
    def __init__(self, tx: "Tracer", code: types.CodeType, f_locals: dict[str, Value],
                 cells: dict[str, CellValue], globals_: Globals, parent: "Frame | None" = None):
        self.tx = tx
        self.code = code
        self.instrs = tx.decoded(code)
        self.ip = 0
        self.stack: list[Value] = []
        self.locals = f_locals
        self.cells = cells
        self.globals = globals_
        self.parent = parent
        self.kw_names: tuple[str, ...] = ()
        self.ctx_stack: list[Value] = []          # active `with` contexts, innermost last
        self.lineno: int = code.co_firstlineno
        self.done = False
        self.result: Value | None = None
        self.yields: list[Value] | None = [] if code.co_flags & inspect.CO_GENERATOR else None
        self.catching = catching_offsets(code)    # instructions an except/finally covers

    # -- stack ----------------------------------------------------------------------------------
    def push(self, v: Value) -> None:
        self.stack.append(self.tx.resolve(v))

    def pop(self) -> Value:
        return self.stack.pop()

    def popn(self, n: int) -> list[Value]:
        if n == 0:
            return []
        vals = self.stack[-n:]
        del self.stack[-n:]
        return vals

    def peek(self, depth: int = 1) -> Value:
        return self.stack[-depth]

    def jump(self, target: int) -> None:
        self.ip = target

    def finish(self, v: Value) -> None:
        self.result = v
        self.done = True

    # -- running ----------------------------------------------------------------------------------
    def user_frame(self) -> traceback.FrameSummary:
        line = linecache.getline(self.code.co_filename, self.lineno).strip() or None
        return traceback.FrameSummary(self.code.co_filename, self.lineno, self.code.co_name, line=line)

    def step(self) -> None:
        if PENDING:                               # a signal handler raised during this compile
            raise_pending()
        inst = self.instrs[self.ip]
        self.ip += 1
        if inst.lineno is not None:
            self.lineno = inst.lineno
        h = HANDLERS.get(inst.opname)
        if h is None:
            raise Unsupported(f"unsupported bytecode {inst.opname}",
                              "This Python construct is not supported inside a compiled region yet.")
        guarded = inst.offset in self.catching
        last = self.tx.gb.graph._root.prev if guarded else None
        try:
            h(self, inst)
            if guarded:
                self._check_run_time_raises(last)
        except PythonError as e:                  # try/except inside the traced code
            if not hub.handle_exception(self, inst, e):
                raise
        except GuardOnDataDependentSymNode as e:  # a number the trace needs is only known at run time
            raise Unsupported(f"{inst.opname} needs a data-dependent value at trace time (an unbacked size "
                              "from item(), nonzero(), x[mask]...)", _DATA_DEPENDENT_HINT, str(e)) from e

    def _check_run_time_raises(self, last: Any) -> None:
        """A step inside a ``try`` added an op that may raise only when the graph runs: a break
        (the frame runs eagerly, where the ``except`` sees it; see try_regions.py)."""
        graph = self.tx.gb.graph
        node = last.next
        while node is not graph._root:
            if may_raise_at_run_time(node):
                raise Unsupported(f"{node.target if isinstance(node.target, str) else node.name} inside a try block "
                                  "may raise only at run time (tensor indices, overlapping writes)",
                                  "Eager runs this frame, so its except clause sees the error.")
            node = node.next

    def run(self) -> Value:
        outer, self.tx.current = self.tx.current, self
        try:
            while not self.done:
                self.step()
        except Unsupported as e:
            e.user_stack.insert(0, self.user_frame())
            raise
        finally:
            self.tx.current = outer
        assert self.result is not None
        return self.result


class Tracer:
    """State shared by every frame of one trace: the graph, the guards, wrapped objects."""

    def __init__(self, frame_state, *, fullgraph: bool = False, shapes: ShapePolicy | None = None):
        self.frame_state = frame_state
        self.fullgraph = fullgraph
        self.gb = GraphBuilder(torch.is_grad_enabled())
        self.shapes = shapes if shapes is not None else ShapePolicy(frame_state.code, None)
        self.shapes.start_trace()
        self.gb.shapes = self.shapes
        self.gb.where = self.where
        self.current: Frame | None = None           # the innermost frame being run
        self.guards = GuardBuilder()
        self.memo: dict[int, tuple[Any, Value]] = {}
        self.gb.resolve = self.resolve
        self.inference_mode = torch.is_inference_mode_enabled()
        self.depth = 0
        self._decoded: dict[types.CodeType, list[Instr]] = {}
        # error_on_graph_break flags, innermost last (tracing_rules.py pushes and pops them)
        self.eogb_stack: list[bool] = [bool(config.error_on_graph_break)]
        self.side_effects = SideEffects()               # changes to state from outside the frame
        self.handled_exception: Value | None = None     # what `except` is handling (sys.exc_info)
        self._cells: dict[int, tuple[Any, CellValue]] = {}   # id(real cell) -> (cell, its value)
        # forward hooks registered inside the trace (frame_hooks.py): id(module) -> hooks, in
        # order; the modules themselves, kept alive; the top frame's (steps, index) now
        self.frame_hooks: dict[int, list] = {}
        self.frame_hook_modules: dict[int, Any] = {}
        self.top_step: tuple[int, int] | None = None
        self.exited_holders: list = []     # sources of _C.ContextExit whose block ended in the graph

    def where(self) -> traceback.FrameSummary | None:
        """The user line the trace is at (for errors raised far from the frame, e.g. a
        ``mark_dynamic`` dimension specialized by a ShapeEnv guard)."""
        return self.current.user_frame() if self.current is not None else None

    def build_guards(self) -> GuardSet:
        """The guards of the trace, with those of its symbolic sizes (frontend/shapes.py)."""
        guard_set = self.guards.build()
        guard_set.all_module_tables = self.side_effects.reads_module_tables()
        env, policy = self.gb.fake_mode.shape_env, self.shapes
        produce_guards(env, policy, guard_set)
        if env is not None:
            produced = shape_state.shape_facts(env)

            def refresh() -> None:
                """Guards for what a backend taught the ShapeEnv and stamped (shape_state.py)."""
                accepted = shape_state.accepted_facts(env)
                if accepted is not None and accepted != produced and accepted == shape_state.shape_facts(env):
                    guard_set.shape_checks = []
                    produce_guards(env, policy, guard_set)
            guard_set.refresh = refresh
        return guard_set

    def decoded(self, code: types.CodeType) -> list[Instr]:
        instrs = self._decoded.get(code)
        if instrs is None:
            instrs = self._decoded[code] = decode(code)
        return instrs

    def wrap(self, obj: Any, source: Source | None, covered: bool = False) -> Value:
        return wrap(self, obj, source, covered)

    def external_cell(self, cell, source: Source | None, cell_source: Source | None) -> CellValue:
        """The one CellValue of a real closure cell (a rebinding is seen by every later reader)."""
        known = self._cells.get(id(cell))
        if known is not None:
            return known[1]
        v = _external_cell(cell, source)
        self._cells[id(cell)] = (cell, v)
        v.real_cell, v.cell_source = cell, cell_source
        return v

    def resolve(self, v: Value) -> Value:
        if isinstance(v, LazyValue):
            return self.wrap(v.obj, v.source, v.covered)
        return v

    # -- the top frame --------------------------------------------------------------------------------
    def top_frame(self) -> Frame:
        fs = self.frame_state
        code = fs.code
        varnames = code.co_varnames
        f_locals: dict[str, Value] = {}
        for name, obj in fs.f_locals.items():
            if name in varnames:
                f_locals[name] = LazyValue(obj, _local_source(name, varnames.index(name)))
        cells: dict[str, CellValue] = {}
        for i, name in enumerate(code.co_freevars):
            cell = fs.closure[i] if fs.closure else None
            cells[name] = self.external_cell(cell, ClosureSource(name, i), ClosureCellSource(name, i))
        globals_ = Globals(fs.f_globals, fs.f_builtins, GlobalSource)
        self.current = Frame(self, code, f_locals, cells, globals_)   # inlined frames replace it
        return self.current

    # -- inlining -----------------------------------------------------------------------------------
    def inline_call(self, parent: Frame | None, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Value:
        replaced = tracing_rules.before_inline(self, fn, args, kwargs)   # disable(), allow_in_graph, ...
        if replaced is not None:
            return replaced
        child = self.call_frame(parent, fn, args, kwargs)
        if child.yields is not None:            # a generator: runs lazily, item by item (generators.py)
            return GeneratorValue(child)
        self.depth += 1
        try:
            result = child.run()
        finally:
            self.depth -= 1
        return result

    def call_frame(self, parent: Frame | None, fn: Value, args: list[Value], kwargs: dict[str, Value]) -> Frame:
        """The frame a call of ``fn`` runs in, arguments bound, not started (contexts.py runs a
        @contextmanager generator's frame in two halves)."""
        if isinstance(fn, FunctionValue):
            f = fn.fn
            code = f.__code__
            # defaults of library code are not guarded (they do not change between calls)
            dsrc = None if rules.is_trusted_code(f) else fn.source
            defaults = tuple(self.wrap(d, _sub(dsrc, "__defaults__", i), fn.covered)
                             for i, d in enumerate(f.__defaults__ or ()))
            kwdefaults = {k: self.wrap(d, _sub(dsrc, "__kwdefaults__", k), fn.covered)
                          for k, d in (f.__kwdefaults__ or {}).items()}
            # the compiler's __class__ cell (zero-argument super) never changes: no guard
            cells = {name: self.external_cell(c, None if name == "__class__" else _closure_source(fn.source, i),
                                              _cell_source(fn.source, i))
                     for i, (name, c) in enumerate(zip(code.co_freevars, f.__closure__ or ()))}
            globals_ = self._function_globals(f, fn.source)
        elif isinstance(fn, NestedFunctionValue):
            code = fn.code
            defaults, kwdefaults = fn.defaults, fn.kwdefaults
            cells = dict(zip(code.co_freevars, fn.closure))
            globals_ = fn.frame_globals
        else:  # pragma: no cover - calls.py only sends functions here
            raise TypeError(fn)
        if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
            raise Unsupported(f"calling async function {code.co_name}")
        f_locals = bind_arguments(code, args, kwargs, defaults, kwdefaults)
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"call depth above {MAX_INLINE_DEPTH} while inlining {code.co_name}",
                              "Recursion cannot be unrolled; restructure the function.")
        return Frame(self, code, f_locals, cells, globals_, parent)

    def _function_globals(self, f: types.FunctionType, fn_source: Source | None) -> Globals:
        fs = self.frame_state
        if f.__globals__ is fs.f_globals:
            return Globals(fs.f_globals, fs.f_builtins, GlobalSource)
        if rules.is_trusted_code(f) or fn_source is None:
            return Globals(f.__globals__, fs.f_builtins, lambda name: None)
        base = AttrSource(fn_source, "__globals__")
        return Globals(f.__globals__, fs.f_builtins, lambda name: ItemSource(base, name))


def _local_source(name: str, index: int):
    return LocalSource(name, index)


def _sub(source: Source | None, attr: str, key) -> Source | None:
    return None if source is None else ItemSource(AttrSource(source, attr), key)


def _closure_source(fn_source: Source | None, i: int) -> Source | None:
    if fn_source is None:
        return None
    return AttrSource(ItemSource(AttrSource(fn_source, "__closure__"), i), "cell_contents")


def _cell_source(fn_source: Source | None, i: int) -> Source | None:
    return None if fn_source is None else ItemSource(AttrSource(fn_source, "__closure__"), i)


def _external_cell(cell, source: Source | None) -> CellValue:
    try:
        contents = cell.cell_contents
    except (ValueError, AttributeError):      # an empty cell (name bound later in the outer frame)
        return CellValue(None, external=True)
    return CellValue(LazyValue(contents, source), external=True)


def bind_arguments(code: types.CodeType, args: list[Value], kwargs: dict[str, Value],
                   defaults: tuple[Value, ...], kwdefaults: dict[str, Value]) -> dict[str, Value]:
    """Python's argument binding, over values (raises Unsupported where Python raises TypeError)."""
    name = code.co_name
    nargs, nposonly, nkwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    names = code.co_varnames
    pos_names = names[:nargs]
    kwonly_names = names[nargs:nargs + nkwonly]
    i = nargs + nkwonly
    varargs = names[i] if code.co_flags & inspect.CO_VARARGS else None
    varkw = names[i + (1 if varargs else 0)] if code.co_flags & inspect.CO_VARKEYWORDS else None

    def type_error(msg: str) -> Unsupported:
        return Unsupported(f"{name}() {msg}", "The same call raises TypeError in eager mode.")

    bound: dict[str, Value] = dict(zip(pos_names, args))
    extra = list(args[nargs:])
    if extra and varargs is None:
        raise type_error(f"takes {nargs} positional arguments but {len(args)} were given")
    if varargs is not None:
        bound[varargs] = TupleValue(extra)
    extra_kw: dict[Any, Value] = {}
    for k, v in kwargs.items():
        if k in kwonly_names or (k in pos_names and pos_names.index(k) >= nposonly):
            if k in bound:
                raise type_error(f"got multiple values for argument {k!r}")
            bound[k] = v
        elif varkw is not None:
            extra_kw[k] = v
        else:
            raise type_error(f"got an unexpected keyword argument {k!r}")
    if varkw is not None:
        bound[varkw] = DictValue(extra_kw)
    first_default = nargs - len(defaults)
    for j, pname in enumerate(pos_names):
        if pname not in bound:
            if j >= first_default:
                bound[pname] = defaults[j - first_default]
            else:
                raise type_error(f"missing required positional argument {pname!r}")
    for pname in kwonly_names:
        if pname not in bound:
            if pname in kwdefaults:
                bound[pname] = kwdefaults[pname]
            else:
                raise type_error(f"missing required keyword-only argument {pname!r}")
    return bound


__all__ = ["Frame", "Globals", "HANDLERS", "NULL", "Tracer", "bind_arguments", "handler"]
