"""dynamo_api.txt (the torch._dynamo API page): each function's example and documented meaning,
with xcompile in torch._dynamo's place."""
from __future__ import annotations

import pytest
import torch

import xcompile
import xcompile.testing
from xcompile.api_tracing import ForbiddenInGraph
from xcompile.exc import Unsupported


def _ops(gm):
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")
            and n.target is not torch._C._set_grad_enabled]


def my_custom_function(x):
    xcompile.graph_break()          # would split the graph if its body were traced
    return torch.sin(x) * 2


def test_allow_in_graph_one_graph_containing_the_function():
    xcompile.allow_in_graph(my_custom_function)
    try:
        cnt = xcompile.testing.CompileCounter()

        @xcompile.optimize(cnt)
        def fn(a):
            x = torch.add(a, 1)
            x = my_custom_function(x)
            x = torch.add(x, 1)
            return x

        a = torch.randn(5)
        torch.testing.assert_close(fn(a), torch.sin(a + 1) * 2 + 1)
        assert cnt.frame_count == 1                      # a single graph ...
        assert any(getattr(t, "__name__", "").endswith("my_custom_function") for t in _ops(cnt.graphs[0]))
    finally:
        xcompile.frontend.tracing_rules.unmark(my_custom_function)


def test_disallow_in_graph_breaks_on_torch_sub():
    xcompile.disallow_in_graph(torch.sub)
    try:
        cnt = xcompile.testing.CompileCounter()

        @xcompile.optimize(cnt)
        def fn(a):
            x = torch.add(a, 1)
            x = torch.sub(x, 1)
            x = torch.add(x, 1)
            return x

        a = torch.randn(5)
        torch.testing.assert_close(fn(a), a + 1)
        # two graphs, each with a single torch.add() op
        assert cnt.frame_count == 2
        assert [_ops(g) for g in cnt.graphs] == [[torch.add], [torch.add]]
    finally:
        xcompile.frontend.tracing_rules.unmark(torch.sub)


def test_forbid_in_graph_asserts_while_tracing():
    def secret(x):
        return x + 1

    xcompile.forbid_in_graph(secret)

    @xcompile.compile
    def fn(x):
        return secret(x) * 2

    with pytest.raises(ForbiddenInGraph, match="forbid_in_graph"):
        fn(torch.randn(3))
    assert isinstance(ForbiddenInGraph("x"), AssertionError)
    torch.testing.assert_close(secret(torch.ones(2)), torch.full((2,), 2.0))   # eager is untouched


def test_graph_break_forces_a_break():
    cnt = xcompile.testing.CompileCounter()

    @xcompile.compile(backend=cnt)
    def fn(x):
        y = x.cos()
        xcompile.graph_break()
        return y.sin()

    x = torch.randn(4)
    torch.testing.assert_close(fn(x), x.cos().sin())
    assert cnt.frame_count == 2
    xcompile.graph_break()            # a no-op outside compiled code


def test_optimize_decorator_and_nopython():
    cnt = xcompile.testing.CompileCounter()

    @xcompile.optimize(cnt)
    def toy_example(a, b):
        return a * b + 1

    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(toy_example(a, b), a * b + 1)
    assert cnt.frame_count == 1

    @xcompile.optimize("eager", nopython=True)
    def broken(a):
        xcompile.graph_break()
        return a

    with pytest.raises(Unsupported):
        broken(a)

    @xcompile.optimize_assert("eager")
    def broken2(a):
        xcompile.graph_break()
        return a

    with pytest.raises(Unsupported):
        broken2(a)

    @xcompile.optimize(cnt, disable=True)
    def plain(a):
        return a - 1

    torch.testing.assert_close(plain(a), a - 1)
    assert cnt.frame_count == 1


def test_run_uses_prior_compilations_only():
    cnt = xcompile.testing.CompileCounter()

    def toy_example(a, b):
        return a + b

    compiled = xcompile.compile(toy_example, backend=cnt)
    a, b = torch.randn(4), torch.randn(4)
    compiled(a, b)
    assert cnt.frame_count == 1
    frozen = xcompile.run(toy_example)
    torch.testing.assert_close(frozen(a, b), a + b)
    torch.testing.assert_close(frozen(torch.randn(5), torch.randn(5)).shape, torch.Size([5]))
    assert cnt.frame_count == 1                     # no new compile, even for a new shape


def test_disable_recursive_and_not():
    cnt = xcompile.testing.CompileCounter()

    def aa_fn(x):
        return x.sin()

    def ab_fn(x):
        return x.cos()

    def a_fn(x):
        return aa_fn(x) + ab_fn(x)

    a_skipped = xcompile.disable(a_fn, recursive=False)
    assert a_skipped is a_fn

    def fn(x):
        return a_fn(x) * 2

    x = torch.randn(4)
    try:
        torch.testing.assert_close(xcompile.compile(fn, backend=cnt)(x), (x.sin() + x.cos()) * 2)
        # fn breaks at a_fn (its frame is skipped); aa_fn and ab_fn are still compiled; then
        # fn's resume (`* 2`): three graphs (the empty prefix before the call is no graph)
        assert sorted(str(t) for g in cnt.graphs for t in _ops(g)) == ["<built-in function mul>", "cos", "sin"]
    finally:
        xcompile.code_states.NONRECURSIVE_SKIPS.discard(a_fn.__code__)
        xcompile._C.set_code_state(a_fn.__code__, 0)

    cnt2 = xcompile.testing.CompileCounter()

    def b_fn(x):
        return aa_fn(x) + ab_fn(x)

    b_off = xcompile.disable(b_fn)              # recursive=True: nothing inside is compiled

    def fn2(x):
        return b_off(x) * 2 + 1

    torch.testing.assert_close(xcompile.compile(fn2, backend=cnt2)(x), (x.sin() + x.cos()) * 2 + 1)
    assert cnt2.frame_count == 1                # fn2's resume (`* 2 + 1`) only; b_fn's frames never

    with xcompile.disable():                    # context manager
        torch.testing.assert_close(xcompile.compile(fn2, backend=cnt2)(x), (x.sin() + x.cos()) * 2 + 1)


def test_reset_clears_compiled_state():
    cnt = xcompile.testing.CompileCounter()

    def f(x):
        return x * 3

    cf = xcompile.compile(f, backend=cnt)
    cf(torch.randn(2))
    cf(torch.randn(2))
    assert cnt.frame_count == 1
    xcompile.reset()
    cf(torch.randn(2))
    assert cnt.frame_count == 2


def test_optimized_module_wraps_the_original():
    mod = torch.nn.Linear(3, 2)
    opt = xcompile.compile(mod)
    assert isinstance(opt, xcompile.OptimizedModule)
    assert opt._orig_mod is mod
    x = torch.randn(4, 3)
    torch.testing.assert_close(opt(x), mod(x))
    assert opt.state_dict().keys() == mod.state_dict().keys()


def test_register_backend_and_list_backends():
    calls = []

    @xcompile.register_backend(name="my_reference_backend")
    def my_compiler(gm, example_inputs):
        calls.append(len(example_inputs))
        return gm.forward

    assert "my_reference_backend" in xcompile.list_backends()

    @xcompile.compile(backend="my_reference_backend")
    def f(x, y):
        return x @ y

    x, y = torch.randn(2, 3), torch.randn(3, 2)
    torch.testing.assert_close(f(x, y), x @ y)
    assert calls == [2]
