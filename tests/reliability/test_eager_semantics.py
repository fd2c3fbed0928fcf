"""Issue #31 sections 3 and 4: places where a compiled call answered otherwise than eager (a mode
active at call time, int overflow, resize_ of an input, NumPy scalars, numpy() on a tensor that
requires grad, deterministic empty). Each test failed before its fix."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import xcompile

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture
def deterministic_fill():
    det, fill = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(det)
    torch.utils.deterministic.fill_uninitialized_memory = fill


@pytest.mark.parametrize("backend", BACKENDS)
def test_deterministic_empty_is_filled(backend, deterministic_fill):
    def f(x):
        return (torch.empty(3) + x, torch.empty(3, dtype=torch.int32), torch.empty_like(x, dtype=torch.bool),
                x.new_empty(2))

    x = torch.zeros(3)
    a, b, c, d = xcompile.compile(f, backend=backend)(x)
    assert a.isnan().all() and d.isnan().all()
    assert (b == torch.iinfo(torch.int32).max).all() and c.all()


def test_numpy_of_tensor_requiring_grad_raises():
    def f(x):
        return x.numpy()

    x = torch.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        xcompile.compile(f, backend="eager")(x)
    np.testing.assert_array_equal(xcompile.compile(f, backend="eager")(x.detach()), x.detach().numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_of_an_input(backend):
    def f(x, n):
        y = x * 2
        x.resize_(n)
        torch.Tensor.resize_(y, 2, 3)
        return x[:3] + 1, y.shape

    for n in (6, 2, 9):
        x, xe = torch.arange(4.0), torch.arange(4.0)
        got, want = xcompile.compile(f, backend=backend)(x, n), f(xe, n)
        assert x.shape == xe.shape == (n,) and got[1] == want[1]
        torch.testing.assert_close(got[0][: min(n, 3)], want[0][: min(n, 3)])


class SinIsCos(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.sin.default:
            return torch.ops.aten.cos.default(*args)
        return func(*args, **(kwargs or {}))


class SinIsCosFn(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.sin, torch.Tensor.sin):
            return torch.cos(*args)
        return func(*args, **(kwargs or {}))


def _mode_fn(x):
    y = x.sin() + 1
    if y.sum() > -1e9:             # a graph break
        y = y * 2
    return y


@pytest.mark.parametrize("mode", [SinIsCos, SinIsCosFn])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("compiled_before", [True, False])
def test_mode_active_at_call_time_is_honoured(mode, backend, compiled_before):
    x = torch.randn(5)
    cf = xcompile.compile(_mode_fn, backend=backend)
    if compiled_before:
        cf(x)
    with mode():
        want = _mode_fn(x)
        torch.testing.assert_close(cf(x), want)
        torch.testing.assert_close(cf(x), want)
    torch.testing.assert_close(cf(x), _mode_fn(x))     # and the mode's end is seen too
    assert not torch.allclose(want, _mode_fn(x))


def _outcome(fn, *args):
    try:
        return fn(*args)
    except (OverflowError, RuntimeError) as e:
        return type(e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("op", ["add", "full", "mul_int"])
def test_int_past_int64_raises_as_eager(backend, dynamic, op):
    def f(x, n):
        if op == "add":
            return x + n
        if op == "full":
            return torch.full((2,), n)
        return torch.arange(3) * n

    x = torch.randn(2)
    cf = xcompile.compile(f, backend=backend, dynamic=dynamic)
    for n in (3, 5, 7, 2**64, -(2**64), 2**63, -(2**63) - 1, 2**63 - 1, 9):
        want, got = _outcome(f, x, n), _outcome(cf, x, n)
        if isinstance(want, type):
            assert got is want, (n, got, want)
        else:
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalar_results_are_numpy_scalars(backend):
    def f(a, z, v):
        return (a.mean(), a.sum(), a.max(), np.sum(a), a.sum(axis=0), v.sum(axis=0), a[1, 2], a[1], z + z, -z,
                np.sin(z), z.copy(), a.mean(keepdims=True), np.dot(v, v), (a > 2).any(), np.count_nonzero(a),
                a.mean() * 2, np.linalg.norm(v))

    args = (np.arange(6.0).reshape(2, 3), np.array(1.5), np.arange(3.0))
    for got, want in zip(xcompile.compile(f, backend=backend)(*args), f(*args)):
        assert type(got) is type(want) and np.asarray(got).dtype == np.asarray(want).dtype, (got, want)
        np.testing.assert_allclose(got, want)
