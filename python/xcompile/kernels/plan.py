"""The launch plan: the order kernels and extern calls run in, when each buffer is allocated,
and when its memory is free again.  A buffer's memory is reused (same dtype, size and
strides) once its last reader has run; graph outputs and inputs are never reused."""
from __future__ import annotations

import dataclasses

from torch.utils import _pytree as pytree

from .fusion import Group
from .ir import ExternNode, KernelGraph, TensorRef


@dataclasses.dataclass
class Step:
    item: Group | ExternNode
    allocs: list[tuple[str, str | None]]            # (buffer, buffer whose memory it takes, or None)
    frees: list[str]                                # buffers dead after this step


@dataclasses.dataclass
class Plan:
    steps: list[Step]
    storage: dict[str, str]                         # buffer -> the buffer variable holding its memory
    inplace: dict[str, str] = dataclasses.field(default_factory=dict)   # value -> input it is written into
    arena: dict[str, int] = dataclasses.field(default_factory=dict)     # buffer -> byte offset in the arena
    arena_bytes: int = 0


# Buffers only kernels touch, this small or smaller, live in one allocation per call (the arena)
# and reach the kernels as addresses: an optimizer's per-parameter scalars (bias corrections) were
# one empty_strided each.
ARENA_BUFFER_BYTES = 16384
ARENA_BYTES = 1 << 20
_ALIGN = 64


def _static_bytes(layout) -> int | None:
    if not all(isinstance(v, int) for v in (*layout.size, *layout.stride)):
        return None
    if any(n == 0 for n in layout.size):
        return 0
    span = 1 + sum((n - 1) * abs(st) for n, st in zip(layout.size, layout.stride))
    return span * layout.dtype.itemsize


def reads_of(item, group_reads: dict) -> list[str]:
    if isinstance(item, ExternNode):
        return [a.name for a in pytree.tree_leaves((item.args, item.kwargs)) if isinstance(a, TensorRef)]
    return group_reads[item]


def _aliasing(node: ExternNode) -> bool:
    schema = getattr(node.op, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


def make_plan(graph: KernelGraph, schedule: list, group_reads: dict, inplace: dict[str, str] | None = None,
              arena: bool = False) -> Plan:
    """``inplace``: values the kernels store straight into the input they are written to
    (``inplace.py``): they take that input's memory, and the wrapper copies nothing. ``arena``:
    the kernels take addresses (``_C.KernelLauncher``), so small buffers no extern call reads
    and the graph does not return can share one allocation."""
    inplace = inplace or {}
    offsets: dict[str, int] = {}
    arena_bytes = 0
    extern_reads = {b for item in schedule if isinstance(item, ExternNode) for b in reads_of(item, group_reads)}
    keep = {r.name for r in graph.outputs if isinstance(r, TensorRef)}
    keep |= {r.name for _, r in graph.mutations}
    keep |= {b.name for b in graph.buffers.values() if b.kind == "input"}
    for item in schedule:
        if isinstance(item, ExternNode) and _aliasing(item):
            keep |= set(reads_of(item, group_reads)) | set(item.outputs)
    last: dict[str, int] = {}
    for i, item in enumerate(schedule):
        for b in reads_of(item, group_reads):
            last[b] = i
    pool: dict[tuple, list[str]] = {}
    storage: dict[str, str] = {}
    steps = []

    def key(name):
        lay = graph.buffers[name].layout
        return (lay.dtype, lay.size, lay.stride)

    for i, item in enumerate(schedule):
        allocs = []
        if isinstance(item, Group):
            for b in item.stores:
                donor = inplace.get(b)
                if donor is None and b not in keep and pool.get(key(b)):
                    donor = pool[key(b)].pop()
                nbytes = _static_bytes(graph.buffers[b].layout) if arena and donor is None else None
                if nbytes is not None and nbytes <= ARENA_BUFFER_BYTES and b not in keep and \
                        b not in extern_reads and arena_bytes + nbytes <= ARENA_BYTES:
                    offsets[b] = arena_bytes
                    arena_bytes += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
                storage[b] = storage.get(donor, donor) if donor else b
                allocs.append((b, donor))
        else:
            for b in item.outputs:
                storage[b] = b
        frees = []
        for b in dict.fromkeys(reads_of(item, group_reads) + list(item.outputs)):
            if b in keep or last.get(b, -1) > i or graph.buffers[b].kind == "input":
                continue
            frees.append(b)
            if b not in offsets:             # (an arena address is no tensor to hand on)
                pool.setdefault(key(b), []).append(storage.get(b, b))
        steps.append(Step(item, allocs, frees))
    return Plan(steps, storage, dict(inplace), offsets, arena_bytes)
