"""``xcompile.export``: one whole-program graph of a function, with the guards its trace made.

The seed API page's ``torch._dynamo.export(f, *args, aten_graph=False, decomposition_table=None,
tracing_mode='real', constraints=None, **kwargs) -> (graph, guards)``, built on the frontend
alone (no torch._dynamo): the frame of ``f`` is traced once with ``fullgraph=True``
(``graph_break.capture``, nothing runs), then the captured graph is rewritten to take ``f``'s own
arguments and return what ``f`` returns:

* every leaf of ``(args, kwargs)`` is a placeholder, and the exported ``GraphModule``'s
  ``forward`` has ``f``'s signature (``_PyTreeCodeGen`` flattens the call and rebuilds the result);
* graph inputs are matched to those leaves by identity (the same tensor passed twice is one
  input); other tensors the trace read (a module's parameters and buffers, globals) become
  attributes of the exported module;
* the output spec (``capture.OutputSpec``) becomes the result structure: graph outputs, constants
  and values handed back as they are (an input returned unchanged is its placeholder);
* ``aten_graph=True`` traces that graph again with ``make_fx`` (functionalized: in-place updates
  of inputs and buffers become a ``copy_`` back at the end), applying ``decomposition_table``.

Anything that keeps the frame from being one graph is an error: a graph break (``Unsupported``
with its reason, hint and user line), a mutation of Python state outside ``f`` or a change of the
grad mode it leaves behind (``ExportError``).
"""
from __future__ import annotations

import builtins
import copy
import inspect
import re
import types
import warnings
from typing import Any, Callable, NamedTuple

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError
from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo

from ._torch_compat import shape_env_hints
from .api_shapes import mark_dynamic
from .convert_frame import _user_hooks_deferred
from .frontend import graph_break
from .frontend.capture import CapturedGraph, FrameState
from .handlers import outside_compile
from .shape_state import DIM_RANGES, DYNAMIC_DIMS
from .warmup import prepare_frontend


class ExportError(RuntimeError):
    """``f`` cannot be exported as one graph for a reason other than a graph break."""


class ExportGuard(NamedTuple):
    """One guard of the trace: its kind (``TENSOR_MATCH``...), the source it reads (``L['x']``;
    empty for global state) and its text as the guard dump prints it."""

    kind: str
    name: str
    text: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"


class ExportResult(NamedTuple):
    """Unpacks as ``graph, guards``."""

    graph_module: torch.fx.GraphModule
    guards: list[ExportGuard]


def export(f: Callable, *args: Any, aten_graph: bool = False, pre_dispatch: bool = False,
           decomposition_table: dict | None = None, tracing_mode: str | None = None,
           constraints: list | None = None, dynamic_shapes: Any = None, same_signature: bool = True,
           **kwargs: Any):
    """Export ``f`` called with ``args``/``kwargs``: ``export(f, *args, **kwargs)`` returns an
    ``ExportResult``; ``export(f)`` returns a function taking the arguments (torch 2.x's form)."""
    if decomposition_table is not None or tracing_mode is not None:
        assert aten_graph, "Specifying a decomposition_table table or tracing mode is illegal without " \
                           "setting aten_graph=True"
    tracing_mode = tracing_mode or "real"
    if tracing_mode not in ("real", "fake", "symbolic"):
        raise ValueError(f"xcompile.export: tracing_mode must be 'real', 'fake' or 'symbolic', got {tracing_mode!r}")
    if not callable(f):
        raise TypeError(f"xcompile.export: expected a function or nn.Module, got {type(f).__name__}")
    options = dict(aten_graph=aten_graph, pre_dispatch=pre_dispatch, decomposition_table=decomposition_table,
                   tracing_mode=tracing_mode, constraints=constraints, dynamic_shapes=dynamic_shapes,
                   same_signature=same_signature)

    def inner(*call_args: Any, **call_kwargs: Any) -> ExportResult:
        return _export(f, call_args, call_kwargs, **options)

    if args or kwargs:
        return inner(*args, **kwargs)
    return inner


