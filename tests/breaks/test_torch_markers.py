"""torch.compiler.disable / torch._dynamo.disable in model code: xcompile honours the mark (a
graph break; the function's own frame runs eagerly) instead of tracing into torch's wrapper
(which put set_eval_frame calls into the graph)."""
import torch

import xcompile
from xcompile.testing import CompileCounter


def test_torch_compiler_disable_is_a_graph_break_and_runs_eagerly():
    seen = []

    @torch.compiler.disable
    def helper(x):
        seen.append(type(x))
        return x * 2

    def f(x):
        return helper(x + 1) - 1

    xcompile.reset()
    cnt = CompileCounter()
    x = torch.randn(3)
    cf = xcompile.compile(f, backend=cnt)
    for _ in range(2):
        torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 2                      # x + 1 and - 1; helper's body is not compiled
    assert all(t is torch.Tensor for t in seen)      # helper always saw real tensors
    ex = xcompile.explain(f)(x)
    assert ex.graph_break_count == 1
    assert "torch.compiler.disable" in str(ex.break_reasons[0].reason)
    assert all("set_eval_frame" not in str(n.target) for g in ex.graphs for n in g.graph.nodes)
    xcompile.reset()


def test_torch_dynamo_disable_recursive_false():
    def inner(x):
        return x.sin()

    @torch._dynamo.disable(recursive=False)
    def helper(x):
        return inner(x) * 2

    def f(x):
        return helper(x) + 1

    xcompile.reset()
    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(x), f(x))
    xcompile.reset()
