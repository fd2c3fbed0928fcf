"""Floats from outside the frame that change between calls become symbolic graph inputs
(automatic dynamic, torch's ``specialize_float=False``): one recompile, not one per value. An
optimizer's ``lr`` under an LR scheduler is the case that matters (issue #32). Each result is
compared with eager's: values, dtypes, the sign of a zero, nan, Python floats returned."""
from __future__ import annotations

import copy
import math

import pytest
import torch

import xcompile
from xcompile import _torch_compat
from xcompile.backends.per_size import MAX_FLOAT_COPIES, PerSize
from xcompile.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager", "inductor"]


def _same(a, b) -> None:
    if isinstance(b, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-6, atol=1e-7)
        if a.is_floating_point():      # (the sign of a zero; a nan's sign means nothing)
            keep = ~b.isnan()
            assert torch.equal(torch.signbit(a[keep]), torch.signbit(b[keep]))
    else:
        assert type(a) is type(b) and (a == b or (math.isnan(a) and math.isnan(b))), (a, b)


def _run(fn, backend, calls) -> int:
    xcompile.reset()                   # (what a float did under an earlier test's compile is forgotten)
    cnt = CompileCounterWithBackend(backend)
    c = xcompile.compile(fn, backend=cnt)
    for args in calls:
        got, want = c(*args), fn(*args)
        for a, b in zip(got, want):
            _same(a, b)
    return cnt.frame_count


def _ops(x, xi, lr):
    return (x * lr, xi * lr, torch._foreach_mul([x], 1 - lr * 0.01)[0], x.add(x, alpha=lr),
            torch.clamp(x, max=lr), x / (lr + 1), torch.full((2,), lr))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changing_float_recompiles_once(backend):
    calls = [(torch.randn(5), torch.arange(5), lr) for lr in (0.1, 0.2, 0.3, -2.5, 1e-8, 7.0)]
    assert _run(_ops, backend, calls) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_specialize_float_keeps_one_graph_per_value(backend, monkeypatch):
    monkeypatch.setattr(xcompile.config, "specialize_float", True)
    calls = [(torch.randn(5), torch.arange(5), lr) for lr in (0.1, 0.2, 0.3)]
    assert _run(_ops, backend, calls) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_branch_on_the_float_guards_its_value(backend):
    def f(x, lr):
        return (x * 2 if lr > 0.5 else x * 3) + lr,
    calls = [(torch.randn(3), lr) for lr in (0.1, 0.2, 0.7, 0.2, 0.9)]
    _run(f, backend, calls)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float_computed_from_it_is_returned_as_python_computes_it(backend):
    def f(x, lr):
        s = (lr * 0.1) * 3
        return x * s, s, lr / 3 - 1
    calls = [(torch.randn(3), lr) for lr in (0.1, 0.7, 0.123456789, 3.3)]
    _run(f, backend, calls)


@pytest.mark.parametrize("backend", BACKENDS)
def test_signed_zero_and_nan(backend):
    def f(x, lr):
        return 1 / (x * lr), x + lr
    x = torch.ones(3)
    calls = [(x, v) for v in (0.5, 0.25, 0.0, -0.0, float("nan"), 0.0, float("-inf"), 2.0)]
    _run(f, backend, calls)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_guard_from_a_torch_kernel_keeps_it_symbolic(backend):
    # torch.sub's own kernel asks ``alpha != 1``: a FLOAT_COMPARE guard, so only alpha == 1
    # compiles again (guarded by value), and other values reuse the symbolic graph
    def f(x, y, lr):
        return torch.sub(x, y, alpha=lr),
    lrs = (0.3, 0.7, 1.0, 1.3, 2.5, 1.0, 0.1)
    assert _run(f, backend, [(torch.randn(3), torch.randn(3), lr) for lr in lrs]) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_comparison_with_a_constant_keeps_it_symbolic(backend):
    # ``lr < 0.75`` is a FLOAT_COMPARE guard: one graph each side of the bound, not one per value
    def f(x, lr):
        return x * (2 if lr < 0.75 else 3),
    lrs = (0.1, 0.2, 0.3, 0.4, 0.74, 0.75, 0.8, 0.9, 1.0, 0.2, 0.76)
    assert _run(f, backend, [(torch.randn(3), lr) for lr in lrs]) == 3


ONE_CYCLE = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9, nesterov=True),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=True),
}


@pytest.mark.parametrize("kind", list(ONE_CYCLE))
def test_one_cycle_momentum_does_not_recompile_every_step(kind):
    # OneCycleLR changes SGD's momentum (torch.optim asks ``momentum != 0``) and Adam's
    # ``betas[0]`` (a tuple of floats) every step, besides the lr
    counts = _train_with_scheduler(ONE_CYCLE[kind], lambda o: torch.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.05, total_steps=20), "inductor", 10)
    assert counts[-1] <= 3, counts