# -- the function and its frame ------------------------------------------------------------------------
def _target(f: Callable) -> Callable:
    """The Python function whose frame is traced (a module's ``forward``, bound)."""
    f = getattr(f, "_torchdynamo_orig_callable", f)
    if isinstance(f, torch.nn.Module):
        if f._forward_hooks or f._forward_pre_hooks or torch.nn.modules.module._global_forward_hooks \
                or torch.nn.modules.module._global_forward_pre_hooks:
            raise ExportError(f"export: {type(f).__name__} has forward hooks; export its forward without them")
        return f.forward
    while hasattr(f, "__wrapped__") and not isinstance(f, (types.FunctionType, types.MethodType)):
        f = f.__wrapped__                       # an xcompile-compiled function: its original
    if isinstance(f, (types.FunctionType, types.MethodType)):
        return f
    call = getattr(type(f), "__call__", None)
    if isinstance(call, types.FunctionType):
        return types.MethodType(call, f)
    raise ExportError(f"export: cannot trace {type(f).__name__} objects (not a Python function)")


def _frame(fn: Callable, args: tuple, kwargs: dict) -> tuple[FrameState, inspect.Signature]:
    func = fn.__func__ if isinstance(fn, types.MethodType) else fn
    sig = inspect.signature(fn)                          # the exported signature (a decorator's wrapped one)
    bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)    # the traced code's
    bound.apply_defaults()
    code = func.__code__
    locals_: dict[str, Any] = {}
    names = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount
                                  + bool(code.co_flags & inspect.CO_VARARGS)
                                  + bool(code.co_flags & inspect.CO_VARKEYWORDS)])
    if isinstance(fn, types.MethodType):
        locals_[names[0]] = fn.__self__
    locals_.update(bound.arguments)
    b = func.__globals__.get("__builtins__", builtins)
    return FrameState(code, locals_, func.__globals__, b if isinstance(b, dict) else b.__dict__,
                      func.__closure__), sig


def _capture(fs: FrameState) -> CapturedGraph:
    prepare_frontend()
    with outside_compile(), _user_hooks_deferred():
        result = graph_break.capture(fs, fullgraph=True)
    if not isinstance(result, graph_break.WholeFrame):      # (fullgraph=True raises on a break)
        raise ExportError(f"export: {fs.code.co_name} did not trace to one graph ({type(result).__name__})")
    captured = result.captured
    lasting = _lasting_effects(captured, fs)
    if lasting:
        raise ExportError(f"export: {fs.code.co_name} changes Python state outside the graph "
                          f"({'; '.join(lasting)}). An exported graph holds tensor computation only: move the "
                          "mutation out of the function or return the values instead.")
    if captured.grad_mode_after is not None:
        raise ExportError(f"export: {fs.code.co_name} leaves grad mode "
                          f"{'enabled' if captured.grad_mode_after else 'disabled'} (torch.set_grad_enabled "
                          "called outside a `with`); use it as a context manager inside the function")
    return captured


_MISSING = object()


def _lasting_effects(captured: CapturedGraph, fs: FrameState) -> list[str]:
    """The side effects of the trace an exported graph would lose, described. Not lost: changes
    to the frame's own ``*args``/``**kwargs`` (made per call) and attribute or global stores that
    put back the value already there (a library's ``state.flag = True ... state.flag = False``)."""
    plan = captured.side_effects
    if plan is None or not plan.steps:
        return []
    code = fs.code
    star = {code.co_varnames[code.co_argcount + code.co_kwonlyargcount + i]
            for i in range(bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS))}
    frame = (fs.f_locals, fs.f_globals, fs.f_builtins, fs.closure)

    def target(spec: Any) -> tuple[Any, Any]:
        if spec[0] != "slot":
            return None, _MISSING
        src = captured.passthrough_sources[spec[1]]
        return src, src.fetch(*frame)

    def same(now: Any, spec: Any) -> bool:
        if spec is None:
            return now is _MISSING
        return spec[0] == "const" and (now is spec[1] or (type(now) is type(spec[1]) and now == spec[1]))

    lasting = []
    for step, text in zip(plan.steps, plan.described or [""] * len(plan.steps)):
        src, obj = target(getattr(step, "target", ("?",)))
        if src is not None and _root_local(src) in star:
            continue
        if step[0] == "attrs" and obj is not _MISSING and \
                all(same(getattr(obj, n, _MISSING), p) for n, p in step.attrs):
            continue
        if step[0] == "global" and same(step.globals.get(step.name, _MISSING), step.value):
            continue
        lasting.append(text or step[0])
    return lasting


