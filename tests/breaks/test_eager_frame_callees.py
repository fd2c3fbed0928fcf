"""Issue #9 item 3: whatever makes a frame run eagerly (a graph break inside ``try`` or a loop,
a wrapper marked ``disable(recursive=False)``, a wrapper that cannot be traced), the frames it
calls still go through the cache and are compiled — on the shape of transformers' output
decorators (``functools.wraps``, ``try/finally``, state set before and reset after ``forward``)."""
from __future__ import annotations

import functools

import torch

import xcompile
from xcompile.testing import CompileCounter


def _opaque():
    print("", end="")                     # a graph break (print is never traced)


def _decorate(kind):
    def deco(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            state = {"calls": 0}
            if kind == "try":
                try:
                    _opaque()                 # a break inside try: this frame runs eagerly
                    out = func(self, *args, **kwargs)
                finally:
                    state["calls"] += 1
            elif kind == "loop":
                out = None
                for _ in range(1):
                    _opaque()                 # a break inside a loop
                    out = func(self, *args, **kwargs)
            else:
                out = func(self, *args, **kwargs)
            return out
        if kind == "skip":
            wrapper = xcompile.disable(wrapper, recursive=False)
        return wrapper
    return deco


def _model(kind):
    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.lin(x)) * 2

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        @_decorate(kind)
        def forward(self, x):
            return self.inner(x) + 1

    return M()


def _check(kind):
    m = _model(kind)
    cnt = CompileCounter()
    cm = xcompile.compile(m, backend=cnt)
    for i in range(3):
        x = torch.randn(2, 4)
        torch.testing.assert_close(cm(x), m(x))
        if i == 0:
            first = cnt.frame_count
    assert first >= 1, f"{kind}: the decorated forward's callees were not compiled"
    assert cnt.op_count >= 3, f"{kind}: the model's ops ran eagerly ({cnt.op_count} ops in graphs)"
    assert cnt.frame_count == first, f"{kind}: recompiled ({first} -> {cnt.frame_count})"


def test_break_inside_try_compiles_the_callees():
    _check("try")


def test_break_inside_loop_compiles_the_callees():
    _check("loop")


def test_skipped_wrapper_compiles_the_callees():
    _check("skip")


def test_plain_wrapper_is_one_graph():
    m = _model("plain")
    cnt = CompileCounter()
    cm = xcompile.compile(m, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(cm(x), m(x))
    assert cnt.frame_count == 1
