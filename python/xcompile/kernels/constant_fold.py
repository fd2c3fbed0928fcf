"""Constant folding: what a graph computes from literals alone is computed once, at compile time.

Models build tensors from literals inside ``forward`` (``torch.tensor(...)``, ``arange``,
``full``) and compute on them: deberta's relative-position buckets (arange, sign, log, ceil,
clamp over 8x8), ``sqrt(torch.tensor(d) * 3)`` per attention layer.  Run every call, those are
small kernels with a launch and an allocation each; folded, they are constants of the wrapper.

What counts as a literal: a zero-input factory call (``arange``, ``full``, ``zeros``, ...;
not ``empty``, not random) and ``lift_fresh_copy`` of a ``get_attr`` tensor (a tensor
literal the program created; a ``get_attr`` read directly may be state that changes between
calls, so it is not folded through).  A node is foldable when it is a deterministic,
functional ATen op whose tensor inputs are all foldable.  The values that stay in the graph
(the foldable nodes read by others) are computed eagerly with ATen -- eager's own numbers --
and become ``get_attr`` constants, except:

- graph outputs and anything an output is a view of: an output must be a fresh tensor each call;
- values of more than ``MAX_NUMEL`` elements: a constant held for the graph's lifetime.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.fx

from .ir import same_strides

aten = torch.ops.aten

MAX_NUMEL = 1 << 16

_FACTORIES = {aten.arange.default, aten.arange.start, aten.arange.start_step, aten.full.default,
              aten.zeros.default, aten.ones.default, aten.scalar_tensor.default, aten.linspace.default,
              aten.eye.default}


# results whose values are whatever memory held
_UNINITIALIZED = {"empty_like", "new_empty", "new_empty_strided", "empty", "empty_strided",
                  "empty_permuted", "resize", "set_"}


def _tensor_inputs(n: torch.fx.Node) -> list[torch.fx.Node]:
    return [a for a in n.all_input_nodes]


def _pure(n: torch.fx.Node) -> bool:
    t = n.target
    if not isinstance(t, torch._ops.OpOverload):
        return False
    if t._schema.is_mutable or torch.Tag.nondeterministic_seeded in t.tags:
        return False
    if t._schema.name.split("::")[-1] in _UNINITIALIZED:
        return False
    return not any(r.alias_info is not None and r.alias_info.is_write for r in t._schema.returns)


def _is_view(n: torch.fx.Node) -> bool:
    t = n.target
    return isinstance(t, torch._ops.OpOverload) and \
        any(r.alias_info is not None for r in t._schema.returns)


def _foldable(gm: torch.fx.GraphModule) -> tuple[set[torch.fx.Node], set[torch.fx.Node]]:
    """(the nodes to fold, the nodes computable from literals): an output is computable but
    stays computed per call, and the folded nodes that read it read its compile-time value."""
    fold: set[torch.fx.Node] = set()
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            if n.users and all(u.target is aten.lift_fresh_copy.default for u in n.users) and \
                    isinstance(getattr(gm, n.target, None), torch.Tensor):
                fold.add(n)
        elif n.op == "call_function" and _pure(n) and isinstance(n.meta.get("val"), torch.Tensor):
            ins = _tensor_inputs(n)
            if ins and all(a in fold for a in ins):
                fold.add(n)
            elif not ins and n.target in _FACTORIES:
                fold.add(n)
    computable = set(fold)
    # outputs, and what an output is a view of, stay computed per call
    out = next(iter(gm.graph.find_nodes(op="output")))
    todo = list(out.all_input_nodes)
    while todo:
        n = todo.pop()
        if n in fold:
            fold.discard(n)
            if _is_view(n):
                todo += _tensor_inputs(n)
    return fold, computable


def fold_constants(gm: torch.fx.GraphModule) -> int:
    """Fold in place; the number of constants made."""
    fold, computable = _foldable(gm)
    while True:
        frontier = [n for n in fold if n.op == "call_function" and any(u not in fold for u in n.users)]
        big = [n for n in frontier if n.meta["val"].numel() > MAX_NUMEL]
        if not big:
            break
        fold.difference_update(big)
    if not frontier:
        return 0
    values: dict[torch.fx.Node, Any] = {}     # tensors and the other values ops return
    needed = set(frontier)
    for n in reversed(gm.graph.nodes):      # only what the frontier reads is evaluated
        if n in needed:                     # (an output a folded node reads: computable, not folded)
            needed.update(a for a in _tensor_inputs(n) if a in computable)
    for n in gm.graph.nodes:
        if n not in needed:
            continue
        if n.op == "get_attr":
            values[n] = getattr(gm, n.target)
            continue
        args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: values[a])
        values[n] = n.target(*args, **kwargs)
    made = 0
    for n in frontier:
        v, meta = values[n], n.meta["val"]
        if not isinstance(v, torch.Tensor) or v.shape != meta.shape or v.dtype != meta.dtype:
            continue
        if not same_strides(v.shape, v.stride(), meta.stride()):
            if not _dense(meta):
                continue            # an expanded view laid out otherwise: leave it to the kernels
            v = torch.empty_strided(meta.shape, meta.stride(), dtype=v.dtype, device=v.device).copy_(v)
        name = _free_name(gm)
        setattr(gm, name, v)
        with gm.graph.inserting_before(n):
            c = gm.graph.create_node("get_attr", name)
        c.meta.update(n.meta)
        n.replace_all_uses_with(c)
        made += 1
    for n in reversed(list(gm.graph.nodes)):       # the folded nodes nothing reads any more
        if n in fold and not n.users:
            gm.graph.erase_node(n)
    gm.recompile()
    return made


def _dense(t: torch.Tensor) -> bool:
    dims = sorted((st, n) for n, st in zip(t.shape, t.stride()) if n != 1)
    expect = 1
    for st, n in dims:
        if st != expect:
            return False
        expect *= n
    return True


def _free_name(gm: torch.fx.GraphModule) -> str:
    i = 0
    while hasattr(gm, f"_folded_constant{i}"):
        i += 1
    return f"_folded_constant{i}"