def _python_result(captured: CapturedGraph, fs: FrameState, outs: list, passed: Callable) -> Any:
    """The result only Python builds (objects made in the frame: a ModelOutput...), with the
    graph's output nodes in place of tensors and placeholders in place of the arguments it holds
    (``passed``); rebuilt by pytree when it knows the class."""
    plan = captured.side_effects
    objects = [passed(src) for src in captured.passthrough_sources[:plan.n_objects]]
    only_result = copy.copy(plan)
    only_result.steps = []
    return only_result.apply(outs, objects)


# -- the exported graph ----------------------------------------------------------------------------------
def _export(f, args, kwargs, *, aten_graph, pre_dispatch, decomposition_table, tracing_mode, constraints,
            dynamic_shapes, same_signature) -> ExportResult:
    fn = _target(f)
    _mark_dynamic(fn, args, kwargs, constraints, dynamic_shapes)
    fs, sig = _frame(fn, args, kwargs)
    captured = _capture(fs)
    _check_constraints(captured)
    flat_args, in_spec = pytree.tree_flatten((args, kwargs))
    self_name = fs.code.co_varnames[0] if isinstance(fn, types.MethodType) else None
    gm = _flatten_signature(captured, fs, flat_args, self_name)
    if aten_graph:
        gm = _to_aten(gm, flat_args, decomposition_table, tracing_mode, pre_dispatch)
    out_spec = gm.meta.pop("xcompile_out_spec")
    if same_signature:
        gm.graph._codegen = _PyTreeCodeGen(_PyTreeInfo(_argument_names(sig, args, kwargs), in_spec, out_spec))
    else:
        gm.graph._codegen = _PyTreeCodeGen(_PyTreeInfo([f"arg{i}" for i in range(len(flat_args))],
                                                       pytree.tree_flatten(tuple(flat_args))[1], out_spec))
    gm.recompile()
    return ExportResult(gm, _guards(captured))


def _holds_node(x: Any, depth: int = 4) -> bool:
    if isinstance(x, torch.fx.Node):
        return True
    if depth == 0:
        return False
    if isinstance(x, (list, tuple, set, frozenset)):
        return any(_holds_node(i, depth - 1) for i in x)
    if isinstance(x, dict):
        return any(_holds_node(i, depth - 1) for i in x.values())
    d = getattr(x, "__dict__", None)
    return isinstance(d, dict) and any(_holds_node(i, depth - 1) for i in d.values())


def _root_local(source: Any) -> str | None:
    """The local variable a source starts from (None for globals, closures...)."""
    while hasattr(source, "base"):
        source = source.base
    return getattr(source, "local_name", None)


