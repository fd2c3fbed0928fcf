"""End to end, on the pre-norm transformer of benchmarks/overhead.py (issue #16): the fast
cache-hit path for deep modules keeps every guard.  A compiled model whose state changes
(a parameter replaced, a submodule swapped, a forward (pre) hook added, train()/eval() flipped on
the root or deep down, a buffer rebound) recompiles and returns what eager returns for the
mutated model; an in-place update of a parameter's values (what an optimizer step does) does not
recompile and is seen; calls with nothing changed do not recompile.

Each mutation is checked to change eager's answer, so a stale graph would fail assert_close."""
import pytest
import torch
import torch.nn as nn

D = 16
LAYERS = 6
DEEP = 4            # the block the deep mutations touch


class TrainBranch(nn.Module):
    """A forward that branches on self.training (deterministic, unlike dropout)."""

    def forward(self, x):
        if self.training:
            return x * 0.5 + 1.0
        return x


class PreNormBlock(nn.Module):
    """benchmarks/overhead.py's block, plus a registered buffer the forward adds and a module
    whose forward depends on self.training."""

    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.g1, self.g2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.register_buffer("shift", torch.zeros(d))
        self.branch = TrainBranch()
        self.heads = 2

    def forward(self, x):
        B, T, C = x.shape
        h = C // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, h).transpose(1, 2) for t in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.g1 * self.proj(a.transpose(1, 2).reshape(B, T, C))
        x = x + self.g2 * self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))
        return self.branch(x) + self.shift


class PreNormTransformer(nn.Module):
    def __init__(self, n=LAYERS, d=D):
        super().__init__()
        self.blocks = nn.ModuleList(PreNormBlock(d) for _ in range(n))
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.ln(x)


class DropoutTransformer(PreNormTransformer):
    """The same model with a Dropout between the blocks and the final norm."""

    def __init__(self, n=LAYERS, d=D):
        super().__init__(n, d)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.ln(self.drop(x))


def _x():
    return torch.randn(2, 5, D)


