"""A compiled deep module sees every change to its state: a parameter replaced, a submodule
swapped, a hook added, train()/eval() flipped, a buffer rebound (at the root and at the deepest
module) each stop the cached entry from running, and the next call gives eager's answer.  In-place
updates of parameters and buffers do not."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xcompile
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    yield
    xcompile.reset()


class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.drop = nn.Dropout(0.5)
        self.gate = nn.Parameter(torch.ones(d))
        self.register_buffer("scale", torch.ones(d))

    def forward(self, x):
        return x + self.drop(self.gate * self.scale * self.mlp(self.ln(x)))


class Deep(nn.Module):
    def __init__(self, n=6, d=8):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return F.gelu(self.norm(x))


def _entries():
    return xcompile._C.cache_entries(Deep.forward)


def _hits():
    return [e.hits for e in _entries()]


def _last(m):
    return m.blocks[-1].mlp[2]


MUTATIONS = [
    pytest.param(lambda m: setattr(_last(m), "weight", nn.Parameter(torch.randn(8, 16))), id="param-replaced"),
    pytest.param(lambda m: setattr(m.norm, "bias", nn.Parameter(torch.randn(8))), id="root-param-replaced"),
    pytest.param(lambda m: setattr(m.blocks[-1], "scale", torch.full((8,), 2.0)), id="buffer-rebound"),
    pytest.param(lambda m: m.blocks[2].register_buffer("scale", torch.full((8,), 3.0)), id="buffer-re-registered"),
    pytest.param(lambda m: m.blocks.__setitem__(3, Block()), id="block-swapped"),
    pytest.param(lambda m: m.blocks[-1].mlp.__setitem__(1, nn.Tanh()), id="deep-submodule-swapped"),
    pytest.param(lambda m: _last(m).register_forward_hook(lambda mod, a, out: out * 2), id="forward-hook"),
    pytest.param(lambda m: _last(m).register_forward_pre_hook(lambda mod, a: (a[0] * 3,)), id="forward-pre-hook"),
    pytest.param(lambda m: _last(m).register_forward_hook(lambda mod, a, kw, out: out + 1, with_kwargs=True),
                 id="forward-hook-with-kwargs"),
    pytest.param(lambda m: m.blocks[-1].train(True), id="train-one-block"),
    pytest.param(lambda m: m.train(True), id="train"),
    pytest.param(lambda m: setattr(m.blocks[-1].ln, "eps", 0.5), id="attribute-reassigned"),
]


def _compiled():
    torch.manual_seed(0)
    m = Deep().eval()
    cnt = CompileCounter()
    cm = xcompile.compile(m, backend=cnt)
    x = torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))
        torch.testing.assert_close(cm(x), m(x))
    assert cnt.frame_count == 1 and _hits() == [1]
    return m, cm, cnt, x


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_change_stops_the_cached_entry(mutate):
    m, cm, cnt, x = _compiled()
    first, = _entries()
    mutate(m)
    torch.manual_seed(1)
    with torch.no_grad():
        training = any(mod.training for mod in m.modules())
        expected = None if training else m(x)                # (dropout in training: no fixed answer)
        got = cm(x)
    assert first.hits == 1                                    # the first entry did not run again
    assert cnt.frame_count == 2
    if expected is not None:
        torch.testing.assert_close(got, expected)
    with torch.no_grad():
        cm(x)
    assert cnt.frame_count == 2                               # the new state is cached in its turn


def test_hook_on_a_module_when_traced_then_removed():
    m, cm, cnt, x = _compiled()
    h = m.blocks[0].mlp[0].register_forward_hook(lambda mod, a, out: out * 0)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))
        h.remove()
        torch.testing.assert_close(cm(x), m(x))
    assert cnt.frame_count == 2                               # the hook-free entry ran again


def test_global_hook():
    m, cm, cnt, x = _compiled()
    h = torch.nn.modules.module.register_module_forward_hook(lambda mod, a, out: None)
    try:
        with torch.no_grad():
            torch.testing.assert_close(cm(x), m(x))
        assert _hits()[-1] == 1                               # not the hook-free entry
    finally:
        h.remove()
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))


def test_in_place_updates_and_eval_again_run_the_cached_entry():
    m, cm, cnt, x = _compiled()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(0.5)
        m.blocks[-1].scale.fill_(2.0)
        m.eval()                                              # already in eval: nothing changes
        torch.testing.assert_close(cm(x), m(x))
    assert cnt.frame_count == 1 and _hits() == [2]


def test_state_dict_hooks_do_not_recompile_unless_forward_reads_them():
    m, cm, cnt, x = _compiled()
    _last(m).register_state_dict_pre_hook(lambda *a, **k: None)
    with torch.no_grad():
        cm(x)
    assert cnt.frame_count == 1 and _hits() == [2]

    class ReadsTables(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x) + len(self.lin._state_dict_hooks)

    r = ReadsTables()
    cnt2 = CompileCounter()
    cr = xcompile.compile(r, backend=cnt2)
    y = torch.randn(2)
    torch.testing.assert_close(cr(y), r(y))
    r.lin._register_state_dict_hook(lambda *a, **k: None)
    torch.testing.assert_close(cr(y), r(y))                  # the trace read the table: watched
    assert cnt2.frame_count == 2


def test_parameter_requires_grad_flip_and_resize_are_seen_by_autograd_backends():
    """Flipping requires_grad or resizing a parameter in place: the answer (and gradients) stay
    eager's."""
    torch.manual_seed(0)
    for backend in ("eager", "aot_eager"):
        xcompile.reset()
        m = Deep(n=2).eval()
        cm = xcompile.compile(m, backend=backend)
        x = torch.randn(3, 8)
        cm(x).sum().backward()
        m.blocks[-1].gate.requires_grad_(False)
        m.zero_grad()
        out = cm(x)
        out.sum().backward()
        assert m.blocks[-1].gate.grad is None
        assert m.blocks[0].gate.grad is not None
        torch.testing.assert_close(out, m(x))
