"""NumPy code inside the graph (issue #12): ``config.trace_numpy``.

Every FAQ NumPy example (CPU versions) runs compiled by xcompile (eager, aot_eager, inductor) and
in plain NumPy: values, dtypes, shapes and the output's type (np.ndarray or tensor) must agree,
and the graph count is compared with torch.compile's on the same calls. Then a conformance table
(ufuncs, reductions, broadcasting, indexing, promotion, where, einsum, linalg), ``x.numpy()``
inside a torch function, ``wrap_numpy``, the knob off, and unsupported features (a graph break
that names them, an error under fullgraph=True).
"""
import numpy as np
import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as TorchCounter

import xcompile
from xcompile.frontend.exc import Unsupported
from xcompile.testing import CompileCounter, CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _same(got, want) -> None:
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    if isinstance(want, np.generic):             # NumPy scalars are 0-d arrays under the compiler
        assert isinstance(got, (np.ndarray, np.generic)) and got.shape == () and got.dtype == want.dtype, (got, want)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
        return
    if isinstance(want, np.ndarray):
        assert type(got) is np.ndarray, type(got)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
        tol = 1e-4 if want.dtype in (np.float32, np.complex64) else 1e-9
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        return
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want)
        return
    assert type(got) is type(want) and got == want, (got, want)


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a.clone() if isinstance(a, torch.Tensor) else a
            for a in args]


def _check(fn, *calls, backend="eager", fullgraph=False):
    """``fn`` compiled by xcompile and by torch.compile on the same calls: the results of both
    match plain NumPy's (and the arguments after the call: in-place writes), the graph counts match."""
    ours = CompileCounterWithBackend(backend)
    theirs = TorchCounter()
    cf = xcompile.compile(fn, backend=ours, fullgraph=fullgraph)
    tf = torch.compile(fn, backend=theirs, fullgraph=fullgraph)
    for args in calls:
        want_args, got_args, ref_args = _copy(args), _copy(args), _copy(args)
        want = fn(*want_args)
        got = cf(*got_args)
        _same(got, want)
        for g, w in zip(got_args, want_args):
            _same(g, w)
        tf(*ref_args)
    assert ours.frame_count == theirs.frame_count, (ours.frame_count, theirs.frame_count)
    return ours


