"""Grad-mode, inference-mode, autocast and profiler contexts, compared with torch.compile: the
breaks torch takes too (with its reasons), state never left changed, FX tracers meeting a
compiled function, and the bugs found with them (a module built in the frame, set-then-deleted
attributes)."""
import pytest
import torch
import torch._dynamo
from torch.fx.experimental.proxy_tensor import make_fx

import xcompile
from xcompile.frontend.exc import Unsupported

pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _state():
    return torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu")


def _torch_refuses(fn, *args):
    with pytest.raises(torch._dynamo.exc.Unsupported) as ei:
        torch.compile(fn, backend="eager", fullgraph=True)(*args)
    return str(ei.value)


# -- breaks taken where torch.compile takes them ------------------------------------------------------------
@torch.set_grad_enabled(False)
def _sge_decorated(t):
    return t + 1


def _calls_sge_decorated(x):
    return _sge_decorated(x) * 2


def _saved_tensors_hooks_block(x):
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        return x.sin()


def _save_on_cpu_block(x):
    with torch.autograd.graph.save_on_cpu():
        return x.sin()


@pytest.mark.parametrize("fn, what", [
    (_calls_sge_decorated, "set_grad_enabled.clone"),
    (_saved_tensors_hooks_block, "saved_tensors_hooks.__init__"),
    (_save_on_cpu_block, "__init__"),
])
def test_breaks_where_torch_breaks_with_its_reason(fn, what):
    x = torch.randn(3, requires_grad=True)
    theirs = _torch_refuses(fn, x)
    assert "marked as skipped" in theirs and what in theirs
    before = _state()
    with pytest.raises(Unsupported) as ei:
        xcompile.compile(fn, fullgraph=True)(x)
    assert "marked as skipped" in ei.value.reason and what in ei.value.reason
    assert ei.value.hint
    assert _state() == before
    # without fullgraph the break runs the construct eagerly: eager's result
    torch.testing.assert_close(xcompile.compile(fn)(x), fn(x))
    assert _state() == before


def test_saved_tensors_hooks_still_run_at_the_break():
    seen = []

    def pack(t):
        seen.append(t.shape)
        return t

    def fn(x):
        y = x * 2
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            z = y.sin()
        return z + 1

    x = torch.randn(3, requires_grad=True)
    xcompile.compile(fn)(x).sum().backward()
    assert seen, "the hooks block ran eagerly, so its saved tensors went through pack"
    torch.testing.assert_close(x.grad, (2 * (2 * x).cos()).detach())


def test_disable_saved_tensors_hooks_flag_inside_and_restored():
    def fn(x):
        with torch.autograd.graph.disable_saved_tensors_hooks("nope"):
            y = x.sin()
            on = torch._C._autograd._saved_tensors_hooks_is_enabled()
        return y, on

    x = torch.randn(3, requires_grad=True)
    for backend in ("eager", "aot_eager"):
        xcompile.reset()
        y, on = xcompile.compile(fn, backend=backend, fullgraph=True)(x)
        assert on is False
        assert torch._C._autograd._saved_tensors_hooks_is_enabled()
        assert torch._C._autograd._saved_tensors_hooks_get_disabled_error_message() is None


def test_hooks_registered_inside_a_disabled_block_raise_eagers_error():
    def fn(x):
        with torch.autograd.graph.disable_saved_tensors_hooks("hooks are off"):
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                return x.sin()

    with pytest.raises(RuntimeError, match="hooks are off"):
        xcompile.compile(fn)(torch.randn(3, requires_grad=True))
    assert torch._C._autograd._saved_tensors_hooks_is_enabled()


# -- profilers: ignored, their object unusable inside ---------------------------------------------------------
def test_profile_object_used_inside_breaks_instead_of_guessing():
    def fn(x):
        with torch.profiler.profile() as prof:
            y = x + 1
            prof.step()
        return y

    with pytest.raises(Unsupported):
        xcompile.compile(fn, fullgraph=True)(torch.randn(3))


def test_profile_block_is_one_graph_without_profiler_nodes():
    from xcompile.testing import CompileCounter

    def fn(x):
        with torch.autograd.profiler.profile():
            with torch.profiler.record_function("r"):
                return x.relu() + 1

    cnt = CompileCounter()
    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(fn, backend=cnt, fullgraph=True)(x), fn(x))
    assert cnt.frame_count == 1 and cnt.op_count == 2


