"""The public API surface: compile as a decorator with and without arguments, OptimizedModule,
optimize/optimize_assert in context and decorator forms, disable, reset, backends."""
import warnings

import pytest
import torch
import torch.nn as nn


def _f(x, y):
    """doc of _f"""
    return torch.relu(x @ y) + 1


def _xy():
    return torch.randn(3, 4), torch.randn(4, 2)


def test_compile_decorator_without_arguments(xc):
    @xc.compile
    def f(x, y):
        return torch.relu(x @ y) + 1

    x, y = _xy()
    torch.testing.assert_close(f(x, y), _f(x, y))


def test_compile_decorator_with_arguments(xc):
    cnt = xc.testing.CompileCounter()

    @xc.compile(fullgraph=True, backend=cnt)
    def f(x, y):
        return torch.relu(x @ y) + 1

    x, y = _xy()
    torch.testing.assert_close(f(x, y), _f(x, y))
    f(*_xy())
    assert cnt.frame_count == 1 and cnt.op_count >= 3


def test_compile_keeps_function_metadata(xc):
    f = xc.compile(_f)
    assert f.__name__ == "_f" and f.__doc__ == "doc of _f"
    assert getattr(f, "__wrapped__", _f) is _f
    assert _f(*_xy()).shape == (3, 2), "the original function is left alone"


def test_compile_with_named_and_dynamo_counter_backends(xc):
    import torch._dynamo.testing

    for backend in ("eager", torch._dynamo.testing.CompileCounter()):
        xc.reset()
        f = xc.compile(_f, backend=backend, fullgraph=True)
        x, y = _xy()
        torch.testing.assert_close(f(x, y), _f(x, y))
        if not isinstance(backend, str):
            assert backend.frame_count == 1


def test_compile_disable_returns_the_original(xc):
    assert xc.compile(_f, disable=True) is _f


@pytest.mark.parametrize("kwargs, error", [
    ({"mode": "fastest"}, RuntimeError),
    ({"mode": "reduce-overhead", "options": {"a": 1}}, RuntimeError),
])
def test_compile_rejects_bad_arguments(xc, kwargs, error):
    with pytest.raises(error):
        xc.compile(_f, **kwargs)


def test_compile_method(xc):
    cnt = xc.testing.CompileCounter()

    class Holder:
        def __init__(self):
            self.k = 3

        def run(self, x):
            return x * self.k

    h = Holder()
    f = xc.compile(h.run, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x * 3)
    assert cnt.frame_count == 1


# --------------------------------------------------------------------------- modules


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)
        self.register_buffer("offset", torch.zeros(2))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) + self.offset


def test_optimized_module_basics(xc):
    torch.manual_seed(0)
    mod = Net()
    cnt = xc.testing.CompileCounter()
    opt = xc.compile(mod, backend=cnt, fullgraph=True)
    assert isinstance(opt, xc.OptimizedModule) and isinstance(opt, nn.Module)
    assert opt._orig_mod is mod
    x = torch.randn(3, 4)
    torch.testing.assert_close(opt(x), mod(x))
    assert cnt.frame_count == 1
    assert list(opt.state_dict().keys()) == list(mod.state_dict().keys())
    assert [id(p) for p in opt.parameters()] == [id(p) for p in mod.parameters()]
    assert [n for n, _ in opt.named_parameters()] == [n for n, _ in mod.named_parameters()] or \
        [n for n, _ in opt.named_parameters()] == [f"_orig_mod.{n}" for n, _ in mod.named_parameters()]
    assert opt.fc1 is mod.fc1, "attribute access reaches the wrapped module"


def test_optimized_module_load_state_dict_changes_results(xc):
    torch.manual_seed(0)
    mod, donor = Net(), Net()
    opt = xc.compile(mod, backend=xc.testing.CompileCounter())
    x = torch.randn(3, 4)
    opt(x)
    opt.load_state_dict(donor.state_dict())
    torch.testing.assert_close(opt(x), donor(x))


