"""torch.func transforms called inside compiled code, traced into the same graph (issue #12).

    torch.func.grad(f, argnums=0, has_aux=False)    -> FuncTransformValue (nothing runs yet)
    FuncTransformValue(*args, **kwargs)            -> f traced on stand-ins into a body
                                                      (func_regions.trace_body), one graph node
                                                      calling the real transform on it (emit)
    torch.func.vjp(f, *primals) / jvp(f, primals, tangents): traced at once; vjp's vjp_fn is a
                                                      VjpFnValue whose call is another node
    torch.func.functional_call(module, params, args): the module traced with the given tensors in
                                                      place of its parameters and buffers

Transforms: vmap (in_dims, out_dims, nested), grad, grad_and_value, vjp, jvp, jacrev, jacfwd,
hessian; their options must be constants. ``config.capture_func_transforms = False`` keeps them
graph breaks (the call runs eagerly). What the interpreter cannot keep right is a graph break
naming it: side effects inside the transformed function, in-place ops on its inputs, metadata
its wrapped tensors answer otherwise (``requires_grad``), ``linearize``. The trace never runs a
transform at trace time except on fake tensors inside the graph builder (functorch cleans its
levels up when that raises).
"""
from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.func

from .. import config
from ..guards.sources import AttrSource, ItemSource
from . import func_regions, hub, marks, rules, tracing_rules
from .calls import register_caller
from .exc import Unsupported
from .func_regions import leaves, map_leaves, stand_in
from .values import (
    ConstantValue,
    DictValue,
    ListValue,
    ModuleValue,
    TensorValue,
    TupleValue,
    Value,
    real_object,
    register_real_object_field,
)

if TYPE_CHECKING:
    from .tracer import Tracer

# transforms that take a function and return the transformed function
_WRAPPERS = ("vmap", "grad", "grad_and_value", "jacrev", "jacfwd", "hessian")
# transforms that differentiate with respect to their ``argnums`` arguments
_ARGNUMS = ("grad", "grad_and_value", "jacrev", "jacfwd", "hessian")


def _knob_off(obj: Any) -> Unsupported:
    reason = rules.FORBIDDEN.get(obj) or "calling a function made by a function transform (torch.func / torch.vmap)"
    return Unsupported(reason, "Set xcompile.config.capture_func_transforms = True to trace it, or call it "
                       "outside the compiled region.")


@dataclass(eq=False)
class FuncTransformValue(Value):
    """``torch.func.<name>(fn, **options)``: called, ``fn`` is traced into the graph."""

    name: str
    transform: Any
    fn: Value
    options: dict[str, Any] = field(default_factory=dict)
    source: Any = None
    covered: bool = False

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"torch.func.{self.name}({self.fn.describe()})"

    @property
    def real(self) -> Any:
        """The real transformed function (for allow_in_graph), when ``fn`` has a real object."""
        fn = real_object(self.fn)
        return None if fn is None or not callable(fn) else self.transform(fn, **self.options)


@dataclass(eq=False)
class VjpFnValue(Value):
    """The ``vjp_fn`` of a traced ``torch.func.vjp``: calling it adds the backward node."""

    body: func_regions.Body
    primals: list[Value]
    options: dict[str, Any]

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"vjp_fn of {self.body.what}"


def _constants(what: str, bound: dict[str, Value]) -> dict[str, Any]:
    out = {}
    for k, v in bound.items():
        ok, c = hub.as_constant(v)
        if not ok:
            raise Unsupported(f"{what} with a non-constant {k}=", "Pass Python constants as the transform's options.")
        out[k] = c
    return out


def _bind(obj: Any, args: list[Value], kwargs: dict[str, Value]) -> dict[str, Any]:
    try:
        return dict(inspect.signature(obj).bind(*args, **kwargs).arguments)
    except TypeError as e:
        raise Unsupported(f"torch.func.{obj.__name__} called with arguments it does not take ({e})",
                          "The call runs eagerly (and raises there as in eager).") from e