def _flatten_signature(captured: CapturedGraph, fs: FrameState, flat_args: list,
                       self_name: str | None = None) -> torch.fx.GraphModule:
    """The captured graph rewritten to take the flat leaves of the call's arguments and return
    the flat leaves of ``f``'s result (the spec is kept in ``meta``)."""
    g = torch.fx.Graph()
    leaves = [g.placeholder(f"arg{i}") for i in range(len(flat_args))]
    by_id: dict[int, int] = {}
    for i, a in enumerate(flat_args):
        by_id.setdefault(id(a), i)                   # the same object twice: its first leaf
    root = torch.nn.Module()
    for name, p in captured.gm.named_parameters(remove_duplicate=False):
        _set_attr(root, name, p)
    for name, b in captured.gm.named_buffers(remove_duplicate=False):
        _set_attr(root, name, b)
    for name, value in vars(captured.gm).items():     # constants held as plain attributes
        if isinstance(value, torch.Tensor) and not hasattr(root, name):
            _set_attr(root, name, value)

    def constant(value: Any, hint: str) -> Any:
        if isinstance(value, torch.Tensor):
            name = _free_name(root, hint)
            if isinstance(value, torch.nn.Parameter):
                root.register_parameter(name, value)
            else:
                root.register_buffer(name, value)
            return g.get_attr(name)
        return value

    def constant_attr(value: Any) -> Any:
        """Any other constant result (a dtype, a tensor, an object) as an attribute of the module:
        the generated code cannot spell every value."""
        if isinstance(value, torch.Tensor):
            return constant(value, "constant")
        name = _free_name(root, f"constant_{type(value).__name__.lower()}")
        setattr(root, name, value)
        return g.get_attr(name)

    classes = {n.meta["tensor_class"].__name__ for n in captured.gm.graph.nodes if n.meta.get("tensor_class")}
    if classes:
        raise ExportError(f"export: {fs.code.co_name} takes or returns tensor subclass instances "
                          f"({', '.join(sorted(classes))}); export works on plain tensors (pass .as_subclass("
                          "torch.Tensor) and convert the results outside)")
    env: dict[torch.fx.Node, Any] = {}
    placeholders = [n for n in captured.gm.graph.nodes if n.op == "placeholder"]
    for node, source, example in zip(placeholders, captured.input_sources, captured.example_inputs):
        k = by_id.get(id(example))
        if k is not None:
            env[node] = leaves[k]
        elif isinstance(example, torch.Tensor):
            root_name = _root_local(source)
            if root_name is not None and root_name != self_name:
                # a tensor inside an argument pytree cannot flatten (an object's attribute): as a
                # constant the exported graph would keep this call's value; torch raises too
                raise ExportError(f"export: the graph reads tensor {source.name()}, which is inside an "
                                  "argument but not a leaf of its pytree (an attribute of an object). Pass "
                                  "the tensor as an argument, or in a list, tuple or dict.")
            env[node] = constant(example, _identifier(source.name()))
        else:
            raise ExportError(f"export: the graph reads {source.name()} = {example!r}, which is not an "
                              "argument of the function (a size or number from outside it)")
    outs = g.graph_copy(captured.gm.graph, env)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]

    def passed(src: Any) -> Any:
        """A value from outside the frame handed back as it is: an argument's placeholder, else a
        constant (a global...)."""
        value = src.fetch(fs.f_locals, fs.f_globals, fs.f_builtins, fs.closure)
        i = by_id.get(id(value))
        return leaves[i] if i is not None else constant(value, _identifier(src.name()))

    def build(spec: Any) -> Any:
        kind = spec[0]
        if kind == "out":
            if spec[1] == len(outs) and captured.side_effects is not None and captured.side_effects.result is not None:
                return _python_result(captured, fs, outs, passed)
            return outs[spec[1]]
        if kind == "const":
            if type(spec[1]) is torch.Size:            # (the code printer would write a tuple)
                return g.call_function(torch.Size, (list(spec[1]),))
            return constant(spec[1], "constant")
        if kind == "source":
            return passed(captured.passthrough_sources[spec[1]])
        if kind in ("tuple", "list"):
            items = [build(p) for p in spec[1]]
            return tuple(items) if kind == "tuple" else items
        if kind == "dict":
            return dict(zip(spec[1], [build(p) for p in spec[2]]))
        if kind == "namedtuple":
            parts = [build(p) for p in spec[2]]
            cls = spec[1]
            if cls is torch.Size:                      # (sizes read in the graph: a node builds it)
                return g.call_function(torch.Size, (parts,))
            return cls(parts) if hasattr(cls, "n_sequence_fields") else cls(*parts)   # (a structseq)
        raise ExportError(f"export: cannot rebuild a result of kind {kind!r}")

    result = build(captured.output)
    out_leaves, out_spec = pytree.tree_flatten(result)
    for i, leaf in enumerate(out_leaves):
        if isinstance(leaf, torch.fx.Node) or leaf is None or type(leaf) in (int, float, bool, str):
            continue
        if _holds_node(leaf):
            raise ExportError(f"export: {fs.code.co_name} returns a {type(leaf).__qualname__} holding tensors, "
                              "which pytree cannot flatten. Register the class with "
                              "torch.utils._pytree.register_pytree_node, or return a tuple, list or dict.")
        out_leaves[i] = constant_attr(leaf)
    g.output(tuple(out_leaves))      # (no dead-code pass: it would drop in-place updates)
    gm = torch.fx.GraphModule(root, g)
    gm.meta["xcompile_out_spec"] = out_spec
    return gm


