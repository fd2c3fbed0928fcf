"""faq.txt (torch.compile FAQ): every code example, with xcompile in torch's place.

Where the FAQ says a case "falls back to eager-mode PyTorch", the test checks the result equals
eager (a graph break or an eager frame); where it says code "will not work", that it raises."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import xcompile
import xcompile.testing
from xcompile.debug.profiler import CompileProfiler
from xcompile.exc import Unsupported

from .util import captured_logs, graph_break_logs

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    print("woo")
    if b.sum() < 0:
        b = b * -1
    return x * b


# -- "Identifying the cause of a graph break" ----------------------------------------------------------
def test_explain_toy_example():
    explanation, out_guards, graphs, ops_per_graph = xcompile.explain(toy_example, torch.randn(10), torch.randn(10))
    assert explanation.startswith("xcompile produced 3 graphs, with 2 graph breaks and ")
    assert len(graphs) == 3 and len(out_guards) == 3 and len(ops_per_graph) == 3
    assert " Break reasons:" in explanation
    line = toy_example.__code__.co_firstlineno + 2
    assert f'line {line}, in toy_example\n       print("woo")' in explanation
    assert "if b.sum() < 0:" in explanation

    out = xcompile.explain(toy_example)(torch.randn(10), -torch.ones(10))
    assert (out.graph_count, out.graph_break_count) == (3, 2)
    assert out.op_count == 7                # abs, add, div | sum, lt | mul, mul
    assert [len(ops) for ops in out.ops_per_graph] == [3, 2, 2]
    first, second = out.break_reasons
    assert "print" in first.reason and first.user_stack[-1].line == 'print("woo")'
    assert "data-dependent" in second.reason and second.user_stack[-1].line == "if b.sum() < 0:"
    assert str(out).startswith("xcompile produced 3 graphs, with 2 graph breaks and 7 ops.")
    out = xcompile.explain(toy_example)(torch.randn(10), torch.ones(10))
    assert out.op_count == 6                # the FAQ's run: b.sum() >= 0


def test_fullgraph_errors_on_the_first_break():
    with pytest.raises(Unsupported) as info:
        xcompile.compile(toy_example, fullgraph=True, backend="eager")(torch.randn(10), torch.randn(10))
    msg = str(info.value)
    assert "print" in msg and "from user code:" in msg and 'print("woo")' in msg


def test_graph_breaks_are_logged():
    with captured_logs("graph_breaks") as logs:
        a, b = torch.randn(10), torch.randn(10)
        torch.testing.assert_close(xcompile.compile(toy_example)(a, b), toy_example(a, b))
    lines = graph_break_logs(logs)
    assert len(lines) == 2
    assert "Graph Break Reason:" in lines[0] and "User code traceback:" in lines[0]


def test_some_fun_compiles_what_it_can():
    def some_fun(x):
        y = x.relu()
        print("side effect the graph cannot hold")
        return y * 2

    x = torch.randn(5)
    torch.testing.assert_close(xcompile.compile(some_fun)(x), some_fun(x))


# -- "Why is my code crashing?" ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_backends_step_by_step(backend):
    def fn(x, w):
        return torch.tanh(x @ w).sum(1)

    x, w = torch.randn(4, 3), torch.randn(3, 5, requires_grad=True)
    out = xcompile.compile(fn, backend=backend)(x, w)
    torch.testing.assert_close(out, fn(x, w))


# -- "Why is compilation slow?": the recompilation profiler ------------------------------------------------
def test_compile_profiler():
    def my_model(x):
        return x.sin() + 1

    with CompileProfiler() as prof:
        profiler_model = xcompile.compile(my_model, backend=prof)
        profiler_model(torch.randn(3))
        profiler_model(torch.randn(3))
        report = prof.report()
    assert prof.frame_count == 1 and "No recompilation detected." in report
    xcompile.reset()
    with CompileProfiler() as prof:
        profiler_model = xcompile.compile(my_model, backend=prof)
        profiler_model(torch.randn(4))
        with pytest.warns(UserWarning, match="cache_size_limit"):
            profiler_model(torch.randn(5))        # cache limit 1 inside the profiler
        report = prof.report()
    assert "TENSOR_MATCH" in report and "size=[4]" in report


def test_compile_profiler_example_as_written():
    def my_model():
        ...

    with CompileProfiler() as prof:
        profiler_model = xcompile.compile(my_model, backend=prof)
        profiler_model()
        assert "Compiled" in prof.report()


# -- "Why are you recompiling in production?" --------------------------------------------------------------
def test_frozen_toy_example_runs_prior_compilations_only():
    cnt = xcompile.testing.CompileCounter()

    def add(a, b):
        return a + b

    xcompile.compile(add, backend=cnt)(torch.randn(10), torch.randn(10))
    frozen_toy_example = xcompile.run(add)
    a, b = torch.randn(10), torch.randn(10)
    torch.testing.assert_close(frozen_toy_example(a, b), a + b)
    frozen_toy_example(torch.randn(3), torch.randn(3))
    assert cnt.frame_count == 1


# -- "Does torch.func work with torch.compile?" -------------------------------------------------------------
def test_func_transform_of_a_compiled_function_does_not_work():
    @xcompile.compile
    def f(x):
        return torch.sin(x)

    def g(x):
        return torch.grad(f)(x)   # as written in the FAQ: "This code will not work."

    x = torch.randn(2, 3)
    with pytest.raises(AttributeError):    # torch has no `grad`: the FAQ's code fails as it says
        g(x)


def test_compile_outside_vmap():
    xcompile.config.capture_func_transforms = True    # the FAQ's knob (no effect needed here)

    def f(x):
        return torch.sin(x)

    @xcompile.compile
    def g(x):
        return torch.vmap(f)(x)

    x = torch.randn(2, 3)
    torch.testing.assert_close(g(x), torch.sin(x))


def test_compile_func_grad():
    def wrapper_fn(x):
        return torch.func.grad(lambda x: x.sin().sum())(x)

    x = torch.randn(3, 3, 3)
    grad_x = xcompile.compile(wrapper_fn)(x)
    torch.testing.assert_close(grad_x, x.cos())


def test_compile_vmap():
    def my_fn(x):
        return torch.vmap(lambda x: x.sum(1))(x)

    x = torch.randn(3, 3, 3)
    output = xcompile.compile(my_fn)(x)
    torch.testing.assert_close(output, x.sum(2))


def test_limitation_tuple_inputs_fall_back():
    def fn(x):
        x1, x2 = x
        return x1 + x2

    def my_fn(x):
        return torch.func.vmap(fn)(x)

    x1 = torch.randn(3, 3, 3)
    x2 = torch.randn(3, 3, 3)
    # Unsupported, falls back to eager-mode PyTorch
    output = xcompile.compile(my_fn)((x1, x2))
    torch.testing.assert_close(output, x1 + x2)


def test_limitation_keyword_arguments_fall_back():
    def fn(x, y):
        return (x + y).sum()

    def my_fn(x, y):
        return torch.func.grad(fn)(x, y=y)

    x = torch.randn(3, 3)
    y = torch.randn(3, 3)
    # Unsupported, falls back to eager-mode PyTorch
    output = xcompile.compile(my_fn)(x, y)
    torch.testing.assert_close(output, torch.ones(3, 3))


some_list = []


def test_limitation_side_effects_fall_back():
    some_list.clear()

    def f(x, y):
        some_list.append(1)
        return x + y

    def my_fn(x, y):
        return torch.func.vmap(f)(x, y)

    x = torch.ones(2, 3)
    y = torch.randn(2, 3)
    # Unsupported, falls back to eager-mode PyTorch
    output = xcompile.compile(my_fn)(x, y)
    torch.testing.assert_close(output, x + y)
    assert some_list == [1]                       # the side effect happened once, as in eager


def test_limitation_metadata_ops_fall_back():
    def bad_fn(x):
        x.stride()
        return x

    def my_fn(x):
        return torch.func.vmap(bad_fn)(x)

    x = torch.randn(3, 3, 3)
    # Unsupported, falls back to eager-mode PyTorch
    output = xcompile.compile(my_fn)(x)
    torch.testing.assert_close(output, x)


def test_allow_in_graph_escape_hatch():
    @xcompile.compile
    def f(x):
        return xcompile.allow_in_graph(torch.vmap(torch.sum))(x)

    x = torch.randn(2, 3)
    torch.testing.assert_close(f(x), x.sum(1))


# -- NumPy ---------------------------------------------------------------------------------------------------
def test_numpy_program_returns_an_ndarray():
    @xcompile.compile
    def numpy_fn(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))

    X = np.random.randn(1024, 64)
    Y = np.random.randn(1024, 64)
    Z = numpy_fn(X, Y)
    assert isinstance(Z, np.ndarray)
    np.testing.assert_allclose(Z, np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1)))


def test_numpy_with_a_graph_break():
    @xcompile.compile
    @torch.compiler.wrap_numpy
    def numpy_fn(X, Y):
        prod = X[:, :, None] * Y[:, None, :]
        print("oops, a graph break!")
        return np.sum(prod, axis=(-2, -1))

    X = torch.randn(64, 8)
    Y = torch.randn(64, 8)
    Z = numpy_fn(X, Y)
    assert isinstance(Z, torch.Tensor)
    torch.testing.assert_close(Z, (X[:, :, None] * Y[:, None, :]).sum((-2, -1)))


@pytest.mark.gpu
@cuda
def test_numpy_on_cuda():
    @xcompile.compile
    def numpy_fn(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))

    X = np.random.randn(1024, 64)
    Y = np.random.randn(1024, 64)
    with torch.device("cuda"):
        Z = numpy_fn(X, Y)
    assert isinstance(Z, np.ndarray)
    np.testing.assert_allclose(Z, np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1)), rtol=1e-6)

    devices = []

    def recording(gm, example_inputs):      # the arrays are moved to the GPU inside the graph
        devices.extend(n.meta["example_value"].device.type for n in gm.graph.nodes
                       if isinstance(n.meta.get("example_value"), torch.Tensor))
        return gm

    with torch.device("cuda"):
        Z2 = xcompile.compile(numpy_fn.__wrapped__ if hasattr(numpy_fn, "__wrapped__") else numpy_fn,
                              backend=recording)(X, Y)
    np.testing.assert_allclose(Z2, Z)
    assert "cuda" in devices


@pytest.mark.gpu
@cuda
def test_wrap_numpy_on_cuda_tensors_with_gradients():
    @xcompile.compile(fullgraph=False)
    @torch.compiler.wrap_numpy
    def numpy_fn(X, Y):
        return np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))

    X = torch.randn(1024, 64, device="cuda", requires_grad=True)
    Y = torch.randn(1024, 64, device="cuda")
    Z = numpy_fn(X, Y)
    assert isinstance(Z, torch.Tensor)
    assert Z.device.type == "cuda"


@pytest.mark.gpu
@cuda
def test_numpy_graph_break_on_cuda():
    @xcompile.compile
    @torch.compiler.wrap_numpy
    def numpy_fn(X, Y):
        prod = X[:, :, None] * Y[:, None, :]
        print("oops, a graph break!")
        return np.sum(prod, axis=(-2, -1))

    X = torch.randn(1024, 64, device="cuda")
    Y = torch.randn(1024, 64, device="cuda")
    with torch.device("cuda"):
        Z = numpy_fn(X, Y)
    assert isinstance(Z, torch.Tensor)
    assert Z.device.type == "cuda"


# -- "How do I graph break on a function?" / disable vs. disallow_in_graph -----------------------------------
def test_graph_break_at_function_start_prevents_inlining():
    cnt = xcompile.testing.CompileCounter()

    def helper(x):
        xcompile.graph_break()
        return x * 2

    def fn(x):
        return helper(x + 1) - 1

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 3     # fn's prefix, helper's rest, fn's resume


def test_disable_skips_the_frame_and_callees_disable_recursive_false_only_the_frame():
    cnt = xcompile.testing.CompileCounter()

    def aa_fn(x):
        return x.sin()

    def ab_fn(x):
        return x.cos()

    def a_fn(x):
        return aa_fn(x) + ab_fn(x)

    def fn(x):
        return a_fn(x) + 1

    x = torch.randn(3)
    off = xcompile.disable(a_fn)

    def fn_off(x):
        return off(x) + 1

    torch.testing.assert_close(xcompile.compile(fn_off, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 1
    xcompile.disable(a_fn, recursive=False)
    try:
        cnt.clear()
        torch.testing.assert_close(xcompile.compile(fn, backend=cnt)(x), fn(x))
        assert cnt.frame_count == 3    # aa_fn, ab_fn and fn's resume
    finally:
        xcompile.code_states.NONRECURSIVE_SKIPS.discard(a_fn.__code__)
        xcompile._C.set_code_state(a_fn.__code__, 0)