def test_optimized_module_train_eval_and_grads(xc):
    torch.manual_seed(0)
    mod = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    ref = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    ref.load_state_dict(mod.state_dict())
    opt = xc.compile(mod, backend=xc.testing.CompileCounter())
    opt.eval()
    assert not mod.training, "eval() on the wrapper reaches the wrapped module"
    ref.eval()
    x = torch.randn(2, 4)
    out = opt(x)
    torch.testing.assert_close(out, ref(x))
    out.sum().backward()
    ref(x).sum().backward()
    for p, q in zip(mod.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_optimized_module_runs_hooks(xc):
    torch.manual_seed(0)
    mod = Net()
    calls = []
    mod.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    mod.register_forward_hook(lambda m, args, out: out * 2)
    opt = xc.compile(mod, backend=xc.testing.CompileCounter())
    x = torch.randn(3, 4)
    torch.testing.assert_close(opt(x), mod(x))
    assert calls == ["pre", "pre"]


# --------------------------------------------------------------------------- optimize / disable


def test_optimize_as_context_manager(xc):
    cnt = xc.testing.CompileCounter()

    def g(x):
        return x.sin() + 1

    with xc.optimize(cnt):
        x = torch.randn(3)
        torch.testing.assert_close(g(x), x.sin() + 1)
    assert cnt.frame_count == 1
    g(torch.randn(3))
    assert cnt.frame_count == 1, "outside the block nothing is compiled"


def test_optimize_as_decorator(xc):
    cnt = xc.testing.CompileCounter()
    f = xc.optimize(cnt)(_f)
    x, y = _xy()
    torch.testing.assert_close(f(x, y), _f(x, y))
    assert cnt.frame_count == 1


def _data_dependent(x):
    if x.sum() > 0:  # DATA-DEP
        return x + 1
    return x - 1


def _line_of(marker, fn):
    import inspect
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(src) if marker in line)


@pytest.mark.parametrize("form", ["optimize_assert", "optimize_nopython", "compile_fullgraph"])
def test_nopython_forms_raise_unsupported_naming_the_line(xc, form):
    cnt = xc.testing.CompileCounter()
    if form == "optimize_assert":
        f = xc.optimize_assert(cnt)(_data_dependent)
    elif form == "optimize_nopython":
        f = xc.optimize(cnt, nopython=True)(_data_dependent)
    else:
        f = xc.compile(_data_dependent, backend=cnt, fullgraph=True)
    with pytest.raises(xc.exc.Unsupported) as info:
        f(torch.randn(3))
    assert issubclass(xc.exc.Unsupported, Exception)
    msg = str(info.value)
    assert f"line {_line_of('DATA-DEP', _data_dependent)}" in msg and __file__ in msg, msg
    assert cnt.frame_count == 0


def test_optimize_assert_as_context_manager(xc):
    cnt = xc.testing.CompileCounter()
    with xc.optimize_assert(cnt):
        with pytest.raises(xc.exc.Unsupported):
            _data_dependent(torch.randn(3))


def test_graph_break_without_fullgraph_runs_correctly(xc):
    cnt = xc.testing.CompileCounter()
    f = xc.compile(_data_dependent, backend=cnt)
    for _ in range(4):
        x = torch.randn(3)
        torch.testing.assert_close(f(x), _data_dependent(x))


def test_disable_decorator_and_context(xc):
    cnt = xc.testing.CompileCounter()

    @xc.disable
    def never(x):
        return x * 5

    x = torch.randn(3)
    with xc.optimize(cnt):
        torch.testing.assert_close(never(x), x * 5)
        with xc.disable():
            (lambda t: t + 1)(x)
    assert cnt.frame_count == 0


def test_disable_inside_compiled_function(xc):
    cnt = xc.testing.CompileCounter()
    inner_calls = []

    @xc.disable
    def helper(x):
        inner_calls.append(1)
        return x * 5

    def f(x):
        return helper(x + 1) - 1

    g = xc.compile(f, backend=cnt)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(g(x), f(x))
    assert len(inner_calls) == 4, "the disabled helper runs, eagerly, on every call"


def test_reset_recompiles(xc):
    cnt = xc.testing.CompileCounter()
    f = xc.compile(_f, backend=cnt, fullgraph=True)
    f(*_xy())
    f(*_xy())
    assert cnt.frame_count == 1
    xc.reset()
    f(*_xy())
    assert cnt.frame_count == 2


def test_eager_and_record_graphs(xc):
    rec = xc.testing.EagerAndRecordGraphs()
    f = xc.compile(_f, backend=rec, fullgraph=True)
    x, y = _xy()
    torch.testing.assert_close(f(x, y), _f(x, y))
    assert len(rec.graphs) == 1 and isinstance(rec.graphs[0], torch.fx.GraphModule)


def test_backend_returning_non_callable(xc):
    f = xc.compile(_f, backend=lambda gm, ex: 42, fullgraph=True)
    with pytest.raises(xc.exc.BackendCompilerFailed, match="not callable"):
        f(*_xy())


def test_suppress_errors_falls_back_to_eager(xc):
    def bad(gm, ex):
        raise ValueError("nope")

    f = xc.compile(_f, backend=bad)
    with xc.config.patch(suppress_errors=True), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x, y = _xy()
        torch.testing.assert_close(f(x, y), _f(x, y))
    assert any("nope" in str(m.message) for m in w)
