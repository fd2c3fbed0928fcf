"""Programs whose shapes and int arguments change between calls (issue #31 section 2): once a
size or an int turns symbolic, the compiled call must still answer as eager does, on every
backend. Each test failed before its fix."""
from __future__ import annotations

import collections
import dataclasses

import pytest
import torch

import xcompile
import xcompile.testing

BACKENDS = ("eager", "aot_eager", "inductor")
INTS = (2, 2, 3, 1, 4, 3)               # 2 twice, then 3: the int turns symbolic


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _run_ints(fn, backend, sizes=(3, 3, 4, 5, 3, 6)):
    c = xcompile.compile(fn, backend=backend)
    for n, m in zip(INTS, sizes):
        x = torch.randn(m)
        got, want = c(x, n), fn(x, n)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:], (n, m, got[1:], want[1:])


# -- 1. a symbolic int in a set, a dict key, an `in` test: equal numbers are one ----------------------------
def set_ops(x, n):
    s = {1, n // 2}
    s.add(abs(n - 2))
    s |= {3, 4}
    return x + 1, len(s)


def set_display(x, n):
    return x + 1, len({n, n - 0, 1}), len({(n, 1), (n - 0, 1)})


def set_discard(x, n):
    s = {1, 2}
    s.discard(n - 1)
    return x + 1, len(s), sorted(s)


def in_list(x, n):
    return x + 1, n in [1, 2, 3], (n - 1) in (1, 2), [n].count(n - 0), [1, 2, 3, 4].index(n)


def set_iteration(x, n):
    s = {n, n - 1, 7}
    return x + 1, sorted(s), s.pop() in (n, n - 1, 7), 1 in s, {n, 1} == {1, n - 0}


def dicts(x, n):
    d = dict.fromkeys([n, 1, n // 1])
    e = {1: "a"}
    e[n - 1] = "b"
    return x + 1, len(d), len(e), (n - 1) in e, len(frozenset([n, 1, 2])), \
        collections.Counter([n, 1, n - 0])[1], len({n: 1, n - 0: 2})


def shape_in_set(x, n):
    return x + 1, x.shape[0] in {3, 4}, len({x.shape[0], 3, n}), x.shape[0] in [n, 5]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [set_ops, set_display, set_discard, in_list, set_iteration, dicts, shape_in_set],
                         ids=lambda f: f.__name__)
def test_symbolic_ints_hash_by_value(fn, backend):
    _run_ints(fn, backend)


def test_captured_scalar_in_a_set_is_not_told_apart_by_identity():
    def f(x):
        a = x.sum().item()
        return x + 1, len({a, 1, 1.0})

    with xcompile.config.patch(capture_scalar_outputs=True):
        c = xcompile.compile(f, backend="eager")
        for v in (1.0, 2.0):
            x = torch.full((3,), v / 3)
            x[0] = v - 2 * (v / 3)
            assert c(x)[1] == f(x)[1]


# -- 2. a torch.Size with symbolic sizes rebuilt beside an object made in the frame -----------------------------
@dataclasses.dataclass
class Box:
    t: torch.Tensor
    k: int


def box_and_shape(x):
    return Box(x + 1, 0), (x * 2).shape


def box_and_sizes(x):
    return Box(x + 1, x.shape[0]), x.shape, x[0].shape


def size_ops(x):
    s = x.shape
    return Box(x, 1), (s[1:], s + (1,), (1,) + s, s * 2, s + s, s[:1] + s[1:], tuple(s), s[::-1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [box_and_shape, box_and_sizes, size_ops], ids=lambda f: f.__name__)
def test_size_rebuilt_with_objects_made_in_the_frame(fn, backend):
    c = xcompile.compile(fn, backend=backend)
    for shape in ((5, 3), (5, 3), (3, 4), (2, 6)):
        x = torch.randn(shape)
        got, want = c(x), fn(x)
        torch.testing.assert_close(got[0].t, want[0].t)
        assert got[0].k == want[0].k
        assert repr(got[1:]) == repr(want[1:])          # torch.Size stays torch.Size


# -- 3. a size returned as a number from a graph whose sizes a guard fixed ---------------------------------------
def size_accumulated_in_a_closure(x, y):
    acc = 0

    def add(t):
        nonlocal acc
        acc += t.size(-1)
    add(x)
    add(y)
    if x.size(-1) == 3:
        pass
    return x + 1, acc


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_returned_as_a_number_after_a_guard_fixed_it(backend):
    c = xcompile.compile(size_accumulated_in_a_closure, backend=backend)
    for shape in ((5, 3), (5, 3), (3, 4), (2, 6), (3, 3)):
        x, y = torch.randn(shape, requires_grad=True), torch.randn(shape[0], 3)
        got, want = c(x, y), size_accumulated_in_a_closure(x, y)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is int
        got[0].sum().backward()


# -- 4. an op that fails only at run time inside the user's try ---------------------------------------------------
def write_in_try(x, y):
    for i, t in zip(range(3), (x,)):
        try:
            y[torch.arange(y.shape[0]).flip(0)] = t
        except Exception:  # noqa: BLE001  (eager raises here: overlapping write)
            pass
    return x * 2


def math_in_try(x, y):
    try:
        z = x.sin() + y
    except RuntimeError:
        z = x
    return z * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_raised_at_run_time_inside_try_is_caught(backend):
    c = xcompile.compile(write_in_try, backend=backend)
    for shape in ((4, 3), (4, 3), (5, 3)):
        x = torch.randn(shape)
        x2 = x.clone()
        got, want = c(x, x), write_in_try(x2, x2)     # y is x: the write overlaps, eager raises and catches
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(x, x2)


def test_ops_that_cannot_fail_at_run_time_stay_compiled_inside_try():
    cnt = xcompile.testing.CompileCounter()
    c = xcompile.compile(math_in_try, backend=cnt)
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(c(x, y), math_in_try(x, y))
    assert cnt.frame_count == 1


# -- 5. an input no gradient reaches is not an edge of the compiled autograd node ---------------------------------
def _clamp_in_helper(x, y):
    s = float(y.mean())
    u = torch.clamp(x, max=s)            # saves x, which clamp_ writes next: its backward cannot run
    x.clamp_(max=s)
    if float(y.mean()) > 0:
        pass
    else:
        keep = [x, u, x]  # noqa: F841  (x and u become inputs of the graph after the break)
        w = y.clamp(-0.5, 0.5)
    return w, w


def clamp_then_unused(a1):
    v1 = a1.neg()
    _, w = _clamp_in_helper(v1, y=a1)
    return (w.square(),)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_never_runs_the_grad_fn_of_an_input_no_gradient_reaches(backend):
    c = xcompile.compile(clamp_then_unused, backend=backend)
    a, b = (torch.linspace(-2, 0.5, 5, dtype=torch.float64).requires_grad_() for _ in range(2))
    clamp_then_unused(a)[0].sum().backward()
    c(b)[0].sum().backward()                  # raised 'modified by an inplace operation' on aot_eager
    torch.testing.assert_close(b.grad, a.grad)


def test_indexing_inside_try_finally_stays_one_graph():
    """A ``finally`` catches nothing: transformers wraps each model's forward in try/finally
    (restoring its config), and an embedding there broke every model's graph."""
    emb = torch.nn.Embedding(10, 4)

    def f(ids):
        try:
            return emb(ids) * 2
        finally:
            emb.training = emb.training

    ids = torch.tensor([1, 2, 3])
    out = xcompile.compile(f, backend="eager", fullgraph=True)(ids)
    torch.testing.assert_close(out, f(ids))


def test_indexing_under_an_except_that_cannot_catch_it_stays_one_graph():
    """transformers' static cache: ``try: keys.index_copy_(...) except NotImplementedError:``.
    A NotImplementedError clause cannot see an index error, so the frame stays compiled (the
    break recompiled Llama's decode step for every token)."""
    def f(cache, pos, x):
        try:
            cache.index_copy_(0, pos, x)
        except NotImplementedError:
            cache[pos] = x
        return cache * 2

    cache, pos, x = torch.zeros(6, 2), torch.tensor([1, 3]), torch.randn(2, 2)
    ce = cache.clone()
    out = xcompile.compile(f, backend="eager", fullgraph=True)(cache, pos, x)
    torch.testing.assert_close(out, f(ce, pos, x))
    torch.testing.assert_close(cache, ce)
