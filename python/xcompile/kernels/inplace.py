"""Writes into the graph's inputs made in place, by the kernel that computes the new value.

A functional graph that writes an input (an optimizer step: ``p``, ``exp_avg``, ``exp_avg_sq``)
computes the new value into a fresh buffer, and the wrapper copies it into the input at the
end: an allocation, a second pass over memory and a copy per written input. When it is safe,
the kernel that computes the value stores it straight into the input's memory instead
(``V = X`` in the wrapper, no copy). Safe means that nothing can tell the difference:

- the value ``V`` has the input ``X``'s layout (dtype, size, strides, offset), ``X`` is dense
  and not overlapping, and ``V`` is a whole buffer stored by a pointwise C++ kernel ``G``
  whose iteration space is ``V`` itself (each element stored once);
- inside ``G``, ``X`` is loaded only at the element being stored, and only by nodes that run
  before the store or by the storing node itself (which loads before it stores): a kernel's
  element reads the old value, then writes the new one, and nothing reads it again;
- nothing scheduled after ``G`` reads ``X``, no extern call makes a view of ``X``, and neither
  ``X`` nor ``V`` is returned or copied into another input;
- no kernel after ``G`` can raise (an index check), and no extern runs after it: an error
  after the write would leave ``X`` written where the graph, which writes its inputs last,
  leaves it untouched;
- ``X`` and ``V`` are the kernel's only aliased pointers: they lose ``__restrict`` there.

Inputs that share memory with another input never get here: aot's runtime runs such calls
eagerly (``aot/aliasing.py``). Triton kernels are left as they are (a block's loads and stores
may be reordered by Triton's compiler; and no GPU checks this here).
"""
from __future__ import annotations

import math

import sympy
from torch.utils import _pytree as pytree

from .. import log
from .fusion import Group
from .graph import _is_dense
from .ir import ExternNode, KernelGraph, TensorRef
from .loops import AccessRecorder, node_indices, plan_loops
from .sizes import known


def _aliasing(node: ExternNode) -> bool:
    schema = getattr(node.op, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)


def _extern_reads(node: ExternNode) -> set[str]:
    return {a.name for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, TensorRef)}


def _group_accesses(group: Group, buffers) -> tuple[list, list[int], int]:
    """Every load and store of ``group`` in the order its kernel runs them: (kind, buffer,
    flat offset); the node position of each; the number of indirect (checked) index sites."""
    nest = plan_loops(group, buffers, reorder=False, merge=False)
    rec = AccessRecorder(buffers, nest.ranges)
    where: list[int] = []
    for k, n in enumerate(group.nodes):
        idx, ridx = node_indices(group, nest, n)
        before = len(rec.flat)
        n.run(rec, idx, ridx)
        where += [k] * (len(rec.flat) - before)
    return rec.flat, where, rec.indirect


def inplace_writes(graph: KernelGraph, schedule: list) -> dict[str, str]:
    """{value buffer: input buffer} for the writes a C++ kernel can make in place."""
    if graph.device.type != "cpu" or not graph.mutations:
        return {}
    returned = {o.name for o in graph.outputs if isinstance(o, TensorRef)}
    sources = [ref.name for _, ref in graph.mutations]
    viewed = set().union(*[_extern_reads(n) for n in schedule if isinstance(n, ExternNode) and _aliasing(n)])
    position = {id(item): i for i, item in enumerate(schedule)}
    stored_by = {b: item for item in schedule if isinstance(item, Group) for b in item.stores}
    info: dict[int, tuple] = {}

    def accesses(item):
        if id(item) not in info:
            info[id(item)] = _group_accesses(item, graph.buffers)
        return info[id(item)]

    def reads(item) -> set[str]:
        if isinstance(item, ExternNode):
            return _extern_reads(item)
        return {name for kind, name, _ in accesses(item)[0] if kind == "load"}

    out: dict[str, str] = {}
    for pos, ref in graph.mutations:
        x, v = graph.inputs[pos], ref.name
        why = _unsafe(graph, schedule, x, v, ref, returned, sources, viewed, stored_by, position, accesses, reads)
        if why is None and x is not None:
            out[v] = x
        else:
            log.log("fusion", "write into input %s copied at the end, not in place: %s", x, why)
    return out


def _unsafe(graph, schedule, x, v, ref, returned, sources, viewed, stored_by, position, accesses, reads):
    if x is None or ref.view is not None:
        return "the new value is a view"
    if sources.count(v) != 1 or x in sources:
        return "the value is copied into another input too, or the input's old value is"
    if v in returned or x in returned:
        return "the value or the input is returned"
    if x in viewed:
        return "an extern call makes a view of the input"
    bx, bv = graph.buffers[x], graph.buffers[v]
    if bv.kind != "computed" or bx.kind != "input" or bx.layout != bv.layout or not _is_dense(bx.layout):
        return "the value's layout is not the input's, or the input is not dense"
    group = stored_by.get(v)
    if group is None or group.rs:
        return "not stored by a pointwise kernel"
    if not known(sympy.Eq(sympy.sympify(math.prod(group.xs)), sympy.sympify(math.prod(bv.layout.size)))):
        return "the kernel's iteration space is not the value's"
    flat, where, indirect = accesses(group)
    if indirect:
        return "the kernel has indirect (checked) indices"
    stores = [(e, k) for (kind, name, e), k in zip(flat, where) if kind == "store" and name == v]
    if len(stores) != 1:
        return "the value is stored more than once"
    at, node = stores[0]
    for (kind, name, e), k in zip(flat, where):
        if kind == "load" and name == x and (k > node or sympy.expand(e - at) != 0):
            return "the kernel reads the input at another element, or after the store"
    for item in schedule[position[id(group)] + 1:]:
        if isinstance(item, ExternNode):
            return "an extern call runs after the kernel"
        if accesses(item)[2]:
            return "a later kernel has indirect (checked) indices"
        if x in reads(item):
            return "a later kernel reads the input"
    return None
