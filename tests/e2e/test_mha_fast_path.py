"""nn.MultiheadAttention in inference takes its fast path (torch._native_multi_head_attention)
after asking whether make_fx is tracing; the tracer answers as eager does outside any dispatch
mode, so the module compiles to one graph (was: 0 graphs, the frame ran eagerly)."""
import torch
import torch.nn as nn

import xcompile
from xcompile.testing import CompileCounter


def test_mha_eval_compiles_to_one_graph():
    m = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    kpm = torch.zeros(2, 5, dtype=torch.bool)
    kpm[1, 3:] = True
    for kw in (dict(), dict(key_padding_mask=kpm), dict(need_weights=False)):
        xcompile.reset()
        cnt = CompileCounter()
        with torch.no_grad():
            out = xcompile.compile(m, backend=cnt, fullgraph=True)(x, x, x, **kw)
            ref = m(x, x, x, **kw)
        for a, b in zip(out, ref):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b)
        assert cnt.frame_count == 1
    xcompile.reset()
