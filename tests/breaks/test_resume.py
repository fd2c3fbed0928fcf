"""Frames split at a graph break: each program equals eager on fresh inputs, compiles the expected
number of graphs, and compiles nothing new on later calls."""
from __future__ import annotations

import torch

import xcompile

from .util import check

GLOBAL_W = torch.randn(4)


def t4():
    return (torch.randn(4),)


opaque = xcompile.disallow_in_graph(lambda *a, **k: len(a) + len(k))


# -- where the break happens -----------------------------------------------------------------------------
def test_break_at_a_call_keeps_live_tensors():
    def f(x):
        y = x.sin()
        z = x.cos()
        xcompile.graph_break()
        return y * z + x
    check(f, t4, graphs=2, breaks=1)


def test_print_break():
    def f(x):
        y = x + 1
        print("tracing?", end="")
        return y * 2
    check(f, t4, graphs=2, breaks=1)


def test_break_result_is_used():
    def f(x):
        n = opaque(x, x)
        return x * n
    check(f, t4, graphs=1, breaks=1)


def test_keyword_arguments_at_the_break():
    def f(x):
        y = x.relu()
        k = opaque(x, a=y, b=3)
        return y + k
    check(f, t4, graphs=2, breaks=1)


def test_star_args_at_the_break():
    def f(x, *rest):
        y = x * 2
        n = opaque(*rest, y)
        return y + n
    check(f, lambda: (torch.randn(4), 1, 2), graphs=2, breaks=1)


def test_star_kwargs_at_the_break():
    def f(x, **kw):
        y = x * 2
        n = opaque(y, **kw)
        return y + n + kw["a"]
    cf = xcompile.compile(f)
    for a in (1.5, 1.5, 2.5):
        x = torch.randn(4)
        torch.testing.assert_close(cf(x, a=a), f(x, a=a))


def test_values_below_the_call_survive():
    def helper(a, b, c):
        return a + b * c

    def f(x):
        return helper(x.sin(), opaque(x), x.cos())
    check(f, t4, graphs=2, breaks=1)


def test_method_call_break_with_self_on_the_stack():
    class Acc:
        def __init__(self):
            self.total = 0

        def add(self, n):
            return n + 1

    acc = Acc()

    def f(x):
        y = x.exp()
        n = acc.add(opaque(y))
        return y * n
    check(f, t4, graphs=2, breaks=1)


def test_item_breaks_once():
    def f(x):
        s = x.sum().item()
        return x * s
    # the resume function specializes on the Python float (a guard on its value): one call only
    check(f, t4, graphs=2, breaks=1, calls=1)

    def g(x):
        s = x.sum().item()
        return x * 2, s > -1e9
    check(g, t4, graphs=2, breaks=1, calls=1)


def test_data_dependent_branch_both_ways():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y - 1
    cnt, _ = check(f, lambda: (torch.ones(4),), graphs=2, breaks=1)
    cf = xcompile.compile(f, backend=cnt)
    torch.testing.assert_close(cf(-torch.ones(4)), f(-torch.ones(4)))
    assert cnt.frame_count == 3          # the other branch's resume compiles on its first call


def test_boolean_operators_on_tensors():
    def f(x, y):
        a = x.sum() > 0 and y.sum() > 0
        b = x.mean() < 0 or y.mean() < 0
        return x + 1 if a else x - 1, b
    # the same branches on every call (each branch's resume compiles on its first use)
    check(f, lambda: (torch.rand(4) + 0.1, torch.rand(4) + 0.1))
    check(f, lambda: (torch.rand(4) + 0.1, -torch.rand(4) - 0.1))


def test_fstring_of_a_tensor_is_a_stub_break():
    def f(x):
        y = x + 1
        s = f"{y.shape[0]}-{y}"
        return y * 2, len(s) > 0
    # the resume function specializes on the string (a guard on its value): one call only
    check(f, t4, breaks=1, calls=1)


def test_break_at_the_first_instruction():
    def f(x):
        opaque()
        return x + 1
    check(f, t4, graphs=1, breaks=1)


def test_two_breaks_in_sequence():
    def f(x):
        a = x + 1
        opaque(a)
        b = a * 2
        opaque(b)
        return a + b
    check(f, t4, graphs=3, breaks=2)


# -- inlined callees ----------------------------------------------------------------------------------------
def test_break_inside_an_inlined_callee():
    def inner(x):
        x = x + 1
        xcompile.graph_break()
        return x * 2

    def f(x):
        y = x.sin()
        z = inner(y)
        return z + y
    # f's prefix, inner's two halves, f's resume
    check(f, t4, graphs=4, breaks=2)


def test_break_two_calls_deep():
    def leaf(x):
        print("leaf", end="")
        return x - 1

    def mid(x):
        return leaf(x * 3) + 1

    def f(x):
        return mid(x + 2) / 2
    check(f, t4)


# -- frame state across the break ------------------------------------------------------------------------------
def test_closure_of_the_frame():
    k = torch.randn(4)
    scale = 3

    def f(x):
        y = x + k
        xcompile.graph_break()
        return y * k * scale
    check(f, t4, graphs=2, breaks=1)