@pytest.mark.parametrize("backend", BACKENDS)
def test_with_a_symbolic_int_beside_it(backend):
    def f(x, n, lr):
        if n * lr > 1:
            return x * n,
        return x * lr,
    calls = [(torch.randn(3), n, lr) for n, lr in ((2, 0.1), (3, 0.2), (4, 0.3), (5, 0.1), (30, 0.1), (3, 0.3))]
    _run(f, backend, calls)


def _train_with_scheduler(make_opt, make_sched, backend, steps):
    """Steps of a compiled ``opt.step()`` beside eager's, a scheduler stepping between them; every
    parameter compared after each. The frame counts after each step."""
    xcompile.reset()
    torch.manual_seed(0)
    m_ref = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    m = copy.deepcopy(m_ref)
    opt_ref, opt = make_opt(m_ref.parameters()), make_opt(m.parameters())
    sched_ref, sched = make_sched(opt_ref), make_sched(opt)
    cnt = CompileCounterWithBackend(backend)
    step = xcompile.compile(lambda: opt.step(), backend=cnt)
    counts = []
    for _ in range(steps):
        x = torch.randn(4, 6)
        m_ref(x).square().sum().backward()
        m(x).square().sum().backward()
        opt_ref.step()
        step()
        sched_ref.step()
        sched.step()
        opt_ref.zero_grad()
        opt.zero_grad()
        for a, b in zip(m.parameters(), m_ref.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)   # (Adam under compile: as torch.compile)
        counts.append(cnt.frame_count)
    return counts


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_lr_scheduler_does_not_recompile_every_step(backend):
    before = PerSize.backend_compiles
    counts = _train_with_scheduler(lambda ps: torch.optim.AdamW(ps, lr=0.05, foreach=True),
                                   lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20), backend, 8)
    # the first step makes the state; the lr changes after it (symbolic from the next compile)
    assert counts[-1] == counts[2] <= 3, counts
    # and no backend compile per value: inductor's kernels take the lr as an argument
    assert PerSize.backend_compiles - before == 0


def test_past_max_float_copies_new_values_run_the_graph_as_it_is():
    # full(..., dtype=float16) keeps its float a constant (kernels.sizes.FloatArg refuses it)
    def f(x, lr):
        return torch.full((3,), lr, dtype=torch.float16) + x,
    before = PerSize.backend_compiles
    _run(f, "inductor", [(torch.randn(3, dtype=torch.float16), lr) for lr in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)])
    assert PerSize.backend_compiles - before == MAX_FLOAT_COPIES


# ops whose kernels take the float as a double argument: one compile for every value
KERNEL_OPS = {
    "mul_f32": lambda x, xi, xh, xd, m, lr: x * lr,
    "pow": lambda x, xi, xh, xd, m, lr: x.abs().pow(lr),
    "clamp_min": lambda x, xi, xh, xd, m, lr: torch.clamp(x, min=lr),
    "lerp": lambda x, xi, xh, xd, m, lr: x.lerp(xd.float(), lr),
    "addcdiv": lambda x, xi, xh, xd, m, lr: torch.addcdiv(x, x, x.abs() + 1, value=lr),
    "leaky_relu": lambda x, xi, xh, xd, m, lr: torch.nn.functional.leaky_relu(x, lr),
    "where": lambda x, xi, xh, xd, m, lr: torch.where(x > 0, x, lr),
    "masked_fill": lambda x, xi, xh, xd, m, lr: x.masked_fill(m, lr),
    "floor_div": lambda x, xi, xh, xd, m, lr: x.div(lr, rounding_mode="floor"),
    "remainder": lambda x, xi, xh, xd, m, lr: torch.remainder(x, lr),
    "int_times_float": lambda x, xi, xh, xd, m, lr: xi * lr,
    "int_compare": lambda x, xi, xh, xd, m, lr: xi > lr,
    "half": lambda x, xi, xh, xd, m, lr: xh * lr,
    "double": lambda x, xi, xh, xd, m, lr: xd * lr * lr,
    "double_alpha": lambda x, xi, xh, xd, m, lr: xd.add(xd, alpha=lr),
    "full_double": lambda x, xi, xh, xd, m, lr: torch.full((3,), lr, dtype=torch.float64),
    "arithmetic": lambda x, xi, xh, xd, m, lr: x * (lr * 3 - 1) / lr,
    "reciprocal": lambda x, xi, xh, xd, m, lr: lr / x,
    "sub_alpha": lambda x, xi, xh, xd, m, lr: torch.sub(x, xd.float(), alpha=lr),
    "sum": lambda x, xi, xh, xd, m, lr: (x * lr).sum(),
    "bool": lambda x, xi, xh, xd, m, lr: m * lr,
}


