"""Grad-mode contexts, and Unsupported: reasons, hints and the user's stack."""
import pytest
import torch

from xcompile.frontend.exc import Unsupported

from .helpers import check, ops, trace


def r(*shape):
    return torch.randn(*shape)


def test_no_grad_block_emits_mode_switches_and_right_requires_grad():
    def fn(x, w):
        y = x @ w
        with torch.no_grad():
            z = y * 2
        with torch.enable_grad():
            q = y + 1
        return y, z, q
    c = check(fn, r(2, 3), r(3, 3).requires_grad_())
    switches = [n.args for n in c.gm.graph.nodes if n.target is torch._C._set_grad_enabled]
    assert switches == [(False,), (True,)]
    out = c.gm(*c.example_inputs)
    assert out[0].requires_grad and not out[1].requires_grad and out[2].requires_grad
    assert torch.is_grad_enabled()


def test_enable_grad_inside_no_grad_caller():
    def fn(w):
        with torch.enable_grad():
            a = w * 2
        return a, w + 1
    w = r(3).requires_grad_()
    with torch.no_grad():
        c = trace(fn, w)
        out = c.gm(w)
        expected = fn(w)
    assert out[0].requires_grad == expected[0].requires_grad is True
    assert out[1].requires_grad == expected[1].requires_grad is False


def test_set_grad_enabled_context_and_nesting():
    def fn(x):
        with torch.set_grad_enabled(False):
            a = x * 2
            with torch.enable_grad():
                b = x * 3
        return a, b, x * 4
    check(fn, r(3).requires_grad_())


def test_inference_mode_inside_enters_and_leaves_in_the_graph():
    def fn(x):
        with torch.inference_mode():
            return x * 2
    c = trace(fn, r(2))
    assert ops(c)[0] is torch.autograd.grad_mode._enter_inference_mode
    assert ops(c)[-1] is torch.autograd.grad_mode._exit_inference_mode
    x = r(2).requires_grad_()
    out = c.gm(x)[0]
    assert out.is_inference() and not out.requires_grad and not torch.is_inference_mode_enabled()


def test_inference_mode_when_already_on_is_a_no_op():
    def fn(x):
        with torch.inference_mode():
            y = x * 2
        return y
    with torch.inference_mode():
        x = r(2)
        c = trace(fn, x)
        torch.testing.assert_close(c.gm(x)[0], fn(x))


def test_print_is_unsupported_with_user_stack():
    def inner(x):
        print("hello")
        return x

    def fn(x):
        y = x + 1
        return inner(y)
    with pytest.raises(Unsupported) as ei:
        trace(fn, r(2))
    e = ei.value
    assert e.reason == "call to builtin print"
    assert e.hint
    names = [fs.name for fs in e.user_stack]
    assert names == ["fn", "inner"]               # outermost first
    assert e.user_stack[-1].line == 'print("hello")'
    assert e.user_stack[0].line == "return inner(y)"
    assert __file__.rstrip("c") == e.user_stack[0].filename
    text = str(e)
    assert "call to builtin print" in text and 'print("hello")' in text


def test_data_dependent_branch_is_unsupported():
    def fn(x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(Unsupported, match="data-dependent branching") as ei:
        trace(fn, r(3))
    assert ei.value.user_stack[-1].line == "if x.sum() > 0:"


def test_item_and_tolist_are_unsupported():
    for body in (lambda x: x.sum().item(), lambda x: x.tolist(), lambda x: float(x.sum()), lambda x: bool(x)):
        with pytest.raises(Unsupported):
            trace(body, r(2))


def test_mutating_input_list_and_attribute_is_a_recorded_side_effect():
    def fn(xs):
        xs.append(1)
        return xs

    class Obj:
        pass

    def fn2(o, x):
        o.y = x
        return x
    c = trace(fn, [1])
    assert c.side_effects is not None and c.side_effects.described == ["L['xs']: list contents"]
    assert c.output == ("source", 0)               # the same list, changed after the graph runs
    c2 = trace(fn2, Obj(), r(2))
    assert c2.side_effects.described == ["L['o']: set attributes y"]


def test_raise_in_traced_code_is_unsupported():
    def fn(x):
        if x.dim() != 3:
            raise ValueError("need 3d")
        return x
    with pytest.raises(Unsupported, match="need 3d"):
        trace(fn, r(2))


def test_errors_in_ops_raise_eagers_error():
    from xcompile.frontend.exc import TorchRuntimeError

    def fn(x, y):
        return x @ y
    with pytest.raises(RuntimeError) as eager:
        fn(r(2, 3), r(2, 3))
    with pytest.raises(TorchRuntimeError) as info:
        trace(fn, r(2, 3), r(2, 3))
    assert str(eager.value) in str(info.value) and "while tracing" in str(info.value)


def test_a_fake_kernel_failure_where_eager_runs_is_a_logged_break():
    """torch's meta kernel of addcmul cannot broadcast a 0-d operand to symbolic sizes; eager runs
    the op. It was a TorchRuntimeError: no break logged, and the frame re-traced on every call."""
    import xcompile

    def fn(a, b, c):
        return torch.addcmul(a + 1, b, c, value=0.5) * 2

    a, b, c = r(4, 3), r(4, 3), torch.randn(())
    explained = xcompile.explain(xcompile.compile(fn, backend="eager", dynamic=True))(a, b, c)
    assert explained.graph_break_count == 1, explained
    assert "fake-tensor kernel failed" in str(explained.break_reasons[0])
    calls = []
    compiled = xcompile.compile(fn, backend=lambda gm, ex: calls.append(gm) or gm, dynamic=True)
    for shape in ((4, 3), (5, 2), (4, 3)):
        a, b, c = r(*shape), r(*shape), torch.randn(())
        torch.testing.assert_close(compiled(a, b, c), fn(a, b, c))
    assert len(calls) == 2, "the graphs before and after the break, traced once"


def test_shape_errors_and_assert_on_constants():
    def fn(x):
        assert x.shape[0] == 2, "bad"
        return x * 2
    check(fn, r(2, 5))
    with pytest.raises(Unsupported):
        trace(fn, r(3, 5))


def test_grad_mode_switch_nodes_are_kept():
    def fn(x):
        with torch.no_grad():
            pass
        return x + 1
    c = trace(fn, r(2))
    assert ops(c).count(torch._C._set_grad_enabled) == 2
