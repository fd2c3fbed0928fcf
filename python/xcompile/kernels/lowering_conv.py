"""The convolution row: an extern ATen call fed channels-last input, or -- for a patch embedding
(kernel == stride, no padding: ViT, DiT) -- a gather of the patches and one addmm."""
from __future__ import annotations

import types

import torch

from .. import config
from .graph import TV
from .ir import TensorRef
from .lowering_base import out_meta, register
from .sizes import vshape

aten = torch.ops.aten


@register(aten.convolution.default)
def _convolution(L, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """Extern, but fed channels-last input (oneDNN's preferred layout: no reorders per call);
    the producer of the input writes it that way directly, and consumers follow the output.
    Not in training graphs: there convolution_backward runs on what the forward saved, and
    oneDNN's backward is slower on channels-last tensors than the NCHW path (a small UNet's
    training step: 0.95x eager channels-last, 1.00x NCHW, 1 thread)."""
    if not config.kernel_channels_last_conv or x.ndim != 4 or L.device.type != "cpu" \
            or transposed or L.training:
        return NotImplemented
    patches = _patch_embedding(L, node, x, w, b, stride, padding, dilation, groups)
    if patches is not None:
        return patches
    n, c, h, wd = x.size
    xr = L.realize(x, stride=(h * wd * c, 1, wd * c, c))
    return L.extern(node, (xr, w, b, stride, padding, dilation, transposed, output_padding, groups), {},
                    reason="convolution", relayout=True)


def _patch_embedding(L, node, x, w, b, stride, padding, dilation, groups):
    """A convolution whose windows do not overlap (kernel == stride, no padding, no dilation,
    one group) is a matrix product: a pointwise loop gathers each output pixel's patch into a row
    (channels, then kernel rows, then columns: the weight's own order), and ``addmm(b, patches,
    w.view(out, -1).t())`` gives the output channels-last.  oneDNN spends ~50 µs setting up a
    small convolution; the gather and the addmm take a few."""
    if not isinstance(w, TV) or w.ndim != 4 or groups != 1 or any(p != 0 for p in padding) or \
            any(d != 1 for d in dilation) or tuple(w.size[2:]) != tuple(stride) or \
            w.size[2] * w.size[3] == 1 or x.dtype not in (torch.float32, torch.float64) or \
            w.dtype != x.dtype or (isinstance(b, TV) and (b.dtype != x.dtype or b.ndim != 1)):
        return None
    if w.ref is None or w.ref.view is not None or L.buffers[w.ref.name].layout.offset != 0 or \
            tuple(L.buffers[w.ref.name].layout.stride) != (w.size[1] * w.size[2] * w.size[3],
                                                            w.size[2] * w.size[3], w.size[3], 1):
        return None                     # the weight must be a whole contiguous buffer (a parameter)
    val = out_meta(node)
    n, c, h, wd = x.size
    o, _, kh, kw = w.size
    ho, wo = (h - kh) // kh + 1, (wd - kw) // kw + 1
    if vshape(val) != (n, o, ho, wo):
        return None
    rows, cols = n * ho * wo, c * kh * kw

    def gather(ops, idx):               # idx over (n, ho, wo, c, kh, kw)
        ni, i, j, ci, a, bb = idx
        return x.loader(ops, [ni, ci, i * kh + a, j * kw + bb])
    saved, L.current = L.current, None  # a buffer of our own, not the node's value
    try:
        p = L.pointwise(x.dtype, (n, ho, wo, c, kh, kw), gather)
    finally:
        L.current = saved
    patches = TensorRef(p.ref.name, ((rows, cols), (cols, 1), 0))
    weight_t = TensorRef(w.ref.name, ((cols, o), (1, cols), 0))
    if b is None:
        target, args = aten.mm.default, (patches, weight_t)
    else:
        target, args = aten.addmm.default, (b, patches, weight_t)
    mm = L.extern(types.SimpleNamespace(target=target, meta={}), args, {}, reason="convolution as matmul",
                  relayout=True)
    name = mm.ref.name

    def loader(ops, idx):               # (n, o, ho, wo) -> row (n, ho, wo), column o
        ni, oi, i, j = idx
        return ops.load(name, [ni * (ho * wo) + i * wo + j, oi])
    view = ((n, o, ho, wo), (ho * wo * o, 1, wo * o, o), 0)
    return TV(x.dtype, (n, o, ho, wo), loader, TensorRef(name, view))
