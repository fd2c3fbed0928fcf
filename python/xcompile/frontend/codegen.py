"""The code a broken frame runs instead of its own: a generated Python function (the runner).

For a frame with a graph break at instruction ``i`` the runner, called by the C++ cache with
the frame's arguments (and its closure when the code has free variables), does what the
original frame would have done, in this order::

    def xcompile_runner_fn(a0, a1, closure):
        outs = graph(a0, G['w'])                     # 1. the compiled prefix
        side_effects(...)                            # 2. mutations the prefix recorded
        v0 = [outs[0], a1]                           # 3. rebuild the live stack and locals
        exit0.enter(torch.no_grad())                 #    (and re-enter active `with` blocks)
        r = print(v0)                                # 4. the breaking instruction, eagerly
        return resume(outs[1], r, a1)                # 5. the rest of the frame, compiled on
                                                     #    its own first call
When `with` blocks are active at the break, their exits (``_C.ContextExit``, made empty on the
runner's first line, or handed in by the runner that called this frame's resume function) are
held by a try/except over everything from the graph call to the resume call: whatever raises in
between (the graph, the breaking instruction, the resume function's own compile, an interrupt
landing between two calls) exits the blocks as eager's frame would. The resume frame calls the
same exit when its block ends; a ContextExit runs at most once, so the runner's handler is then
a no-op.
``RunnerBuilder`` turns symbolic values back into Python expressions over the frame's
arguments, the graph's outputs and constants (``expr``), then renders the source text
(``XCOMPILE_LOGS=output_code`` prints it) and executes it once to make the function.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import keyword
import linecache
import math
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any, Callable, cast

import torch

from .. import _C
from ..guards.sources import AttrSource, ClosureSource, GenericAttrSource, GlobalSource, ItemSource, LocalSource, Source
from .dict_keys import ValueKey
from .reach import frame_roots, reachable
from .resume import CannotResume
from .values import (
    AutocastValue,
    BoundMethodValue,
    CellValue,
    ConstantValue,
    ContextExitValue,
    DictValue,
    DictViewValue,
    GeneratorContextValue,
    GradModeValue,
    IteratorValue,
    LazyValue,
    ListValue,
    NestedFunctionValue,
    NewObjectValue,
    NoOpContextValue,
    NullValue,
    ObjectMethodValue,
    PartialValue,
    SetValue,
    SuperValue,
    TensorMethodValue,
    TensorValue,
    TupleValue,
    UserContextValue,
    Value,
    real_object,
)

if TYPE_CHECKING:
    from .scalars import SymScalarValue
    from .tracer import Frame, Tracer

_LITERALS = (type(None), bool, int, str, bytes)
_counter = itertools.count()


def _make_function(code, globals_, defaults, closure, kwdefaults=None):
    f = types.FunctionType(code, globals_, code.co_name, defaults, closure)
    if kwdefaults:
        f.__kwdefaults__ = kwdefaults
    return f


def _new_object(cls, attrs: dict, base=None, items=()):
    """An instance of ``cls`` without running its __init__; a dict subclass gets its contents
    through the builtin base's __setitem__ (not the class's own)."""
    obj = object.__new__(cls) if base is None else base.__new__(cls)
    for k, v in items:
        base.__setitem__(obj, k, v)
    obj.__dict__.update(attrs)
    return obj


def _dict_item(obj, key):
    """``obj[key]`` as the guards read it: a dict subclass's own __getitem__ is not run (its
    storage is what the trace read)."""
    return dict.__getitem__(obj, key) if isinstance(obj, dict) else obj[key]


def _grad_ctx(mode: bool, prev: bool) -> torch.set_grad_enabled:
    """``torch.set_grad_enabled(mode)`` as if made when grad mode was ``prev``, without switching."""
    ctx = torch.set_grad_enabled.__new__(torch.set_grad_enabled)
    ctx.prev, ctx.mode = prev, mode
    return ctx


class RunnerBuilder:
    """Collects the runner's statements; ``expr(v)`` is the expression for a value."""

    def __init__(self, tx: Tracer, frame: Frame):
        self.tx = tx
        self.frame = frame
        code = frame.code
        self.code = code
        self.n_args = (code.co_argcount + code.co_kwonlyargcount
                       + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08))
        self.params = [f"a{i}" for i in range(self.n_args)]
        self.has_closure = bool(code.co_freevars)
        self.ns: dict[str, Any] = {
            "G": tx.frame_state.f_globals, "B": tx.frame_state.f_builtins, "torch": torch,
            "make_function": _make_function, "new_object": _new_object, "ContextExit": _C.ContextExit,
            "grad_ctx": _grad_ctx,
            "MethodType": types.MethodType, "CellType": types.CellType, "partial": functools.partial,
            "sys": sys, "dict_item": _dict_item,
        }
        self.lines: list[str] = []
        self.outputs: list[TensorValue | SymScalarValue] = []
        self._out_index: dict[Any, int] = {}
        self._memo: dict[int, str] = {}
        self._owners: dict[int, Value] | None = None     # id(storage) -> its NewObjectValue
        self._keep: list[Any] = []
        self._names = itertools.count()
        self.exits: list[str] = []                # entered contexts' __exit__, outermost first
        self.exit_decls: list[str] = []           # the runner's first lines: the exits' holders
        self.preload: list[str] = []              # reads of outside objects (before side effects)
        self.built_by_effects: set[int] = set()   # ids of values the side effects rebuild
        self._loaded: dict[Source, str] = {}

    # -- names ---------------------------------------------------------------------------------------
    def temp(self, prefix: str = "v") -> str:
        return f"{prefix}{next(self._names)}"

    def const(self, obj: Any, hint: str = "k") -> str:
        if type(obj) in _LITERALS or (type(obj) is float and math.isfinite(obj)):
            return repr(obj)
        key = id(obj)
        name = self._memo.get(key)
        if name is None or self.ns.get(name) is not obj:
            name = self.temp(hint)
            self.ns[name] = obj
            self._keep.append(obj)
            self._memo[key] = name
        return name

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def assign(self, expr: str, prefix: str = "v") -> str:
        name = self.temp(prefix)
        self.emit(f"{name} = {expr}")
        return name

    # -- sources -------------------------------------------------------------------------------------
    def source(self, src: Source) -> str:
        if isinstance(src, LocalSource):
            if src.index >= self.n_args:
                raise CannotResume(f"local {src.local_name!r} is not an argument of the frame")
            return self.params[src.index]
        if isinstance(src, GlobalSource):
            table = "G" if src.global_name in self.tx.frame_state.f_globals else "B"
            return f"{table}[{src.global_name!r}]"
        if isinstance(src, ClosureSource):
            return f"closure[{src.index}].cell_contents"
        if isinstance(src, GenericAttrSource):
            return f"object.__getattribute__({self.source(src.base)}, {src.attr!r})"
        if isinstance(src, AttrSource):
            base = self.source(src.base)
            if src.attr.isidentifier() and not keyword.iskeyword(src.attr):
                return f"{base}.{src.attr}"
            return f"getattr({base}, {src.attr!r})"
        if isinstance(src, ItemSource):
            if type(src.key) is int:                # list / tuple items (dicts with int keys too)
                return f"{self.source(src.base)}[{self.const(src.key)}]"
            return f"dict_item({self.source(src.base)}, {self.const(src.key)})"
        raise CannotResume(f"cannot reload a value from source {src!r}")

    def load(self, src: Source) -> str:
        """An object from outside the frame, read before the recorded side effects are applied
        (they may replace what the source leads to: ``xs[0]`` after ``xs.insert(0, ...)``)."""
        if isinstance(src, LocalSource):
            return self.source(src)
        name = self._loaded.get(src)
        if name is None:
            name = self._loaded[src] = self.temp("g")
            self.preload.append(f"{name} = {self.source(src)}")
        return name

    # -- values --------------------------------------------------------------------------------------
    def tensor_output(self, v: TensorValue | SymScalarValue) -> str:
        i = self._out_index.get(v.node)
        if i is None:
            i = self._out_index[v.node] = len(self.outputs)
            self.outputs.append(v)
        return f"outs[{i}]"

    def expr(self, v: Value) -> str:
        """An expression (cheap to repeat) for the object ``v`` stands for."""
        if isinstance(v, LazyValue):
            return self.load(v.source) if v.source is not None else self.const(v.obj)
        if isinstance(v, TensorValue):
            op = v.node.op
            if op == "placeholder":
                assert v.source is not None         # a graph input is read from somewhere
                return self.load(v.source)
            if op == "get_attr":
                if v.source is not None:
                    return self.load(v.source)
                return self.const(self.tx.gb.root[cast(str, v.node.target)], "t")
            return self.tensor_output(v)
        if isinstance(v, ConstantValue):
            return self.const(v.value)
        if isinstance(v, NullValue):
            raise CannotResume("a NULL stack slot where a value is needed")
        rebuild = v.rebuild_as                             # tracing_rules._rebuilt_as
        if rebuild is not None:
            obj, src = rebuild
            return self.load(src) if src is not None else self.const(obj)
        if v.source is not None:
            if isinstance(v, ContextExitValue):          # a context entered before this frame
                name = self._memo.get(id(v))
                if name is None:
                    name = self._memo[id(v)] = self.exit_holder()
                    if isinstance(v.source, LocalSource):     # a resume argument: a holder already
                        self.exit_decls[-1] = f"{name} = {self.source(v.source)}"
                    else:
                        self.emit(f"{name}.hold({self.load(v.source)})")
                return name
            return self.load(v.source)
        name = self._memo.get(id(v))
        if name is not None:
            return name
        owner = self._storage_owner(v)
        if owner is not None:                  # a dict/list subclass's contents: the instance itself
            return self.expr(owner)
        if id(v) in self.built_by_effects:                # the side effects built this object
            name = self._memo[id(v)] = f"built[{id(v)}]"
            self._keep.append(v)
            return name
        maker = _MAKERS.get(type(v))
        if maker is not None:
            name = maker(self, v)
        else:
            obj = real_object(v)
            if obj is None:
                raise CannotResume(f"cannot rebuild {v.describe()} after the graph")
            return self.const(obj)
        self._memo[id(v)] = name
        self._keep.append(v)
        return name

    def _storage_owner(self, v: Value) -> Value | None:
        """The object made in the frame whose dict/list contents ``v`` is (``d.update`` on a dict
        subclass instance is a method of the contents): rebuilt once, as that object."""
        if not isinstance(v, (DictValue, ListValue, TupleValue)):
            return None
        if self._owners is None:
            self._owners = {id(x.storage): x for x in reachable(frame_roots(self.frame)).values()
                            if isinstance(x, NewObjectValue) and x.storage is not None}
        return self._owners.get(id(v))

    def bind(self, obj: object, name: str) -> None:
        """``name`` is the runner's expression for ``obj`` (a value, or a real cell) from now on."""
        self._memo[id(obj)] = name

    def exit_holder(self) -> str:
        """A new ``ContextExit``, bound on the runner's first line (before anything can raise) and
        exited by its handler."""
        name = self.temp("exit")
        self.exit_decls.append(f"{name} = ContextExit()")
        self.exits.append(name)
        return name

    def cell(self, c: CellValue) -> str:
        """The cell object for ``c``: the frame's own closure cells are reused, cells made in the
        frame are made again (once) with their current contents."""
        name = self._memo.get(id(c))
        if name is not None:
            return name
        src = getattr(c.contents, "source", None)
        if c.external:
            if isinstance(src, ClosureSource):
                return f"closure[{src.index}]"
            if isinstance(src, AttrSource) and src.attr == "cell_contents":
                return self.load(src.base)
            raise CannotResume("a closure cell of a function outside the frame")
        if c.contents is None:
            name = self.assign("CellType()", "cell")
        else:
            name = self.assign(f"CellType({self.expr(c.contents)})", "cell")
        self._memo[id(c)] = name
        self._keep.append(c)
        return name

    # -- rendering -----------------------------------------------------------------------------------
    @property
    def runner_name(self) -> str:
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in self.code.co_name)
        return f"xcompile_runner_{name}"

    def render(self, body_tail: list[str], graph_call: str | None, side_effects: list[str]) -> str:
        params = ", ".join(self.params + (["closure"] if self.has_closure else []))
        fname = self.runner_name
        body = ([f"outs = {graph_call}"] if graph_call else []) + self.preload + side_effects + self.lines + body_tail
        if self.exits:
            handler = [f"    {e}(*sys.exc_info())" for e in reversed(self.exits)]
            body = (self.exit_decls + ["try:"] + ["    " + ln for ln in body]
                    + ["except BaseException:"] + handler + ["    raise"])
        return "\n".join([f"def {fname}({params}):"] + ["    " + ln for ln in body]) + "\n"

    def build(self, source_text: str) -> types.FunctionType:
        filename = f"<xcompile runner {self.code.co_name} {next(_counter)}>"
        exec(compile(source_text, filename, "exec"), self.ns)  # noqa: S102  (our own generated code)
        fn = self.ns[self.runner_name]
        fn.__xcompile_source__ = source_text
        linecache.cache[filename] = (len(source_text), None, source_text.splitlines(True), filename)
        weakref.finalize(fn, linecache.cache.pop, filename, None)   # the runner's entry was dropped
        return fn


