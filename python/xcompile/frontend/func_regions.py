"""A function traced into a region of the graph and cut out as a GraphModule of its own: the
body of a torch.func transform (``func_transforms.py``).

    body = trace_body(tx, fn, args, kwargs, what)   fn traced by the interpreter on stand-ins
    result = emit(tx, body, apply, args, kwargs, name)

``trace_body`` traces ``fn`` (any callable value: a function, a lambda, a module, a torch op,
another transform) on *stand-ins*: tensors with the metadata the transform's function sees
(``stand_in``; per-sample shapes under vmap), added to the graph as temporary nodes. Every node
the call adds is the region; it becomes the GraphModule ``body`` over (the stand-ins, then every
value from outside the region the body reads: graph inputs, parameters, values computed
before; never baked constants), and the region leaves the graph. The call must be pure from
the outside: recording a side effect (a list, dict, global, attribute or cell from outside the
function) or an in-place op on an input or an outside tensor is ``Unsupported`` naming it.

``emit`` adds one node ``run(args, kwargs, outside)``: ``apply(fn, *args, **kwargs)`` where
``fn(*a, **k)`` calls ``body`` on the tensors among its arguments and the outside values; its
result (any pytree) comes back flat and is rebuilt as values. The backends see a call of the
real transform on a traced function: the eager backend runs it, AOT and the kernel generator
trace through it with make_fx to ATen ops.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.multiprocessing.reductions import StorageWeakRef

from . import hub, scalars
from .exc import PythonError, Unsupported
from .reach import frame_roots, reachable
from .side_effects import SideEffects
from .values import (
    ConstantValue,
    DictValue,
    ListValue,
    NestedFunctionValue,
    TensorValue,
    TupleValue,
    Value,
    is_constant,
)

if TYPE_CHECKING:
    from .tracer import Tracer


def _stand_in(i: int) -> None:
    """Target of the temporary nodes that stand for a transformed function's arguments; they
    become the body's placeholders and never stay in a finished graph."""
    raise RuntimeError("a function-transform stand-in reached a compiled graph")


# Tensor metadata the interpreter would answer from its stand-ins where the transform's own
# wrapped tensors answer otherwise (inside grad an input requires grad and is a leaf).
_UNREADABLE = frozenset({"Tensor.requires_grad", "Tensor.is_leaf", "Tensor.data", "Tensor.storage_offset",
                         "Tensor.requires_grad_", "Tensor.retain_grad", "Tensor.retains_grad",
                         "Tensor.grad_fn", "Tensor._base", "Tensor._version"})

_INPLACE_DUNDERS = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                              "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
                              "__ilshift__", "__irshift__", "__imatmul__"})
_INPLACE_OPERATORS = frozenset({operator.setitem, operator.iadd, operator.isub, operator.imul,
                                operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
                                operator.iand, operator.ior, operator.ixor, operator.ilshift,
                                operator.irshift, operator.imatmul})


@dataclass
class Body:
    gm: torch.fx.GraphModule
    outside: list[Value]              # values from outside the region the body reads, in order
    what: str


class _RefusingSideEffects(SideEffects):
    """The trace's side-effect record (same state), refusing new effects while a transformed
    function is traced: an effect inside a transform is a graph break naming it."""

    what: str
    made_before: set[int]                # ids of the values the frames reached before the transform

    def _refuse(self, which: str) -> None:
        raise Unsupported(f"{self.what}: the transformed function has a side effect ({which})",
                          "Functions passed to torch.func transforms must be pure: keep mutations of "
                          "outside lists, dicts, globals and attributes out of them.")

    def mutated(self, v: Value) -> None:
        self._refuse(f"it mutates a {v.describe()} from outside the function")

    def mutated_local(self, v: Value) -> None:
        if id(v) in self.made_before:
            self._refuse(f"it mutates a {v.describe()} made outside the function")

    def store_attr(self, obj_v: Value, obj: Any, name: str, value: Any) -> None:
        self._refuse(f"it sets or deletes attribute {name!r} of an object from outside the function")

    def store_global(self, f_globals: dict, name: str, value: Any) -> None:
        self._refuse(f"it assigns global {name!r}")

    def store_cell(self, cell_v: Any, where: Any) -> None:
        self._refuse("it rebinds a nonlocal variable of an outside function")