def test_closure_differs_between_function_objects_of_one_code():
    def make(scale):
        def f(x):
            y = x * scale
            xcompile.graph_break()
            return y + scale
        return f

    f2, f5 = make(2.0), make(5.0)
    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(f2)(x), f2(x))
    torch.testing.assert_close(xcompile.compile(f5)(x), f5(x))
    torch.testing.assert_close(xcompile.compile(f2)(x), f2(x))


def test_cell_variable_captured_before_the_break():
    def f(x):
        y = x + 1
        g = lambda: y * 2  # noqa: E731
        xcompile.graph_break()
        return g() + y
    check(f, t4, graphs=2, breaks=1)


def test_cell_variable_rebound_after_the_break():
    def f(x):
        y = x + 1

        def get():
            return y

        xcompile.graph_break()
        y = y * 3
        return get() + x
    check(f, t4, breaks=1)


def test_local_bound_on_one_path_only():
    def f(x, flag):
        if flag:
            y = x + 1
        xcompile.graph_break()
        return y * 2 if flag else x - 1
    check(f, lambda: (torch.randn(4), True), breaks=1)
    check(f, lambda: (torch.randn(4), False), breaks=1)


def test_containers_built_in_the_frame():
    def f(x):
        d = {"a": x + 1, "b": [x * 2, 3]}
        t = (d["a"], d)
        xcompile.graph_break()
        d["c"] = d["a"] - 1
        return t[1]["b"][0] + d["c"], len(t[1])
    check(f, t4, graphs=2, breaks=1)


def test_object_identity_is_kept():
    def f(x):
        lst = [x]
        alias = lst
        xcompile.graph_break()
        alias.append(x * 2)
        return len(lst), lst[1]
    check(f, t4, breaks=1)


def test_new_user_object_survives_the_break():
    class Box:
        def __init__(self, v):
            self.v = v

    def f(x):
        b = Box(x + 1)
        xcompile.graph_break()
        return b.v * 2
    check(f, t4, breaks=1)


def test_global_tensor_and_module():
    lin = torch.nn.Linear(4, 4)

    def f(x):
        y = lin(x) + GLOBAL_W
        xcompile.graph_break()
        return lin(y)
    check(f, t4, graphs=2, breaks=1)


def test_module_forward_with_a_break():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 8)
            self.b = torch.nn.Linear(8, 2)

        def forward(self, x):
            h = self.a(x).relu()
            xcompile.graph_break()
            return self.b(h)

    m = M()
    check(m, lambda: (torch.randn(3, 4),), graphs=2, breaks=1)