# -- one maker per value class that is rebuilt (not reloaded) ------------------------------------------------
def _tuple(b: RunnerBuilder, v: TupleValue) -> str:
    items = [b.expr(i) for i in v.items]
    if v.cls is tuple:
        return b.assign("(" + "".join(f"{i}, " for i in items) + ")")
    if hasattr(v.cls, "_fields"):
        return b.assign(f"{b.const(v.cls)}({', '.join(items)})")
    return b.assign(f"{b.const(v.cls)}(({''.join(f'{i}, ' for i in items)}))")


def _list(b: RunnerBuilder, v: ListValue) -> str:
    return b.assign(f"[{', '.join(b.expr(i) for i in v.items)}]")


def _dict(b: RunnerBuilder, v: DictValue) -> str:
    items = "{" + ", ".join(f"{b.expr(k.value) if isinstance(k, ValueKey) else b.const(k)}: {b.expr(x)}"
                            for k, x in v.items.items()) + "}"
    cls = getattr(v, "cls", dict)
    if cls is dict:
        return b.assign(items)
    if v.default_factory is not None:                        # defaultdict
        return b.assign(f"{b.const(cls)}({b.expr(v.default_factory)}, {items})")
    return b.assign(f"{b.const(cls)}({items})")


def _set(b: RunnerBuilder, v: SetValue) -> str:
    return b.assign("{" + ", ".join(b.expr(i) for i in v.items) + "}" if v.items else "set()")


