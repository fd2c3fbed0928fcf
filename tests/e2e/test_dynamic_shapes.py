"""Dynamic shapes (issue #11): the policy (automatic dynamic, dynamic=True/False, marks), symbolic
sizes through the frontend, the shape guards in C++, and results equal to eager on every size.
Compile counts are compared with torch.compile's, run as the reference in the same test."""
import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as TorchCounter
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

import xcompile
from xcompile.testing import CompileCounter, CompileCounterWithBackend


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    torch._dynamo.reset()
    yield
    xcompile.reset()
    torch._dynamo.reset()


def _counts(fn, calls, **kw):
    """(xcompile graphs, torch.compile graphs) after ``calls`` (argument tuples); every result
    is compared with eager's."""
    cnt, tcnt = CompileCounter(), TorchCounter()
    xf = xcompile.compile(fn, backend=cnt, **kw)
    tf = torch.compile(fn, backend=tcnt, **kw)
    for args in calls:
        expected = fn(*args)
        torch.testing.assert_close(xf(*args), expected)
        tf(*args)
    return cnt.frame_count, tcnt.frame_count


def _sizes(*ns, cols=None):
    return [(torch.randn(n) if cols is None else torch.randn(n, cols),) for n in ns]


def test_automatic_dynamic_compiles_twice():
    xc, tc = _counts(lambda x: x.cos() + 1, _sizes(2, 3, 4, 5, 6))
    assert (xc, tc) == (2, 2)


def test_sizes_up_and_down_hit_the_symbolic_entry():
    xc, tc = _counts(lambda x: (x * 2).sum(0), _sizes(8, 3, 17, 5, 100, 2, 9, cols=3))
    assert xc == tc == 2


def test_dynamic_true_is_symbolic_from_the_first_compile():
    xc, tc = _counts(lambda x: x.sin() * 2, _sizes(3, 4, 9, 31), dynamic=True)
    assert xc == tc == 1


def test_dynamic_false_specializes_every_size():
    xc, tc = _counts(lambda x: x.sin() * 2, _sizes(3, 4, 9), dynamic=False)
    assert xc == tc == 3


def test_sizes_zero_and_one_stay_specialized():
    xc, tc = _counts(lambda x: x + 1, _sizes(4, 5, 1, 6, 0, 7), dynamic=True)
    assert xc == tc == 3          # symbolic (>= 2), then 1, then 0


def test_duck_sizing_and_its_break_when_sizes_diverge():
    def f(x, y):
        return x + y.sum()
    calls = [(torch.randn(3), torch.randn(3)), (torch.randn(5), torch.randn(5)),
             (torch.randn(5), torch.randn(7)), (torch.randn(6), torch.randn(8))]
    xc, tc = _counts(f, calls, dynamic=True)
    assert xc == tc == 2