def test_zero_argument_super_across_the_break():
    class Base(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Child(Base):
        def forward(self, x):
            y = x * 2
            xcompile.graph_break()
            return super().forward(y)

    check(Child(), t4, breaks=1)


# -- grad modes and `with` ---------------------------------------------------------------------------------------
def test_break_inside_no_grad():
    def f(x):
        with torch.no_grad():
            y = x * 2
            xcompile.graph_break()
            z = y + 1
        return z, torch.is_grad_enabled(), x * 3
    check(f, lambda: (torch.randn(4, requires_grad=True),), graphs=2, breaks=1)


def test_break_inside_nested_grad_modes():
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
                xcompile.graph_break()
                c = b * x
            d = a + 1
        return a, b, c, d, torch.is_grad_enabled()
    check(f, lambda: (torch.randn(4, requires_grad=True),), breaks=1)


def test_set_grad_enabled_statement_before_the_break():
    def f(x):
        torch.set_grad_enabled(False)
        y = x * 2
        xcompile.graph_break()
        torch.set_grad_enabled(True)
        return y + 1, (x * 2).requires_grad
    check(f, lambda: (torch.randn(4, requires_grad=True),))


def test_gradients_flow_through_both_graphs():
    w = torch.randn(4, requires_grad=True)

    def f(x):
        y = (x * w).sin()
        xcompile.graph_break()
        return (y * w).sum()

    x1 = torch.randn(4, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    f(x1).backward()
    g_eager = (x1.grad.clone(), w.grad.clone())
    w.grad = None
    xcompile.compile(f)(x2).backward()
    torch.testing.assert_close(x2.grad, g_eager[0])
    torch.testing.assert_close(w.grad, g_eager[1])


def test_exception_in_the_breaking_call_leaves_grad_mode_restored():
    def boom(x):
        raise ValueError("boom")

    boom_opaque = xcompile.disallow_in_graph(boom)

    def f(x):
        with torch.no_grad():
            y = x * 2
            boom_opaque(y)
        return y

    cf = xcompile.compile(f)
    for _ in range(2):
        try:
            cf(torch.randn(3))
        except ValueError as e:
            assert str(e) == "boom"
        else:
            raise AssertionError("no exception")
        assert torch.is_grad_enabled()


# -- side effects before the break ------------------------------------------------------------------------------
class Counter:
    def __init__(self):
        self.n = 0


def test_side_effects_are_applied_before_the_breaking_call():
    seen = []

    def watch(lst):
        seen.append(len(lst))
        return 0

    watch_opaque = xcompile.disallow_in_graph(watch)
    counter = Counter()

    def f(x, lst):
        y = x + 1
        lst.append(y)
        counter.n += 1
        watch_opaque(lst)                 # eager code observes the mutation
        lst.append(y * 2)
        return y

    cf = xcompile.compile(f)
    a, b = [], []
    x = torch.randn(4)
    cf(x, a)
    n_compiled = counter.n
    f(x, b)
    assert [len(a), len(b)] == [2, 2] and seen == [1, 1] and n_compiled == 1 and counter.n == 2
    torch.testing.assert_close(a[1], b[1])


# -- frames that run eagerly instead ------------------------------------------------------------------------------
def test_break_in_a_loop_runs_the_frame_eagerly():
    def f(x):
        for i in range(3):
            x = x + i
            opaque(x)
        return x
    _, records = check(f, t4, graphs=0, breaks=1)
    assert not records[0].resumed


def test_break_in_a_try_block_runs_the_frame_eagerly():
    def f(x):
        try:
            y = x + 1
            opaque(y)
        except ValueError:
            y = x
        return y
    check(f, t4, graphs=0, breaks=1)


def test_callees_of_an_eager_frame_are_still_compiled():
    def inner(x):
        return x.sin() * 2

    def f(x):
        for _ in range(2):
            opaque(x)
            x = inner(x)
        return x
    cnt, _ = check(f, t4, breaks=1)
    assert cnt.frame_count == 1          # inner, compiled once through the hook


# -- recompiles ------------------------------------------------------------------------------------------------------
def test_resume_function_recompiles_on_its_own_guards():
    def f(x, n):
        y = x * n
        xcompile.graph_break()
        return y + n

    cnt = xcompile.testing.CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    x = torch.randn(4)
    for n in (2, 2, 3, 3):
        torch.testing.assert_close(cf(x, n), f(x, n))
    assert cnt.frame_count == 4          # (prefix, resume) for n=2 and for n=3
    for shape in ((4,), (5,), (4,)):
        x = torch.randn(shape)
        torch.testing.assert_close(cf(x, 2), f(x, 2))
    assert cnt.frame_count == 6


def test_runner_is_called_with_the_closure():
    """C++: a code entry of code with free variables gets the closure as one more argument."""
    from xcompile import _C

    def make(k):
        def f(x):
            return x + k
        return f

    f = make(5)
    got = []

    def runner(*args):
        got.append(args)
        return "ran"

    _C.set_code_state(runner, 1)
    _C.cache_add(f.__code__, _C.CacheEntry.code(_C.RootGuard(0), runner))
    try:
        prev = _C.set_callback(lambda *a: None)
        try:
            assert f(1) == "ran"
        finally:
            _C.set_callback(prev)
    finally:
        _C.cache_clear(f.__code__)
    assert got == [(1, f.__closure__)]


def test_c_extension_call_class_statement_and_numpy_scalars():
    import zlib

    import numpy as np

    def f(x):
        y = x + 1
        c = zlib.crc32(b"abc")            # a C extension function
        class Local:
            k = 2
        z = np.float32(3.0)               # numpy: a 0-d array in the graph (config.trace_numpy)
        return y * (c % 7) * Local.k + float(z)     # float() of an array: a break
    # the class is a new object on every call (its identity is guarded): one call only
    check(f, t4, breaks=4, calls=1)


def test_resume_functions_are_named_after_the_user_function():
    def g(x):
        y = x + 1
        opaque(y)
        z = y * 2
        opaque(z)
        return z

    out = xcompile.explain(g)(torch.randn(3))
    names = [r.user_stack[-1].name for r in out.break_reasons]
    assert names[0] == "g" and names[1].startswith("xcompile_resume_in_g_at_")


def test_gradients_across_breaks_with_aot_eager():
    w = torch.randn(4, requires_grad=True)

    def f(x):
        y = (x * w).sin()
        print(end="")
        z = (y * w).cos()
        if z.sum() > 0:
            return z.sum() * 2
        return z.sum()

    cf = xcompile.compile(f, backend="aot_eager")
    for _ in range(3):
        x1 = torch.randn(4, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_(True)
        w.grad = None
        f(x1).backward()
        expected = (x1.grad.clone(), w.grad.clone())
        w.grad = None
        cf(x2).backward()
        torch.testing.assert_close(x2.grad, expected[0])
        torch.testing.assert_close(w.grad, expected[1])


class _Registry(dict):
    pass


class _Items(list):
    pass


def _breaks(t):
    xcompile.graph_break()
    return t


def test_method_of_a_container_subclass_made_in_the_frame_across_a_break():
    # `d.update(...)` with the break inside its argument: the bound method on the stack is the
    # contents' method; the runner rebuilt the contents as a second object, and the update went
    # there (eager ['a', 'c'], compiled ['a'])
    def f(x):
        d = _Registry(a=x)
        d.update(c=_breaks(x) * 3)
        items = _Items([x])
        items.append(_breaks(x) + 1)
        return sorted(d), d["c"], len(items), items[1]
    check(f, t4)
