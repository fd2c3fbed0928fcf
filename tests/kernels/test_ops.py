"""The op table x dtypes x layouts, C++ and Triton (TRITON_INTERPRET=1), compared with eager.

Each case compiles the ops that support its dtype as one graph, so a case is one or two
kernels; failures name the op.
"""
from __future__ import annotations

import pytest
import torch

from .opinfo import BINARY, UNARY, domain_tensor, supported
from .util import BACKENDS, assert_close, compile_fn, make_tensor

# masked-out lanes of interpreted Triton kernels divide by zero / take logs of 0 in numpy
pytestmark = [pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")]

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool)


def layout(kind: str, shape, dtype, make):
    """A tensor of ``shape`` laid out as ``kind``: contiguous, transposed or sliced."""
    if kind == "transposed":
        return make(tuple(reversed(shape)), dtype).t()
    if kind == "sliced":
        return make(shape[:-1] + (shape[-1] * 2,), dtype)[..., ::2]
    return make(shape, dtype)


UNARY_CASES = {"scalar": ((), "contiguous"), "1d_odd": ((7,), "contiguous"), "2d": ((5, 3), "contiguous"),
               "transposed": ((5, 3), "transposed"), "sliced": ((5, 3), "sliced")}


def _maker(op):
    return lambda shape, dtype, lo=None, hi=None: domain_tensor(op, shape, dtype, make_tensor)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(UNARY_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_unary(backend, case, dtype):
    ops = supported(UNARY, dtype, backend)
    shape, kind = UNARY_CASES[case]

    def inputs():
        return [layout(kind, shape, dtype, _maker(op)) for op in ops]

    def fn(*xs):
        return tuple(op.fn(x) for op, x in zip(ops, xs))

    compiled = compile_fn(fn, inputs(), backend)
    fresh = inputs()
    for op, got, want in zip(ops, compiled(*fresh), fn(*fresh)):
        assert_close(got, want, f"{op.name}({case}, {dtype})")


BINARY_CASES = {"same": ((5, 3), (5, 3), "contiguous"), "broadcast": ((4, 1, 3), (5, 1), "contiguous"),
                "scalar_tensor": ((7,), (), "contiguous"), "transposed": ((5, 3), (5, 3), "transposed")}


def _binary_inputs(op, dtype, case):
    sa, sb, kind = BINARY_CASES[case]
    a = layout(kind, sa, dtype, _maker(op))
    if op.domain is not None and not dtype.is_floating_point and dtype != torch.bool:
        b = make_tensor(sb, dtype, 1, 8) * (2 * (torch.rand(sb) > 0.5).to(dtype) - 1)  # no zero divisors
    else:
        b = _maker(op)(sb, dtype)
    return [a, b]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(BINARY_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_binary(backend, case, dtype):
    ops = supported(BINARY, dtype, backend)

    def inputs():
        return [t for op in ops for t in _binary_inputs(op, dtype, case)]

    def fn(*xs):
        return tuple(op.fn(xs[2 * i], xs[2 * i + 1]) for i, op in enumerate(ops))

    compiled = compile_fn(fn, inputs(), backend)
    fresh = inputs()
    for op, got, want in zip(ops, compiled(*fresh), fn(*fresh)):
        assert_close(got, want, f"{op.name}({case}, {dtype})")


@pytest.mark.parametrize("backend", BACKENDS)
def test_large_parallel(backend):
    """Big enough for OpenMP and the vector loops, with a ragged tail."""
    ops = supported(UNARY, torch.float32, backend)[:12]
    xs = [_maker(op)((64, 1031), torch.float32) for op in ops]

    def fn(*xs):
        return tuple(op.fn(x) for op, x in zip(ops, xs))

    compiled = compile_fn(fn, xs, backend)
    for op, got, want in zip(ops, compiled(*xs), fn(*xs)):
        assert_close(got, want, op.name)


@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_kernels_one_thread_and_two(threads):
    """Kernels big enough to split their outer loop between threads (pointwise, rows, columns,
    a loop of tiles) give eager's results with one OpenMP thread (one call of the loop) and
    with two (a share each, odd sizes)."""
    def fn(x, y):
        return (torch.tanh(x) * 2 + y, torch.softmax(x, -1), x.sum(0), (x * y).sum(0, keepdim=True) + 1,
                torch.nn.functional.layer_norm(x, (x.shape[-1],)))
    xs = [torch.randn(301, 517), torch.randn(301, 517)]
    compiled = compile_fn(fn, xs, "cpp")
    assert any("omp parallel" in k.source for k in compiled.kernels)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert_close(compiled(*xs), fn(*xs), tol=dict(atol=1e-4, rtol=1e-4))
    finally:
        torch.set_num_threads(old)


TRANSPOSING = {
    # name: (fn, input shapes and layouts)
    "transpose_add": (lambda x, t: x + t.transpose(-1, -2), [((3, 37, 45), None), ((3, 45, 37), None)]),
    "to_channels_last": (lambda x: (torch.sigmoid(x) * 2).contiguous(memory_format=torch.channels_last),
                         [((2, 19, 17, 23), None)]),
    "from_channels_last": (lambda x: x.contiguous() + 1, [((2, 19, 17, 23), torch.channels_last)]),
    "2d_parallel": (lambda x: x.t().contiguous() * 3, [((301, 517), None)]),
    "two_loads_one_tile": (lambda x, y: (x.t() * y + x.t().exp()).contiguous(),
                           [((40, 33), None), ((33, 40), None)]),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64],
                         ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("name", list(TRANSPOSING))
def test_transposing_kernels_are_tiled(name, dtype, threads):
    """Pointwise kernels that read across the store's rows (a transpose, a layout conversion)
    run tile by tile: partial tiles at the edges, half types, one thread or two."""
    fn, specs = TRANSPOSING[name]
    if dtype == torch.int64 and name in ("to_channels_last", "two_loads_one_tile"):
        pytest.skip("float ops")
    xs = [make_tensor(shape, dtype).contiguous(memory_format=fmt or torch.contiguous_format)
          for shape, fmt in specs]
    compiled = compile_fn(fn, xs, "cpp")
    assert any("xc_tile0" in k.source for k in compiled.kernels), [k.source for k in compiled.kernels]
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        xs = [make_tensor(shape, dtype).contiguous(memory_format=fmt or torch.contiguous_format)
              for shape, fmt in specs]
        assert_close(compiled(*xs), fn(*xs), name)
    finally:
        torch.set_num_threads(old)
