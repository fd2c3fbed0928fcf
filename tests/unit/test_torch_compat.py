"""xcompile/_torch_compat.py: each private torch name it reads is where this torch keeps it.

A failure names the symbol, so a torch that moves one again says what to mend."""
import threading

import pytest
import torch
import torch.fx

from xcompile import _torch_compat as compat
from xcompile._torch_check import SUPPORTED


def test_torch_version_is_in_the_supported_range():
    assert SUPPORTED[0] <= compat.TORCH_VERSION <= SUPPORTED[1], torch.__version__


def test_autograd_function_apply_is_found_either_way():
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    if compat.AUTOGRAD_FUNCTION_APPLY is not None:
        # torch <= 2.13: Function.apply is a classmethod over this Python function
        assert Double.apply.__func__ is compat.AUTOGRAD_FUNCTION_APPLY, "torch.autograd.Function.apply.__func__"
        assert compat.autograd_function_of_apply(Double.apply) is None
    else:
        # torch >= 2.14: C code bound to the class
        assert compat.autograd_function_of_apply(Double.apply) is Double, "torch._C._FunctionBase.apply"
    assert compat.autograd_function_of_apply(torch.sin) is None
    assert compat.autograd_function_of_apply([].append) is None


def test_is_fx_tracing_follows_symbolic_trace():
    seen = []

    def f(x):
        seen.append(compat.is_fx_tracing())
        return x + 1

    assert not compat.is_fx_tracing(), "torch.fx._symbolic_trace tracing flag"
    torch.fx.symbolic_trace(f)
    assert seen == [True], "torch.fx._symbolic_trace tracing flag"
    assert not compat.is_fx_tracing()


def test_is_fx_tracing_in_another_thread_while_not_tracing():
    out = []
    t = threading.Thread(target=lambda: out.append(compat.is_fx_tracing()))
    t.start()
    t.join()
    assert out == [False]


@pytest.mark.parametrize("shape_env", [False, True])
@pytest.mark.parametrize("index", [4, 99, -5, -99])
def test_fake_select_checks_the_index_range(index, shape_env):
    # torch 2.11 and 2.12: the fake rule made a view at storage offset `index` (compat wraps it there)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv() if shape_env else None) as mode:
        x = mode.from_tensor(torch.randn(4, 3))
        with pytest.raises(IndexError, match="out of range"):
            x.select(0, index)
        assert x.select(0, -4).storage_offset() == 0, "torch._subclasses.fake_impls aten.select.int"
        assert x.select(1, 2).storage_offset() == 2, "torch._subclasses.fake_impls aten.select.int"


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled_select_past_the_end_raises_as_eager_does(backend):
    # x[:2].select(0, 3) is row 3 of x's storage: compiled on 2.11 it returned that row
    import xcompile

    def view(x):
        return x[:2].select(0, 3)

    def computed(x):
        return (x[:2] * 1).select(0, 3) + 1

    x = torch.arange(12.0).reshape(4, 3)
    for fn in (view, computed):
        xcompile.reset()
        with pytest.raises(IndexError, match="out of range"):
            fn(x)
        with pytest.raises(IndexError, match="out of range"):
            xcompile.compile(fn, backend=backend)(x)


def test_cond_and_while_loop_ops_run_eagerly_and_under_make_fx():
    # torch._higher_order_ops.cond.cond_op / .while_loop.while_loop_op, called without dynamo
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(p, x):
        c = compat.cond(p, lambda a: a.sin(), lambda a: a.cos(), (x,))
        (w,) = compat.while_loop(lambda a: a.sum() < 10, lambda a: (a + 1,), (x,))
        return c, w

    x, p = torch.zeros(3), torch.tensor(True)
    assert torch.equal(f(p, x)[0], x.sin()), "torch._higher_order_ops.cond.cond_op"
    assert torch.equal(f(p, x)[1], torch.full((3,), 4.0)), "torch._higher_order_ops.while_loop.while_loop_op"
    for mode in ("real", "fake"):
        gm = make_fx(f, tracing_mode=mode)(p, x)
        targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
        assert torch.ops.higher_order.cond in targets, "torch._higher_order_ops.cond.cond_op under make_fx"
        assert torch.ops.higher_order.while_loop in targets, "while_loop_op under make_fx"
        assert torch.equal(gm(torch.tensor(False), x)[0], x.cos())


def test_fake_unique_inverse_and_counts_are_int64():
    # torch 2.11: the fake rules made them in the input's dtype (compat wraps them there)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        x = mode.from_tensor(torch.tensor([[3.0, 1.0], [3.0, 1.0], [2.0, 0.0]]))
        for name, (_, inverse, counts) in [
                ("aten._unique2", torch.unique(x, return_inverse=True, return_counts=True)),
                ("aten.unique_dim", torch.unique(x, dim=0, return_inverse=True, return_counts=True)),
                ("aten.unique_consecutive", torch.unique_consecutive(x, return_inverse=True, return_counts=True))]:
            assert inverse.dtype == counts.dtype == torch.int64, f"torch._subclasses.fake_impls {name}"


def test_compiled_unique_inverse_dtype_is_eagers():
    import xcompile

    def f(x):
        _, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        return inverse * 2, counts + 1, (inverse + 1).dtype

    x = torch.tensor([3.0, 1.0, 3.0, 2.0])
    for backend in ("eager", "aot_eager", "inductor"):
        xcompile.reset()
        with xcompile.config.patch(capture_dynamic_output_shape_ops=True):
            got = xcompile.compile(f, backend=backend)(x)
        want = f(x)
        assert got[2] == want[2] == torch.int64, backend
        for g, w in zip(got[:2], want[:2]):
            assert g.dtype == w.dtype and torch.equal(g, w), backend


def test_clamp_one_nan_bound_matches_eager():
    # CLAMP_ONE_NAN_BOUND_IGNORED: torch 2.11's clamp(x, min=nan) leaves x as it is; later torches
    # give nan. The flag must say what this torch does, and compiled code must do the same
    import xcompile

    x = torch.tensor([-1.0, 0.5, 2.0])
    eager_ignores = not torch.clamp(x, min=float("nan")).isnan().any().item()
    assert eager_ignores == compat.CLAMP_ONE_NAN_BOUND_IGNORED, \
        f"_torch_compat.CLAMP_ONE_NAN_BOUND_IGNORED is wrong for torch {torch.__version__}"

    def f(x):
        nan = float("nan")
        return torch.clamp(x, min=nan), torch.clamp(x, max=nan), torch.clamp(x, min=nan, max=1.0)
    for backend in ("eager", "aot_eager", "inductor"):
        xcompile.reset()
        got = xcompile.compile(f, backend=backend)(x)
        for g, w in zip(got, f(x)):
            torch.testing.assert_close(g, w, equal_nan=True)
