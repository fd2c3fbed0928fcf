"""Whole models compiled with mode="reduce-overhead" (and the other ways to turn CUDA graphs on),
recorded and replayed by the CPU stand-in device and compared with eager: values, gradients,
module state and inputs."""
import copy

import pytest
import torch
import torch.nn as nn
from tests.e2e.test_model_zoo import _check, _float_leaves, _grads, _module_state, _param_grads, _seeded, _weighted_sum
from tests.e2e.zoo_models import CASES

import xcompile
from xcompile import config
from xcompile.kernels import cudagraphs as cg

pytestmark = pytest.mark.usefixtures("cudagraph_stand_in")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)
        self.register_buffer("scale", torch.full((8,), 0.5))

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x)))) * self.scale + x


@pytest.mark.parametrize("how", [dict(mode="reduce-overhead"), dict(mode="max-autotune"),
                                 dict(options={"triton.cudagraphs": True}), dict(backend="cudagraphs")])
def test_inference_matches_eager_and_replays(how):
    torch.manual_seed(0)
    m = Net().eval()
    c = xcompile.compile(m, **how)
    with torch.no_grad():
        for _ in range(5):
            x = torch.randn(3, 8)
            out = c(x)
            ref = m(x)
            torch.testing.assert_close(out, ref)
            assert out.shape == ref.shape and out.stride() == ref.stride() and out.dtype == ref.dtype
    graphs = cg.recorded_graphs()
    assert graphs and all(g.stats["replays"] >= 3 for g in graphs)


def test_default_mode_does_not_record():
    m = Net().eval()
    c = xcompile.compile(m)
    with torch.no_grad():
        for _ in range(3):
            c(torch.randn(3, 8))
    assert not cg.recorded_graphs()