# -- state never left changed ---------------------------------------------------------------------------------
def _raises_in_inference_mode(x):
    with torch.inference_mode():
        y = x * 2
        raise ValueError(f"boom {y.shape[0]}")


def _raises_after_c_set_grad_enabled(x):
    torch._C._set_grad_enabled(False)
    try:
        y = x * 2
        raise ValueError(f"boom {y.shape[0]}")
    finally:
        torch._C._set_grad_enabled(True)


def _raises_in_autocast_decorated(x):
    @torch.autocast("cpu", dtype=torch.bfloat16)
    def inner(t):
        raise ValueError(f"boom {t.shape[0]}")
    return inner(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_raises_in_inference_mode, _raises_after_c_set_grad_enabled,
                                _raises_in_autocast_decorated])
def test_state_restored_when_the_region_raises(fn, backend):
    before = _state()
    for _ in range(2):
        with pytest.raises(ValueError, match="boom"):
            xcompile.compile(fn, backend=backend)(torch.randn(3, requires_grad=True))
        assert _state() == before


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_c_set_grad_enabled_left_off_as_eager_leaves_it(backend):
    def fn(x):
        torch._C._set_grad_enabled(False)
        return x * 2

    x = torch.randn(3, requires_grad=True)
    try:
        out = xcompile.compile(fn, backend=backend, fullgraph=True)(x)
        assert not torch.is_grad_enabled()          # as after fn(x) in eager
        assert not out.requires_grad
    finally:
        torch._C._set_grad_enabled(True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_inference_mode_false_under_no_grad_builds_the_autograd_path(backend):
    def fn(x):
        with torch.inference_mode(False):
            return x * 3

    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        out = xcompile.compile(fn, backend=backend, fullgraph=True)(x)
    assert out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))


def test_inference_mode_false_under_outer_inference_mode_is_refused():
    def fn(x):
        with torch.inference_mode(False):
            return x * 3

    with torch.inference_mode():
        with pytest.raises(Unsupported, match="inference_mode"):
            xcompile.compile(fn, fullgraph=True)(torch.randn(3))
        assert torch.is_inference_mode_enabled()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_inference_mode_block_values_and_flags_like_torch_compile(backend):
    def fn(x):
        with torch.inference_mode():
            y = x.sin() * 2
        return y, y.requires_grad

    x = torch.randn(4, requires_grad=True)
    ours = xcompile.compile(fn, backend=backend, fullgraph=True)(x)
    theirs = torch.compile(fn, backend=backend, fullgraph=True)(x)
    torch.testing.assert_close(ours[0], theirs[0])
    assert ours[1] is theirs[1] is False
    assert ours[0].is_inference() == theirs[0].is_inference()
    assert _state() == (True, False, False)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_decorator_applied_in_frame_exits_when_the_function_raises(backend):
    # (torch.compile 2.13 leaves grad mode off after this program: checked against eager only)
    def fn(x):
        def raiser(t):
            raise ValueError("boom")
        g = torch.no_grad()(raiser)
        try:
            g(x)
        except ValueError:
            pass
        return x * 2, torch.is_grad_enabled()

    x = torch.randn(3, requires_grad=True)
    out, on = xcompile.compile(fn, backend=backend, fullgraph=True)(x)
    assert on is True and out.requires_grad and _state() == (True, False, False)


def test_set_grad_enabled_applied_in_frame_breaks_like_the_decorator():
    def fn(x):
        g = torch.set_grad_enabled(False)(lambda t: t * 2)
        return g(x)

    with pytest.raises(Unsupported, match="marked as skipped"):
        xcompile.compile(fn, fullgraph=True)(torch.randn(3))
    assert _state() == (True, False, False)


def _break_in_inference_block(x):
    with torch.inference_mode():
        y = x * 2
        print("", end="")
        z = y + 1
    return z


@torch.inference_mode()
def _breaking_inference_helper(t):
    print("", end="")
    return t * 3


def _calls_breaking_inference_helper(x):
    return _breaking_inference_helper(x) + 1


