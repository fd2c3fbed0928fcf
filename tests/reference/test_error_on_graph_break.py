"""error_on_graph_break.md, In [2] .. In [10], with xcompile in torch's place.

Each example runs as written; the test checks what the document shows: the result (equal to
eager), whether it raised, the error text, and the graph-break log lines."""
from __future__ import annotations

import pytest
import torch

import xcompile
import xcompile.testing
from xcompile.exc import Unsupported

from .util import captured_logs, graph_break_logs

REASON = "Call to `xcompile.graph_break()`"


def _break_lines(messages):
    return [m for m in graph_break_logs(messages) if REASON in m]


def test_in2_error_on_graph_break_false_under_true():
    @xcompile.error_on_graph_break(False)
    def code_with_a_difficult_graph_break(x):
        x = x + 1
        xcompile.graph_break()
        return x + 2

    def inner(x):
        return code_with_a_difficult_graph_break(x)

    # NOTE: fullgraph=False
    @xcompile.error_on_graph_break(True)
    @xcompile.compile
    def fn(x):
        return inner(x)

    x = torch.randn(3)
    with captured_logs("graph_breaks") as logs:
        out = fn(x)                                   # No error, but there is a graph break
    torch.testing.assert_close(out, x + 3)
    lines = _break_lines(logs)
    assert lines, logs
    assert lines[0].startswith("Graph break in user code at ")
    assert "Explanation: User-inserted graph break. Message: None" in lines[0]
    assert "Hint: Remove the `xcompile.graph_break()` call." in lines[0]
    assert "User code traceback:" in lines[0]
    # the same break seen again prints the short form
    assert any("(user stack suppressed due to duplicate graph break)" in m for m in lines[1:]), lines
    assert xcompile.config.error_on_graph_break is False     # every scope restored
    torch.testing.assert_close(fn(x), x + 3)


def test_in3_context_manager():
    # NOTE: fullgraph=False
    @xcompile.error_on_graph_break(True)
    @xcompile.compile
    def fn(x):
        x = x + 1
        with xcompile.error_on_graph_break(False):
            xcompile.graph_break()  # no error
        return x + 2

    x = torch.randn(3)
    with captured_logs("graph_breaks") as logs:
        out = fn(x)                                   # No error, but there is a graph break
    torch.testing.assert_close(out, x + 3)
    assert _break_lines(logs)
    assert xcompile.config.error_on_graph_break is False
    torch.testing.assert_close(fn(x), x + 3)


def test_in4_monkey_patching():
    class ThirdPartyModule(torch.nn.Module):
        def forward(self, x):
            x = x + 1
            xcompile.graph_break()
            return x + 2

    tp_mod = ThirdPartyModule()
    tp_mod.forward = xcompile.error_on_graph_break(False)(tp_mod.forward)

    @xcompile.error_on_graph_break(True)
    @xcompile.compile
    def fn(x):
        return tp_mod.forward(x)

    x = torch.randn(3)
    with captured_logs("graph_breaks") as logs:
        out = fn(x)                                   # No error, but there is a graph break
    torch.testing.assert_close(out, x + 3)
    assert _break_lines(logs)


def test_in5_error_on_graph_break_true_under_false():
    @xcompile.error_on_graph_break(True)
    def inner2(x):
        x = x + 1
        xcompile.graph_break()  # error
        return x + 2

    def inner(x):
        return inner2(x)

    # fullgraph=False, error_on_graph_break=False
    @xcompile.compile
    def fn(x):
        x = x + 4
        xcompile.graph_break()  # no error
        return inner(x)

    with captured_logs("graph_breaks") as logs, pytest.raises(Unsupported) as info:
        fn(torch.randn(3))
    assert _break_lines(logs), "the first break (in fn) is a graph break"
    msg = str(info.value)
    assert REASON in msg
    assert "Explanation: User-inserted graph break. Message: None" in msg
    assert "Hint: Remove the `xcompile.graph_break()` call." in msg
    assert "from user code:" in msg
    stack = msg.split("from user code:")[1]
    # the resume function of fn, then inner, then inner2's break
    assert stack.index("xcompile_resume_in_fn_at_") < stack.index("in inner\n") < stack.index("in inner2\n")
    assert "return inner2(x)" in stack and "xcompile.graph_break()  # error" in stack
    assert xcompile.config.error_on_graph_break is False