def _randomize(model):
    """Non-trivial values everywhere (LayerNorm's ones/zeros would hide swaps of it)."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3 + (1.0 if p.dim() == 1 else 0.0))
        for b in model.buffers():
            b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    return model


@pytest.fixture
def setup(xc):
    """(model, compiled model, graphs compiled so far: a function) with the model compiled
    (backend "eager", no_grad, eval mode, warm start off) and called twice."""
    torch.manual_seed(0)
    model = _randomize(PreNormTransformer()).eval()
    xc.counters.clear()
    with xc.config.patch(warm_start=False), torch.no_grad():
        compiled = xc.compile(model, backend="eager")

        def graphs():
            return xc.counters["stats"]["unique_graphs"]
        x = _x()
        torch.testing.assert_close(compiled(x), model(x))
        compiled(_x())
        assert graphs() == 1, "one graph, no recompile on a second call with nothing changed"
        yield model, compiled, graphs
    xc.counters.clear()


def _check_recompiles(model, compiled, graphs, mutate, *, seeded=False, new_graphs=1):
    """``mutate`` changes eager's answer; after it the compiled model compiles ``new_graphs``
    graphs on its first call, agrees with eager on fresh inputs, and does not compile again."""
    x = _x()
    before = model(x)
    mutate(model)
    after = model(x)
    assert not torch.allclose(before, after), "the mutation must change eager's answer"
    n = graphs()
    for i in range(3):
        x = _x()
        if seeded:
            torch.manual_seed(1)
        got = compiled(x)
        if seeded:
            torch.manual_seed(1)
        torch.testing.assert_close(got, model(x))
        assert graphs() == n + new_graphs, \
            f"call {i} after the mutation: expected {new_graphs} new graph(s) in all, got {graphs() - n}"


def _deep(model):
    return model.blocks[DEEP]


def test_no_mutation_no_recompile(setup):
    model, compiled, graphs = setup
    for _ in range(10):
        x = _x()
        torch.testing.assert_close(compiled(x), model(x))
    assert graphs() == 1


def test_in_place_parameter_update_is_seen_without_recompile(setup):
    model, compiled, graphs = setup
    x = _x()
    before = compiled(x).clone()
    with torch.no_grad():
        for p in model.parameters():           # an optimizer-like step on every parameter
            p.add_(0.05 * torch.randn_like(p))
        _deep(model).fc2.weight.add_(1)
        _deep(model).shift.add_(1)             # and on a buffer
    got = compiled(x)
    assert not torch.allclose(got, before)
    torch.testing.assert_close(got, model(x))
    assert graphs() == 1, "an in-place update of a parameter must not recompile"


def test_parameter_replaced_deep(setup):
    def mutate(m):
        w = _deep(m).fc2.weight
        _deep(m).fc2.weight = nn.Parameter(torch.randn_like(w))
    _check_recompiles(*setup, mutate)


def test_block_parameter_replaced(setup):
    def mutate(m):
        _deep(m).g2 = nn.Parameter(torch.randn(D))
    _check_recompiles(*setup, mutate)


def test_last_parameter_replaced(setup):
    def mutate(m):
        m.ln.bias = nn.Parameter(torch.randn(D))
    _check_recompiles(*setup, mutate)


def test_submodule_swapped_same_type(setup):
    def mutate(m):
        _deep(m).fc1 = nn.Linear(D, 4 * D)
    _check_recompiles(*setup, mutate)


def test_submodule_swapped_other_type(setup):
    def mutate(m):
        _deep(m).fc1 = nn.Sequential(nn.Linear(D, 4 * D), nn.Tanh())
    _check_recompiles(*setup, mutate)


def test_block_swapped_in_module_list(setup):
    def mutate(m):
        m.blocks[DEEP] = _randomize(PreNormBlock(D)).eval()
    _check_recompiles(*setup, mutate)


def test_forward_hook_added_deep(setup):
    def mutate(m):
        _deep(m).fc1.register_forward_hook(lambda mod, args, out: out * 2)
    _check_recompiles(*setup, mutate)


def test_forward_pre_hook_added_deep(setup):
    def mutate(m):
        _deep(m).fc2.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    _check_recompiles(*setup, mutate)


def test_forward_hook_added_on_root(setup):
    # with hooks on the root, the call goes through the module's __call__ (the hooks run as in
    # eager): forward is compiled again (its guard saw the root's hooks change) and the hook's
    # own frame is compiled too: two graphs
    def mutate(m):
        m.register_forward_hook(lambda mod, args, out: out - 3)
    _check_recompiles(*setup, mutate, new_graphs=2)


def test_forward_hook_removed_deep(setup):
    model, compiled, graphs = setup
    handle = _deep(model).fc1.register_forward_hook(lambda mod, args, out: out * 2)
    x = _x()
    torch.testing.assert_close(compiled(x), model(x))
    assert graphs() == 2
    # without the hook, the first graph's guards hold again: it is used, nothing is compiled
    _check_recompiles(model, compiled, graphs, lambda m: handle.remove(), new_graphs=0)


def test_train_on_root(setup):
    _check_recompiles(*setup, lambda m: m.train())


def test_train_on_deep_submodule(setup):
    _check_recompiles(*setup, lambda m: _deep(m).branch.train())


def test_eval_after_train_on_deep_submodule(setup):
    model, compiled, graphs = setup
    _deep(model).branch.train()
    x = _x()
    torch.testing.assert_close(compiled(x), model(x))
    assert graphs() == 2
    # back to eval: a graph for it exists already, so the answer must be right; a new compile
    # is allowed but at most one
    _deep(model).branch.eval()
    for _ in range(2):
        x = _x()
        torch.testing.assert_close(compiled(x), model(x))
    assert graphs() <= 3


def test_dropout_train_eval_flipped(xc):
    torch.manual_seed(0)
    model = _randomize(DropoutTransformer()).eval()
    xc.counters.clear()
    with xc.config.patch(warm_start=False), torch.no_grad():
        compiled = xc.compile(model, backend="eager")

        def graphs():
            return xc.counters["stats"]["unique_graphs"]
        x = _x()
        torch.testing.assert_close(compiled(x), model(x))
        assert graphs() == 1
        # train(): dropout now drops; seeded alike, compiled and eager drop the same elements
        _check_recompiles(model, compiled, graphs, lambda m: m.drop.train(), seeded=True)
        # and eval() again on the root: no dropout, the right answer
        model.eval()
        for _ in range(2):
            x = _x()
            torch.testing.assert_close(compiled(x), model(x))
        assert graphs() <= 3
    xc.counters.clear()


def test_buffer_rebound_deep(setup):
    def mutate(m):
        _deep(m).shift = torch.randn(D)         # Module.__setattr__ rebinds the registered buffer
        assert "shift" in _deep(m)._buffers
    _check_recompiles(*setup, mutate)


def test_buffer_rebound_via_register_buffer(setup):
    def mutate(m):
        _deep(m).register_buffer("shift", torch.randn(D))
    _check_recompiles(*setup, mutate)
