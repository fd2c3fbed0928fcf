"""Higher-order ops run eagerly at a graph break (until they are traced into the graph, issue
#12), and a break whose prefix stored something the runner cannot rebuild: right answers, no
crash. ``torch.cond`` run eagerly compiles its branches with torch.compile, importing torch's
compile stack: none of those frames may be compiled by xcompile (they once were: an ImportError
from a partially initialized module, and an Unsupported error raised into the user's program)."""
from __future__ import annotations

import pytest
import torch

import xcompile
from xcompile.testing import CompileCounter


def _g(x, p):
    y = x * 2
    # (a branch reading requires_grad is not traced into the graph: the cond runs eagerly at a break)
    z = torch.cond(p, lambda t: t.sin() if not t.requires_grad else t, lambda t: t.cos(), (y,))
    return z + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_cond_runs_eagerly_between_graphs(backend):
    cnt = CompileCounter()
    compiled = xcompile.compile(_g, backend=cnt if backend == "eager" else backend)
    for p in (True, False, True):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x, torch.tensor(p)), _g(x, torch.tensor(p)))
    if backend == "eager":
        assert cnt.frame_count == 2          # before and after the cond


def test_cond_alone():
    compiled = xcompile.compile(lambda x, p: torch.cond(p, lambda t: t.sin() if not t.requires_grad else t,
                                                        lambda t: t.cos(), (x,)))
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x, torch.tensor(False)), x.cos())


class _Holder:
    pass


_HOLDER = _Holder()


def _stores_a_function(x):
    y = x + 1
    _HOLDER.fn = lambda: 7          # a function made in the frame, stored into outside state
    print("", end="")               # a graph break after it
    return y * 2


def test_a_break_after_storing_a_new_function_runs_the_frame_eagerly():
    compiled = xcompile.compile(_stores_a_function)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), (x + 1) * 2)
    assert _HOLDER.fn() == 7
