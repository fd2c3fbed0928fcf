"""The lowering table and what its rows share: ``register``, result metadata, broadcast loads and
the pointwise builder with eager's result layout.

A row is ``fn(L, node, *args, **kwargs)`` with ``L`` the ``GraphLowering``, ``node`` the FX node
(its ``meta["val"]`` is the fake result) and the arguments lowered (``TV`` for tensors).  It
returns a ``TV`` (or a tuple of them), or ``NotImplemented`` to run that call as an extern ATen
kernel.  The rows live in ``lowering.py`` (pointwise), ``lowering_reductions.py``,
``lowering_views.py`` and ``lowering_conv.py``; ``lowerings.py`` imports them all and is where the
table is read from.
"""
from __future__ import annotations

from typing import Callable, Sequence

import sympy
import torch
import torch.fx
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as K
from torch._prims_common import elementwise_dtypes

from .graph import TV, GraphLowering
from .ir import Layout
from .sizes import FloatArg, is_symbolic, lt, sym, vshape, vstride

aten = torch.ops.aten
LOWERINGS: dict = {}


def register(*ops):
    def deco(fn):
        for op in ops:
            LOWERINGS[op] = fn
        return fn
    return deco


# -- pointwise helpers ---------------------------------------------------------------------------------

def meta_like(a):
    if isinstance(a, FloatArg):    # a symbolic float promotes as a Python float does
        return 1.0
    if isinstance(a, TV):          # (only the dtype and whether it is 0-d count: 2 for a symbolic size)
        return torch.empty([2 if is_symbolic(s) else s for s in a.size], dtype=a.dtype, device="meta")
    return a


def opmath(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def bload(ops, a, idx: Sequence, dtype: torch.dtype):
    """Load ``a`` (TV or Python scalar) at ``idx`` of the broadcast output, as ``dtype``."""
    if not isinstance(a, TV):
        return ops.constant(a, dtype)
    sub = list(idx[len(idx) - a.ndim:]) if a.ndim else []
    sub = [sympy.Integer(0) if s == 1 else i for s, i in zip(a.size, sub)]
    v = a.loader(ops, sub)
    return v if a.dtype == dtype else ops.to_dtype(v, dtype)


def out_meta(node):
    v = node.meta.get("val")
    return v


def pointwise(L: GraphLowering, node, inputs: Sequence, fn: Callable, kind=K.DEFAULT,
              compute_dtype=None, out_dtype=None) -> TV:
    """``fn(ops, dtype, *values)`` over the broadcast of ``inputs`` (values as ``compute_dtype``)."""
    val = out_meta(node)
    if compute_dtype is None:
        compute_dtype, _ = elementwise_dtypes(*[meta_like(a) for a in inputs], type_promotion_kind=kind)
    out_dtype = out_dtype or val.dtype
    size = vshape(val)

    def body(ops, idx):
        return fn(ops, compute_dtype, *[bload(ops, a, idx, compute_dtype) for a in inputs])

    res_dtype = torch.bool if kind == K.ALWAYS_BOOL else compute_dtype
    out = L.pointwise(out_dtype, size, body, compute_dtype=res_dtype,
                      layout=iter_layout(L, node, inputs, out_dtype, size, actual=True))
    assert out.ref is not None                   # a pointwise result is a buffer of its own
    L.eager_layouts[out.ref.name] = iter_layout(L, node, inputs, out_dtype, size, actual=False)
    return out


def iter_layout(L, node, inputs, dtype, size, actual: bool) -> Layout:
    """The strides eager's TensorIterator gives an elementwise result: dims ordered like the
    inputs' strides (first input first; broadcast dims do not vote).  Inputs vote with the
    layout they really have here (a channels-last convolution output makes channels-last
    consumers) when ``actual``, else with the layouts eager would see (the FX metadata: that is
    the layout a graph output must have).  Some fake kernels disagree with eager about the
    result, so the node's own meta strides are not used."""
    ndim = len(size)
    ops_strides = []
    metas = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in node.args]
    by_value = {id(L.env[a]): a.meta.get("val") for a in node.all_input_nodes if a in L.env}
    for i, a in enumerate(inputs):
        if not isinstance(a, TV) or a.ndim == 0:
            continue
        stride = L.strides_of(a) if actual else None
        if stride is None and a.ref is not None and a.ref.view is None and a.ref.name in L.eager_layouts:
            stride = L.eager_layouts[a.ref.name].stride   # ours for an elementwise input: the meta may differ
        if stride is None:
            # the input's own metadata (a row may list its inputs in another order than the node)
            v = by_value.get(id(a), metas[i] if i < len(metas) else None)
            if not (isinstance(v, torch.Tensor) and vshape(v) == tuple(a.size)):
                continue
            stride = vstride(v)
        pad = ndim - a.ndim
        ops_strides.append([0] * pad + [0 if s == 1 else st for s, st in zip(a.size, stride)])
    perm = list(reversed(range(ndim)))  # perm[0]: the innermost dim

    def should_swap(d0, d1):
        for st in ops_strides:
            if st[d0] == 0 or st[d1] == 0:
                continue
            if lt(st[d0], st[d1]):
                return -1
            if lt(st[d1], st[d0]):
                return 1
            if lt(size[d1], size[d0]):
                return 1
        return 0

    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    strides = [0] * ndim
    acc = 1
    for d in perm:
        strides[d] = acc
        acc *= size[d] if is_symbolic(size[d]) else max(int(size[d]), 1)
    return Layout(dtype, tuple(sym(s) for s in size), tuple(strides))


def const(ops, v, dt):
    return ops.constant(v, dt)
