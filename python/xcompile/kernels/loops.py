"""The loop nest of a fused group, shared by the C++ and Triton emitters.

Starts from the group's iteration space (``xs`` outer dims, ``rs`` reduction dims), orders
the outer dims so the group's first stored buffer is written contiguously, then merges
neighbouring dims whenever every load and store stays as simple (``x1 + 128*x0`` becomes
``x0`` over 128x as many iterations).  The result maps each group variable to an expression
of the loop variables.
"""
from __future__ import annotations

import dataclasses

import sympy

from .fusion import Group
from .index import FloorDiv, ModIndex, index_var, simplify_index
from .ir import ReadRecorder


@dataclasses.dataclass
class LoopNest:
    xvars: list          # loop variables, outermost first
    xsizes: list[int]
    rvars: list
    rsizes: list[int]
    subst: dict          # group variable -> expression of loop variables

    @property
    def ranges(self) -> dict:
        return {**dict(zip(self.xvars, self.xsizes)), **dict(zip(self.rvars, self.rsizes))}

    @property
    def xnumel(self) -> int:
        n = 1
        for s in self.xsizes:
            n *= s
        return n

    @property
    def rnumel(self) -> int:
        n = 1
        for s in self.rsizes:
            n *= s
        return n


class AccessRecorder(ReadRecorder):
    """Flat element offsets of every load and store (after the buffers' layouts)."""

    def __init__(self, buffers, ranges):
        super().__init__()
        self.buffers = buffers
        self.ranges = ranges
        self.flat: list[tuple[str, str, sympy.Expr]] = []

    def _flat(self, name, index):
        e = self.buffers[name].layout.flat_index(index)
        return simplify_index(sympy.expand(e), self.ranges)

    def load(self, name, index):
        self.flat.append(("load", name, self._flat(name, index)))
        return super().load(name, index)

    def store(self, name, index, value):
        self.flat.append(("store", name, self._flat(name, index)))

    def store_reduction(self, name, index, value):
        self.store(name, index, value)


def node_indices(group: Group, nest: LoopNest, node):
    idx, ridx = group.node_index(node)
    sub = nest.subst
    return ([sympy.sympify(i).xreplace(sub) for i in idx], [sympy.sympify(i).xreplace(sub) for i in ridx])


def accesses(group: Group, nest: LoopNest, buffers) -> list[tuple[str, str, sympy.Expr]]:
    rec = AccessRecorder(buffers, nest.ranges)
    for n in group.nodes:
        idx, ridx = node_indices(group, nest, n)
        n.run(rec, idx, ridx)
    return rec.flat


def _complexity(acc) -> int:
    return sum(len(e.atoms(FloorDiv)) + len(e.atoms(ModIndex)) for _, _, e in acc)


def _coeff(e: sympy.Expr, v) -> int | None:
    d = sympy.diff(e, v)
    return int(d) if d.is_Integer else None


def plan_loops(group: Group, buffers, reorder: bool = True, merge: bool = True) -> LoopNest:
    xv, rv = group.xvars(), group.rvars()
    nest = LoopNest(list(xv), list(group.xs), list(rv), list(group.rs), {v: v for v in xv + rv})
    if reorder and len(xv) > 1:
        acc = accesses(group, nest, buffers)
        stores = [e for kind, name, e in acc if kind == "store"]
        if stores:
            coeffs = [_coeff(stores[0], v) for v in xv]
            known = [c for c in coeffs if c is not None]
            if len(known) == len(coeffs):
                order = sorted(range(len(xv)), key=lambda i: -abs(known[i]))
                nest.xvars = [xv[i] for i in order]
                nest.xsizes = [group.xs[i] for i in order]
    if merge:
        for kind in ("x", "r"):
            _merge_dims(group, nest, buffers, kind)
    return nest


def _merge_dims(group: Group, nest: LoopNest, buffers, kind: str) -> None:
    base = _complexity(accesses(group, nest, buffers))
    i = (len(nest.xvars) if kind == "x" else len(nest.rvars)) - 2
    counter = [0]
    while i >= 0:
        vars_ = nest.xvars if kind == "x" else nest.rvars
        sizes = nest.xsizes if kind == "x" else nest.rsizes
        outer, inner = vars_[i], vars_[i + 1]
        so, si = sizes[i], sizes[i + 1]
        counter[0] += 1
        w = index_var(f"{kind}m{counter[0]}_", 0)
        trial_sub = {k: e.xreplace({outer: FloorDiv(w, si), inner: ModIndex(w, si)})
                     for k, e in nest.subst.items()}
        trial = LoopNest(nest.xvars, nest.xsizes, nest.rvars, nest.rsizes, trial_sub)
        new_vars = vars_[:i] + [w] + vars_[i + 2:]
        new_sizes = sizes[:i] + [so * si] + sizes[i + 2:]
        if kind == "x":
            trial.xvars, trial.xsizes = new_vars, new_sizes
        else:
            trial.rvars, trial.rsizes = new_vars, new_sizes
        c = _complexity(accesses(group, trial, buffers))
        if c <= base:
            base = c
            nest.subst, nest.xvars, nest.xsizes, nest.rvars, nest.rsizes = (
                trial.subst, trial.xvars, trial.xsizes, trial.rvars, trial.rsizes)
        i -= 1
    # readable names again: x0, x1, ... / r0, r1, ...
    vars_ = nest.xvars if kind == "x" else nest.rvars
    rename = {v: index_var(kind, j) for j, v in enumerate(vars_)}
    tmp = {v: sympy.Symbol(f"_tmp_{v.name}", integer=True, nonnegative=True) for v in vars_}
    nest.subst = {k: e.xreplace(tmp).xreplace({tmp[v]: rename[v] for v in vars_}) for k, e in nest.subst.items()}
    if kind == "x":
        nest.xvars = [rename[v] for v in vars_]
    else:
        nest.rvars = [rename[v] for v in vars_]
