"""Split a joint forward+backward graph into a forward and a backward graph.

Two policies, same output (``Partition``):
- ``save_all``: the forward computes everything that does not depend on tangents and
  saves every such value the backward reads. The baseline, kept for tests.
- ``min_cut``: choose the set of forward values to save with the fewest bytes such that
  the backward can recompute the rest from them. Recomputation is allowed only for cheap
  ops (``ops.recompute_policy``: pointwise, views, reductions, norms); matmuls,
  convolutions, attention and random ops are never recomputed.

The min-cut flow network (one ``n_in -> n_out`` edge per forward node, capacity = the
bytes it would cost to save it):

    source -> n_in                 n cannot be recomputed (a primal, or a banned op)
    n_in   -> n_out  (bytes)       cutting here means "save n"; views/tuples cannot be saved
    n_out  -> user_in              data dependency
    n_in   -> sink                 n depends on a tangent (it is backward work)

Every source->sink path is cut exactly once at a saved node; the backward recomputes
whatever lies between the saved values and its own ops.

Graph conventions: fw graph ``(*primals) -> (*fw_outs, *saved)``; bw graph
``(*saved, *tangents) -> (*grads)`` with the grads ``JointGraph.grad_slots`` names.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Sequence, cast

import networkx as nx
import torch
import torch.fx

from .joint import JointGraph
from .ops import aliases_input, checkpointed, recompute_policy

aten = torch.ops.aten


@dataclass
class Partition:
    fw_gm: torch.fx.GraphModule
    bw_gm: torch.fx.GraphModule
    num_fw_outs: int
    saved: list[str]                    # joint-graph names of the saved values, in order
    saved_bytes: int                    # bytes of the saved values (by the fake metadata)
    recomputed: list[str] = field(default_factory=list)   # forward nodes the backward recomputes
    policy: str = ""

    def describe(self) -> str:
        lines = [f"partition[{self.policy}]: {len(self.saved)} saved, {self.saved_bytes} bytes"]
        lines += [f"  saved {name}" for name in self.saved]
        if self.recomputed:
            lines.append(f"  recomputed in backward: {', '.join(self.recomputed)}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- analysis

def _val(node: torch.fx.Node):
    return node.meta.get("val")


def _hint(v) -> int:
    """An int, or a symbolic size's example value (never a guard): costs, not decisions."""
    if isinstance(v, torch.SymInt):
        h = v.node.hint
        if h is None:
            h = v.node.shape_env.size_hint(v.node.expr, allow_none=True)
        return int(h) if h is not None else 4096          # unbacked: a typical size
    return int(v)


def nbytes(node: torch.fx.Node) -> float:
    """Bytes to keep ``node`` alive for the backward; inf if it cannot be saved alone."""
    val = _val(node)
    if isinstance(val, torch.Tensor):
        if aliases_input(node):
            return math.inf                  # saving a view keeps its base: save the base instead
        return float(_hint(val.numel()) * val.element_size())     # (symbolic sizes: their example values)
    if isinstance(val, (int, float, bool, torch.SymInt)):
        return 8.0
    return math.inf                          # tuples of tensors: save their getitems


@dataclass
class _Roles:
    primals: list[torch.fx.Node]
    tangents: list[torch.fx.Node]
    fw_outs: list[torch.fx.Node]
    grads: list[torch.fx.Node]
    tangent_closure: set[torch.fx.Node]      # nodes that depend on a tangent (backward work)
    required_fw: set[torch.fx.Node]          # ancestors of fw outs
    required_bw: set[torch.fx.Node]          # ancestors of grads