def _to_aten(gm: torch.fx.GraphModule, flat_args: list, decompositions: dict | None, tracing_mode: str,
             pre_dispatch: bool) -> torch.fx.GraphModule:
    """``gm`` traced to ATen ops (functionalized; input mutations copied back at the end)."""
    out_spec = gm.meta.pop("xcompile_out_spec")
    # parameters and buffers are traced as inputs (so an update of a buffer is functionalized
    # like one of an argument), then put back as attributes of the traced module
    state = {**dict(gm.named_parameters(remove_duplicate=False)), **dict(gm.named_buffers(remove_duplicate=False))}
    names = list(state)

    def run(state_values, *flat):
        return tuple(torch.func.functional_call(gm, dict(zip(names, state_values)), flat, tie_weights=False))

    mode: Any = "fake" if tracing_mode == "real" else tracing_mode   # ("real" would run it, mutating inputs)
    traced = make_fx(torch.func.functionalize(run, remove="mutations"),
                     decomposition_table=decompositions, tracing_mode=mode, pre_dispatch=pre_dispatch,
                     _allow_non_fake_inputs=True)(list(state.values()), *flat_args)
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == len(names) + len(flat_args), (len(placeholders), len(names), len(flat_args))
    root = torch.nn.Module()
    for name, value in state.items():
        _set_attr(root, name, value)
    for node, name in zip(placeholders, names):
        with traced.graph.inserting_before(node), warnings.catch_warnings():
            warnings.simplefilter("ignore")          # (the attribute is on the new root, below)
            attr = traced.graph.get_attr(name)
        node.replace_all_uses_with(attr)
        traced.graph.erase_node(node)
    for node in list(traced.graph.nodes):          # make_fx's own constants (tensors it met)
        if node.op == "get_attr" and not hasattr(root, node.target):
            setattr(root, node.target, getattr(traced, node.target))
    out = torch.fx.GraphModule(root, traced.graph)
    out.meta["xcompile_out_spec"] = out_spec
    return out


