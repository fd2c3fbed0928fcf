"""torch._dynamo's functions called in traced code (torch.optim's step calls
``torch._dynamo.graph_break()``; model code written for torch.compile calls ``mark_dynamic``).

``torch._dynamo.graph_break()`` is a graph break, as under torch.compile; any other function of
torch._dynamo runs eagerly at a graph break. Before, each was a graph node calling the function
(a graph_break() that did not break).
"""
import pytest
import torch
import torch._dynamo

import xcompile
from xcompile.testing import CompileCounter

pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _split(x):
    y = x + 1
    torch._dynamo.graph_break()
    return y * 2


def test_graph_break_breaks():
    cnt = CompileCounter()
    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(_split, backend=cnt)(x), (x + 1) * 2)
    assert cnt.frame_count == 2
    assert all(torch._dynamo.graph_break not in (n.target for n in gm.graph.nodes) for gm in cnt.graphs)
    text = str(xcompile.explain(_split)(x))
    assert "Call to `torch._dynamo.graph_break()`" in text


def test_graph_break_under_fullgraph_is_an_error():
    with pytest.raises(Exception, match=r"torch\._dynamo\.graph_break"):
        xcompile.compile(_split, backend="eager", fullgraph=True)(torch.randn(3))


def test_other_functions_run_eagerly():
    def f(x):
        torch._dynamo.mark_dynamic(x, 0)
        return x * 2
    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(x), x * 2)
    assert 0 in getattr(x, "_dynamo_dynamic_indices", set())          # the real call ran, on x
    assert "call to torch._dynamo.mark_dynamic inside a compiled region" in str(xcompile.explain(f)(torch.randn(4)))


def test_is_compiling_is_true_in_one_graph():
    def f(x):
        return x * 2 if torch._dynamo.is_compiling() else x
    cnt = CompileCounter()
    torch.testing.assert_close(xcompile.compile(f, backend=cnt, fullgraph=True)(torch.ones(2)), torch.full((2,), 2.0))
    assert cnt.frame_count == 1