def test_in6_nesting():
    def inner(x):
        x = x + 1
        xcompile.graph_break()
        return x + 2

    def inner2(x):
        with xcompile.error_on_graph_break(False):
            return inner(x)

    @xcompile.error_on_graph_break(True)
    @xcompile.compile
    def fn(x):
        return inner2(x)

    x = torch.randn(3)
    with captured_logs("graph_breaks") as logs:
        out = fn(x)                                   # no error
    torch.testing.assert_close(out, x + 3)
    assert _break_lines(logs)


def test_in7_nested_regions():
    def inner(x):
        x = x + 1
        with xcompile.error_on_graph_break(False):
            xcompile.graph_break()
        return x + 2

    def inner2(x):
        with xcompile.error_on_graph_break(True):
            return inner(x)

    @xcompile.compile
    def fn(x):
        return inner2(x)

    x = torch.randn(3)
    with captured_logs("graph_breaks") as logs:
        out = fn(x)                                   # no error
    torch.testing.assert_close(out, x + 3)
    assert _break_lines(logs)


def test_in8_fullgraph_takes_precedence():
    @xcompile.error_on_graph_break(False)
    def inner(x):
        x = x + 1
        xcompile.graph_break()
        return x + 2

    @xcompile.compile(fullgraph=True)
    def fn(x):
        return inner(x)

    with pytest.raises(Unsupported) as info:
        fn(torch.randn(3))
    msg = str(info.value)
    assert REASON in msg and "from user code:" in msg
    stack = msg.split("from user code:")[1]
    assert stack.index("in fn\n") < stack.index("in inner\n")
    assert "return inner(x)" in stack and "xcompile.graph_break()" in stack


def test_in9_fullgraph_cannot_be_turned_off():
    @xcompile.compile(fullgraph=False)
    def inner(x):
        x = x + 1
        xcompile.graph_break()
        return x + 2

    @xcompile.compile(fullgraph=True)
    def fn(x):
        return inner(x)

    with pytest.raises(Unsupported) as info:
        fn(torch.randn(3))
    msg = str(info.value)
    assert REASON in msg
    stack = msg.split("from user code:")[1]
    assert stack.index("in fn\n") < stack.index("in inner\n")


def test_in10_inner_fullgraph_errors_when_called():
    @xcompile.compile(fullgraph=True)
    def inner(x):
        x = x + 1
        xcompile.graph_break()
        return x + 2

    @xcompile.compile(fullgraph=False)
    def fn(x):
        return inner(x)

    with captured_logs("graph_breaks") as logs, pytest.raises(Unsupported) as info:
        fn(torch.randn(3))
    assert _break_lines(logs), "fn itself only breaks the graph"
    msg = str(info.value)
    stack = msg.split("from user code:")[1]
    assert "in inner\n" in stack and "in fn\n" not in stack   # raised by inner's own compile


@pytest.mark.parametrize("flag", [True, False])
def test_summary_table(flag):
    """The table: with fullgraph=False, error_on_graph_break decides; with fullgraph=True it has
    no effect (always an error, one graph)."""
    def body(x):
        x = x * 2
        xcompile.graph_break()
        return x - 1

    def body2(x):             # another code object (cache entries live on the code object)
        x = x * 2
        xcompile.graph_break()
        return x - 1

    cnt = xcompile.testing.CompileCounter()
    relaxed = xcompile.error_on_graph_break(flag)(xcompile.compile(body, backend=cnt))
    x = torch.randn(4)
    if flag:
        with pytest.raises(Unsupported):
            relaxed(x)
    else:
        torch.testing.assert_close(relaxed(x), x * 2 - 1)
        assert cnt.frame_count == 2
    strict = xcompile.error_on_graph_break(flag)(xcompile.compile(body2, fullgraph=True))
    with pytest.raises(Unsupported):
        strict(x)