def _refusing(inner: SideEffects, what: str, made_before: set[int]) -> SideEffects:
    r = object.__new__(_RefusingSideEffects)
    r.__dict__ = inner.__dict__                   # one record: reads see the trace's state
    r.what = what
    r.made_before = made_before
    return r


def _holder(tx: "Tracer", t: Value) -> str:
    """What holds ``t`` among the frames' locals, for the error."""
    frame = tx.current
    while frame is not None:
        names = list(frame.locals.items()) if isinstance(frame.locals, dict) else []
        if isinstance(frame.cells, dict):
            names += [(n, getattr(c, "contents", c)) for n, c in frame.cells.items()]
        # containers and objects before functions (whose closures reach them too)
        names.sort(key=lambda kv: isinstance(kv[1], NestedFunctionValue))
        for name, v in names:
            if v is t:
                return f"local {name!r}"
            if isinstance(v, Value) and id(t) in reachable([v]):
                return f"{v.describe()} (local {name!r})"
        frame = frame.parent
    return "a value from outside the function"


def _reachable(tx: "Tracer") -> dict[int, Value]:
    """The values the frames being traced can reach (locals, stacks, cells, closures, container
    items and object attributes), by id. Before a transform: the containers made outside it (one
    made inside the transformed function is not among them, and may change there); after it: a
    tensor made inside that got out by another way than the result."""
    return reachable(frame_roots(tx.current))


# -- values as pytrees --------------------------------------------------------------------------------
def leaves(tx: "Tracer", v: Value) -> list[Value]:
    """The leaves of a value in torch's pytree order (tuples, lists, dicts: their items)."""
    v = tx.resolve(v)
    if isinstance(v, (TupleValue, ListValue)):
        return [x for i in v.items for x in leaves(tx, i)]
    if isinstance(v, DictValue):
        return [x for i in v.items.values() for x in leaves(tx, i)]
    return [v]


def map_leaves(tx: "Tracer", v: Value, fn: Callable[[Value], Value]) -> Value:
    v = tx.resolve(v)
    if isinstance(v, TupleValue):
        return TupleValue([map_leaves(tx, i, fn) for i in v.items], cls=v.cls)
    if isinstance(v, ListValue):
        return ListValue([map_leaves(tx, i, fn) for i in v.items])
    if isinstance(v, DictValue):
        return DictValue({k: map_leaves(tx, i, fn) for k, i in v.items.items()}, cls=v.cls)
    return fn(v)


def stand_in(tx: "Tracer", like: TensorValue, drop_dim: int | None) -> TensorValue:
    """A fresh stand-in with ``like``'s metadata (``drop_dim`` removed: vmap's per-sample view)."""
    fake = like.fake
    size, stride = list(fake.shape), list(fake.stride())
    if drop_dim is not None:
        if not -fake.dim() <= drop_dim < max(fake.dim(), 1) or fake.dim() == 0:
            raise Unsupported(f"vmap: in_dim {drop_dim} is out of range for a {fake.dim()}-d tensor",
                              "The call runs eagerly (and raises there as in eager).")
        d = drop_dim % fake.dim()
        del size[d], stride[d]
    with tx.gb.fake_mode:
        t = torch.empty_strided(size, stride, dtype=fake.dtype, device=fake.device)
    node = tx.gb.graph.call_function(_stand_in, (len(tx.gb.graph.nodes),))
    node.meta["example_value"] = t
    return TensorValue(node, t)