def _break_in_autocast_block(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        print("", end="")
    return y


def _break_between_c_set_grad_enabled(x):
    torch._C._set_grad_enabled(False)
    y = x * 2
    print("", end="")
    torch._C._set_grad_enabled(True)
    return y * 3


def _break_in_disabled_hooks_block(x):
    with torch.autograd.graph.disable_saved_tensors_hooks("m"):
        print("", end="")
        y = x.sin()
    return y


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [_break_in_inference_block, _calls_breaking_inference_helper,
                                _break_in_autocast_block, _break_between_c_set_grad_enabled,
                                _break_in_disabled_hooks_block])
def test_graph_break_inside_a_context_keeps_results_and_state(fn, backend):
    x = torch.randn(3, 3, requires_grad=True)
    expected = fn(x)
    compiled = xcompile.compile(fn, backend=backend)
    for _ in range(2):
        out = compiled(x)
        assert out.dtype == expected.dtype and out.requires_grad == expected.requires_grad
        torch.testing.assert_close(out.float(), expected.float(), atol=1e-2, rtol=1e-2)
        assert _state() == (True, False, False)
        assert torch._C._autograd._saved_tensors_hooks_is_enabled()


# -- FX tracers meeting a compiled function --------------------------------------------------------------------
def _body(x):
    return x.sin() + 1


def test_symbolic_trace_through_a_compiled_function_traces_the_original():
    cf = xcompile.compile(_body)

    def outer(x):
        return cf(x) * 2

    gm = torch.fx.symbolic_trace(outer)
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), outer(x))
    # torch.compile's behaviour with error_on_nested_fx_trace=False: the same graph
    tcf = torch.compile(_body, backend="eager")

    def touter(x):
        return tcf(x) * 2

    with torch._dynamo.config.patch(error_on_nested_fx_trace=False):
        tgm = torch.fx.symbolic_trace(touter)
    targets = [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert targets == [n.target for n in tgm.graph.nodes if n.op in ("call_function", "call_method")]


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_make_fx_through_a_compiled_function(mode):
    cf = xcompile.compile(_body)
    gm = make_fx(lambda x: cf(x) * 2, tracing_mode=mode)(torch.randn(3))
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), _body(x) * 2)
    assert any(n.target is torch.ops.aten.sin.default for n in gm.graph.nodes)


def test_compiled_function_under_fake_mode_returns_fakes():
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    cf = xcompile.compile(_body)
    with FakeTensorMode():
        out = cf(torch.randn(3))
    assert isinstance(out, FakeTensor)


# -- bugs found here ------------------------------------------------------------------------------------------
def test_module_built_in_the_frame_across_a_break():
    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = 1

        def forward(self, x):
            del self.a
            return x * 2

    def fn(x):
        m = Inner()
        return m(x) + 1

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(fn)(x), fn(x))


def test_break_at_zero_argument_super_call():
    class Base:
        def __init__(self):
            self.v = 3

    class Child(Base):
        def __init__(self, t):
            print("", end="")                 # a graph break before super()
            super().__init__()
            self.t = t

    def fn(x):
        c = Child(x)
        return c.t * c.v

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(fn)(x), fn(x))


@pytest.mark.parametrize("fullgraph", [True, False])
def test_attribute_set_then_deleted_in_forward(fullgraph):
    class M(torch.nn.Module):
        def forward(self, x):
            self.tmp = x + 1
            y = self.tmp * 2
            del self.tmp
            return y, hasattr(self, "tmp")

    m = M()
    x = torch.randn(3)
    out = xcompile.compile(m, fullgraph=fullgraph)(x)
    torch.testing.assert_close(out[0], (x + 1) * 2)
    assert out[1] is False and "tmp" not in vars(m)


def test_augmented_assignment_in_code_made_by_exec_and_compile():
    def fn(x):
        ns = {"x": x}
        exec("y = x * 2\ny += 1\nz = [1]\nz[0] += 2", ns)  # noqa: S102
        code = compile("w = 3\nw *= 2", "<probe>", "exec")
        exec(code, ns)  # noqa: S102
        return ns["y"] * ns["w"] + ns["z"][0]

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(fn)(x), fn(x))

