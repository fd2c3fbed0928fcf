"""torch.func transforms inside compiled code (issue #12): traced into the graph, compared with
eager torch.func on fresh random inputs, graph counts compared with torch.compile's."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing

import xcompile
from xcompile.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    torch._dynamo.reset()
    yield
    xcompile.reset()
    torch._dynamo.reset()
    assert torch._C._functorch.maybe_current_level() is None      # no functorch level leaked


def _torch_graphs(fn, make_inputs, calls=2) -> int:
    cnt = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(fn, backend=cnt)
    for _ in range(calls):
        compiled(*make_inputs())
    return cnt.frame_count


def _check(fn, make_inputs, backend, *, fullgraph=False, calls=3, torch_graphs=True):
    """Compiled == eager on fresh inputs each call; returns (our graph count, torch.compile's)."""
    cnt = CompileCounterWithBackend(backend)
    compiled = xcompile.compile(fn, backend=cnt, fullgraph=fullgraph)
    for _ in range(calls):
        args = make_inputs()
        got = compiled(*args)
        want = fn(*args)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    ours = cnt.frame_count
    theirs = _torch_graphs(fn, make_inputs) if torch_graphs else None
    return ours, theirs


def _same_count(fn, make_inputs, backend, **kw):
    ours, theirs = _check(fn, make_inputs, backend, **kw)
    assert ours == theirs, (ours, theirs)
    return ours


# -- the FAQ's examples (CPU) ------------------------------------------------------------------------------
def _faq_f(x):
    return torch.sin(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_vmap_of_outside_function(backend):
    def g(x):
        return torch.vmap(_faq_f)(x)

    assert _same_count(g, lambda: (torch.randn(2, 3),), backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_grad(backend):
    def wrapper_fn(x):
        return torch.func.grad(lambda x: x.sin().sum())(x)

    assert _same_count(wrapper_fn, lambda: (torch.randn(3, 3, 3),), backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_vmap(backend):
    def my_fn(x):
        return torch.vmap(lambda x: x.sum(1))(x)

    assert _same_count(my_fn, lambda: (torch.randn(3, 3, 3),), backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_tuple_input_and_keyword_argument_now_traced(backend):
    def fn(x):
        x1, x2 = x
        return x1 + x2

    def my_fn(x):
        return torch.func.vmap(fn)(x)

    def kw_fn(x, y):
        return (x + y).sum()

    def my_kw(x, y):
        return torch.func.grad(kw_fn)(x, y=y)

    assert _same_count(my_fn, lambda: ((torch.randn(3, 3, 3), torch.randn(3, 3, 3)),), backend) == 1
    xcompile.reset()
    assert _same_count(my_kw, lambda: (torch.randn(3, 3), torch.randn(3, 3)), backend) == 1


def test_faq_stride_under_vmap_is_the_per_sample_stride():
    def bad_fn(x):
        return x * x.stride()[0]

    def my_fn(x):
        return torch.func.vmap(bad_fn, in_dims=1)(x)

    assert _same_count(my_fn, lambda: (torch.randn(3, 4, 5),), "eager") == 1


def test_faq_allow_in_graph_escape_hatch():
    def f(x):
        return xcompile.allow_in_graph(torch.vmap(torch.sum))(x)

    ours, _ = _check(f, lambda: (torch.randn(2, 3),), "eager", fullgraph=True, torch_graphs=False)
    assert ours == 1        # (torch.compile's own allow_in_graph rejects this object in 2.13)


_OUTSIDE_GRAD = torch.func.grad(lambda x: (x.sin() * x).sum())
_OUTSIDE_VMAP = torch.vmap(torch.func.jacrev(torch.sin), in_dims=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_transformed_function_made_outside(backend):
    def f(x):
        return _OUTSIDE_GRAD(x), _OUTSIDE_VMAP(x.unsqueeze(0).expand(3, 4) * 2)

    assert _same_count(f, lambda: (torch.randn(4),), backend, fullgraph=True) == 1


# -- transforms and their options --------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_vmap_in_dims_out_dims(backend):
    def f(x, y):
        inner = torch.vmap(lambda a, b: a * b + a.sin())
        return torch.vmap(inner, in_dims=(1, None), out_dims=1)(x, y) * 2

    assert _same_count(f, lambda: (torch.randn(3, 4, 5), torch.randn(3, 5)), backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_dtypes_and_shapes(backend):
    def f(x, y):
        return torch.vmap(lambda a, b: (a @ b).relu(), in_dims=(0, None))(x, y)

    for dtype in (torch.float32, torch.float64):
        xcompile.reset()
        _same_count(f, lambda: (torch.randn(6, 2, 3, dtype=dtype), torch.randn(3, 4, dtype=dtype)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_has_aux_argnums_and_grad_and_value(backend):
    def f(x, y):
        def loss(a, b):
            return (a * b).sin().sum(), {"cos": a.cos(), "b": b * 3}
        (ga, gb), aux = torch.func.grad(loss, argnums=(0, 1), has_aux=True)(x, y)
        g, v = torch.func.grad_and_value(lambda a: (a ** 2).sum())(x)
        return ga + gb + aux["cos"] * aux["b"], g * v

    assert _same_count(f, lambda: (torch.randn(4), torch.randn(4)), backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacrev_jacfwd_hessian(backend):
    def small(x):
        return (x.sin() * x.roll(1)).sum()

    def f(x):
        return (torch.func.jacrev(torch.sin)(x), torch.func.jacfwd(lambda x: x.exp() * 2)(x),
                torch.func.hessian(small)(x))

    assert _same_count(f, lambda: (torch.randn(5),), backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_vjp_and_jvp(backend):
    def f(x, v):
        out, vjp_fn = torch.func.vjp(lambda a: a.sin() * a, x)
        (g,) = vjp_fn(v)
        p, t = torch.func.jvp(lambda a: a.cos().sum(0), (x,), (v,))
        return out, g, p, t

    assert _same_count(f, lambda: (torch.randn(3, 4), torch.randn(3, 4)), backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_closed_over_tensors_and_parameters_are_inputs(backend):
    lin = torch.nn.Linear(4, 3)

    def f(x, w):
        return torch.vmap(lambda r: lin(r * w).tanh())(x), torch.func.grad(lambda a: (a * w).sum())(x)

    cnt = CompileCounterWithBackend(backend)
    cf = xcompile.compile(f, backend=cnt, fullgraph=True)
    for _ in range(3):
        with torch.no_grad():
            lin.weight.copy_(torch.randn(3, 4))          # new values, same objects: no recompile
        x, w = torch.randn(5, 4), torch.randn(4)
        torch.testing.assert_close(cf(x, w), f(x, w))
    assert cnt.frame_count == 1
    code = cnt.graphs[0].code        # the parameters reach the transform as graph values
    assert "lin_weight" in code and "_tensor_constant" not in code


# -- functional_call and per-sample gradients ------------------------------------------------------------------
class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


@pytest.mark.parametrize("backend", BACKENDS)
def test_functional_call(backend):
    net = _Net()

    def f(params, x):
        return torch.func.functional_call(net, params, (x,))

    def inputs():
        return {k: torch.randn_like(v) for k, v in net.named_parameters()}, torch.randn(3, 4)

    assert _same_count(f, inputs, backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_sample_gradients(backend):
    net = _Net()

    def compute_loss(params, x, y):
        out = torch.func.functional_call(net, params, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, y.unsqueeze(0))

    def per_sample_grads(params, x, y):
        return torch.vmap(torch.func.grad(compute_loss), in_dims=(None, 0, 0))(params, x, y)

    def inputs():
        params = {k: v.detach() for k, v in net.named_parameters()}
        return params, torch.randn(6, 4), torch.randint(0, 2, (6,))

    assert _same_count(per_sample_grads, inputs, backend, fullgraph=True) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_through_transforms(backend):
    w = torch.randn(4, requires_grad=True)

    def f(x):
        g = torch.func.grad(lambda a: (a.sin() * a * w).sum())(x)
        return (torch.vmap(lambda r: r * w)(g.expand(3, 4)) ** 2).sum()

    cf = xcompile.compile(f, backend=backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(4, requires_grad=True)
        cf(x).backward()
        got = (x.grad.clone(), w.grad.clone())
        x.grad = None
        w.grad = None
        f(x).backward()
        torch.testing.assert_close(got, (x.grad, w.grad))
        w.grad = None


# -- what stays a graph break ------------------------------------------------------------------------------------
def _program_with_break_candidate(x):
    y = x * 2
    z = torch.vmap(torch.sin)(y)
    return z + 1


def test_knob_off_keeps_the_graph_break():
    with xcompile.config.patch(capture_func_transforms=False):
        cnt = CompileCounterWithBackend("eager")
        cf = xcompile.compile(_program_with_break_candidate, backend=cnt)
        for _ in range(2):
            x = torch.randn(3, 4)
            torch.testing.assert_close(cf(x), _program_with_break_candidate(x))
        assert cnt.frame_count == 2
        xcompile.reset()
        with pytest.raises(xcompile.exc.Unsupported, match="function transform"):
            xcompile.compile(_program_with_break_candidate, backend="eager", fullgraph=True)(torch.randn(2, 2))
    xcompile.reset()
    cnt = CompileCounterWithBackend("eager")
    xcompile.compile(_program_with_break_candidate, backend=cnt)(torch.randn(3, 4))
    assert cnt.frame_count == 1


OUTSIDE: list = []
COUNTER = 0


def _appends(x, y):
    OUTSIDE.append(1)
    return x + y


def _bumps(x):
    global COUNTER
    COUNTER += 1
    return x.sin()


def test_side_effects_are_a_graph_break_naming_them():
    def my_fn(x, y):
        return torch.func.vmap(_appends)(x, y) * 2

    OUTSIDE.clear()
    x, y = torch.ones(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(xcompile.compile(my_fn, backend="eager")(x, y), my_fn(x, y))
    assert OUTSIDE == [1, 1]                  # once compiled (eagerly at the break), once eager
    with pytest.raises(xcompile.exc.Unsupported, match="side effect"):
        xcompile.reset()
        xcompile.compile(my_fn, backend="eager", fullgraph=True)(x, y)

    def glob(x):
        return torch.func.grad(lambda a: _bumps(a).sum())(x)

    before = COUNTER
    xcompile.reset()
    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(glob, backend="eager")(x), x.cos())
    assert COUNTER == before + 1
    with pytest.raises(xcompile.exc.Unsupported, match="assigns global 'COUNTER'"):
        xcompile.reset()
        xcompile.compile(glob, backend="eager", fullgraph=True)(x)


class _Box:
    pass


def _stores_in_list(x):
    acc = []

    def inner(y):
        acc.append(y * 2)
        return y.sin().sum()

    return torch.func.grad(inner)(x), len(acc)


def _stores_in_dict(x):
    d = {}

    def inner(y):
        d["k"] = y.cos()
        return y.sin()

    return torch.func.vmap(inner)(x), len(d)


def _stores_on_object(x):
    b = _Box()

    def inner(y):
        b.t = y * 2
        return y.sin().sum()

    return torch.func.grad(inner)(x), hasattr(b, "t")


def _list_made_inside(x):
    def inner(y):
        acc = []                                 # made inside the transformed function: pure
        acc.append(y.sin())
        return acc[0].sum()

    return torch.func.grad(inner)(x)


@pytest.mark.parametrize("fn, match", [(_stores_in_list, "mutates a list"), (_stores_in_dict, "mutates a dict"),
                                       (_stores_on_object, "escapes it .stored into new _Box object .local 'b'")])
def test_a_container_made_in_the_frame_mutated_inside_a_transform_is_a_break(fn, match):
    # (the graph once returned the region's tensor from outside it: an FX lint error, not a break)
    x = torch.randn(3)
    want = fn(x)
    got = xcompile.compile(fn, backend="eager")(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]
    with pytest.raises(xcompile.exc.Unsupported, match=match):
        xcompile.reset()
        xcompile.compile(fn, backend="eager", fullgraph=True)(x)


def test_a_container_made_inside_the_transformed_function_is_traced():
    x = torch.randn(3)
    _check(_list_made_inside, lambda: (torch.randn(3),), "aot_eager", fullgraph=True)
    torch.testing.assert_close(xcompile.compile(_list_made_inside, fullgraph=True)(x), x.cos())


def test_metadata_the_transform_answers_otherwise_is_a_break():
    def f(x):
        return torch.func.grad(lambda a: a.sin().sum() if a.requires_grad else a.cos().sum())(x)

    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(x), x.cos())   # eager: requires_grad
    with pytest.raises(xcompile.exc.Unsupported, match="requires_grad"):
        xcompile.reset()
        xcompile.compile(f, backend="eager", fullgraph=True)(x)


def test_in_place_on_an_input_is_a_break():
    def f(x):
        return torch.vmap(lambda r: r.add_(1))(x)

    x = torch.randn(3, 4)
    want = f(x.clone())
    got_in = x.clone()
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(got_in), want)
    torch.testing.assert_close(got_in, x + 1)
    with pytest.raises(xcompile.exc.Unsupported, match="in place"):
        xcompile.reset()
        xcompile.compile(f, backend="eager", fullgraph=True)(x.clone())


def test_error_inside_a_transform_leaks_no_level():
    def f(x):
        return torch.func.grad(lambda a: a.sin())(x)        # not a scalar: eager raises

    with pytest.raises(RuntimeError):
        xcompile.compile(f, backend="eager")(torch.randn(3))
    assert torch._C._functorch.maybe_current_level() is None
    x = torch.randn(3)
    torch.testing.assert_close(torch.func.grad(lambda a: a.sin().sum())(x), x.cos())
    torch.testing.assert_close(torch.vmap(torch.sin)(x), x.sin())


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_shapes_one_graph_for_every_batch_size(backend):
    def f(x, w):
        return torch.vmap(lambda r: (r * w).sin())(x) + torch.func.grad(lambda a: (a * a).sum())(x)

    cnt = CompileCounterWithBackend(backend)
    cf = xcompile.compile(f, backend=cnt, dynamic=True)
    for n in (3, 5, 7):
        x, w = torch.randn(n, 4), torch.randn(4)
        torch.testing.assert_close(cf(x, w), f(x, w))
    assert cnt.frame_count == 1
