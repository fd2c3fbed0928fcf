"""Captured scalars: ``Tensor.item()`` / ``.tolist()`` as graph ops (``config.capture_scalar_outputs``).

With the knob on, ``t.item()`` is a ``call_method item`` node whose trace-time value is an
unbacked ``SymInt`` / ``SymFloat`` / ``SymBool`` from the GraphBuilder's ``ShapeEnv``
(tensor inputs keep their static shapes).  The value is a ``SymScalarValue``:

    flows into tensor ops          x * s, torch.add(x, s), torch.full_like(x, s)  (graph arguments)
    Python arithmetic on it        s * 2 + 1, -s, s > 0, abs(s), max(s, t), int(s), math.sqrt(s)
                                   -> operator / torch.sym_* nodes, values still symbolic
    sizes a tensor                 torch.zeros(s), torch.arange(s), x[:s]: the result's size is
                                   the unbacked symbol (as torch.compile keeps it)
    leaves the graph               returned, or live at a graph break: a graph output (a Python
                                   number at run time, as eager gives)

Anything that needs the concrete number at trace time is Unsupported (a graph break after
the captured prefix): ``if s > 0``, ``range(s)``, iterating over a tensor sized by it,
formatting it.  Sizes of data-dependent ops (``nonzero``, ``x[mask]``, ``unique``; the knob
``config.capture_dynamic_output_shape_ops``) are unbacked symbols of the same kind.

``.tolist()`` is captured for integer tensors only, as torch does: one ``item()`` per element
of ``t[i]...``; other dtypes are a graph break.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols
from torch.utils._pytree import tree_leaves

from .. import config
from ..guards.sources import Source
from . import codegen, hub
from .exc import Unsupported
from .values import ConstantValue, ListValue, TensorValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PY_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}
_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)
# .tolist() makes one graph node per element; past this many it is a graph break instead.
TOLIST_MAX_ELEMENTS = 1024

_HINT = ("The value of a captured scalar (Tensor.item()) is only known when the graph runs. "
         "Compute with it using tensor ops, or accept the graph break here.")


@dataclass(eq=False)
class SymScalarValue(Value):
    """A Python number produced inside the graph (``item()`` and arithmetic on it)."""

    node: torch.fx.Node
    sym: Any                                  # torch.SymInt | torch.SymFloat | torch.SymBool
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return _PY_TYPES[type(self.sym)]

    def describe(self) -> str:
        return f"captured scalar {self.node.name} ({self.python_type().__name__})"


@dataclass(eq=False)
class SymSliceValue(Value):
    """``start:stop:step`` with a symbolic bound (``t[:x.shape[0] - 1]``): a slice argument of a
    graph op; Python containers sliced by it specialize the bound (``pyops.as_constant``)."""

    parts: list[Value]
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return slice

    def describe(self) -> str:
        return "slice with a symbolic bound"


def enabled() -> bool:
    return bool(config.capture_scalar_outputs)


def is_sym(v: Any) -> TypeGuard[SymScalarValue]:
    return isinstance(v, SymScalarValue)


def needs_value(what: str) -> Unsupported:
    """The graph break for an operation that needs a captured scalar's concrete value."""
    return Unsupported(f"{what} needs the value of a captured scalar (Tensor.item()) at trace time", _HINT,
                       "Data-dependent control flow or shapes cannot be captured in one graph.")


# -- item / tolist ------------------------------------------------------------------------------------------
def item(tx: "Tracer", t: TensorValue) -> Value:
    return tx.gb.call("call_method", "item", [t], what="Tensor.item")