# -- tracing the body -----------------------------------------------------------------------------------
def trace_body(tx: "Tracer", fn: Value, args: list[Value], kwargs: dict[str, Value], what: str,
               before: set[torch.fx.Node]) -> Body:
    """Trace ``fn(*args, **kwargs)`` (its tensor leaves are stand-ins made after ``before``, the
    graph's nodes before the call) into a region and cut it out as a Body."""
    gb = tx.gb
    saved_effects = tx.side_effects
    grad_mode = gb.grad_enabled

    def check(op: str) -> None:
        if op in _UNREADABLE:
            raise Unsupported(f"{what}: the transformed function reads {op}, which the transform's "
                              "wrapped tensors answer differently", "Read it outside the transformed function.")

    tx.side_effects = _refusing(saved_effects, what, set(_reachable(tx)))
    gb.op_checks.append(check)
    try:
        try:
            result = hub.call_value(tx, fn, list(args), dict(kwargs))
        except PythonError as e:
            raise Unsupported(f"{what}: the transformed function raised {type(e).__name__}",
                              "The call runs eagerly.") from e
        for v in _reachable(tx).values():
            if isinstance(v, TensorValue) and v.node not in before and v.node.op.startswith("call_"):
                raise Unsupported(f"{what}: a tensor made inside the transformed function escapes it "
                                  f"(stored into {_holder(tx, v)})",
                                  "Functions passed to torch.func transforms must be pure: return "
                                  "the tensor instead of storing it.")
        stand_ins: dict[torch.fx.Node, None] = {}        # in argument order, once each
        for a in [*args, *kwargs.values()]:
            for leaf in leaves(tx, a):
                if isinstance(leaf, TensorValue) and leaf.node.target is _stand_in:
                    stand_ins.setdefault(leaf.node)
        body = _cut(tx, before, list(stand_ins), result, what)
    except BaseException:
        _drop_region(gb.graph, before)
        gb.grad_enabled = grad_mode
        raise
    finally:
        tx.side_effects = saved_effects
        gb.op_checks.remove(check)
    if gb.grad_enabled != grad_mode:
        raise Unsupported(f"{what}: the transformed function leaves grad mode changed")
    return body


def _drop_region(graph: torch.fx.Graph, before: set[torch.fx.Node]) -> None:
    for n in reversed(list(graph.nodes)):
        if n not in before and n.op not in ("placeholder", "get_attr") and not n.users:
            graph.erase_node(n)


def _out_struct(tx: "Tracer", v: Value, what: str) -> Any:
    v = tx.resolve(v)
    if isinstance(v, (TensorValue, scalars.SymScalarValue)):
        return v.node
    if isinstance(v, ConstantValue) and is_constant(v.value):
        return v.value
    if isinstance(v, TupleValue):
        items = [_out_struct(tx, i, what) for i in v.items]
        if v.cls is tuple:
            return tuple(items)
        if hasattr(v.cls, "_fields"):
            return v.cls(*items)
    if isinstance(v, ListValue):
        return [_out_struct(tx, i, what) for i in v.items]
    if isinstance(v, DictValue) and v.cls is dict:
        return {k: _out_struct(tx, i, what) for k, i in v.items.items()}
    raise Unsupported(f"{what}: the transformed function returns a {v.describe()}",
                      "Return tensors, and tuples, lists and dicts of tensors.")


def _storage(x: Any) -> Any:
    return StorageWeakRef(x.untyped_storage()) if isinstance(x, torch.Tensor) else None


def _is_inplace(n: torch.fx.Node) -> bool:
    if "out" in n.kwargs:
        return True
    if n.op == "call_method":
        name = str(n.target)
        return name in _INPLACE_DUNDERS or (name.endswith("_") and not name.startswith("_"))
    if n.op == "call_function":
        if n.target in _INPLACE_OPERATORS:
            return True
        name = getattr(n.target, "__name__", "")
        return name.endswith("_") and not name.startswith("_")
    return False


