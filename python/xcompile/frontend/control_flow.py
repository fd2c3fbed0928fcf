"""``torch.cond`` and ``torch.while_loop`` inside traced code.

A constant predicate (a Python bool, a size the trace knows) picks its branch, which is traced
inline, as torch.compile does. A tensor predicate keeps both branches: each is traced by the
interpreter on stand-ins of the operands and cut out as a GraphModule (``func_regions``; values
from outside the branch become its inputs, side effects are refused), and one graph node calls
the real ``torch.cond`` with the two bodies. The eager backend runs it; the AOT backends trace it
with ``make_fx`` into torch's ``cond`` higher-order op (forward and backward), and the kernel
generator calls that op as an extern kernel. Branches that return different shapes or dtypes
make ``torch.cond`` itself raise on the fakes: the frame then runs eagerly and raises torch's own
error. ``torch.while_loop(cond_fn, body_fn, carried_inputs)`` is kept the same way: both
functions traced on stand-ins of the carried values (what they read from outside becomes their
inputs), one node calling the real ``while_loop`` on the two bodies.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from .. import _C
from . import func_regions, hub, scalars
from .exc import Unsupported
from .values import ConstantValue, ListValue, TensorValue, TupleValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer


# Run eagerly (the eager backend, a graph break), these compile their functions with torch.compile:
# no frame below them is xcompile's to compile.
_COND = _C.untraced(torch.cond)
_WHILE_LOOP = _C.untraced(getattr(torch, "while_loop", torch.cond))


def _operands(tx: "Tracer", v: Value | None, op: str) -> list[TensorValue]:
    if v is None:
        return []
    v = tx.resolve(v)
    if isinstance(v, (TupleValue, ListValue)):
        items = [tx.resolve(i) for i in v.items]
        tensors = [i for i in items if isinstance(i, TensorValue)]
        if len(tensors) == len(items):
            return tensors
    raise Unsupported(f"{op} with operands that are not a tuple or list of tensors",
                      "Pass the tensors its functions read as a tuple.")


def _bind(args: list[Value], kwargs: dict[str, Value], names: tuple[str, ...], required: int,
          op: str) -> dict[str, Value]:
    """The call's arguments by name (``required``: how many of ``names`` must be given)."""
    bound: dict[str, Value] = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    if len(args) > len(names) or set(kwargs) - set(names) or not set(names[:required]) <= set(bound):
        raise Unsupported(f"{op} with unexpected arguments")
    return bound


def _bodies(tx: "Tracer", fns: list[tuple[str, Value]], operands: list[TensorValue], op: str) -> tuple[list, list]:
    """Each function traced on stand-ins of ``operands`` into a Body; and, per body, a function
    of (operands, the outside values of all bodies) calling it."""
    bodies = []
    for name, fn in fns:
        before = set(tx.gb.graph.nodes)
        stands: list[Value] = [func_regions.stand_in(tx, o, None) for o in operands]
        bodies.append(func_regions.trace_body(tx, fn, stands, {}, f"{op}'s {name}", before))
    callers, start = [], 0
    for body in bodies:
        end = start + len(body.outside)

        def call(outside, *a, _gm=body.gm, _s=start, _e=end):
            return _gm(*a, *outside[_s:_e])
        callers.append(call)
        start = end
    return [o for b in bodies for o in b.outside], callers


def cond(tx: "Tracer", obj: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _bind(args, kwargs, ("pred", "true_fn", "false_fn", "operands"), 3, "torch.cond")
    pred = tx.resolve(bound["pred"])
    operands = _operands(tx, bound.get("operands"), "torch.cond")
    known = _constant(pred)
    if known is not None:                 # a constant predicate: its branch, inline
        return hub.call_value(tx, bound["true_fn"] if known else bound["false_fn"], list(operands), {})
    if not (isinstance(pred, TensorValue) and pred.fake.numel() == 1 and pred.fake.dtype == torch.bool):
        raise Unsupported(f"torch.cond with a predicate that is a {pred.describe()}",
                          "The predicate must be a boolean tensor with one element, or a constant.")
    outside, (true_call, false_call) = _bodies(
        tx, [("true_fn", bound["true_fn"]), ("false_fn", bound["false_fn"])], operands, "torch.cond")

    def run(pred, ops, outside):
        return _COND(pred, lambda *a: true_call(outside, *a), lambda *a: false_call(outside, *a), tuple(ops))

    run.__name__ = run.__qualname__ = "cond"
    return tx.gb.call("call_function", run, [pred, TupleValue(list(operands)), TupleValue(outside)],
                      what="torch.cond")


def _constant(v: Value) -> bool | None:
    if isinstance(v, ConstantValue) and isinstance(v.value, (bool, int)):
        return bool(v.value)
    if isinstance(v, scalars.SymScalarValue) and isinstance(v.sym, torch.SymBool):
        if free_unbacked_symbols(v.sym):
            raise Unsupported("torch.cond with a predicate computed from data (an unbacked size)")
        return bool(v.sym)                 # a relation of sizes: decided here, guarded
    return None


def while_loop(tx: "Tracer", obj: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    bound = _bind(args, kwargs, ("cond_fn", "body_fn", "carried_inputs"), 3, "torch.while_loop")
    carried = _operands(tx, bound["carried_inputs"], "torch.while_loop")
    outside, (cond_call, body_call) = _bodies(
        tx, [("cond_fn", bound["cond_fn"]), ("body_fn", bound["body_fn"])], carried, "torch.while_loop")

    def run(carried_in, outside):
        def body_fn(*a):
            out = body_call(outside, *a)
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)
        return _WHILE_LOOP(lambda *a: cond_call(outside, *a), body_fn, tuple(carried_in))

    run.__name__ = run.__qualname__ = "while_loop"
    run.makes_fresh_sizes = True       # type: ignore[attr-defined]  # (aot/joint.makes_fresh_sizes)
    tx.gb._shape_env()                 # (while_loop's fake kernel sizes its results with the ShapeEnv)
    return tx.gb.call("call_function", run, [TupleValue(list(carried)), TupleValue(outside)],
                      what="torch.while_loop")