def tolist(tx: "Tracer", t: TensorValue) -> Value:
    fake = t.fake
    if fake.dtype not in _INT_DTYPES:
        raise Unsupported("Tensor.tolist() with non-integer tensor",
                          "Only integer tensors' tolist() is captured (as torch does); "
                          "use tensor ops, or accept the graph break.",
                          "tolist() on floating point or bool tensors is not traced.")
    if fake.numel() > TOLIST_MAX_ELEMENTS:
        raise Unsupported(f"Tensor.tolist() of {fake.numel()} elements (more than {TOLIST_MAX_ELEMENTS})",
                          "Keep large tolist() calls outside the compiled region.")

    def walk(v: TensorValue) -> Value:
        if v.fake.dim() == 0:
            return item(tx, v)
        parts = []
        for i in range(v.fake.shape[0]):
            sub = tx.gb.call("call_function", operator.getitem, (v, ConstantValue(i)))
            parts.append(walk(cast(TensorValue, sub)))   # a row of the tensor
        return ListValue(parts)

    return walk(t)


# -- Python operators on captured scalars --------------------------------------------------------------------
_INPLACE = {operator.iadd: operator.add, operator.imul: operator.mul, operator.isub: operator.sub,
            operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
            operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
            operator.ior: operator.or_, operator.ixor: operator.xor, operator.ilshift: operator.lshift,
            operator.irshift: operator.rshift}
_NUMBER = (bool, int, float)


def _operand(v: Value) -> bool:
    return is_sym(v) or (isinstance(v, ConstantValue) and type(v.value) in _NUMBER)


def binary(tx: "Tracer", op, a: Value, b: Value) -> Value:
    """``a op b`` where one side is a captured scalar and the other a number (or captured scalar)."""
    op = _INPLACE.get(op, op)                 # numbers are immutable: a += 1 is a = a + 1
    if not (_operand(a) and _operand(b)):
        raise Unsupported(f"operator {getattr(op, '__name__', op)} on {a.describe()} and {b.describe()}")
    return tx.gb.call("call_function", op, (a, b))


def unary(tx: "Tracer", op, a: Value) -> Value:
    return tx.gb.call("call_function", op, (a,))


def truth(v: SymScalarValue) -> bool:
    """``if s:`` on a symbolic size: its value now, with a guard that keeps it (a captured
    scalar's value is unknown: a graph break)."""
    try:
        return bool(v.sym)
    except GuardOnDataDependentSymNode:
        raise needs_value(f"branching on {v.describe()}") from None


def is_backed(v: Value) -> bool:
    """A symbolic size (or a number computed from sizes): its value is known at trace time."""
    return is_sym(v) and not free_unbacked_symbols(v.sym)


def specialize(v: SymScalarValue) -> ConstantValue:
    """The value of a symbolic size, fixed: the ShapeEnv guards that it stays this number."""
    return ConstantValue(_PY_TYPES[type(v.sym)](v.sym))