def _cut(tx: "Tracer", before: set[torch.fx.Node], stand_ins: list[torch.fx.Node], result: Value,
         what: str) -> Body:
    graph = tx.gb.graph
    region = [n for n in graph.nodes if n not in before and n.op not in ("placeholder", "get_attr")]
    in_region = set(region)
    inputs = set(stand_ins)
    out = _out_struct(tx, result, what)
    outside: dict[torch.fx.Node, None] = {}

    def note(n: torch.fx.Node) -> None:
        if n not in in_region:
            outside.setdefault(n)

    for n in region:
        if n.target is _stand_in and n not in inputs:
            raise Unsupported(f"{what}: an argument of the transformed function escaped its call")
        for a in n.all_input_nodes:
            note(a)
    torch.fx.map_arg(out, note)
    # an in-place op on an input or on an outside tensor (or a view of one) mutates state the
    # transform does not own
    shared = {_storage(n.meta.get("example_value")) for n in [*stand_ins, *outside]} - {None}
    for n in region:
        if _is_inplace(n) and n.args and isinstance(n.args[0], torch.fx.Node) \
                and _storage(n.args[0].meta.get("example_value")) in shared:
            raise Unsupported(f"{what}: the transformed function mutates an input or a tensor from "
                              f"outside it in place ({_describe(n)})",
                              "Use the out-of-place op inside the transformed function.")
    body = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for i, s in enumerate(stand_ins):
        env[s] = body.placeholder(f"arg{i}")
        env[s].meta.update(s.meta)
    for j, o in enumerate(outside):
        env[o] = body.placeholder(f"outside{j}_{o.name}")
        env[o].meta.update(o.meta)
    for n in region:
        if n not in inputs:
            env[n] = body.node_copy(n, lambda a: env[a])
    body.output(torch.fx.map_arg(out, lambda a: env[a]))
    gm = torch.fx.GraphModule(torch.nn.Module(), body)
    for n in reversed(region):
        graph.erase_node(n)
    return Body(gm, [_outside_value(o, what) for o in outside], what)


def _describe(n: torch.fx.Node) -> str:
    return f"Tensor.{n.target}" if n.op == "call_method" else getattr(n.target, "__name__", str(n.target))


def _outside_value(n: torch.fx.Node, what: str) -> Value:
    ex = n.meta.get("example_value")
    if isinstance(ex, torch.Tensor):
        return TensorValue(n, ex)
    if isinstance(ex, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return scalars.SymScalarValue(n, ex)
    raise Unsupported(f"{what}: the transformed function reads {n.name} ({type(ex).__name__}) from outside it")


# -- the node that runs the transform ---------------------------------------------------------------------
def emit(tx: "Tracer", body: Body, apply: Callable[..., Any], args: list[Value],
         kwargs: dict[str, Value], name: str) -> Value:
    """One node: ``apply(fn, *args, **kwargs)`` with ``fn`` the body over its tensor arguments."""
    gm = body.gm
    spec: list[Any] = []

    def run(call_args, call_kwargs, outside):
        def fn(*a, **k):
            ts = [t for t in pytree.tree_leaves((a, k)) if isinstance(t, torch.Tensor)]
            return gm(*ts, *outside)

        flat, tree = pytree.tree_flatten(apply(fn, *call_args, **call_kwargs))
        spec[:] = [tree]
        return tuple(flat)

    run.__name__ = run.__qualname__ = re.sub(r"\W+", "_", name).strip("_") or "func_transform"
    run.body = gm                                 # type: ignore[attr-defined]  # for debugging
    flat = tx.gb.call("call_function", run,
                      [TupleValue(list(args)), DictValue(dict(kwargs)), TupleValue(list(body.outside))],
                      what=body.what)
    items: list[Value] | None = list(flat.items) if isinstance(flat, TupleValue) else \
        [ConstantValue(c) for c in flat.value] if isinstance(flat, ConstantValue) else None
    if items is None or not spec:
        raise Unsupported(f"{body.what} returned something that is not a pytree of tensors and constants")
    return rebuild(pytree.tree_unflatten(list(range(len(items))), spec[0]), items, body.what)


def rebuild(struct: Any, items: list[Value], what: str) -> Value:
    """Values for a pytree whose leaves are indices into ``items``."""
    if type(struct) is int:
        return items[struct]
    if type(struct) is list:
        return ListValue([rebuild(s, items, what) for s in struct])
    if isinstance(struct, tuple):
        cls = type(struct) if hasattr(type(struct), "_fields") else tuple
        return TupleValue([rebuild(s, items, what) for s in struct], cls=cls)
    if type(struct) is dict:
        return DictValue({k: rebuild(s, items, what) for k, s in struct.items()})
    if struct is None:
        return ConstantValue(None)
    raise Unsupported(f"{what} returned a {type(struct).__name__}")
