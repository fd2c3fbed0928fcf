"""config.capture_scalar_outputs: Tensor.item() / .tolist() as graph ops (issue 3).

Every program runs compiled and eagerly on fresh inputs (values, dtypes, shapes, Python number
types), counts graphs, and where a break is expected checks its reason. A reference test runs
the same programs under torch.compile (backend "eager") with the knob on and compares graph counts.
"""
from __future__ import annotations

import math
import warnings

import pytest
import torch

import xcompile
from xcompile.testing import CompileCounter, CompileCounterWithBackend, captured_logs

OUTER: list = []


def _pos(n=4):
    return torch.rand(n) + 0.5               # sums stay positive (int() of them is a valid size)


def _same(a, b) -> bool:
    if isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape \
            and a.stride() == b.stride() and torch.allclose(a, b, rtol=1e-6, atol=1e-6)
    if isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(b, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in b)
    if isinstance(b, float) and isinstance(a, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12)
    return type(a) is type(b) and a == b


# -- programs: (fn, expected graphs on the first call, expected break count) -------------------------------
def p_mul(x):
    s = x.sum().item()
    return x * s


def p_arith_return(x):
    s = x.sum().item()
    return s * 2 + 1


def p_tuple_return(x):
    s = x.sum().item()
    return x + 1, s


def p_full_like_add(x):
    s = x.mean().item()
    return torch.full_like(x, s) + torch.add(x, s)


def p_clamp_where(x):
    s = x.mean().item()
    return torch.clamp(x, min=s), torch.where(x > s, x, s), x.new_full((3,), s)


def p_int_ops(x):
    n = (x * 10).int().sum().item()
    return x + n, n // 2, n % 3, -n, abs(-n)


def p_bool_item(x):
    b = (x > 0.7).any().item()
    return x * b


def p_math(x):
    s = x.sum().item()
    return s ** 2, math.sqrt(abs(s)), max(s, 1.0), min(s, 1.0), math.floor(s), int(s), float(s)


def p_two_items(x):
    s, t = x.sum().item(), x.max().item()
    return x * (s - t) / 3


def p_inplace_ops(x):
    s = x.sum().item()
    s += 1
    s *= 2
    return x * s


def p_to_tensor(x):
    s = x.sum().item()
    return torch.tensor(s), torch.tensor((x * 10).int().sum().item()), torch.as_tensor(s, dtype=torch.float64)


def p_dict_return(x):
    s = x.sum().item()
    return {"s": s, "y": x * s}


def p_store_outer(x):
    s = x.sum().item()
    OUTER.append(s)
    return x * 2


def p_tolist_int(x):
    n = (x * 3).long()
    lst = n.tolist()
    return x * lst[0] + lst[1], lst


def p_tolist_2d(x):
    return (x * 3).long().view(2, 2).tolist()


def p_isinstance(x):
    s = x.sum().item()
    return isinstance(s, float), x * s


def p_operator_and_closure(x):
    import operator
    s, t = x.sum().item(), x.max().item()

    def inner(y):
        return y * operator.add(s, 1)
    return inner(x), operator.neg(s), sum([s, t])


def p_branch(x):                         # if s > 0: break at the jump; the prefix holds the item
    s = x.sum().item() - 3.0
    if s > 0:
        return x + 1
    return x - 1


def p_zeros(x):                          # a shape from a captured int: an unbacked size, as torch
    n = (x * 3).int().sum().item()
    return torch.zeros(n)


def p_range(x):
    n = (x * 3).int().sum().item()
    return [i for i in range(n)]


def p_index(x):
    n = (x * 10).int().sum().item()
    return x[n % 4] * 2


def p_format(x):
    s = x.sum().item()
    return f"{s:.3f}"


def p_tolist_float(x):                   # torch only captures integer tolist()
    y = x * 2
    return y * 2, y.tolist()


PROGRAMS = [
    (p_mul, 1, 0), (p_arith_return, 1, 0), (p_tuple_return, 1, 0), (p_full_like_add, 1, 0),
    (p_clamp_where, 1, 0), (p_int_ops, 1, 0), (p_bool_item, 1, 0), (p_math, 1, 0), (p_two_items, 1, 0),
    (p_inplace_ops, 1, 0), (p_to_tensor, 1, 0), (p_dict_return, 1, 0), (p_store_outer, 1, 0),
    (p_tolist_int, 1, 0), (p_tolist_2d, 1, 0), (p_isinstance, 1, 0), (p_operator_and_closure, 1, 0),
    (p_branch, 2, 1), (p_zeros, 1, 0), (p_range, 1, 1), (p_index, 2, 1), (p_format, 1, 1),
    (p_tolist_float, 1, 1),
]
WHOLE = [p for p in PROGRAMS if p[2] == 0]


@pytest.fixture(autouse=True)
def _knob():
    xcompile.reset()
    with xcompile.config.patch(capture_scalar_outputs=True):
        yield
    xcompile.reset()


