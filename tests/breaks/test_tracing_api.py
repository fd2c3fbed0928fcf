"""The fine-grained tracing APIs beyond the reference examples: methods, kwargs, pytrees,
context-manager forms and messages."""
from __future__ import annotations

import pytest
import torch

import xcompile
import xcompile.testing
from xcompile.api_tracing import ForbiddenInGraph
from xcompile.exc import Unsupported

from .util import check


def t4():
    return (torch.randn(4),)


def test_graph_break_message_is_in_the_explanation():
    def f(x):
        xcompile.graph_break("need eager here")
        return x + 1

    out = xcompile.explain(f)(torch.randn(2))
    assert out.break_reasons[0].explanation == "User-inserted graph break. Message: need eager here"


def test_disable_as_a_context_manager_inside_compiled_code():
    calls = []

    def helper(x):
        calls.append(torch.compiler.is_compiling())
        return x * 2

    def f(x):
        y = x + 1
        with xcompile.disable():
            z = helper(y)
        return z - 1

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(f)(x), f(x))
    assert calls == [False, False]      # helper ran eagerly inside the block (and once in eager)


def test_disabled_method_of_a_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @xcompile.disable
        def helper(self, x):
            return x.tolist()           # would break anyway; disabled, it is never traced

        def forward(self, x):
            h = self.lin(x)
            n = len(self.helper(h))
            return h * n

    _, records = check(M(), lambda: (torch.randn(2, 4),), graphs=2, breaks=1)
    assert "xcompile.disable()" in records[0].reason


def test_allow_in_graph_with_keywords_and_tuple_outputs():
    def split_scale(x, *, scale):
        xcompile.graph_break()
        return x * scale, x.sum()

    xcompile.allow_in_graph(split_scale)
    try:
        def f(x):
            a, b = split_scale(x + 1, scale=3.0)
            return a - b

        cnt, _ = check(f, t4, graphs=1, breaks=0)
        assert any("split_scale" in str(n.target) for n in cnt.graphs[0].graph.nodes)
    finally:
        xcompile.frontend.tracing_rules.unmark(split_scale)


def test_allow_in_graph_under_aot_eager_traces_through():
    @xcompile.nonstrict_trace
    def body(x):
        return x.sin() * 2

    def f(x):
        return body(x).sum()

    x = torch.randn(4, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    xcompile.compile(f, backend="aot_eager", fullgraph=True)(x).backward()
    f(y).backward()
    torch.testing.assert_close(x.grad, y.grad)


_TABLE = {"w": torch.randn(4)}


def test_nonstrict_trace_reads_outside_tensors_at_run_time_without_guards():
    @xcompile.nonstrict_trace
    def scaled(x):
        return x * _TABLE["w"]

    cnt = xcompile.testing.CompileCounter()
    f = xcompile.compile(lambda x: scaled(x) + 1, backend=cnt, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(f(x), x * _TABLE["w"] + 1)
    old = _TABLE["w"]
    _TABLE["w"] = torch.randn(4)
    try:
        f(x)
        assert cnt.frame_count == 1     # not guarded: no recompile
    finally:
        _TABLE["w"] = old


def test_forbid_in_graph_reached_through_a_method():
    class Box:
        def value(self, x):
            return x + 1

    xcompile.forbid_in_graph(Box.value)
    try:
        box = Box()
        with pytest.raises(ForbiddenInGraph):
            xcompile.compile(lambda x: box.value(x) * 2)(torch.randn(2))
    finally:
        xcompile.frontend.tracing_rules.unmark(Box.value)


def test_disallow_in_graph_of_a_python_function_and_its_result():
    def noisy(x):
        return x.abs().max()

    xcompile.disallow_in_graph(noisy)
    try:
        def f(x):
            m = noisy(x)
            return x / m

        cnt, _ = check(f, t4, breaks=1)
        # noisy ran eagerly: its own frame compiled through the hook, then f's resume
        assert cnt.frame_count == 2
    finally:
        xcompile.frontend.tracing_rules.unmark(noisy)


def test_error_on_graph_break_on_a_method():
    class M(torch.nn.Module):
        @xcompile.error_on_graph_break(True)
        def forward(self, x):
            y = x + 1
            xcompile.graph_break()
            return y

    with pytest.raises(Unsupported, match="graph_break"):
        xcompile.compile(M())(torch.randn(2))


def test_error_on_graph_break_context_restores_on_exceptions():
    with pytest.raises(KeyError), xcompile.error_on_graph_break(True):
        assert xcompile.config.error_on_graph_break is True
        raise KeyError
    assert xcompile.config.error_on_graph_break is False


def test_error_on_graph_break_is_read_when_a_frame_compiles():
    def f(x):
        y = x * 2
        xcompile.graph_break()
        return y

    def g(x):
        y = x * 3
        xcompile.graph_break()
        return y

    with xcompile.error_on_graph_break(True), pytest.raises(Unsupported):
        xcompile.compile(f)(torch.randn(2))
    torch.testing.assert_close(xcompile.compile(g)(torch.ones(2)), torch.full((2,), 3.0))


def test_compiled_function_inlined_uses_the_outer_backend():
    inner_cnt, outer_cnt = xcompile.testing.CompileCounter(), xcompile.testing.CompileCounter()
    inner = xcompile.compile(lambda x: x.sin(), backend=inner_cnt)

    def outer(x):
        return inner(x) * 2

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(outer, backend=outer_cnt)(x), x.sin() * 2)
    assert (outer_cnt.frame_count, inner_cnt.frame_count) == (1, 0)


def test_compiled_module_called_after_a_break_keeps_its_own_backend():
    inner_cnt, outer_cnt = xcompile.testing.CompileCounter(), xcompile.testing.CompileCounter()
    mod = torch.nn.Linear(3, 3)
    opt = xcompile.compile(mod, backend=inner_cnt)

    def outer(x):
        h = opt(x)                      # inlined into outer's graph
        xcompile.graph_break()
        return opt(h)                   # in the resume function: inlined again

    x = torch.randn(2, 3)
    torch.testing.assert_close(xcompile.compile(outer, backend=outer_cnt)(x), mod(mod(x)))
    assert outer_cnt.frame_count == 2 and inner_cnt.frame_count == 0
