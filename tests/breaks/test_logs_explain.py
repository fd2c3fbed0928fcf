"""Observing breaks: the graph_breaks / recompiles / output_code logs (set_logs and XCOMPILE_LOGS)
and xcompile.explain."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import torch

import xcompile

from .util import captured_logs, graph_break_logs


def _f(x):
    y = x + 1
    print(end="")
    return y * 2


def test_graph_break_log_has_reason_explanation_hint_and_user_stack():
    with captured_logs("graph_breaks") as logs:
        xcompile.compile(_f)(torch.randn(3))
    (msg,) = graph_break_logs(logs)
    head, *rest = msg.splitlines()
    assert head == f"Graph break in user code at {__file__}:{_f.__code__.co_firstlineno + 2}"
    assert rest[0] == "Graph Break Reason: call to builtin print"
    assert rest[1].startswith("  Explanation: ") and rest[2].startswith("  Hint: ")
    assert rest[3] == "User code traceback:"
    assert rest[4].strip() == f'File "{__file__}", line {_f.__code__.co_firstlineno + 2}, in _f'
    assert rest[5].strip() == 'print(end="")'


def test_repeated_break_prints_the_short_form_until_reset():
    def g(x):
        return _f(x) + 1

    with captured_logs("graph_breaks") as logs:
        xcompile.compile(_f)(torch.randn(3))
        xcompile.compile(g)(torch.randn(3))   # the same break, reached from g's trace
    lines = graph_break_logs(logs)
    assert lines[0].startswith("Graph break in user code at ")
    assert all(m.startswith("Graph break (user stack suppressed due to duplicate graph break) in user code at ")
               for m in lines[1:]) and len(lines) >= 2
    assert "User code traceback" not in lines[1]
    xcompile.reset()
    with captured_logs("graph_breaks") as logs:
        xcompile.compile(_f)(torch.randn(3))
    assert graph_break_logs(logs)[0].startswith("Graph break in user code at ")


def test_frame_that_runs_eagerly_says_so():
    def loop(x):
        for _ in range(2):
            print(end="")
            x = x + 1
        return x

    with captured_logs("graph_breaks") as logs:
        xcompile.compile(loop)(torch.randn(3))
    (msg,) = graph_break_logs(logs)
    assert "The frame runs eagerly: the break is inside a loop" in msg


def test_recompile_log_names_the_failed_guard():
    def h(x):
        return x * 2

    cf = xcompile.compile(h)
    with captured_logs("recompiles") as logs:
        cf(torch.randn(3))
        cf(torch.randn(3))
        cf(torch.randn(5))
    (msg,) = logs
    assert msg.startswith("Recompiling function 'h'")
    assert "triggered by the following guard failure(s):" in msg
    assert "TENSOR_MATCH: L['x']" in msg and "size=[3]" in msg


def test_output_code_log_shows_the_replacement_code():
    with captured_logs("output_code") as logs:
        xcompile.compile(_f)(torch.randn(3))
    text = "\n".join(m for m in logs if m.startswith("REPLACEMENT CODE"))
    assert "def xcompile_runner__f(a0):" in text
    assert "outs = graph(a0)" in text and "xcompile_resume" not in text.split("\n")[0]
    assert "return resume" in text


def test_logs_from_the_environment():
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import xcompile
        def f(x):
            y = x + 1
            print("", end="")
            return y * 2
        cf = xcompile.compile(f)
        cf(torch.randn(3)); cf(torch.randn(4))
    """)
    env = dict(os.environ, XCOMPILE_LOGS="graph_breaks,recompiles,guards,graph_code,output_code")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    for needle in ("Graph break in user code at", "Graph Break Reason: call to builtin print",
                   "Recompiling function", "GUARDS for", "TRACED GRAPH", "REPLACEMENT CODE"):
        assert needle in r.stderr, needle


def test_set_logs_rejects_unknown_artifacts():
    try:
        xcompile.set_logs(no_such_artifact=True)
    except ValueError as e:
        assert "no_such_artifact" in str(e)
    else:
        raise AssertionError("no error")
    assert logging.getLogger("xcompile.graph_breaks") is not None


def test_explain_counts_graphs_breaks_ops_and_guards():
    def fn(x, y):
        a = x.sin()
        xcompile.graph_break()
        b = a * y
        print(end="")
        return b.cos() + a

    out = xcompile.explain(fn)(torch.randn(3), torch.randn(3))
    assert (out.graph_count, out.graph_break_count) == (3, 2)
    assert out.op_count == sum(len(o) for o in out.ops_per_graph) == 4   # sin | mul | cos, add
    assert len(out.out_guards) == 3 and all("TENSOR_MATCH" in str(g) for g in out.out_guards)
    assert [r.reason for r in out.break_reasons] == ["Call to `xcompile.graph_break()`", "call to builtin print"]
    assert all(r.user_stack and r.resumed for r in out.break_reasons)
    assert str(out).startswith("xcompile produced 3 graphs, with 2 graph breaks and 4 ops.")
    # explain leaves nothing compiled behind
    assert xcompile._C.cache_entries(fn.__code__) == []


def test_explain_of_a_module_and_of_a_whole_graph():
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    out = xcompile.explain(m)(torch.randn(2, 3))
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    assert "1 graph, with 0 graph breaks" in str(out)


def test_logging_calls_break_the_graph():
    logger = logging.getLogger("xcompile_test_user")

    def fn(x):
        y = x + 1
        logger.info("value %s", 1)
        return y * 2

    out = xcompile.explain(fn)(torch.randn(3))
    assert out.graph_count == 2
    assert out.break_reasons[0].reason == "call to logging function logging.Logger.info"
