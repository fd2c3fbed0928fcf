"""A value compared with eq/ne in the backward (max/amax/min backward masks x == reduce(x)) is
saved, not recomputed: a recomputation in another kernel may differ in the last bit, and the
mask then selects nothing (inf/NaN grads). Found by the training fuzzer (seed 830)."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import xcompile
from xcompile.aot.ops import recompute_policy


def _amax_of_exp(x):
    return (torch.exp(x.tanh()).amax(-1),)


def test_policy_keeps_compared_values():
    def f(x):
        e = torch.exp(x)
        return torch.eq(e.view(5), e.amax(-1, keepdim=True)), torch.sin(x)

    g = make_fx(f)(torch.randn(5))
    policy = {str(n.target): recompute_policy(n)[0] for n in g.graph.nodes if n.op == "call_function"}
    assert policy["aten.exp.default"] is False          # compared (through a view)
    assert policy["aten.sin.default"] is True           # an ordinary pointwise op


def test_amax_backward_grads_match_eager_on_inductor():
    for seed in range(12):
        torch.manual_seed(seed)
        x = torch.randn(5, dtype=torch.float64, requires_grad=True)
        xcompile.reset()
        want = torch.autograd.grad(_amax_of_exp(x)[0], x)[0]
        got = torch.autograd.grad(xcompile.compile(_amax_of_exp, backend="inductor")(x)[0], x)[0]
        torch.testing.assert_close(got, want)
    xcompile.reset()
