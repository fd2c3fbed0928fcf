"""Lowering rows for views (no copies: index functions over the base), split/unbind/as_strided,
cat, and indexing with tensor indices (index, gather, index_select, embedding)."""
from __future__ import annotations

import sympy
import torch

from .. import config
from .graph import TV, reshape_index, view_tv
from .index import FloorDiv, ModIndex
from .ir import IndexCheck
from .lowering_base import bload, iter_layout, opmath, out_meta, register
from .sizes import broadcast_sizes, sym, vshape

aten = torch.ops.aten


# -- views ----------------------------------------------------------------------------------------------------

@register(aten.view.default, aten.reshape.default, aten._unsafe_view.default)
def _view(L, node, x, size):
    out = vshape(out_meta(node))
    if out == tuple(x.size):
        return view_tv(L, x, out, x.loader)
    return view_tv(L, x, out, lambda ops, idx: x.loader(ops, reshape_index(x.size, out, idx)))


@register(aten.permute.default)
def _permute(L, node, x, dims):
    dims = [d % max(x.ndim, 1) for d in dims]
    out = tuple(x.size[d] for d in dims)

    def loader(ops, idx):
        full = [None] * x.ndim
        for i, d in enumerate(dims):
            full[d] = idx[i]
        return x.loader(ops, full)
    return view_tv(L, x, out, loader)


@register(aten.t.default)
def _t(L, node, x):
    return _permute(L, node, x, list(reversed(range(x.ndim))))


@register(aten.transpose.int)
def _transpose(L, node, x, d0, d1):
    dims = list(range(x.ndim))
    if x.ndim:
        d0, d1 = d0 % x.ndim, d1 % x.ndim
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return _permute(L, node, x, dims)


@register(aten.expand.default)
def _expand(L, node, x, size, implicit=False):
    out = vshape(out_meta(node))
    pad = len(out) - x.ndim

    def loader(ops, idx):
        return x.loader(ops, [sympy.Integer(0) if s == 1 else idx[pad + i] for i, s in enumerate(x.size)])
    return view_tv(L, x, out, loader)


# -- copies of views --------------------------------------------------------------------------------------------
# ``*_copy`` ops read like their view but return a new tensor (contiguous, its own storage). The
# view rows keep a strided TensorRef into the base taken from the node's meta; the copy's meta
# is contiguous, so that ref read the base with the copy's strides (permute_copy: wrong values;
# expand_copy: past the base's storage) and aliased it. A copy keeps only the loader.

def _fresh(tv: TV) -> TV:
    return TV(tv.dtype, tv.size, tv.loader)


@register(aten.view_copy.default)
def _view_copy(L, node, x, size):
    return _fresh(_view(L, node, x, size))


@register(aten.permute_copy.default)
def _permute_copy(L, node, x, dims):
    return _fresh(_permute(L, node, x, dims))


@register(aten.expand_copy.default)
def _expand_copy(L, node, x, size, implicit=False):
    return _fresh(_expand(L, node, x, size, implicit))


@register(aten.unsqueeze.default)
def _unsqueeze(L, node, x, dim):
    dim = dim % (x.ndim + 1)
    out = x.size[:dim] + (1,) + x.size[dim:]
    return view_tv(L, x, out, lambda ops, idx: x.loader(ops, list(idx[:dim]) + list(idx[dim + 1:])))