def test_branch_on_a_size_guards_it():
    def f(x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1
    xc, tc = _counts(f, _sizes(2, 3, 5, 6, 3, 8), dynamic=True)
    assert xc == tc == 2


def test_views_reshapes_and_slices_with_symbolic_sizes():
    def f(x):
        n = x.shape[0]
        a = x.view(n, -1).sum(1)
        b = x.reshape(-1, 2)[: n - 1]
        c = x[1:].flatten()
        return a, b.mean(), c.softmax(0), x.new_zeros(n, 2) + n
    xc, tc = _counts(f, [(torch.randn(k, 4),) for k in (3, 4, 7, 10)], dynamic=True)
    assert xc == tc == 1


def test_reductions_over_symbolic_dims():
    def f(x):
        return x.sum(), x.amax(1), x.mean(0), torch.softmax(x, dim=1), x.var(0)
    xc, tc = _counts(f, [(torch.randn(a, b),) for a, b in ((3, 5), (6, 7), (9, 13), (17, 3))], dynamic=True)
    assert xc == tc == 1


def test_int_from_a_size_in_python_arithmetic():
    def f(x):
        n = x.shape[0] * 2 + 1
        return torch.arange(n).float().sum() + x.size(1) // 2
    xc, tc = _counts(f, [(torch.randn(k, k + 1),) for k in (3, 4, 8)], dynamic=True)
    assert xc == tc == 1


def test_a_loop_over_a_size_specializes_and_stays_correct():
    def f(x):
        out = x[0]
        for i in range(x.shape[0]):
            out = out + x[i]
        return out
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for k in (3, 4, 3, 5):
        x = torch.randn(k, 2)
        torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 3


def test_returned_shape_is_a_torch_size():
    cf = xcompile.compile(lambda x: (x + 1, x.shape, x.size(1)), backend="eager", dynamic=True)
    for k in (3, 6):
        x = torch.randn(k, 4)
        out, shape, n = cf(x)
        assert shape == x.shape and type(shape) is torch.Size and n == 4 and type(n) is int


def test_shape_guards_are_listed_and_name_their_sources():
    def f(x, y):
        return x + y
    cf = xcompile.compile(f, backend="eager", dynamic=True)
    cf(torch.randn(3, 4), torch.randn(3, 4))
    dump = xcompile._C.cache_entries(f.__code__)[0].guard.dump()
    assert "SHAPE: L['y'].size()[0] == L['x'].size()[0]" in dump
    assert "SHAPE: L['x'].size()[0] >= 2" in dump
    assert "checked: size=[*, *]" in dump


def test_recompile_reason_names_the_failed_relation(caplog):
    def f(x, y):
        return x + y.sum()
    cf = xcompile.compile(f, backend="eager", dynamic=True)
    cf(torch.randn(3), torch.randn(3))
    reasons = []
    cf2 = xcompile.optimize("eager", guard_fail_fn=lambda g: reasons.append(g.reason), dynamic=True)(f)
    cf2(torch.randn(4), torch.randn(4))
    cf2(torch.randn(4), torch.randn(6))
    assert any("L['y'].size()[0] == L['x'].size()[0]" in r for r in reasons), reasons


def test_rank_and_dtype_changes_recompile():
    f = lambda x: x * 2  # noqa: E731
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for x in (torch.randn(3), torch.randn(5), torch.randn(3, 2), torch.randn(5).double()):
        out = cf(x)
        torch.testing.assert_close(out, f(x))
        assert out.dtype == x.dtype
    assert cnt.frame_count == 3


def test_mark_dynamic_is_symbolic_from_the_first_compile():
    def f(x):
        return x.relu() + 1
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    for k in (4, 5, 9):
        x = torch.randn(k, 3)
        xcompile.mark_dynamic(x, 0)
        torch.testing.assert_close(cf(x), f(x))
    x = torch.randn(11, 3)                       # unmarked: the symbolic entry still serves it
    torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 1


def test_mark_dynamic_then_specialized_raises_naming_the_dim_and_line():
    def f(x):
        if x.shape[0] == 4:
            return x + 1
        return x - 1
    x = torch.randn(4, 3)
    xcompile.mark_dynamic(x, 0)
    with pytest.raises(ConstraintViolationError) as info:
        xcompile.compile(f, backend="eager")(x)
    msg = str(info.value)
    assert "L['x'].size()[0]" in msg and "marked dynamic" in msg and "if x.shape[0] == 4" in msg


def test_maybe_mark_dynamic_may_be_specialized():
    def f(x):
        return x + 1 if x.shape[0] == 4 else x - 1
    x = torch.randn(4, 3)
    xcompile.maybe_mark_dynamic(x, 0)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(x), f(x))


def test_mark_dynamic_range_outside_recompiles():
    def f(x):
        return x * 3
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    x = torch.randn(4)
    xcompile.mark_dynamic(x, 0, min=2, max=8)
    cf(x)
    for k in (6, 8):
        y = torch.randn(k)
        torch.testing.assert_close(cf(y), f(y))
    assert cnt.frame_count == 1
    y = torch.randn(12)                          # outside [2, 8]: a new entry, right answer
    torch.testing.assert_close(cf(y), f(y))
    assert cnt.frame_count == 2
    dump = xcompile._C.cache_entries(f.__code__)[-1].guard.dump()
    assert "SHAPE: L['x'].size()[0] <= 8" in dump


def test_mark_static_wins_over_dynamic_true_and_loses_to_mark_dynamic():
    def f(x):
        return x.sum(1)
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for k in (3, 5):
        x = torch.randn(2, k)
        xcompile.mark_static(x, 1)
        torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 2
    xcompile.reset()
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    for k in (3, 5):
        x = torch.randn(2, k)
        xcompile.mark_static(x, 1)
        xcompile.mark_dynamic(x, 1)
        torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 1