# -- torch.func.<transform>(fn, ...) ----------------------------------------------------------------------
def _make_transform(tx: "Tracer", obj: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if not config.capture_func_transforms:
        raise _knob_off(obj)
    name = obj.__name__
    bound = _bind(obj, args, kwargs)
    fn = bound.pop("func")
    if name == "vjp":
        primals = list(bound.pop("primals", ()))
        return _vjp(tx, obj, fn, primals, _constants("torch.func.vjp", bound))
    if name == "jvp":
        primals, tangents = bound.pop("primals"), bound.pop("tangents")
        return _jvp(tx, obj, fn, primals, tangents, _constants("torch.func.jvp", bound))
    if name not in _WRAPPERS:
        raise Unsupported(f"torch.func.{name} inside a compiled region is not traced",
                          "It runs eagerly; call it outside the compiled region to avoid the graph break.")
    return FuncTransformValue(name, obj, fn, _constants(f"torch.func.{name}", bound))


def _vmap_dims(tx: "Tracer", v: FuncTransformValue, args: list[Value]) -> list[Any]:
    """One in_dim per argument (a pytree matching it), as vmap reads ``in_dims``."""
    in_dims = v.options.get("in_dims", 0)
    if isinstance(in_dims, (int, type(None))):
        return [in_dims] * len(args)
    if not isinstance(in_dims, (tuple, list)) or len(in_dims) != len(args):
        raise Unsupported(f"{v.describe()}: in_dims {in_dims!r} does not match {len(args)} arguments",
                          "The call runs eagerly (and raises there as in eager).")
    return list(in_dims)


def _per_sample(tx: "Tracer", v: Value, dims: Any, what: str) -> Value:
    """``v`` with a stand-in for each tensor leaf (its vmap dim ``dims`` dropped)."""
    v = tx.resolve(v)
    if isinstance(dims, (int, type(None))):
        return map_leaves(tx, v, lambda x: stand_in(tx, x, dims) if isinstance(x, TensorValue) else x)
    if isinstance(dims, (tuple, list)) and isinstance(v, (TupleValue, ListValue)) and len(dims) == len(v.items):
        items = [_per_sample(tx, i, d, what) for i, d in zip(v.items, dims)]
        return TupleValue(items, cls=v.cls) if isinstance(v, TupleValue) else ListValue(items)
    if isinstance(dims, dict) and isinstance(v, DictValue) and dims.keys() == v.items.keys():
        return DictValue({k: _per_sample(tx, i, dims[k], what) for k, i in v.items.items()}, cls=v.cls)
    raise Unsupported(f"{what}: in_dims {dims!r} does not match the argument's structure",
                      "The call runs eagerly (and raises there as in eager).")


def _same(tx: "Tracer", v: Value) -> Value:
    return map_leaves(tx, v, lambda x: stand_in(tx, x, None) if isinstance(x, TensorValue) else x)


def _call_transformed(tx: "Tracer", v: FuncTransformValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    what = v.describe()
    before = set(tx.gb.graph.nodes)
    if v.name == "vmap":
        dims = _vmap_dims(tx, v, args)
        s_args = [_per_sample(tx, a, d, what) for a, d in zip(args, dims)]
    else:
        s_args = [_same(tx, a) for a in args]
    s_kwargs = {k: _same(tx, a) for k, a in kwargs.items()}
    body = func_regions.trace_body(tx, v.fn, s_args, s_kwargs, what, before)
    transform, options = v.transform, dict(v.options)

    def apply(fn, *a, **k):
        return transform(fn, **options)(*a, **k)

    return func_regions.emit(tx, body, apply, args, kwargs, f"func_{v.name}_{_fn_name(v.fn)}")


def _fn_name(v: Value) -> str:
    if isinstance(v, FuncTransformValue):
        return f"{v.name}_{_fn_name(v.fn)}"
    real = real_object(v)
    code = getattr(v, "code", None)
    return getattr(real, "__name__", None) or getattr(code, "co_name", None) or type(v).__name__


# -- vjp / jvp: traced at once ----------------------------------------------------------------------------
def _vjp(tx: "Tracer", obj: Any, fn: Value, primals: list[Value], options: dict[str, Any]) -> Value:
    what = f"torch.func.vjp({fn.describe()})"
    before = set(tx.gb.graph.nodes)
    body = func_regions.trace_body(tx, fn, [_same(tx, p) for p in primals], {}, what, before)
    has_aux = bool(options.get("has_aux", False))

    def forward(f, *p):
        r = torch.func.vjp(f, *p, **options)
        return (r[0], r[2]) if has_aux else r[0]

    out = func_regions.emit(tx, body, forward, primals, {}, f"func_vjp_{_fn_name(fn)}")
    vjp_fn = VjpFnValue(body, primals, options)
    if has_aux:
        assert isinstance(out, TupleValue)
        return TupleValue([out.items[0], vjp_fn, out.items[1]])
    return TupleValue([out, vjp_fn])


def _call_vjp_fn(tx: "Tracer", v: VjpFnValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if kwargs:
        raise Unsupported(f"calling {v.describe()} with keyword arguments")
    options = v.options

    def backward(f, primals, cotangents):
        return torch.func.vjp(f, *primals, **options)[1](*cotangents)

    return func_regions.emit(tx, v.body, backward, [TupleValue(list(v.primals)), TupleValue(list(args))], {},
                             "func_vjp_fn")


def _jvp(tx: "Tracer", obj: Any, fn: Value, primals: Value, tangents: Value, options: dict[str, Any]) -> Value:
    what = f"torch.func.jvp({fn.describe()})"
    primals, tangents = tx.resolve(primals), tx.resolve(tangents)
    if not isinstance(primals, TupleValue) or not isinstance(tangents, TupleValue):
        raise Unsupported(f"{what} with primals or tangents that are not tuples",
                          "The call runs eagerly (and raises there as in eager).")
    before = set(tx.gb.graph.nodes)
    body = func_regions.trace_body(tx, fn, [_same(tx, p) for p in primals.items], {}, what, before)

    def apply(f, p, t):
        return torch.func.jvp(f, p, t, **options)

    return func_regions.emit(tx, body, apply, [primals, tangents], {}, f"func_jvp_{_fn_name(fn)}")


# -- torch.func.functional_call ---------------------------------------------------------------------------
def _functional_call(tx: "Tracer", obj: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    if not config.capture_func_transforms:
        raise _knob_off(obj)
    bound = _bind(obj, args, kwargs)
    module_v = tx.resolve(bound["module"])
    if not isinstance(module_v, ModuleValue):
        raise Unsupported(f"torch.func.functional_call of {module_v.describe()} (not an nn.Module)")
    m = module_v.module
    opts = _constants("torch.func.functional_call", {k: bound[k] for k in ("tie_weights", "strict") if k in bound})
    dicts = tx.resolve(bound["parameter_and_buffer_dicts"])
    given: dict[str, Value] = {}
    for d in (dicts.items if isinstance(dicts, (TupleValue, ListValue)) else [dicts]):
        d = tx.resolve(d)
        if not isinstance(d, DictValue):
            raise Unsupported("torch.func.functional_call with parameters that are not a dict")
        for k, t in d.items.items():
            if k in given:
                raise Unsupported(f"torch.func.functional_call: {k!r} is given twice",
                                  "The call runs eagerly (and raises there as in eager).")
            given[k] = tx.resolve(t)
    named: dict[str, torch.Tensor] = dict(m.named_parameters(remove_duplicate=False))
    named.update(m.named_buffers(remove_duplicate=False))
    swap: dict[int, TensorValue] = {}
    for k, t in given.items():
        real = named.get(k)
        if real is None or not isinstance(t, TensorValue):
            raise Unsupported(f"torch.func.functional_call: {k!r} is not a tensor for a parameter or buffer "
                              f"of {type(m).__name__}", "The call runs eagerly.")
        if t.fake.shape != real.shape or t.fake.dtype != real.dtype or t.fake.device != real.device:
            raise Unsupported(f"torch.func.functional_call: {k!r} has another shape, dtype or device than the "
                              "module's own tensor", "The call runs eagerly.")
        if id(real) in swap and swap[id(real)] is not t:
            raise Unsupported(f"torch.func.functional_call: tied tensors given different values ({k!r})",
                              "The call runs eagerly (and raises there as in eager).")
        swap[id(real)] = t
    if opts.get("strict", False) and set(given) != set(named):
        raise Unsupported("torch.func.functional_call(strict=True) without exactly the module's parameters "
                          "and buffers", "The call runs eagerly (and raises there as in eager).")
    if opts.get("tie_weights", True) is False:
        for k, real in named.items():
            if id(real) in swap and k not in given:
                raise Unsupported("torch.func.functional_call(tie_weights=False) of a module with tied tensors")
    call_args = tx.resolve(bound.get("args", ConstantValue(None)))
    if isinstance(call_args, TupleValue):
        pos = list(call_args.items)
    elif isinstance(call_args, ConstantValue) and call_args.value is None:
        pos = []
    else:
        pos = [call_args]
    call_kwargs = tx.resolve(bound.get("kwargs", ConstantValue(None)))
    named_args = dict(call_kwargs.items) if isinstance(call_kwargs, DictValue) else {}
    by_id = tx.gb.by_id
    saved = {i: by_id.get(i) for i in swap}
    by_id.update(swap)            # the module's reads of these tensors find the given values
    try:
        return hub.call_value(tx, module_v, pos, named_args)
    finally:
        for i, old in saved.items():
            if old is None:
                by_id.pop(i, None)
            else:
                by_id[i] = old


def _call_functional_call_rule(tx: "Tracer", obj: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    return _functional_call(tx, obj, args, kwargs)


# -- a transformed function made outside the compiled code ------------------------------------------------
def _probe(x):
    return x


# the code of the function each transform returns (hessian returns jacfwd's)
_WRAPPER_CODES = {getattr(torch.func, n)(_probe).__code__: n for n in _WRAPPERS if n != "hessian"}


def _outside_transformed(tx: "Tracer", fn: types.FunctionType, source, covered: bool) -> Value | None:
    """``g = torch.func.grad(f)`` made outside, called inside: the same value as made inside,
    read from the wrapper's closure (guarded: its code, ``f`` and the options)."""
    name = _WRAPPER_CODES.get(fn.__code__)
    if name is None or not config.capture_func_transforms or fn.__closure__ is None:
        return None
    if source is not None and not covered:
        tx.guards.object_type(source, fn)
        tx.guards.identity(AttrSource(source, "__code__"), fn.__code__)
    parts: dict[str, Value] = {}
    for i, (var, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__)):
        if var == "eager_transforms":
            continue
        src = AttrSource(ItemSource(AttrSource(source, "__closure__"), i), "cell_contents") \
            if source is not None else None
        parts[var] = tx.wrap(cell.cell_contents, src, covered)
    return FuncTransformValue(name, getattr(torch.func, name), parts.pop("func"),
                              _constants(f"torch.func.{name}", parts))


def _chain_function_row() -> None:
    """Ahead of the row tracing_rules keeps for functions (closures made elsewhere)."""
    after = tracing_rules.SPECIAL_TYPES.get(types.FunctionType)

    def row(tx: "Tracer", fn: Any, source, covered: bool) -> Value | None:
        v = _outside_transformed(tx, fn, source, covered)
        if v is None and after is not None:
            return after(tx, fn, source, covered)
        return v

    tracing_rules.SPECIAL_TYPES[types.FunctionType] = row


# -- registration -------------------------------------------------------------------------------------------
_TRANSFORMS = ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize")


def _register() -> None:
    tracing_rules.RULE_CALLS["func_transform"] = _make_transform
    tracing_rules.RULE_CALLS["functional_call"] = _call_functional_call_rule
    for name in _TRANSFORMS:
        for mod in (torch, torch.func):
            fn = getattr(mod, name, None)
            if callable(fn) and marks.rule_of(fn) is None:
                marks.mark(fn, "func_transform")
    marks.mark(torch.func.functional_call, "functional_call")
    register_caller(FuncTransformValue, _call_transformed)
    register_caller(VjpFnValue, _call_vjp_fn)
    register_real_object_field(FuncTransformValue, "real")
    _chain_function_row()


_register()

__all__ = ["FuncTransformValue", "VjpFnValue", "leaves"]
