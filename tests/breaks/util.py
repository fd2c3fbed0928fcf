"""check(): a compiled function against eager on fresh inputs, with graph and break counts."""
from __future__ import annotations

import copy

import torch

import xcompile
import xcompile.testing
from xcompile import log
from xcompile.testing import captured_logs, graph_break_logs  # noqa: F401  (shared with tests/reference)


class BreakCounter:
    """Observer of graph breaks (xcompile.log.add_observer)."""

    def __init__(self):
        self.records = []

    def on_break(self, record):
        self.records.append(record)

    def on_graph(self, code, gm, guards):
        pass

    def __enter__(self):
        log.add_observer(self)
        return self

    def __exit__(self, *exc):
        log.remove_observer(self)


def same(a, e, path="out"):
    assert type(a) is type(e), f"{path}: {type(a).__name__} != {type(e).__name__}"
    if isinstance(e, torch.Tensor):
        assert a.shape == e.shape and a.dtype == e.dtype and a.requires_grad == e.requires_grad, path
        assert a.stride() == e.stride(), f"{path}: stride {a.stride()} != {e.stride()}"
        torch.testing.assert_close(a.detach(), e.detach(), equal_nan=True)
    elif isinstance(e, (list, tuple)):
        assert len(a) == len(e), path
        for i, (x, y) in enumerate(zip(a, e)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(e, dict):
        assert list(a) == list(e), path
        for k in e:
            same(a[k], e[k], f"{path}[{k!r}]")
    else:
        assert a == e, f"{path}: {a!r} != {e!r}"


def check(fn, make_args, *, graphs=None, breaks=None, calls=3, backend=None):
    """Compile ``fn``; call it ``calls`` times on fresh ``make_args()`` (also run eagerly on deep
    copies); compare results and the arguments afterwards. ``graphs``/``breaks``: expected
    counts after the first call; later calls must not compile anything new."""
    cnt = xcompile.testing.CompileCounter() if backend is None else backend
    compiled = xcompile.compile(fn, backend=cnt)
    counts = None
    with BreakCounter() as bc:
        for i in range(calls):
            torch.manual_seed(i)
            args = make_args()
            eager_args = copy.deepcopy(args)
            torch.manual_seed(100 + i)
            expected = fn(*eager_args)
            torch.manual_seed(100 + i)
            actual = compiled(*args)
            same(actual, expected)
            same(args, eager_args, "args after the call")
            if i == 0:
                counts = (cnt.frame_count, len(bc.records))
            else:
                assert (cnt.frame_count, len(bc.records)) == counts, (
                    f"call {i} compiled again: {counts} -> {(cnt.frame_count, len(bc.records))}")
    if graphs is not None:
        assert counts[0] == graphs, f"{counts[0]} graphs, expected {graphs}"
    if breaks is not None:
        assert counts[1] == breaks, f"{counts[1]} graph breaks, expected {breaks}: " + \
            "; ".join(r.reason for r in bc.records)
    return cnt, bc.records




