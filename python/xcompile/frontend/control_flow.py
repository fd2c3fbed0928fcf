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

from .. import _C, _torch_compat
from . import func_regions, hub, scalars
from .exc import Unsupported
from .values import ConstantValue, ListValue, TensorValue, TupleValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer


# The higher-order ops themselves (not torch.cond, which compiles a wrapper with torch.compile when
# called outside dynamo: _torch_compat), run untraced: no frame below them is xcompile's to compile.
_COND = _C.untraced(_torch_compat.cond)
_WHILE_LOOP = _C.untraced(_torch_compat.while_loop)


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

    n, (slots, firsts) = len(operands), _lifted(outside)

    def run(pred, ops, outside):
        # the outside tensors and sizes are operands too (as dynamo lifts them): the op's autograd
        # differentiates them, and its tracer sees them as inputs of the branch graphs
        def branch(call):
            return lambda *a: call(_outside(a[n:], outside, slots), *a[:n])
        return _COND(pred, branch(true_call), branch(false_call), (*ops, *(outside[i] for i in firsts)))

    run.__name__ = run.__qualname__ = "cond"
    return tx.gb.call("call_function", run, [pred, TupleValue(list(operands)), TupleValue(outside)],
                      what="torch.cond")


def _lifted(outside: list[Value]) -> tuple[list[int | None], list[int]]:
    """The outside values the higher-order op takes as extra operands: tensors and integer sizes,
    each node once (an operand given twice is an alias the op refuses). Per outside value its
    place among them, or None (SymFloat and SymBool stay read from outside); and the index of
    each one's first occurrence."""
    slots: list[int | None] = []
    place: dict[torch.fx.Node, int] = {}
    firsts: list[int] = []
    for i, v in enumerate(outside):
        if isinstance(v, TensorValue) or (isinstance(v, scalars.SymScalarValue) and isinstance(v.sym, torch.SymInt)):
            if v.node not in place:
                place[v.node] = len(firsts)
                firsts.append(i)
            slots.append(place[v.node])
        else:
            slots.append(None)
    return slots, firsts


def _outside(lifted: tuple, outside: tuple, slots: list[int | None]) -> list:
    """The outside values in their order: the lifted operands the op passes, the rest as given."""
    return [outside[i] if s is None else lifted[s] for i, s in enumerate(slots)]


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

    n, (slots, firsts) = len(carried), _lifted(outside)

    def run(carried_in, outside):
        # the outside tensors and sizes are the op's additional inputs (as dynamo lifts them)
        def body_fn(*a):
            out = body_call(_outside(a[n:], outside, slots), *a[:n])
            return tuple(out) if isinstance(out, (tuple, list)) else (out,)
        return _WHILE_LOOP(lambda *a: cond_call(_outside(a[n:], outside, slots), *a[:n]), body_fn,
                           tuple(carried_in), tuple(outside[i] for i in firsts))

    run.__name__ = run.__qualname__ = "while_loop"
    run.makes_fresh_sizes = True       # type: ignore[attr-defined]  # (aot/joint.makes_fresh_sizes)
    tx.gb._shape_env()                 # (while_loop's fake kernel sizes its results with the ShapeEnv)
    return tx.gb.call("call_function", run, [TupleValue(list(carried)), TupleValue(outside)],
                      what="torch.while_loop")