# -- the FAQ's examples ---------------------------------------------------------------------------
def faq_numpy_fn(X, Y):
    return np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_numpy_fn(backend):
    X, Y = np.random.randn(64, 16), np.random.randn(64, 16)
    X2, Y2 = np.random.randn(64, 16), np.random.randn(64, 16)
    counter = _check(faq_numpy_fn, (X, Y), (X2, Y2), backend=backend)
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_wrap_numpy_tensors_in_and_out(backend):
    def numpy_fn(X, Y):
        return np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))

    X, Y = torch.randn(64, 16), torch.randn(64, 16)
    ours = CompileCounterWithBackend(backend)
    Z = xcompile.compile(xcompile.wrap_numpy(numpy_fn), backend=ours, fullgraph=True)(X, Y)
    assert isinstance(Z, torch.Tensor)
    torch.testing.assert_close(Z, torch.from_numpy(numpy_fn(X.numpy(), Y.numpy())))
    theirs = TorchCounter()
    torch.compile(torch.compiler.wrap_numpy(numpy_fn), backend=theirs, fullgraph=True)(X, Y)
    assert ours.frame_count == theirs.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_wrap_numpy_gradients(backend):
    def numpy_fn(X, Y):
        return np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))

    X = torch.randn(32, 8, requires_grad=True)
    Y = torch.randn(32, 8)
    Z = xcompile.compile(xcompile.wrap_numpy(numpy_fn), backend=backend, fullgraph=True)(X, Y)
    assert isinstance(Z, torch.Tensor) and Z.requires_grad
    Z.sum().backward()
    X2 = X.detach().clone().requires_grad_(True)
    (X2[:, :, None] * Y[:, None, :]).sum((-2, -1)).sum().backward()
    torch.testing.assert_close(X.grad, X2.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_faq_graph_break_in_numpy_code(backend, capsys):
    def numpy_fn(X, Y):
        prod = X[:, :, None] * Y[:, None, :]
        print("oops, a graph break!")
        return np.sum(prod, axis=(-2, -1))

    X, Y = torch.randn(32, 8), torch.randn(32, 8)
    ours = CompileCounterWithBackend(backend)
    Z = xcompile.compile(xcompile.wrap_numpy(numpy_fn), backend=ours)(X, Y)
    assert isinstance(Z, torch.Tensor)
    torch.testing.assert_close(Z, torch.from_numpy(numpy_fn(X.numpy(), Y.numpy())))
    theirs = TorchCounter()
    torch.compile(torch.compiler.wrap_numpy(numpy_fn), backend=theirs)(X, Y)
    # torch: the views, the product, the sum, and torch.as_tensor in wrap_numpy's wrapper after the
    # call returns; ours: the same first three, and the wrapper's tail (in xcompile's own module,
    # which is never compiled) runs eagerly
    assert (ours.frame_count, theirs.frame_count) == (3, 4)
    # the same break on plain arrays: arrays materialized at the break, the rest compiled
    _check(numpy_fn, (X.numpy(), Y.numpy()), backend=backend)
    assert "oops" in capsys.readouterr().out


# -- conformance ----------------------------------------------------------------------------------
def _a(*shape, dtype=np.float64):
    return (np.random.randn(*shape) * 3).astype(dtype)


CASES = {
    "ufuncs": (lambda a, b: (np.exp(a), np.sin(b), np.add(a, b), np.maximum(a, b), np.sqrt(np.abs(a))),
               (_a(3, 4), _a(3, 4))),
    "operators": (lambda a, b: (a + b, a - 2, 3 * a, a / b, a ** 2, -a, a @ b.T, a > b, a % 2.0),
                  (_a(3, 4), _a(3, 4))),
    "reductions": (lambda a: (a.sum(), a.sum(axis=0), np.mean(a, axis=1, keepdims=True), a.max(axis=-1),
                              np.argmin(a, axis=0), np.std(a), np.prod(a, axis=(0, 1)), np.cumsum(a, axis=1)),
                   (_a(4, 5),)),
    "broadcasting": (lambda a, b: (a[:, None, :] * b[None, :, :], a + b[0], np.broadcast_to(a[:1], (3, 5))),
                     (_a(3, 5), _a(2, 5))),
    "indexing": (lambda a, i: (a[i], a[:, i], a[1:3, ::2], a[..., -1], a[None], a[i, i], a[a.shape[0] - 1]),
                 (_a(4, 4), np.array([0, 2, 3]))),
    "promotion": (lambda a, i: (a + i, i + 1.5, i * 2, i / 2, np.float32(2.5) * i, a.astype(np.float32) + 1.0,
                                i + np.int8(1), np.array([1.0, 2.0]), np.array([1, 2]) + a[0, :2], -i // 4),
                  (_a(2, 3), np.arange(6, dtype=np.int32).reshape(2, 3))),
    "where": (lambda a: (np.where(a > 0, a, 0.0), np.where(a < 0, -1, 1), np.clip(a, -1, 1)), (_a(3, 3),)),
    "einsum": (lambda a, b: (np.einsum("ij,jk->ik", a, b), np.einsum("ii->i", a[:, :3]),
                             np.einsum("ij->", a)), (_a(3, 4), _a(4, 5))),
    "linalg": (lambda a: (np.linalg.norm(a), np.linalg.norm(a, axis=1), np.linalg.inv(a @ a.T + 4 * np.eye(3)),
                          np.linalg.det(a @ a.T + np.eye(3)), np.dot(a, a.T), np.trace(a @ a.T)), (_a(3, 3),)),
    "creation": (lambda a: (np.zeros_like(a), np.ones((2, 3)), np.arange(5), np.linspace(0, 1, 5),
                            np.concatenate([a, a], axis=0), np.stack([a, a]), np.eye(3) + a, np.full((2,), 7)),
                 (_a(3, 3),)),
    "shapes": (lambda a: (a.reshape(-1), a.T, np.transpose(a, (1, 0)), a.shape, a.ndim, a.size,
                          np.expand_dims(a, 0), a.flatten(), np.squeeze(a[None])), (_a(2, 3),)),
    "scalars": (lambda a: (np.float32(3) * a, a * np.float64(2.0), np.sum(a) > 0), (_a(3, dtype=np.float32),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance(name):
    fn, args = CASES[name]
    _check(fn, args)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", ["ufuncs", "reductions", "indexing", "promotion", "where"])
def test_conformance_backends(name, backend):
    fn, args = CASES[name]
    _check(fn, args, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_writes_reach_the_caller(backend):
    def fn(a, b):
        a += b
        a[0] = 5.0
        b *= 2
        return a.mean()

    _check(fn, (_a(3, 4), _a(3, 4)), backend=backend)


def test_input_guards_dtype_shape_strides():
    counter = CompileCounter()
    f = xcompile.compile(faq_numpy_fn, backend=counter)
    X, Y = _a(8, 4), _a(8, 4)
    f(X, Y)
    f(_a(8, 4), _a(8, 4))
    assert counter.frame_count == 1
    _same(f(X.astype(np.float32), Y.astype(np.float32)), faq_numpy_fn(X.astype(np.float32), Y.astype(np.float32)))
    assert counter.frame_count == 2                        # dtype
    Xf = np.asfortranarray(X)
    _same(f(Xf, Y), faq_numpy_fn(Xf, Y))                  # strides
    assert counter.frame_count == 3
    _same(f(X[:4], Y[:4]), faq_numpy_fn(X[:4], Y[:4]))    # shape
    assert counter.frame_count == 4


def test_same_array_twice_and_returned_input():
    def fn(a, b):
        return a, a + b

    got = xcompile.compile(fn, backend="eager")(x := _a(3), x)
    assert got[0] is x
    np.testing.assert_allclose(got[1], 2 * x)


# -- tensors and arrays ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_numpy_inside_a_torch_function(backend):
    def fn(x):
        a = x.numpy()
        b = np.cos(a) * 2 + a.sum(axis=0)
        t = torch.from_numpy(b)
        return t + 1, torch.as_tensor(a.T.copy()).relu()

    x = torch.randn(4, 3)
    ours = CompileCounterWithBackend(backend)
    got = xcompile.compile(fn, backend=ours)(x)
    want = fn(x)
    _same(list(got), list(want))
    theirs = TorchCounter()
    torch.compile(fn, backend=theirs)(x)
    assert ours.frame_count == theirs.frame_count == 1


def test_numpy_of_a_tensor_shares_memory():
    def fn(x):
        a = x.numpy()
        a[0] = 100.0
        return x * 2

    x = torch.zeros(3)
    x2 = x.clone()
    got = xcompile.compile(fn, backend="eager")(x)
    want = fn(x2)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(x, x2)


def test_ndarray_dtype_attribute():
    """``arr.dtype`` is a constant (torch.compile breaks the graph on it: it runs this frame in NumPy)."""
    def fn(a, i):
        return a.dtype == np.float64, (i + np.int8(1)).dtype == np.int32, a.astype(i.dtype), a.dtype.itemsize

    counter = CompileCounter()
    got = xcompile.compile(fn, backend=counter)(a := _a(3), i := np.arange(3, dtype=np.int32))
    _same(got, fn(a, i))
    assert counter.frame_count == 1


def test_dtypes_match_numpy():
    def fn(n):
        return np.array([1.0, 2.0]) * n, np.arange(3) + n, np.ones(2, dtype=np.float32) + 1.0, \
            np.array([1, 2], dtype=np.int32) + 1.5

    _check(fn, (2,))


# -- the knob, unsupported features ---------------------------------------------------------------
def test_config_off():
    X, Y = _a(8, 4), _a(8, 4)
    with xcompile.config.patch(trace_numpy=False), torch._dynamo.config.patch(trace_numpy=False):
        counter = _check(faq_numpy_fn, (X, Y))
    assert counter.frame_count == 0

    def fn(x):
        return torch.from_numpy(np.cos(x.numpy())) + 1

    with xcompile.config.patch(trace_numpy=False):
        got = xcompile.compile(fn, backend="eager")(x := torch.randn(3))
    torch.testing.assert_close(got, fn(x))


@pytest.mark.parametrize("fn,feature", [
    (lambda a: np.add.reduce(a) * 2, "ufunc method np.add.reduce"),
    (lambda a: a + np.random.rand(3), "np.random"),
    (lambda a: np.array(["x", "y"]).size + a, "torch._numpy cannot trace"),
    (lambda a: np.ma.masked_array(a).sum() + a, "MaskedArray"),
])
def test_unsupported_feature_breaks_with_its_name(fn, feature):
    a = _a(3)
    np.random.seed(0)
    want = fn(a)
    e = xcompile.explain(fn)(a)
    assert e.graph_break_count >= 1
    assert any(feature in r.reason for r in e.break_reasons), [r.reason for r in e.break_reasons]
    np.random.seed(0)
    _same(xcompile.compile(fn, backend="eager")(a), want)
    xcompile.reset()
    with pytest.raises(Unsupported, match=feature.replace(".", r"\.")):
        xcompile.compile(fn, backend="eager", fullgraph=True)(a)


def test_non_numeric_input_array_runs_in_numpy():
    def fn(a, b):
        return a.size + b * 2

    s = np.array(["a", "b"])
    b = _a(2)
    _same(xcompile.compile(fn, backend="eager")(s, b), fn(s, b))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_overlapping_input_arrays_see_each_others_writes(backend):
    """``a`` and ``a[:]`` are separate arrays over one buffer: a write through one is seen
    through the other, as in NumPy (the graph was traced for independent inputs: such calls run
    the traced program op by op)."""
    def f(a, b):
        a += 1
        return b * 2
    compiled = xcompile.compile(f, backend=backend)
    for make_b in (lambda a: a[:], lambda a: a.copy(), lambda a: a[::-1]):
        a1, a2 = np.arange(6.0), np.arange(6.0)
        want = f(a1, make_b(a1))
        got = compiled(a2, make_b(a2))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(a2, a1)
