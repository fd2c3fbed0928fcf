"""Lowering rows for reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, any/all,
var/std (one Welford pass), var_mean/std_mean."""
from __future__ import annotations

import math

import torch

from .graph import TV, GraphLowering, reshape_index
from .lowering_base import const as _c
from .lowering_base import opmath, out_meta, register
from .sizes import is_symbolic, smax, sym, vshape

aten = torch.ops.aten


def _dims(x: TV, dims) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % max(x.ndim, 1) for d in dims}) if x.ndim else []


def _fit(L: GraphLowering, tv: TV, shape) -> TV:
    """View ``tv`` as ``shape`` (same numel) when the reduction's natural shape differs."""
    shape = tuple(sym(s) for s in shape)
    if tuple(tv.size) == shape:
        return tv
    return TV(tv.dtype, shape, lambda ops, idx: tv.loader(ops, reshape_index(tv.size, shape, idx)))


def _reduce(L, node, x, dims, keepdim, rtype, acc, out_dtype, value_fn=None):
    (r,) = L.reduction(x, _dims(x, dims), keepdim, rtype, acc, out_dtype, value_fn=value_fn)
    return r


def _numel(x: TV, dims) -> int:
    return math.prod(x.size[d] for d in _dims(x, dims))


@register(aten.sum.dim_IntList, aten.sum.default)
def _sum(L, node, x, dims=None, keepdim=False, dtype=None):
    val = out_meta(node)
    acc = opmath(val.dtype) if val.dtype.is_floating_point else torch.int64
    return _fit(L, _reduce(L, node, x, dims, keepdim, "sum", acc, val.dtype), vshape(val))


@register(aten.prod.dim_int, aten.prod.default)
def _prod(L, node, x, dim=None, keepdim=False, dtype=None):
    val = out_meta(node)
    acc = opmath(val.dtype) if val.dtype.is_floating_point else torch.int64
    return _fit(L, _reduce(L, node, x, dim, keepdim, "prod", acc, val.dtype), vshape(val))


@register(aten.mean.dim, aten.mean.default)
def _mean(L, node, x, dims=None, keepdim=False, dtype=None):
    val = out_meta(node)
    acc = opmath(val.dtype)
    s = _reduce(L, node, x, dims, keepdim, "sum", acc, acc)
    n = _numel(x, dims)
    out = L.pointwise(val.dtype, s.size, lambda ops, idx: ops.truediv(s.loader(ops, idx), _c(ops, n, acc)),
                      compute_dtype=acc)
    return _fit(L, out, vshape(val))


def _minmax(rtype):
    def row(L, node, x, dims=None, keepdim=False):
        val = out_meta(node)
        return _fit(L, _reduce(L, node, x, dims, keepdim, rtype, opmath(x.dtype), val.dtype), vshape(val))
    return row


register(aten.amax.default)(_minmax("max"))
register(aten.amin.default)(_minmax("min"))


@register(aten.max.default)
def _max_all(L, node, x):
    return _minmax("max")(L, node, x)


@register(aten.min.default)
def _min_all(L, node, x):
    return _minmax("min")(L, node, x)


def _arg(rtype):
    def row(L, node, x, dim=None, keepdim=False):
        val = out_meta(node)
        dims = None if dim is None else [dim]
        r = _reduce(L, node, x, dims, keepdim if dim is not None else False, rtype, opmath(x.dtype),
                    torch.int64)
        return _fit(L, r, vshape(val))
    return row


register(aten.argmax.default)(_arg("argmax"))
register(aten.argmin.default)(_arg("argmin"))


def _value_and_index(rtype, argtype):
    def row(L, node, x, dim, keepdim=False):
        values, indices = out_meta(node)
        v = _reduce(L, node, x, [dim], keepdim, rtype, opmath(x.dtype), values.dtype)
        i = _reduce(L, node, x, [dim], keepdim, argtype, opmath(x.dtype), torch.int64)
        return _fit(L, v, vshape(values)), _fit(L, i, vshape(indices))
    return row


register(aten.max.dim)(_value_and_index("max", "argmax"))
register(aten.min.dim)(_value_and_index("min", "argmin"))


def _anyall(rtype):
    def row(L, node, x, dims=None, keepdim=False):
        val = out_meta(node)
        return _fit(L, _reduce(L, node, x, dims, keepdim, rtype, torch.bool, val.dtype), vshape(val))
    return row


register(aten.any.dim, aten.any.dims, aten.any.default)(_anyall("any"))
register(aten.all.dim, aten.all.dims, aten.all.default)(_anyall("all"))


def _welford(L, node, x, dims, keepdim, correction, want_std, want_mean):
    """One Welford pass gives mean and M2; var = M2 / max(N - correction, 0)."""
    metas = out_meta(node)
    metas = metas if isinstance(metas, (tuple, list)) else (metas,)
    acc = opmath(metas[0].dtype)
    mean, m2 = L.reduction(x, _dims(x, dims), keepdim, "welford", acc, acc)
    n = _numel(x, dims)
    corr = 1 if correction is None else correction
    denom = smax(n - corr, 0)

    def var_body(ops, idx):
        v = ops.truediv(m2.loader(ops, idx), _c(ops, denom if is_symbolic(denom) else float(denom), acc))
        return ops.sqrt(v) if want_std else v
    var = _fit(L, L.pointwise(metas[0].dtype, m2.size, var_body, compute_dtype=acc), vshape(metas[0]))
    if not want_mean:
        return var
    if not is_symbolic(n) and int(n) == 0:
        # the mean of no elements is nan (0 / 0), as eager's; Welford's accumulator starts at 0
        mean = L.pointwise(metas[1].dtype, mean.size, lambda ops, idx: _c(ops, float("nan"), acc), compute_dtype=acc)
    elif metas[1].dtype != acc:
        mean = L.pointwise(metas[1].dtype, mean.size, mean.loader, compute_dtype=acc)
    return var, _fit(L, mean, vshape(metas[1]))


@register(aten.var.correction)
def _var(L, node, x, dims=None, *, correction=None, keepdim=False):
    return _welford(L, node, x, dims, keepdim, correction, False, False)


@register(aten.std.correction)
def _std(L, node, x, dims=None, *, correction=None, keepdim=False):
    return _welford(L, node, x, dims, keepdim, correction, True, False)


@register(aten.var_mean.correction)
def _var_mean(L, node, x, dims=None, *, correction=None, keepdim=False):
    return _welford(L, node, x, dims, keepdim, correction, False, True)


@register(aten.std_mean.correction)
def _std_mean(L, node, x, dims=None, *, correction=None, keepdim=False):
    return _welford(L, node, x, dims, keepdim, correction, True, True)