def _ancestors(roots) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = [r for r in roots if isinstance(r, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def _roles(joint: JointGraph) -> _Roles:
    graph = joint.gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    primals, tangents = placeholders[: joint.num_primals], placeholders[joint.num_primals:]
    outs = list(cast("Sequence[Any]", graph.output_node().args[0]))   # the output tuple
    fw_outs, grads = outs[: joint.num_fw_outs], outs[joint.num_fw_outs:]
    closure: set[torch.fx.Node] = set(tangents)
    for n in graph.nodes:
        if n.op != "output" and any(a in closure for a in n.all_input_nodes):
            closure.add(n)
    return _Roles(primals, tangents, fw_outs, grads, closure, _ancestors(fw_outs), _ancestors(grads))


# ----------------------------------------------------------------------------- policies

def save_all_partition(joint: JointGraph, mutated_primals=()) -> Partition:
    """Save every forward value the backward reads directly."""
    r = _roles(joint)
    saved: list[torch.fx.Node] = []
    for n in joint.gm.graph.nodes:
        if n.op == "output" or n in r.tangent_closure or n not in r.required_bw:
            continue
        if n in r.grads or any(u in r.tangent_closure and u in r.required_bw for u in n.users):
            saved.append(n)
    return _build(joint, r, saved, mutated_primals, "save_all")


def min_cut_partition(joint: JointGraph, mutated_primals=()) -> Partition:
    """Save the fewest bytes; recompute cheap ops in the backward."""
    r = _roles(joint)
    try:
        return _min_cut(joint, r, mutated_primals, _visible_unsaved_by_eager(r))
    except nx.NetworkXUnbounded:
        return _min_cut(joint, r, mutated_primals, set())


def _visible_unsaved_by_eager(r: _Roles) -> set[torch.fx.Node]:
    """Primals and forward outputs the backward does not read (directly or through a view):
    eager saved none of them, only values computed from them. The user holds them and may
    write into them after the call (a later graph's write-back, ``x.addcmul_(...)`` after a
    break): saved here, the backward would then fail its version check where eager's passes.
    min_cut saves what is computed from them instead (when it can; else it saves them)."""
    read = set()
    for n in r.tangent_closure:
        for a in n.all_input_nodes:
            while a not in read and a not in r.tangent_closure:
                read.add(a)
                if not aliases_input(a) or not a.all_input_nodes:
                    break
                a = cast(torch.fx.Node, a.args[0])           # a view's base
    return {n for n in (*r.primals, *r.fw_outs) if isinstance(n, torch.fx.Node) and n not in read}


def _min_cut(joint: JointGraph, r: _Roles, mutated_primals, unsaveable: set) -> Partition:
    g = nx.DiGraph()
    g.add_node("source")
    g.add_node("sink")
    for n in joint.gm.graph.nodes:
        if n.op == "output":
            continue
        if n in r.tangent_closure:
            if n in r.required_bw:
                g.add_edge(n.name + "_in", "sink")          # no capacity = infinite
            continue
        if n not in r.required_bw and n not in r.required_fw:
            continue
        may_recompute, _ = recompute_policy(n)
        if not may_recompute and (n.op == "placeholder" or n in r.required_fw):
            g.add_edge("source", n.name + "_in")
        # a checkpointed region keeps nothing of its own for the backward: it is recomputed
        # from what it read (its inputs are saved, or recomputed in turn)
        weight = math.inf if n in unsaveable or (checkpointed(n) and may_recompute and
                                                 not _leaves_region(n, r.tangent_closure) and
                                                 not _of_kept_tuple(n)) else nbytes(n)
        if math.isinf(weight):
            g.add_edge(n.name + "_in", n.name + "_out")
        else:
            g.add_edge(n.name + "_in", n.name + "_out", capacity=weight)
        for user in n.users:
            if user.op != "output":
                g.add_edge(n.name + "_out", user.name + "_in")
        if n in r.grads:
            g.add_edge(n.name + "_out", "sink")
    try:
        _, (reachable, _) = nx.minimum_cut(g, "source", "sink")
    except nx.NetworkXUnbounded as e:
        if unsaveable:
            raise                           # min_cut_partition tries again, allowed to save them
        raise RuntimeError("aot min-cut: a value the backward needs can be neither saved nor recomputed "
                           "(this is a partitioner bug; partition='save_all' avoids it)") from e
    saved = [n for n in joint.gm.graph.nodes
             if n.name + "_in" in reachable and n.name + "_out" in g and n.name + "_out" not in reachable]
    return _build(joint, r, saved, mutated_primals, "min_cut")


def _of_kept_tuple(n: torch.fx.Node) -> bool:
    """An element of a tuple the backward cannot recompute (dropout's (output, mask)): saved."""
    return n.target is operator.getitem and isinstance(n.args[0], torch.fx.Node) and \
        not recompute_policy(n.args[0])[0]


def _leaves_region(n: torch.fx.Node, backward: set) -> bool:
    """A checkpointed value the forward reads outside its region (the region's output, the
    next region's input): it may be saved, as eager's checkpoint keeps it."""
    region = n.meta.get("ac_graph_id")
    return any(u.op == "output" or (u not in backward and (not checkpointed(u) or u.meta.get("ac_graph_id") != region))
               for u in n.users)


POLICIES = {"min_cut": min_cut_partition, "save_all": save_all_partition}


# ----------------------------------------------------------------------------- extraction

def _extract(joint_gm: torch.fx.GraphModule, inputs: list[torch.fx.Node],
             outputs: list, keep: Sequence[torch.fx.Node] = ()) -> torch.fx.GraphModule:
    """A new graph computing ``outputs`` from ``inputs`` (copying only the needed nodes, and
    the ``keep`` nodes even when nothing uses them)."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in inputs:
        env[n] = graph.placeholder(n.name)
        env[n].meta = dict(n.meta)
    needed = set()
    stack = [o for o in outputs if isinstance(o, torch.fx.Node)] + list(keep)
    while stack:
        n = stack.pop()
        if n in needed or n in env:
            continue
        if n.op == "placeholder":
            raise RuntimeError(f"aot partition: {n.name} is needed but is not an input of this graph")
        needed.add(n)
        stack.extend(n.all_input_nodes)
    for n in joint_gm.graph.nodes:
        if n in needed:
            env[n] = graph.node_copy(n, lambda a: env[a])
    graph.output(tuple(env[o] if isinstance(o, torch.fx.Node) else o for o in outputs))
    graph.lint()
    return torch.fx.GraphModule(joint_gm, graph)


def _unused_forward_random_ops(gm: torch.fx.GraphModule, tangents: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """Random ops of the forward (not fed by a tangent): kept even when their result is unused
    (``F.dropout(x)`` never read), so the forward draws from the RNG exactly as eager does."""
    backward = set(tangents)
    keep = []
    for n in gm.graph.nodes:
        if any(a in backward for a in n.all_input_nodes):
            backward.add(n)
        elif (n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
              and torch.Tag.nondeterministic_seeded in n.target.tags):
            keep.append(n)
    return keep


def _recompute_at_first_use(bw_gm: torch.fx.GraphModule, n_saved: int) -> None:
    """Move the backward's recomputation (nodes that depend on saved values only, not on a
    tangent) to just before its first use, as the autograd engine would run it.  Extraction
    keeps the joint graph's order, where every recomputed forward value comes first: all of
    them were then alive (and fused side by side) from the start of the backward.  Only saved
    inputs live longer for it, and they live through the whole backward anyway."""
    graph = bw_gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    backward = set(placeholders[n_saved:])
    for n in graph.nodes:
        if n.op != "placeholder" and any(a in backward for a in n.all_input_nodes):
            backward.add(n)
    nodes = list(graph.nodes)
    pos = {n: float(i) for i, n in enumerate(nodes)}
    moved = False
    for n in reversed(nodes):
        if n.op != "call_function" or n in backward or not n.users:
            continue
        if isinstance(n.target, torch._ops.OpOverload) and (
                torch.Tag.nondeterministic_seeded in n.target.tags or n.target._schema.is_mutable):
            continue
        first = min(n.users, key=pos.__getitem__)
        if n.next is first:
            continue
        first.prepend(n)
        moved = True
        lo, hi = pos[n.prev] if n.prev.op != "root" else -1.0, pos[first]
        mid = (lo + hi) / 2
        if lo < mid < hi:
            pos[n] = mid
        else:                               # no float left between them: number them again
            pos.update({m: float(i) for i, m in enumerate(graph.nodes)})
    if moved:
        graph.lint()
        bw_gm.recompile()


def _root_placeholder(n: torch.fx.Node) -> torch.fx.Node:
    while aliases_input(n):
        n = cast(torch.fx.Node, n.args[0])               # a view's base
    return n


def _build(joint: JointGraph, r: _Roles, saved: list[torch.fx.Node], mutated_primals,
           policy: str) -> Partition:
    fw_gm = _extract(joint.gm, r.primals, r.fw_outs + saved, _unused_forward_random_ops(joint.gm, r.tangents))
    bw_gm = _extract(joint.gm, saved + r.tangents, r.grads)
    _recompute_at_first_use(bw_gm, len(saved))
    # The runtime writes new values into mutated inputs after the forward; a saved input
    # (or a view of one) must keep the value the forward saw: save a copy of it instead.
    mutated = {r.primals[k].name for k in mutated_primals}
    fw_out_node = fw_gm.graph.output_node()
    new_outs = list(cast("Sequence[Any]", fw_out_node.args[0]))
    for i, n in enumerate(new_outs[joint.num_fw_outs:], start=joint.num_fw_outs):
        if _root_placeholder(n).op == "placeholder" and _root_placeholder(n).name in mutated:
            with fw_gm.graph.inserting_before(fw_out_node):
                new_outs[i] = fw_gm.graph.call_function(aten.clone.default, (n,))
                new_outs[i].meta = dict(n.meta)
    fw_out_node.args = (tuple(new_outs),)
    fw_gm.recompile()
    fw_names = {n.name for n in fw_gm.graph.nodes if n.op == "call_function"}
    recomputed = [n.name for n in bw_gm.graph.nodes if n.op == "call_function" and n.name in fw_names]
    size = sum(nbytes(n) if not aliases_input(n) else _view_bytes(n) for n in saved)
    return Partition(fw_gm, bw_gm, joint.num_fw_outs, [n.name for n in saved], int(size), recomputed, policy)


def _view_bytes(n: torch.fx.Node) -> float:
    val = _val(n)
    return float(_hint(val.untyped_storage().nbytes())) if isinstance(val, torch.Tensor) else 0.0
