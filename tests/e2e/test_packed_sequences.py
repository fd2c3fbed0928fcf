"""PackedSequence programs (finding F2): torch.nn.utils functions are Python and are traced;
an op that reads tensor data while tracing (_pad_packed_sequence) or that would be handed a
named tuple is a graph break, never a TorchRuntimeError."""
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import xcompile
from xcompile.testing import CompileCounter


def _pad(x, lengths):
    p = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(p, batch_first=True)[0] * 2


LSTM = torch.nn.LSTM(4, 5, batch_first=True)


def _lstm(x, lengths):
    p = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    o, (h, c) = LSTM(p)
    return pad_packed_sequence(o, batch_first=True)[0], h


def test_pack_pad_roundtrip_and_lstm_match_eager():
    for fn in (_pad, _lstm):
        xcompile.reset()
        cnt = CompileCounter()
        cf = xcompile.compile(fn, backend=cnt)
        for _ in range(2):
            x, lengths = torch.randn(3, 6, 4), torch.tensor([6, 2, 4])
            out, ref = cf(x, lengths), fn(x, lengths)
            for a, b in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
                torch.testing.assert_close(a, b)
        n = cnt.frame_count
        cf(torch.randn(3, 6, 4), torch.tensor([6, 2, 4]))
        assert cnt.frame_count == n                     # no recompile
    xcompile.reset()


def test_explain_names_the_break():
    xcompile.reset()
    ex = xcompile.explain(_pad)(torch.randn(3, 6, 4), torch.tensor([6, 2, 4]))
    assert ex.graph_break_count >= 1
    assert any("reads tensor data" in str(r.reason) or "named" in str(r.reason).lower()
               or "namedtuple" in str(r.reason) for r in ex.break_reasons), [str(r.reason) for r in ex.break_reasons]
    xcompile.reset()