# -- pieces --------------------------------------------------------------------------------------------------
def _argument_names(sig: inspect.Signature, args: tuple, kwargs: dict) -> list[str]:
    """One name per top-level argument of the call, as torch's export names them: positional
    parameters by name, extra positionals ``{varargs}_{i}``, then the keyword arguments' keys."""
    params = list(sig.parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    names = positional[:len(args)]
    names += [f"{varargs}_{i}" for i in range(len(args) - len(names))]
    return names + list(kwargs)


def _mark_dynamic(fn: Callable, args: tuple, kwargs: dict, constraints: list | None, dynamic_shapes: Any) -> None:
    """``constraints`` as ``(tensor, dim)`` pairs, ``dynamic_shapes`` as torch.export takes it (a
    dict by argument name or a tuple by position, of ``{dim: anything}`` or ``[dims]``): those dims
    are marked dynamic before the trace, so they stay symbolic in the exported graph."""
    for c in constraints or ():
        t, dim = (c.t, c.dim) if hasattr(c, "dim") and hasattr(c, "t") else c
        mark_dynamic(t, dim)
    if dynamic_shapes is None:
        return
    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs).arguments
    if isinstance(dynamic_shapes, dict):
        pairs = [(bound[k], v) for k, v in dynamic_shapes.items() if k in bound]
    else:
        pairs = list(zip(list(args) + list(kwargs.values()), dynamic_shapes))

    def mark(value: Any, spec: Any) -> None:
        if spec is None:
            return
        if isinstance(value, torch.Tensor):
            dims = list(spec) if isinstance(spec, (dict, list, tuple)) else []
            for d in dims:
                mark_dynamic(value, d)
            return
        if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
            for v, s in zip(value, spec):
                mark(v, s)
        elif isinstance(value, dict) and isinstance(spec, dict):
            for k, s in spec.items():
                if k in value:
                    mark(value[k], s)

    for value, spec in pairs:
        mark(value, spec)


def _check_constraints(captured: CapturedGraph) -> None:
    """A dim marked dynamic must stay free over its whole range: the seed page's rule that a
    partially constrained dim (the trace assumed it even, or not 3...) is an export error, with
    the relation that constrains it. (A dim specialized to one value already raised in the trace.)"""
    placeholders = [n for n in captured.gm.graph.nodes if n.op == "placeholder"]
    for node, source, example in zip(placeholders, captured.input_sources, captured.example_inputs):
        fake = node.meta.get("example_value")
        marked = getattr(example, DYNAMIC_DIMS, None) if isinstance(example, torch.Tensor) else None
        if not marked or not isinstance(fake, torch.Tensor):
            continue
        ranges = getattr(example, DIM_RANGES, None) or {}
        for d in sorted(marked):
            size = fake.size(d)
            if not isinstance(size, torch.SymInt) or not isinstance(size.node.expr, sympy.Symbol):
                continue
            sym, env = size.node.expr, size.node.shape_env
            lo, hi = ranges.get(d, (None, None))
            values = [v for v in [*range(2, 66), 127, 128, 1000, 1001, 4096, 4099]
                      if (lo is None or v >= lo) and (hi is None or v <= hi)]
            others = {k: v for k, v in shape_env_hints(env).items() if k != sym}
            for guard in env.guards:
                expr = guard.expr
                if sym not in expr.free_symbols:
                    continue
                bad = [v for v in values if expr.xreplace({**others, sym: sympy.Integer(v)}) is sympy.false]
                if bad:
                    name = f"{source.name()}.size()[{d}]"
                    raise ConstraintViolationError(
                        f"Constraints violated ({name})! Not all values of {name} in its range satisfy the "
                        f"generated guard {expr} ({sym} = {name}; it fails for {bad[:4]}).\nHint: the traced "
                        "code constrains this dimension; drop it from dynamic_shapes/constraints, or change "
                        "the code so that it holds for every size.")


def _guards(captured: CapturedGraph) -> list[ExportGuard]:
    out = []
    for line in str(captured.guards).splitlines():
        kind, _, text = line.partition(": ")
        if not text:
            continue
        name = text.split(" ", 1)[0] if text[:2] in ("L[", "G[") or text.startswith("___") else ""
        out.append(ExportGuard(kind.strip(), name, text))
    return out


def _identifier(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_") or "constant"


def _free_name(root: torch.nn.Module, hint: str) -> str:
    name, i = hint, 0
    while hasattr(root, name):
        i += 1
        name = f"{hint}_{i}"
    return name


def _set_attr(root: torch.nn.Module, dotted: str, value: torch.Tensor) -> None:
    *path, last = dotted.split(".")
    mod = root
    for p in path:
        if not hasattr(mod, p):
            mod.add_module(p, torch.nn.Module())
        mod = getattr(mod, p)
    if isinstance(value, torch.nn.Parameter):
        mod.register_parameter(last, value)
    else:
        mod.register_buffer(last, value)