@pytest.mark.parametrize("name", list(KERNEL_OPS))
def test_inductor_kernels_take_the_float(name):
    f = KERNEL_OPS[name]
    calls = []
    for lr in (0.3, 0.7, 1.3, -0.45, 2.5, 0.0, -0.0, float("nan")):
        x = torch.randn(7)
        calls.append((x, torch.arange(-3, 4), x.half(), x.double(), x > 0.5, lr))
    before = PerSize.backend_compiles
    assert _run(lambda *a: (f(*a),), "inductor", calls) == 2
    # (torch 2.11's clamp ignores a lone nan bound: a symbolic one is compiled per value there)
    per_value = MAX_FLOAT_COPIES if name == "clamp_min" and _torch_compat.CLAMP_ONE_NAN_BOUND_IGNORED else 0
    assert PerSize.backend_compiles - before == per_value


# Python-level uses of a symbolic float: each one specializes it (guarded by value), compares it
# with a constant (FLOAT_COMPARE), or keeps it symbolic; all must give eager's answer for every
# value, the same and new ones
PATTERNS = {
    "tensor": lambda x, lr: x + torch.tensor(lr),
    "tensor_list": lambda x, lr: x + torch.tensor([lr, 1.0]).sum(),
    "sqrt": lambda x, lr: x * math.sqrt(abs(lr)),
    "float": lambda x, lr: x * float(lr),
    "int": lambda x, lr: x * int(lr * 10),
    "round": lambda x, lr: x * round(lr, 2),
    "fstring": lambda x, lr: (x, f"{lr:.3f}"),
    "repr": lambda x, lr: (x, repr(lr)),
    "in_tuple": lambda x, lr: x * (2 if lr in (0.1, 0.7) else 3),
    "max": lambda x, lr: x * max(lr, 0.5),
    "range": lambda x, lr: sum(x * i for i in range(int(abs(lr) * 10))) + x,
    "truthy": lambda x, lr: x * (1 if lr else 2),
    "dict_key": lambda x, lr: x * {0.1: 1, 0.7: 2}.get(lr, 3),
    "isclose": lambda x, lr: x * (1 if math.isclose(lr, 0.7) else 2),
    "hash": lambda x, lr: x * (hash(lr) % 7),
    "is_integer": lambda x, lr: x * (1 if lr.is_integer() else 2),
    "compare_bare": lambda x, lr: x * (2 if lr < 0.75 else 3),
    "compare_sum": lambda x, lr: x * (2 if lr + 0.1 > 0.8 else 3),
    "compare_scaled": lambda x, lr: x * (2 if lr * 3 != 0.9 else 3),
    "not_zero": lambda x, lr: x * (2 if lr != 0 else 3),
    "linspace": lambda x, lr: torch.linspace(0, lr, 5),
    "fill_": lambda x, lr: x.clone().fill_(lr),
    "pow": lambda x, lr: x * lr ** 2,
    "floordiv": lambda x, lr: x * (lr // 0.3),
    "mod": lambda x, lr: x * (lr % 0.3),
    "rfloordiv": lambda x, lr: x * (1.0 // lr),         # (1.0 // 0.1 is 9.0, not floor(1.0 / 0.1))
    "softmax_temperature": lambda x, lr: torch.softmax(x / (abs(lr) + 0.1), -1),
    "clip_like": lambda x, lr: x * min(1.0, lr / (x.norm() + 1e-6)),
}


def _same_tree(a, b) -> None:
    if isinstance(b, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same_tree(x, y)
    elif isinstance(b, torch.Tensor):
        _same(a, b)
    else:
        assert type(a) is type(b) and a == b, (a, b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(PATTERNS))
def test_python_uses_of_a_symbolic_float(name, backend):
    f = PATTERNS[name]
    xcompile.reset()
    c = xcompile.compile(f, backend=backend)
    for lr in (0.1, 0.7, 1.3, -0.45, 0.7, 0.75, 0.6, 0.3, 0.0, -0.0, 2.0, float("nan"), 0.1):
        x = torch.randn(4)
        try:
            want = f(x, lr)
        except (ValueError, OverflowError, ZeroDivisionError) as e:    # (int(nan), 1.0 // 0.0)
            with pytest.raises(type(e)):
                c(x, lr)
            continue
        _same_tree(c(x, lr), want)