def _check(fn, backend, calls=3):
    cnt = CompileCounter() if backend == "eager" else CompileCounterWithBackend(backend)
    compiled = xcompile.compile(fn, backend=cnt)
    first = None
    for _ in range(calls):
        x = _pos()
        OUTER.clear()
        got = compiled(x)
        got_outer = list(OUTER)
        OUTER.clear()
        want = fn(x)
        assert _same(got, want), (fn.__name__, got, want)
        assert _same(got_outer, list(OUTER))
        if first is None:
            first = cnt.frame_count
    return first, cnt


@pytest.mark.parametrize("fn,graphs,breaks", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_program_matches_eager(fn, graphs, breaks):
    first, cnt = _check(fn, "eager")
    assert first == graphs
    e = xcompile.explain(fn)(_pos())
    assert e.graph_break_count == breaks, [r.reason for r in e.break_reasons]


@pytest.mark.parametrize("fn,graphs,breaks", WHOLE, ids=[p[0].__name__ for p in WHOLE])
def test_whole_graph_does_not_recompile(fn, graphs, breaks):
    first, cnt = _check(fn, "eager", calls=4)
    assert cnt.frame_count == first == 1
    g = cnt.graphs[0]
    if fn is not p_tolist_int and fn is not p_tolist_2d:
        assert any(n.op == "call_method" and n.target == "item" for n in g.graph.nodes)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", [p_mul, p_arith_return, p_int_ops, p_tolist_int, p_branch, p_zeros],
                         ids=lambda f: f.__name__)
def test_backends_run_scalar_graphs_without_warnings(backend, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(fn, backend)


def test_python_number_types_are_eagers():
    def f(x):
        return x.sum().item(), (x * 10).int().sum().item(), (x > 0).all().item()

    got = xcompile.compile(f, backend="eager")(_pos())
    assert [type(v) for v in got] == [float, int, bool]


def test_graph_records_sym_ops():
    cnt = CompileCounter()
    xcompile.compile(p_arith_return, backend=cnt)(_pos())
    code = cnt.graphs[0].code
    assert "item()" in code and "* 2" in code and "+ 1" in code


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_gradients_with_a_captured_scalar(backend):
    def f(x, w):
        loss = (x * w).sum()
        scale = x.detach().sum().item()
        return loss * scale, scale

    for _ in range(2):
        x, w = torch.randn(3, 4), torch.randn(4, requires_grad=True)
        w2 = w.detach().clone().requires_grad_(True)
        got, s = xcompile.compile(f, backend=backend)(x, w)
        want, s2 = f(x, w2)
        assert s == s2 and torch.allclose(got, want)
        got.backward()
        want.backward()
        assert torch.allclose(w.grad, w2.grad)


def test_backend_fallback_is_logged():
    with captured_logs("fallbacks") as messages:
        _check(p_mul, "inductor", calls=1)
    assert any("captured scalar" in m for m in messages)


@pytest.mark.parametrize("fn,why", [(p_branch, "branching on captured scalar"), (p_range, "range()"),
                                    (p_tolist_float, "non-integer")], ids=lambda v: getattr(v, "__name__", ""))
def test_fullgraph_names_the_reason(fn, why):
    with pytest.raises(xcompile.exc.Unsupported) as info:
        xcompile.compile(fn, backend="eager", fullgraph=True)(_pos())
    assert why in str(info.value)


def test_knob_off_still_breaks():
    with xcompile.config.patch(capture_scalar_outputs=False):
        cnt = CompileCounter()
        x = _pos()
        assert _same(xcompile.compile(p_mul, backend=cnt)(x), p_mul(x))
        assert all("item" not in n.name for g in cnt.graphs for n in g.graph.nodes)
        e = xcompile.explain(p_mul)(x)
        assert e.graph_break_count == 1
        assert "capture_scalar_outputs" in str(e.break_reasons[0].hint) or \
            "capture_scalar_outputs" in str(e)


def test_item_of_a_multi_element_tensor_raises_like_eager():
    def f(x):
        return x.item()

    with pytest.raises(Exception, match="cannot be converted to Scalar|1 element"):
        xcompile.compile(f, backend="eager")(torch.randn(3))


@pytest.mark.parametrize("fn,graphs,breaks", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_reference_torch_compile_graph_count(fn, graphs, breaks):
    """torch.compile with the knob on: same results and the same graph count (a tensor with a
    data-dependent shape stays in the graph, in torch's and in ours)."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter as TorchCounter

    if fn is p_index or fn is p_store_outer:
        pytest.skip("torch's answer here depends on its dynamic-shape support")
    torch._dynamo.reset()
    cnt = TorchCounter()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        x = _pos()
        got = torch.compile(fn, backend=cnt)(x)
    torch._dynamo.reset()
    assert _same(got, fn(x))
    # p_zeros: torch keeps torch.zeros(n) (an unbacked size) in its graph, and so do we.
    assert graphs == cnt.frame_count


def test_fullgraph_captures_item_with_the_knob_on():
    x = _pos()
    assert _same(xcompile.compile(p_int_ops, backend="eager", fullgraph=True)(x), p_int_ops(x))