def to_tensor(tx: "Tracer", fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``torch.tensor(s)`` / ``torch.as_tensor(s)`` of one captured scalar: ``torch.scalar_tensor``
    with the dtype eager would pick."""
    if len(args) != 1 or set(kwargs) - {"dtype", "device"} or \
            not all(isinstance(k, ConstantValue) for k in kwargs.values()):
        raise needs_value(f"torch.{fn.__name__}() of these arguments")
    s = args[0]
    default = {float: torch.get_default_dtype(), int: torch.int64, bool: torch.bool}[s.python_type()]
    kw = {"dtype": kwargs.get("dtype") or ConstantValue(default)}
    if kwargs.get("device") is not None:
        kw["device"] = kwargs["device"]
    if cast(ConstantValue, kw["dtype"]).value is None:   # the kwargs are constants (checked above)
        kw["dtype"] = ConstantValue(default)
    return tx.gb.call("call_function", torch.scalar_tensor, (s,), kw)


TO_TENSOR = (torch.tensor, torch.as_tensor)


# -- builtins and math on captured scalars -----------------------------------------------------------------
def _to_int(tx, s: SymScalarValue) -> Value:
    if isinstance(s.sym, torch.SymInt):
        return s
    return tx.gb.call("call_function", torch.sym_int, (s,))


def _to_float(tx, s: SymScalarValue) -> Value:
    if isinstance(s.sym, torch.SymFloat):
        return s
    return tx.gb.call("call_function", torch.sym_float, (s,))


def _minmax(fn):
    sym_fn = torch.sym_max if fn is max else torch.sym_min

    def handler(tx, args, kwargs):
        if kwargs or len(args) != 2 or not all(_operand(a) for a in args):
            raise needs_value(f"{fn.__name__}() of these arguments")
        kinds = {float if a.python_type() is float else int for a in args}
        if len(kinds) != 1:                    # Python keeps the winner's type; a graph op cannot
            raise needs_value(f"{fn.__name__}() of an int and a float")
        return tx.gb.call("call_function", sym_fn, tuple(args))
    return handler


def _one(fn_name, impl):
    def handler(tx, args, kwargs):
        if kwargs or len(args) != 1 or not is_sym(args[0]):
            raise needs_value(f"{fn_name}() of these arguments")
        return impl(tx, args[0])
    return handler


def _math(fn):
    """math.sqrt & co.: torch's ``_sym_<name>`` runs math.<name> on a number at run time."""
    sym_fn = getattr(torch, f"_sym_{fn.__name__}")
    return _one(f"math.{fn.__name__}", lambda tx, s: tx.gb.call("call_function", sym_fn, (s,)))


BUILTINS: dict[Any, Any] = {
    int: _one("int", _to_int),
    float: _one("float", _to_float),
    abs: _one("abs", lambda tx, s: unary(tx, operator.abs, s)),
    max: _minmax(max),
    min: _minmax(min),
    math.floor: _one("math.floor", lambda tx, s: _to_int(tx, s) if isinstance(s.sym, torch.SymInt)
                     else tx.gb.call("call_function", math.floor, (s,))),
    math.ceil: _one("math.ceil", lambda tx, s: _to_int(tx, s) if isinstance(s.sym, torch.SymInt)
                    else tx.gb.call("call_function", math.ceil, (s,))),
}
for _fn in (math.sqrt, math.cos, math.sin, math.tan, math.cosh, math.sinh, math.tanh, math.asin, math.acos,
            math.atan, math.log2):
    if hasattr(torch, f"_sym_{_fn.__name__}"):
        BUILTINS[_fn] = _math(_fn)
del _fn


# Builtins whose usual handlers take captured scalars: they look only at a value's type or
# identity, or they are Python operators (operator.mul(s, 2) is s * 2).
TYPE_ONLY_BUILTINS = frozenset({isinstance, type, id, callable, print})


def passes_through(fn: Any) -> bool:
    return fn in TYPE_ONLY_BUILTINS or getattr(fn, "__module__", None) in ("_operator", "operator")


def call_builtin(tx: "Tracer", fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """A builtin or math function called with a captured scalar among its arguments."""
    h = BUILTINS.get(fn)
    if h is None:
        raise needs_value(f"{getattr(fn, '__name__', fn)}()")
    return h(tx, args, kwargs)


# -- the graph builder's side -------------------------------------------------------------------------------
def is_sym_result(x: Any) -> bool:
    return isinstance(x, SYM_TYPES)


def has_sym(*trees: Any) -> bool:
    return any(isinstance(x, SYM_TYPES) for t in trees for x in tree_leaves(t))


def constant_of(sym: Any) -> Any:
    """The Python value of a symbolic scalar that simplified to a constant (``s * 0``), else None."""
    node = sym.node
    if node.is_constant():
        return _PY_TYPES[type(sym)](node.constant)
    expr = node.expr
    if expr.free_symbols:
        return None
    try:
        return _PY_TYPES[type(sym)](expr)
    except (TypeError, ValueError):
        return None


__all__ = ["SymScalarValue", "SymSliceValue", "binary", "call_builtin", "enabled", "is_backed",
           "item", "is_sym", "specialize", "needs_value", "to_tensor", "tolist", "truth", "unary"]

hub.register(
    SymScalarValue=SymScalarValue,
)


codegen.register_value_maker(SymScalarValue, lambda b, v: b.tensor_output(v))   # a graph output