def test_automatic_dynamic_can_be_turned_off():
    with xcompile.config.patch(automatic_dynamic_shapes=False):
        cnt = CompileCounter()
        cf = xcompile.compile(lambda x: x + 1, backend=cnt)
        for k in (2, 3, 4):
            cf(torch.randn(k))
    assert cnt.frame_count == 3


def test_assume_static_by_default_false_is_dynamic_from_the_start():
    with xcompile.config.patch(assume_static_by_default=False):
        cnt = CompileCounter()
        cf = xcompile.compile(lambda x: x + 1, backend=cnt)
        for k in (2, 3, 4):
            cf(torch.randn(k))
    assert cnt.frame_count == 1


def test_graph_break_resumes_with_symbolic_sizes():
    def f(x):
        y = x.cos()
        xcompile.graph_break()
        return y[: x.shape[0] - 1] * 2
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for k in (3, 5, 8):
        x = torch.randn(k, 2)
        torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 2                  # the graph before the break and the resume function


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiling_backends_are_right_on_every_size(backend):
    lin = torch.nn.Linear(6, 4)

    def f(x, y):
        return (lin(x).relu() * y).sum(0), x.shape[0] + 1
    cnt = CompileCounterWithBackend(backend)
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for k in (3, 5, 17):
        x, y = torch.randn(k, 6), torch.randn(k, 4)
        out, n = cf(x, y)
        torch.testing.assert_close(out, f(x, y)[0])
        assert n == k + 1
    assert cnt.frame_count == 1          # one trace; the backend compiles per size (backends/per_size.py)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_training_with_a_symbolic_batch(backend):
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    ref.load_state_dict(model.state_dict())
    cm = xcompile.compile(model, backend=backend)
    for k in (4, 6, 9):
        x = torch.randn(k, 5)
        cm(x).pow(2).mean().backward()
        ref(x).pow(2).mean().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None


def test_int_argument_becomes_symbolic_after_it_changes():
    def f(x, n):
        return x * n + n
    calls = [(torch.randn(3), n) for n in (2, 3, 4, 7, 9)]
    xc, tc = _counts(f, calls)
    assert xc == tc == 2


def test_int_argument_sizes_a_tensor():
    def f(x, n):
        return x.sum() + torch.ones(n, 2).sum(), n * 2
    xc, tc = _counts(f, [(torch.randn(3), n) for n in (3, 5, 8)], dynamic=True)
    assert xc == tc == 1


def test_int_argument_used_as_a_python_value_is_specialized():
    def f(x, n):
        for _ in range(n):
            x = x * 2
        return x
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for n in (2, 3, 2, 4):
        x = torch.randn(3)
        torch.testing.assert_close(cf(x, n), f(x, n))
    assert cnt.frame_count == 3
    dump = xcompile._C.cache_entries(f.__code__)[0].guard.dump()
    assert "EQUALS_MATCH: L['n'] 4" in dump


def test_int_zero_and_one_stay_specialized_and_bools_are_not_ints():
    def f(x, n):
        return x + n
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for n in (0, 1, True, 5, 6):
        x = torch.randn(2)
        out = cf(x, n)
        torch.testing.assert_close(out, f(x, n))
    assert cnt.frame_count == 4            # 0, 1, True, then one symbolic entry for 5 and 6


def test_specialize_int_keeps_ints_constant():
    with xcompile.config.patch(specialize_int=True):
        xc, _ = _counts(lambda x, n: x * n, [(torch.randn(3), n) for n in (2, 3, 4)])
    assert xc == 3


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_int_argument_with_compiling_backends(backend):
    def f(x, n):
        return (x * n).relu() + torch.arange(n).sum(), n + 1
    cnt = CompileCounterWithBackend(backend)
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for n in (3, 4, 6):
        x = torch.randn(5)
        out, m = cf(x, n)
        torch.testing.assert_close(out, f(x, n)[0])
        assert m == n + 1 and type(m) is int
    assert cnt.frame_count == 1


def test_a_relation_the_guards_cannot_express_compiles_static():
    # a guard on a float division of sizes (FloatTrueDiv): the C++ shape programs are integer-only,
    # so the frame is traced again with static shapes instead of guarding less
    def f(x):
        if x.shape[0] / 3 > 1.5:
            return x * 2
        return x - 1
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for k in (3, 5, 7, 4):
        x = torch.randn(k)
        torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 4
