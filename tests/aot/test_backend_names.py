"""The AOT backend names torch users pass, the double-backward error and xcompile.counters,
each compared with torch.compile's behaviour."""
import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters as torch_counters

import xcompile
from xcompile.backends.registry import lookup_backend

pytestmark = pytest.mark.usefixtures("fresh_compilers")

NAMES = ["aot_eager_default_partitioner", "aot_eager_decomp_partition", "cudagraphs"]


def _model(x, w):
    return (torch.relu(x @ w).sin() * x.softmax(-1)).sum()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 4, generator=g, requires_grad=True),
            torch.randn(4, 4, generator=g, requires_grad=True))


def _run(compiled):
    x, w = _inputs()
    out = compiled(x, w)
    out.backward()
    return out.detach(), x.grad, w.grad


@pytest.mark.parametrize("name", NAMES)
def test_backend_names_known_and_match_torch_compile(name):
    assert name in xcompile.list_backends()
    assert name in torch._dynamo.list_backends(None)
    ours = _run(xcompile.compile(_model, backend=name, fullgraph=True))
    theirs = _run(torch.compile(_model, backend=name, fullgraph=True))
    eager = _run(_model)
    for o, t, e in zip(ours, theirs, eager):
        torch.testing.assert_close(o, e)
        torch.testing.assert_close(t, e)


def _training_artifact(name):
    x, w = _inputs()
    gm = torch.fx.symbolic_trace(_model)
    prog = lookup_backend(name)(gm, [x, w])
    prog(x, w)[0].backward()
    (art,) = prog._training.values()
    return art


def test_default_partitioner_recomputes_nothing():
    assert _training_artifact("aot_eager_default_partitioner").partition.policy == "save_all"
    assert _training_artifact("aot_eager").partition.policy == "min_cut"


def test_decomp_partition_decomposes_with_the_kernel_table():
    def targets(art):
        return {n.target for g in (art.partition.fw_gm, art.partition.bw_gm) for n in g.graph.nodes}
    plain = targets(_training_artifact("aot_eager"))
    decomposed = targets(_training_artifact("aot_eager_decomp_partition"))
    assert torch.ops.aten._softmax.default in plain
    assert torch.ops.aten._softmax.default not in decomposed
    assert _training_artifact("aot_eager_decomp_partition").partition.policy == "min_cut"


def test_cudagraphs_on_cpu_runs_like_aot_eager():
    x, w = _inputs()
    with torch.no_grad():
        torch.testing.assert_close(xcompile.compile(_model, backend="cudagraphs")(x, w), _model(x, w))


# -- double backward --------------------------------------------------------------------------------------
def _double_backward_error(compiled):
    x = torch.randn(3, requires_grad=True)
    y = compiled(x)
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    with pytest.raises(Exception) as ei:
        g.sum().backward()
    return ei.value


@pytest.mark.parametrize("backend", ["aot_eager", "inductor", "aot_eager_decomp_partition"])
def test_double_backward_raises_torch_compiles_error(backend):
    def f(x):
        return (x.sin() * x).sum()

    theirs = _double_backward_error(torch.compile(f, backend="aot_eager"))
    ours = _double_backward_error(xcompile.compile(f, backend=backend))
    assert type(ours) is type(theirs) is RuntimeError
    assert str(theirs) == "torch.compile with aot_autograd does not currently support double backward"
    assert str(ours).startswith(str(theirs))


def test_double_backward_through_the_eager_backend_works():
    def f(x):
        return (x.sin() * x).sum()

    x = torch.randn(3, requires_grad=True)
    (g,) = torch.autograd.grad(xcompile.compile(f, backend="eager")(x), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    xe = x.detach().requires_grad_()
    (ge,) = torch.autograd.grad(f(xe), xe, create_graph=True)
    (gge,) = torch.autograd.grad(ge.sum(), xe)
    torch.testing.assert_close(gg, gge)


# -- counters --------------------------------------------------------------------------------------------
def _two_breaks(x):
    x = x + 1
    print("", end="")
    x = x * 2
    print("", end="")
    return x - 1


def test_counters_have_torch_keys_and_counts():
    x = torch.ones(3)
    torch_counters.clear()
    torch.compile(_two_breaks, backend="eager")(x)
    theirs = {k: dict(v) for k, v in torch_counters.items() if v}
    xcompile.counters.clear()
    xcompile.compile(_two_breaks, backend="eager")(x)
    ours = {k: dict(v) for k, v in xcompile.counters.items() if v}
    assert {"graph_break", "stats", "frames"} <= set(ours) <= set(theirs) | {"frames"}
    assert set(ours["stats"]) == {"unique_graphs", "calls_captured"}
    assert sum(ours["graph_break"].values()) == sum(theirs["graph_break"].values()) == 2
    assert len(ours["graph_break"]) == len(theirs["graph_break"]) == 1      # one message, twice
    assert ours["stats"]["unique_graphs"] == theirs["stats"]["unique_graphs"]
    assert ours["frames"]["ok"] == ours["frames"]["total"] >= ours["stats"]["unique_graphs"]
    (key,) = [k for k in ours["graph_break"] if "print" in k]
    assert "\n  Explanation: " in key and "\n  Hint: " in key
    # a fullgraph error is raised, not counted as a break
    xcompile.counters.clear()
    with pytest.raises(Exception):
        xcompile.compile(_two_breaks, fullgraph=True)(x)
    assert not xcompile.counters["graph_break"]


def test_counters_survive_reset_like_torchs():
    xcompile.counters.clear()
    xcompile.compile(lambda t: t + 1, backend="eager")(torch.ones(2))
    xcompile.reset()
    assert xcompile.counters["stats"]["unique_graphs"] == 1