def _iterator(b: RunnerBuilder, v: IteratorValue) -> str:
    return b.assign(f"iter([{', '.join(b.expr(i) for i in v.items[v.pos:])}])")


def _dict_view(b: RunnerBuilder, v: DictViewValue) -> str:
    return b.assign(f"{b.expr(v.dict_value)}.{v.kind}()")


def _bound_method(b: RunnerBuilder, v: BoundMethodValue) -> str:
    return b.assign(f"MethodType({b.expr(v.func)}, {b.expr(v.self_value)})")


def _tensor_method(b: RunnerBuilder, v: TensorMethodValue) -> str:
    return b.assign(f"{b.expr(v.tensor)}.{v.name}")


def _object_method(b: RunnerBuilder, v: ObjectMethodValue) -> str:
    obj = b.expr(v.obj)
    # the builtin container's own method, bound to the object: the storage of a dict subclass is
    # the subclass instance, whose class may override the name (`super().get(k)` inside `get`)
    meth = getattr(v.obj.python_type(), v.name, None)
    if isinstance(meth, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return b.assign(f"{b.const(meth)}.__get__({obj})")
    return b.assign(f"getattr({obj}, {v.name!r})")


def _partial(b: RunnerBuilder, v: PartialValue) -> str:
    args = [b.expr(a) for a in v.args]
    kwargs = [f"{k}={b.expr(a)}" for k, a in v.kwargs.items()]
    return b.assign(f"partial({', '.join([b.expr(v.func)] + args + kwargs)})")


def _super(b: RunnerBuilder, v: SuperValue) -> str:
    return b.assign(f"super({b.const(v.cls)}, {b.expr(v.obj)})")


def _new_object_value(b: RunnerBuilder, v: NewObjectValue) -> str:
    if isinstance(v.storage, (ListValue, TupleValue)):       # a list / tuple subclass
        items = "[" + "".join(f"{b.expr(x)}, " for x in v.storage.items) + "]"
        if isinstance(v.storage, TupleValue):
            name = b.assign(f"tuple.__new__({b.const(v.cls)}, {items})")
            b.bind(v, name)
        else:
            name = b.assign(f"new_object({b.const(v.cls)}, {{}}, list)")
            b.bind(v, name)                         # items may refer back to the object
            b.emit(f"list.extend({name}, {items})")
        for k, x in v.attrs.items():
            b.emit(f"{name}.__dict__[{k!r}] = {b.expr(x)}")
        return name
    base = "" if v.storage is None else f", {b.const(v.storage.cls)}"
    name = b.assign(f"new_object({b.const(v.cls)}, {{}}{base})")
    b.bind(v, name)                             # attributes may refer back to the object
    if v.storage is not None:
        for k, x in v.storage.items.items():
            b.emit(f"{b.const(v.storage.cls)}.__setitem__({name}, {b.const(k)}, {b.expr(x)})")
    for k, x in v.attrs.items():
        b.emit(f"{name}.__dict__[{k!r}] = {b.expr(x)}")
    return name


def _nested_function(b: RunnerBuilder, v: NestedFunctionValue) -> str:
    fs = b.tx.frame_state
    g = "G" if getattr(v.frame_globals, "f_globals", None) is fs.f_globals else b.const(v.frame_globals.f_globals)
    defaults = "(" + "".join(f"{b.expr(d)}, " for d in v.defaults) + ")" if v.defaults else "None"
    closure = "(" + "".join(f"{b.cell(c)}, " for c in v.closure) + ")" if v.closure else "None"
    kwd = "{" + ", ".join(f"{k!r}: {b.expr(d)}" for k, d in v.kwdefaults.items()) + "}" if v.kwdefaults else "None"
    return b.assign(f"make_function({b.const(v.code)}, {g}, {defaults}, {closure}, {kwd})", "fn")


def _grad_mode(b: RunnerBuilder, v: GradModeValue) -> str:
    if v.prev is not None:                       # set_grad_enabled(b) switches when it is made
        return b.assign(f"torch.set_grad_enabled({v.enabled})", "ctx")
    return b.assign("torch.enable_grad()" if v.enabled else "torch.no_grad()", "ctx")


def _noop_context(b: RunnerBuilder, v: NoOpContextValue) -> str:
    return b.assign(b.const(contextlib.nullcontext) + "()", "ctx")


def _context_exit(b: RunnerBuilder, v: ContextExitValue) -> str:
    """An active `with` block: make its context again, enter it, and hand out ``__exit__``."""
    ctx = v.ctx
    if isinstance(ctx, UserContextValue):           # entered while tracing: its effects are replayed
        fn = b.expr(ctx.exit_fn)                    # already (side effects), so it is not re-entered
        name = b.exit_holder()
        b.emit(f"{name}.hold({fn})")
        return name
    if isinstance(ctx, (GeneratorContextValue, AutocastValue)):
        raise CannotResume(f"{ctx.describe()} is active at the break")
    if isinstance(ctx, GradModeValue) and ctx.exit_to is not None:
        # the mode it was entered in: the graph may have left an outer block since (its exit ran
        # in the graph, which leaves the real mode as it found it), and this block's __exit__
        # restores what is current when it is made / entered
        b.emit(f"torch._C._set_grad_enabled({ctx.exit_to})")
    if isinstance(ctx, GradModeValue) and ctx.prev is not None:
        # made without switching (its __init__ would switch before the exit is held); the
        # switch happens in __enter__, inside ContextExit.enter
        prev = ctx.exit_to if ctx.exit_to is not None else ctx.prev
        ctx_expr = b.assign(f"grad_ctx({ctx.enabled}, {prev})", "ctx")
    elif isinstance(ctx, (GradModeValue, NoOpContextValue)):
        ctx_expr = b.expr(ctx)
    else:
        obj = getattr(ctx, "obj", None)
        maker = _CONTEXT_REMAKERS.get(type(ctx))
        if maker is not None:
            ctx_expr = maker(b, ctx)
        elif obj is not None:
            ctx_expr = b.const(obj)
        else:
            raise CannotResume(f"cannot re-enter {ctx.describe()} after the graph")
    name = b.exit_holder()
    b.emit(f"{name}.enter({ctx_expr})")
    return name


# value class -> function(builder, value) -> expression
_MAKERS: dict[type, Callable[[RunnerBuilder, Any], str]] = {
    TupleValue: _tuple, ListValue: _list, DictValue: _dict, SetValue: _set, IteratorValue: _iterator,
    DictViewValue: _dict_view, BoundMethodValue: _bound_method, TensorMethodValue: _tensor_method,
    ObjectMethodValue: _object_method, PartialValue: _partial, SuperValue: _super,
    NewObjectValue: _new_object_value, NestedFunctionValue: _nested_function, GradModeValue: _grad_mode,
    NoOpContextValue: _noop_context, ContextExitValue: _context_exit,
}
# context value class -> function(builder, ctx) -> expression of a fresh context object
_CONTEXT_REMAKERS: dict[type, Any] = {}


def register_context_remaker(value_cls: type, remake) -> None:
    """How a runner makes a fresh context object for an active ``with`` block whose context is a
    ``value_cls`` value: ``remake(builder, ctx) -> expression``."""
    _CONTEXT_REMAKERS[value_cls] = remake


def register_value_maker(value_cls: type, make) -> None:
    """How the runner rebuilds a value of ``value_cls`` after the graph: ``make(builder, v)``
    (scalars.py: a captured scalar is a graph output)."""
    _MAKERS[value_cls] = make

__all__ = ["CannotResume", "RunnerBuilder", "register_context_remaker"]
