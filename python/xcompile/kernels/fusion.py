"""Fusion: decide which loops share a kernel, and which values never touch memory.

Two steps, both greedy and in graph order:

1. Inlining (vertical fusion of pointwise chains): a pointwise producer is substituted into
   its readers' bodies unless it is a graph output or extern argument, too costly to recompute
   for several readers, or read broadcast (recomputing it per element of a bigger loop).
2. Grouping: each remaining node joins the latest group with a compatible iteration space
   whose position its inputs allow: pointwise into the reduction that consumes it, the
   reduction's epilogue, later reductions over the same rows (softmax, layer_norm), and
   independent loops over the same space (horizontal fusion).  A reader inside the group must
   read a value at exactly the point where it is produced; every rejected pair logs why.

A group's nodes run at two levels: "x" (once per outer index) and "r" (per reduction
element, inside a reduction loop).  Loops are numbered by phase: a node reading a reduction's
result runs in a later loop than the reduction.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import sympy
from torch.utils import _pytree as pytree

from .. import config, log
from .index import FloorDiv, ModIndex, index_var, simplify_index
from .ir import ExternNode, InlineOps, KernelGraph, LoopNode, ReadRecorder, TensorRef, record
from .sizes import known, sym

LOOKBACK = 8
# A kernel's memory streams (arrays it reads or writes element by element) beyond which a node
# that shares no array with it starts a kernel of its own: an optimizer over 300 parameters was
# one loop touching 1,200 arrays per element, more streams than the hardware prefetches (5 ms a
# step against 2.8 ms with a kernel per few parameters).
MAX_HORIZONTAL_STREAMS = 32


def squeeze(sizes) -> tuple[int, ...]:
    return tuple(sym(s) for s in sizes if s != 1)


def fill(sizes, variables) -> list:
    it = iter(variables)
    return [sympy.Integer(0) if s == 1 else next(it) for s in sizes]


@dataclasses.dataclass(eq=False)
class Group:
    """One fused kernel."""

    name: str
    nodes: list[LoopNode]
    xs: tuple[int, ...]
    rs: tuple[int, ...]
    level: dict = dataclasses.field(default_factory=dict)     # node -> "x" | "r"
    phase: dict = dataclasses.field(default_factory=dict)     # node -> loop number
    stores: list[str] = dataclasses.field(default_factory=list)  # buffers written to memory
    origins: list[str] = dataclasses.field(default_factory=list)

    @property
    def is_reduction(self) -> bool:
        return bool(self.rs)

    @property
    def outputs(self) -> list[str]:
        return self.stores

    def xvars(self):
        return [index_var("x", i) for i in range(len(self.xs))]

    def rvars(self):
        return [index_var("r", i) for i in range(len(self.rs))]

    def var_ranges(self) -> dict:
        return {**dict(zip(self.xvars(), self.xs)), **dict(zip(self.rvars(), self.rs))}

    def node_index(self, node: LoopNode, level: str | None = None):
        level = level or self.level[node]
        xv, rv = self.xvars(), self.rvars()
        if node.is_reduction:
            return fill(node.ranges, xv), fill(node.rranges, rv)
        return fill(node.ranges, xv if level == "x" else xv + rv), []


class _TrackingInline(InlineOps):
    def __init__(self, inner, inlined, buffers):
        super().__init__(inner, inlined, buffers)
        self.used: list[str] = []

    def load(self, name, index):
        if name in self.inlined:
            self.used.append(name)
        return super().load(name, index)


def _reads_in(node: LoopNode, idx, ridx) -> list[tuple[str, tuple]]:
    rec = ReadRecorder()
    node.run(rec, idx, ridx)
    return rec.reads


def _why(*parts) -> None:
    log.log("fusion", " ".join(str(p) for p in parts))


class Fusion:
    def __init__(self, graph: KernelGraph):
        self.g = graph
        self.group_streams: dict[str, set[str]] = {}      # group name -> its streams
        self.inline_max_ops = config.inline_max_ops
        self.enabled = config.kernel_fusion

    # -- step 1: inlining ---------------------------------------------------------------------------
    def external_uses(self) -> set[str]:
        ext: set[str] = set()
        refs = [o for o in self.g.outputs if isinstance(o, TensorRef)]
        refs += [r for _, r in self.g.mutations]
        for n in self.g.nodes:
            if isinstance(n, ExternNode):
                refs += [a for a in pytree.tree_leaves((n.args, n.kwargs)) if isinstance(a, TensorRef)]
        return ext | {r.name for r in refs}

    def reads_broadcast(self, user: LoopNode, b: str, inlined: dict) -> bool:
        """Does ``user`` (with the producers inlined so far) read some element of ``b`` more than
        once, i.e. is one of its loop variables missing from an index it loads ``b`` at?"""
        rec = ReadRecorder()
        ops = InlineOps(rec, inlined, self.g.buffers)
        idx = [index_var("x", i) for i in range(len(user.ranges))]
        ridx = [index_var("r", i) for i in range(len(user.rranges))]
        user.run(ops, idx, ridx)
        loop_vars = {v for v, s in zip(idx + ridx, user.ranges + user.rranges) if s != 1}
        for name, index in rec.reads:
            if name == b:
                used = set().union(*[sympy.sympify(i).free_symbols for i in index]) if index else set()
                if loop_vars - used:
                    return True
        return False

    def full_reads(self, n: LoopNode, rec: ReadRecorder) -> int:
        """How many buffers ``n`` reads at an index using all of its loop variables (element by
        element; broadcast reads of per-row or per-column values are cheap and not counted)."""
        idx = [index_var("x", i) for i in range(len(n.ranges))]
        loop_vars = {v for v, s in zip(idx, n.ranges) if s != 1}
        full = set()
        for name, index in rec.reads:
            used = set().union(*[sympy.sympify(i).free_symbols for i in index]) if index else set()
            if loop_vars <= used:
                full.add(name)
        return len(full)

    def inline(self) -> tuple[list, dict[str, LoopNode]]:
        loops = [n for n in self.g.nodes if isinstance(n, LoopNode)]
        recs = {n: record(n) for n in loops}
        readers: dict[str, list[LoopNode]] = {}
        for n in loops:
            for b in {b for b, _ in recs[n].reads}:
                readers.setdefault(b, []).append(n)
        external = self.external_uses()
        inlined: dict[str, LoopNode] = {}

        def effective(b: str) -> list[LoopNode]:
            out = []
            for r in readers.get(b, []):
                out += effective(r.outputs[0]) if r.outputs[0] in inlined else [r]
            return out

        for n in reversed(loops):
            if n.is_reduction or not self.enabled:
                continue
            b = n.outputs[0]
            if b in external:
                continue
            users = effective(b)
            if not users:
                continue
            cost = recs[n].op_count
            broadcast = [u.name for u in users if cost > 0 and self.reads_broadcast(u, b, inlined)]
            if broadcast and cost > 0:
                _why(f"keep {b}: read broadcast by {broadcast}; inlining would recompute {cost} ops per element")
                continue
            if len(users) > 1 and cost > self.inline_max_ops:
                _why(f"keep {b}: {cost} ops, {len(users)} readers")
                continue
            heavy = self.full_reads(n, recs[n])
            if len(users) > 1 and (len(users) - 1) * (heavy - 1) >= 2:
                # each reader would load all of its inputs again: U * R loads instead of
                # R + U loads and one store (a residual stream x + f(x) read by a norm's two
                # loops and the next residual add would otherwise be recomputed from every
                # earlier block's output, its reads growing with depth)
                _why(f"keep {b}: reads {heavy} buffers element by element, {len(users)} readers")
                continue
            inlined[b] = n
        # the nodes that remain, with inlined producers substituted into their bodies
        result = []
        for n in self.g.nodes:
            if isinstance(n, ExternNode):
                result.append(n)
                continue
            if n.outputs[0] in inlined:
                continue
            if not any(o in external or readers.get(o) for o in n.outputs):
                continue  # dead
            if inlined:
                body = n.body

                def wrapped(ops, *ix, _body=body):
                    return _body(InlineOps(ops, inlined, self.g.buffers), *ix)
                tracker = _TrackingInline(ReadRecorder(), inlined, self.g.buffers)
                n.run(tracker, [index_var("x", i) for i in range(len(n.ranges))],
                      [index_var("r", i) for i in range(len(n.rranges))])
                origins = []
                for u in reversed(tracker.used):
                    origins += list(inlined[u].origins)
                origins += list(n.origins)
                n = dataclasses.replace(n, body=wrapped, origins=tuple(dict.fromkeys(origins)))
            result.append(n)
        # inlined producers whose readers all died are dead as well: nothing left to do
        return result, inlined

    # -- step 2: grouping ----------------------------------------------------------------------------
    def run(self) -> list:
        nodes, self.inlined = self.inline()
        producer: dict[str, Any] = {}
        for n in nodes:
            for b in n.outputs:
                producer[b] = n
        self.producer = producer
        schedule: list = []
        position: dict[Any, int] = {}  # node -> schedule position
        for n in nodes:
            if isinstance(n, ExternNode):
                position[n] = len(schedule)
                schedule.append(n)
                continue
            reads = {b for b, _ in record(n).reads}
            deps = [producer[b] for b in reads if b in producer]
            lo = max([position[d] for d in deps], default=-1)
            placed = False
            if self.enabled:
                for pos in range(len(schedule) - 1, max(lo, len(schedule) - LOOKBACK, 0) - 1, -1):
                    g = schedule[pos]
                    if not isinstance(g, Group):
                        continue
                    verdict = self.try_join(g, n)
                    if verdict is None:
                        position[n] = pos
                        placed = True
                        break
                    if any(position.get(d) == pos for d in deps) or pos == len(schedule) - 1:
                        _why(f"not fusing {n.name} into {g.name}: {verdict}")
            if not placed:
                g = self.new_group(n, len(schedule))
                position[n] = len(schedule)
                schedule.append(g)
        self.reads_of = {n: [b for b, _ in record(n).reads] for n in nodes if isinstance(n, LoopNode)}
        self.readers: dict[str, list] = {}
        for m, bs in self.reads_of.items():
            for b in bs:
                self.readers.setdefault(b, []).append(m)
        self.external = self.external_uses()
        for g in schedule:
            if isinstance(g, Group):
                self.finalize(g)
        return schedule

    def new_group(self, n: LoopNode, pos: int) -> Group:
        if n.is_reduction:
            g = Group(f"kernel{pos}", [n], squeeze(n.ranges), squeeze(n.rranges) or (1,))
            g.level[n] = "r"
        else:
            g = Group(f"kernel{pos}", [n], squeeze(n.ranges), ())
            g.level[n] = "x"
        return g

    def streams(self, n: LoopNode) -> set[str]:
        """The arrays ``n`` reads or writes element by element (not single elements)."""
        out = set()
        for b in [b for b, _ in record(n).reads] + list(n.outputs):
            buf = self.g.buffers.get(b)
            if buf is None or not known(sympy.Eq(sympy.sympify(buf.layout.numel), 1)):
                out.add(b)
        return out

    def try_join(self, g: Group, n: LoopNode) -> str | None:
        """None if ``n`` joined ``g``; otherwise the reason it cannot."""
        mine = self.streams(n)
        theirs = self.group_streams.setdefault(g.name, set().union(*[self.streams(m) for m in g.nodes]))
        if not (mine & theirs) and len(mine | theirs) > MAX_HORIZONTAL_STREAMS:
            return f"shares no array with the kernel, which has {len(theirs)} streams already"
        nx, nr = squeeze(n.ranges), squeeze(n.rranges) or (1,)
        xs, rs = g.xs, g.rs
        levels = dict(g.level)
        if n.is_reduction:
            if g.is_reduction:
                if (nx, nr) != (xs, rs):
                    return f"reduction spaces differ: {nx}|{nr} vs {xs}|{rs}"
            elif nx + nr == xs and nr != (1,):
                xs, rs = nx, nr        # the pointwise loops become the reduction's inner loops
                levels = {m: "r" for m in g.nodes}
            else:
                return f"pointwise space {xs} is not reduction space {nx}|{nr}"
            level = "r"
        elif nx == xs:
            level = "x"
        elif g.is_reduction and nx == xs + rs:
            level = "r"
        else:
            return f"iteration spaces differ: {nx} vs {xs}|{rs}"
        trial = Group(g.name, g.nodes, xs, rs, levels)
        strided = [(m, lv) for m, lv in ([(n, level)] + [(m, levels[m]) for m in g.nodes])
                   if lv == "r" and not m.is_reduction]
        for m, lv in strided:
            b = self.transposed_read(trial, m, lv)
            if b is not None:
                return (f"{m.name} reads {b} across the reduction loop's rows (transposed): "
                        f"a pointwise loop of its own reads it better")
        idx, ridx = trial.node_index(n, level)
        ranges = trial.var_ranges()
        members = set(g.nodes)
        for b, index in _reads_in(n, idx, ridx):
            p = self.producer.get(b)
            if p not in members:
                continue
            if level == "x" and levels[p] == "r" and not p.is_reduction:
                return f"reads {b}, a per-element value of the reduction loop, once per row"
            pidx, _ = trial.node_index(p, levels[p])
            got = tuple(simplify_index(sympy.expand(i), ranges) for i in index)
            want = tuple(simplify_index(sympy.expand(i), ranges) for i in pidx)
            if got != want:
                return f"reads {b} at {list(got)} but it is produced at {list(want)}"
        g.xs, g.rs, g.level = xs, rs, levels
        g.level[n] = level
        g.nodes.append(n)
        theirs |= mine
        return None

    def transposed_read(self, g: Group, n: LoopNode, level: str) -> str | None:
        """A buffer ``n`` loads with a stride along the innermost reduction variable while it
        is contiguous along an outer one (``x + t.transpose(1, 2)`` feeding a norm over the
        last dim): inside the reduction loop every such load is a gather, 4x slower than
        contiguous rows and 2x slower than the same gathers in a plain pointwise loop."""
        if not g.rs or config.kernel_fuse_transposed_reads:
            return None
        idx, ridx = g.node_index(n, level)
        r = g.rvars()[-1]
        xv = [v for v, size in zip(g.xvars(), g.xs) if known(sympy.sympify(size) > 1)]
        for b, index in _reads_in(n, idx, ridx):
            buf = self.g.buffers.get(b)
            if buf is None or self.producer.get(b) in g.nodes:
                continue
            flat = sympy.expand(buf.layout.flat_index(index))
            if flat.has(FloorDiv, ModIndex):
                continue
            cr = sympy.diff(flat, r)
            if not cr.is_Integer or abs(int(cr)) <= 1:
                continue
            if any(sympy.diff(flat, v) == 1 for v in xv):
                return b
        return None

    def finalize(self, g: Group) -> None:
        members = set(g.nodes)
        external, readers = self.external, self.readers
        for n in g.nodes:
            deps = [self.producer[b] for b in self.reads_of[n] if self.producer.get(b) in members]
            g.phase[n] = max([g.phase[d] + 1 if d.is_reduction else g.phase[d] for d in deps], default=0)
        for n in g.nodes:
            for b in n.outputs:
                rs = readers.get(b, [])
                outside = any(r not in members for r in rs)
                cross_phase = (not n.is_reduction and g.level[n] == "r" and
                               any(g.phase[r] != g.phase[n] for r in rs if r in members))
                if b in external or outside or cross_phase:
                    g.stores.append(b)
        origins = []
        for n in g.nodes:
            origins += list(n.origins)
        g.origins = list(dict.fromkeys(origins))


def fuse(graph: KernelGraph) -> list:
    """The kernel schedule: ``Group``s and ``ExternNode``s in execution order."""
    return Fusion(graph).run()