@pytest.mark.parametrize("backend", ["inductor", "cudagraphs"])
def test_training_matches_eager_with_forward_and_backward_replayed(backend):
    torch.manual_seed(0)
    m = Net()
    twin = copy.deepcopy(m)
    kw = dict(mode="reduce-overhead") if backend == "inductor" else dict(backend="cudagraphs")
    c = xcompile.compile(twin, **kw)
    opt_e = torch.optim.SGD(m.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(twin.parameters(), lr=0.1)
    for _ in range(5):
        x = torch.randn(3, 8, requires_grad=True)
        xc = x.detach().clone().requires_grad_(True)
        loss_e = m(x).square().mean()
        loss_c = c(xc).square().mean()
        torch.testing.assert_close(loss_c, loss_e)
        loss_e.backward()
        loss_c.backward()
        torch.testing.assert_close(xc.grad, x.grad)
        for p, q in zip(m.parameters(), twin.parameters()):
            torch.testing.assert_close(q.grad, p.grad)
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
    names = {g.stats["state"] for g in cg.recorded_graphs()}
    assert names == {"recorded"}
    assert len(cg.recorded_graphs()) == 2    # forward and backward


def test_gradient_accumulation_keeps_earlier_gradients():
    """Two forwards and backwards before the step: the first backward's gradients (held by
    .grad) must survive the second forward's and backward's replays."""
    torch.manual_seed(0)
    m = Net()
    twin = copy.deepcopy(m)
    c = xcompile.compile(twin, mode="reduce-overhead")
    for _ in range(4):
        xs = [torch.randn(3, 8) for _ in range(2)]
        for x in xs:
            m(x).sum().backward()
            c(x).sum().backward()
        for p, q in zip(m.parameters(), twin.parameters()):
            torch.testing.assert_close(q.grad, p.grad)


def test_dynamic_shapes_run_plainly(reasons):
    m = Net().eval()
    c = xcompile.compile(m, mode="reduce-overhead", dynamic=True)
    with torch.no_grad():
        for n in (2, 3, 5):
            x = torch.randn(n, 8)
            torch.testing.assert_close(c(x), m(x))
    assert any("dynamic shapes" in msg for msg in reasons())


def test_a_graph_break_gives_two_replayed_graphs_in_one_pool():
    def f(x):
        y = torch.sin(x) * 2
        print(end="")
        return torch.cos(y) + 1
    c = xcompile.compile(f, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(6)
            torch.testing.assert_close(c(x), f(x))
    pools = [p for p in cg._ALL_POOLS if len(p)]
    assert len(pools) == 1 and len(pools[0]) == 2


def test_batchnorm_training_updates_running_stats_once_per_call():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU())
    twin = copy.deepcopy(m)
    c = xcompile.compile(twin, mode="reduce-overhead")
    for _ in range(5):
        x = torch.randn(6, 8)
        m(x).sum().backward()
        c(x).sum().backward()
    for (n, b), b2 in zip(m.named_buffers(), twin.buffers()):
        torch.testing.assert_close(b2, b, msg=lambda s: f"{n}: {s}")
    for p, q in zip(m.parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad)
    graphs = cg.recorded_graphs()
    assert len(graphs) == 2 and all(g.stats["replays"] >= 3 for g in graphs)


class Cached(nn.Module):
    """A decode step writing the new key into a static cache buffer at a position."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(8, 4))
        self.proj = nn.Linear(4, 4)

    def forward(self, x, pos):
        self.cache.index_copy_(0, pos, self.proj(x))
        return torch.softmax(self.cache @ x.t(), dim=0).t() @ self.cache


def test_a_static_cache_written_in_place_matches_eager():
    torch.manual_seed(0)
    m = Cached()
    twin = copy.deepcopy(m)
    c = xcompile.compile(twin, mode="reduce-overhead")
    with torch.no_grad():
        for step in range(8):
            x = torch.randn(1, 4)
            pos = torch.tensor([step])
            torch.testing.assert_close(c(x, pos), m(x, pos))
            torch.testing.assert_close(twin.cache, m.cache)
    graphs = cg.recorded_graphs()
    assert len(graphs) == 1 and graphs[0].stats["replays"] >= 6


ZOO = ["buffers_updated_in_forward", "float64_model", "gpt_block_kv_cache", "transformer_encoder",
       "batchnorm1d_mlp"]


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("name", ZOO)
def test_zoo_models_under_reduce_overhead_match_eager(name, mode):
    """Model-zoo cases compiled with mode="reduce-overhead" (the stand-in records them): four
    calls (warm-up, recording, replays), each compared with eager: outputs, gradients, module
    state and inputs. (The whole zoo passes this way: /tmp/zoo_cg.py in session 10's note.)"""
    case = next(c for c in CASES if c.name == name)
    if mode not in case.modes:
        pytest.skip(f"{name} has no {mode} mode")
    train = mode == "train"
    em = _seeded(case.model, 0)
    cm = copy.deepcopy(em)
    em.train(train)
    cm.train(train)
    c = xcompile.compile(cm, mode="reduce-overhead")
    with config.patch(kernel_raise_errors=True):
        for call in range(4):
            ae, ac = _seeded(case.inputs, 100 + call), _seeded(case.inputs, 100 + call)
            if train:
                for t in _float_leaves((ae, ac)):
                    t.requires_grad_(True)
            with torch.set_grad_enabled(train):
                exp, act = em(*ae), c(*ac)
            _check(act, exp, f"call {call} out", case.tol)
            if train:
                _weighted_sum(exp, 7 + call).backward()
                _weighted_sum(act, 7 + call).backward()
                _check(_grads(_float_leaves(ac)), _grads(_float_leaves(ae)), "input grads", case.tol)
                _check(_param_grads(cm), _param_grads(em), "param grads", case.tol)
            _check(_module_state(cm), _module_state(em), "module state", case.tol)
            _check(ac, ae, "inputs after the call", case.tol)
    graphs = cg.recorded_graphs()
    assert graphs and all(g.stats["replays"] >= 2 for g in graphs)


def test_detach_of_an_input_under_reduce_overhead_is_no_new_name_for_it():
    def f(x, y):
        return x.detach(), y * 2
    cf = xcompile.compile(f, backend="inductor", mode="reduce-overhead")
    for _ in range(4):
        x, y = torch.randn(3), torch.randn(3)
        d, e = cf(x, y)
        assert d is not x and d.data_ptr() == x.data_ptr()
        torch.testing.assert_close(e, y * 2)