@register(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(L, node, x, dims=None):
    if dims is None:
        dims = [d for d in range(x.ndim) if x.size[d] == 1]
    elif isinstance(dims, int):
        dims = [dims]
    dims = {d % x.ndim for d in dims if x.ndim and x.size[d % x.ndim] == 1}
    out = tuple(s for d, s in enumerate(x.size) if d not in dims)

    def loader(ops, idx):
        it = iter(idx)
        return x.loader(ops, [sympy.Integer(0) if d in dims else next(it) for d in range(x.ndim)])
    return view_tv(L, x, out, loader)


@register(aten.slice.Tensor)
def _slice(L, node, x, dim=0, start=None, end=None, step=1):
    dim = dim % x.ndim
    n = x.size[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    start = min(max(start, 0), n)
    out = vshape(out_meta(node))

    def loader(ops, idx):
        full = list(idx)
        full[dim] = start + step * idx[dim]
        return x.loader(ops, full)
    return view_tv(L, x, out, loader)


@register(aten.select.int)
def _select(L, node, x, dim, index):
    dim = dim % x.ndim
    index = index + x.size[dim] if index < 0 else index
    out = x.size[:dim] + x.size[dim + 1:]
    return view_tv(L, x, out,
                   lambda ops, idx: x.loader(ops, list(idx[:dim]) + [sympy.Integer(index)] + list(idx[dim:])))


@register(aten.split.Tensor, aten.split_with_sizes.default)
def _split(L, node, x, sizes, dim=0):
    dim = dim % x.ndim
    vals = out_meta(node)
    outs, start = [], 0
    for v in vals:
        n = vshape(v)[dim]
        outs.append(_narrow(L, x, dim, start, v))
        start += n
    return outs


@register(aten.unbind.int)
def _unbind(L, node, x, dim=0):
    dim = dim % x.ndim
    outs = []
    for i, v in enumerate(out_meta(node)):
        def loader(ops, idx, _i=i):
            return x.loader(ops, list(idx[:dim]) + [sympy.Integer(_i)] + list(idx[dim:]))
        outs.append(view_tv(L, x, vshape(v), loader, val=v))
    return outs


def _narrow(L, x, dim, start, val):
    def loader(ops, idx):
        full = list(idx)
        full[dim] = idx[dim] + start
        return x.loader(ops, full)
    return view_tv(L, x, vshape(val), loader, val=val)


@register(aten.as_strided.default)
def _as_strided(L, node, x, size, stride, storage_offset=None):
    """A strided view of the storage under ``x``: loads go to the base buffer directly."""
    if x.ref is None:
        return NotImplemented
    base = L.buffers[x.ref.name]
    lay = base.layout
    if any(n == 0 for n in lay.size):
        return NotImplemented       # an empty base: no index to recover (the loader would take % 0)
    dims = sorted((st, n, d) for d, (n, st) in enumerate(zip(lay.size, lay.stride)) if n != 1)
    expect = 1
    for st, n, _ in dims:  # the base must be dense to turn a storage offset back into an index
        if st != expect:
            return NotImplemented
        expect *= n
    val = out_meta(node)
    offset = sym(val.storage_offset()) - (L.input_offsets.get(base.name, 0) if base.kind == "input"
                                          else L.meta_offsets.get(base.name, 0))

    def loader(ops, idx):
        flat = sympy.Integer(offset)
        for i, st, n in zip(idx, stride, size):
            if n != 1:
                flat = flat + i * st
        full = [sympy.Integer(0)] * len(lay.size)
        for st, n, d in dims:
            full[d] = ModIndex(FloorDiv(flat, st), n)
        return ops.load(base.name, full)
    return view_tv(L, x, vshape(val), loader)


@register(aten.alias.default, aten.detach.default)
def _alias(L, node, x):
    return view_tv(L, x, x.size, x.loader)


@register(aten.repeat.default)
def _repeat(L, node, x, repeats):
    """A contiguous copy reading ``x`` at ``idx % size`` (a pointwise loop: the copy feeding it,
    a ``contiguous()`` of a permute say, fuses into it instead of an ATen call and a copy)."""
    val = out_meta(node)
    size = vshape(val)
    pad = len(size) - x.ndim
    if pad < 0:
        return NotImplemented

    def body(ops, idx):
        sub = []
        for i, s in enumerate(x.size):
            j = idx[pad + i]
            sub.append(sympy.Integer(0) if s == 1 else j if size[pad + i] == s else ModIndex(j, s))
        return x.loader(ops, sub)
    return L.pointwise(val.dtype, size, body)


# -- cat, indexing -------------------------------------------------------------------------------------------

@register(aten.cat.default)
def _cat(L, node, tensors, dim=0):
    val = out_meta(node)
    tensors = [t for t in tensors if not (t.ndim == 1 and t.size[0] == 0)]
    dim = dim % val.dim()
    dt = opmath(val.dtype)
    offsets, acc = [], 0
    for t in tensors:
        offsets.append(acc)
        acc += t.size[dim]

    def body(ops, idx):
        result = None
        for t, off in reversed(list(zip(tensors, offsets))):
            if t.size[dim] == 0:
                continue
            local = list(idx)
            # clamped, so every load stays in bounds; the where chain picks the right one
            local[dim] = sympy.Min(sympy.Max(idx[dim] - off, 0), t.size[dim] - 1)
            v = bload(ops, t, local, dt)
            if result is None:
                result = v
            else:
                result = ops.where(ops.lt(ops.index_expr(idx[dim], torch.int64),
                                          ops.constant(off + t.size[dim], torch.int64)), v, result)
        return result if result is not None else ops.constant(0, dt)
    size = vshape(val)
    if not tensors or any(t.ndim != len(size) for t in tensors):
        return L.pointwise(val.dtype, size, body, compute_dtype=dt)
    # laid out like its inputs really are (channels-last convolution outputs make a channels-last
    # cat), not as the metadata says: a stored cat would otherwise be transposed twice.  (As a
    # graph output it gets eager's layout, the metadata's: eager's cat keeps only channels-last.)
    return L.pointwise(val.dtype, size, body, compute_dtype=dt,
                       layout=iter_layout(L, node, tensors, val.dtype, size, actual=True))


@register(aten.select_scatter.default)
def _select_scatter(L, node, base, src, dim, index):
    """``base`` with ``src`` written at ``index`` along ``dim`` (select's backward)."""
    val = out_meta(node)
    dim = dim % val.dim()
    index = index + vshape(val)[dim] if index < 0 else index
    dt = opmath(val.dtype)

    def body(ops, idx):
        inside = ops.eq(ops.index_expr(idx[dim], torch.int64), ops.constant(index, torch.int64))
        v = bload(ops, src, list(idx[:dim]) + list(idx[dim + 1:]), dt)
        return ops.where(inside, v, bload(ops, base, idx, dt))
    return L.pointwise(val.dtype, vshape(val), body, compute_dtype=dt)


@register(aten.slice_scatter.default)
def _slice_scatter(L, node, base, src, dim=0, start=None, end=None, step=1):
    """``base`` with ``src`` written into ``base[start:end:step]`` along ``dim`` (slice's backward)."""
    val = out_meta(node)
    dim = dim % val.dim()
    n = vshape(val)[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None else (end + n if end < 0 else end)
    start, end = min(max(start, 0), n), min(max(end, 0), n)
    m = src.size[dim]
    if m == 0:
        return NotImplemented
    dt = opmath(val.dtype)

    def body(ops, idx):
        i = ops.index_expr(idx[dim], torch.int64)
        inside = ops.logical_and(ops.ge(i, ops.constant(start, torch.int64)),
                                 ops.lt(i, ops.constant(end, torch.int64)))
        if step != 1:
            on_step = ops.eq(ops.remainder(ops.sub(i, ops.constant(start, torch.int64)),
                                           ops.constant(step, torch.int64)), ops.constant(0, torch.int64))
            inside = ops.logical_and(inside, on_step)
        local = list(idx)
        # clamped, so the load stays in bounds where the where picks base
        local[dim] = sympy.Min(FloorDiv(sympy.Max(idx[dim] - start, 0), step), m - 1)
        return ops.where(inside, bload(ops, src, local, dt), bload(ops, base, idx, dt))
    return L.pointwise(val.dtype, vshape(val), body, compute_dtype=dt)


def _check(op: str, dim: int, size: int, wrap: bool, error: type, eager_text: str = "") -> IndexCheck | None:
    """How the kernel checks an index of ``op`` (None when ``config.kernel_index_checks`` is off:
    out-of-range indices then read a clamped element instead of raising)."""
    if not config.kernel_index_checks:
        return None
    return IndexCheck(op, dim, sym(size), wrap, error, eager_text)


def _indirect(ops, t: TV, idx, size: int, check: IndexCheck | None):
    return ops.indirect_indexing(bload(ops, t, idx, torch.int64), size, check)


# eager's words for index_select and embedding (which do not name the index)
_OUT_OF_RANGE = "index out of range in self"


@register(aten.index.Tensor)
def _index(L, node, x, indices, checked=True):
    val = out_meta(node)
    if any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in indices):
        return NotImplemented
    indices = list(indices) + [None] * (x.ndim - len(indices))
    pos = [i for i, t in enumerate(indices) if t is not None]
    bshape = broadcast_sizes(*[t.size for t in indices if t is not None])
    if any(x.size[d] == 0 for d in pos):
        return NotImplemented  # nothing to load from: eager raises for any index
    consecutive = pos == list(range(pos[0], pos[-1] + 1))
    bstart = pos[0] if consecutive else 0
    checks = {d: _check("aten.index", d, x.size[d], True, IndexError) if checked else None for d in pos}

    def body(ops, idx):
        bidx = list(idx[bstart:bstart + len(bshape)])
        other = list(idx[:bstart]) + list(idx[bstart + len(bshape):])
        full, k = [], 0
        for d in range(x.ndim):
            if indices[d] is not None:
                full.append(_indirect(ops, indices[d], bidx, x.size[d], checks[d]))
            else:
                full.append(other[k])
                k += 1
        return x.loader(ops, full)
    return L.pointwise(val.dtype, vshape(val), body, compute_dtype=val.dtype)


@register(aten._unsafe_index.Tensor)
def _unsafe_index(L, node, x, indices):
    """``x[indices]`` whose indices are known to be in range (upsampling's decomposition in
    training graphs): a gather without checks (out-of-range values read a clamped element)."""
    return _index(L, node, x, indices, checked=False)


@register(aten.gather.default)
def _gather(L, node, x, dim, index, sparse_grad=False):
    val = out_meta(node)
    dim = dim % max(x.ndim, 1)
    size = x.size[dim] if x.ndim else 1
    if size == 0 and index.numel:
        return NotImplemented
    check = _check("aten.gather", dim, size, False, RuntimeError)

    def body(ops, idx):
        full = list(idx)
        if x.ndim:
            full[dim] = _indirect(ops, index, idx, size, check)
        return x.loader(ops, full)
    return L.pointwise(val.dtype, vshape(val), body, compute_dtype=val.dtype)


@register(aten.index_select.default)
def _index_select(L, node, x, dim, index):
    val = out_meta(node)
    dim = dim % max(x.ndim, 1)
    size = x.size[dim] if x.ndim else 1
    if size == 0 and index.numel:
        return NotImplemented
    check = _check("aten.index_select", dim, size, False, IndexError, _OUT_OF_RANGE)

    def body(ops, idx):
        full = list(idx)
        if x.ndim:
            full[dim] = ops.indirect_indexing(
                bload(ops, index, [idx[dim]] if index.ndim else [], torch.int64), size, check)
        return x.loader(ops, full)
    return L.pointwise(val.dtype, vshape(val), body, compute_dtype=val.dtype)


@register(aten.embedding.default)
def _embedding(L, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    val = out_meta(node)
    n = indices.ndim
    if weight.size[0] == 0 and indices.numel:
        return NotImplemented
    check = _check("aten.embedding", 0, weight.size[0], False, IndexError, _OUT_OF_RANGE)

    def body(ops, idx):
        row = _indirect(ops, indices, list(idx[:n]), weight.size[0], check)
        return weight.loader(ops, [row, idx[n]])
    return L.pointwise(val.dtype, vshape(val), body, compute_dtype=val.dtype)
