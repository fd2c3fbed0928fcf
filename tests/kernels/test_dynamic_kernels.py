"""Kernels with symbolic sizes (issue #11): one inductor compile serves every size.

Each program is compiled with ``dynamic=True`` and called at sizes that are and are not
multiples of the vector width; every result is compared with eager (values, dtype, shape,
strides), and no per-size backend compile may happen: the kernels take the sizes as
arguments. The sizes land in the generated code as symbols (``s0`` in loop bounds).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import xcompile
from xcompile import config
from xcompile.backends.per_size import PerSize

SIZES = (3, 17, 33, 64)


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    if not isinstance(want, torch.Tensor):
        assert got == want
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.numel() > 1:
        assert got.stride() == want.stride(), (got.stride(), want.stride())
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def _lin(x, w):
    return F.linear(x, w)


W = torch.randn(24, 16)
EMB = torch.randn(50, 8)

PROGRAMS = {
    "pointwise": (lambda x: (x.cos() * 2 + x.sigmoid()).relu(), lambda n: (torch.randn(n, 16),)),
    "broadcast": (lambda x, b: x * b + 1, lambda n: (torch.randn(n, 5, 7), torch.randn(7))),
    "two_symbolic_dims": (lambda x: x.exp() - x, lambda n: (torch.randn(n, n + 3),)),
    "sum_last": (lambda x: x.sum(-1), lambda n: (torch.randn(4, n),)),
    "sum_first": (lambda x: x.sum(0), lambda n: (torch.randn(n, 33),)),
    "mean_all": (lambda x: x.mean(), lambda n: (torch.randn(n, 6),)),
    "amax_argmax": (lambda x: (x.amax(-1), x.argmax(-1)), lambda n: (torch.randn(5, n),)),
    "softmax": (lambda x: x.softmax(-1), lambda n: (torch.randn(3, n),)),
    "layer_norm": (lambda x: F.layer_norm(x, (16,)), lambda n: (torch.randn(n, 16),)),
    "var_mean": (lambda x: torch.var_mean(x, -1), lambda n: (torch.randn(2, n),)),
    "transpose": (lambda x: x.t().contiguous() + 1, lambda n: (torch.randn(n, 40),)),
    "view_reshape": (lambda x: (x.view(x.shape[0], 4, 4) * 2).reshape(-1), lambda n: (torch.randn(n, 16),)),
    "slice": (lambda x: x[:, 1:-1] * x[:, :-2], lambda n: (torch.randn(4, n),)),
    "size_as_value": (lambda x: x * x.shape[0] + x.size(1), lambda n: (torch.randn(n, 3),)),
    "cat": (lambda x, y: torch.cat([x, y * 2], 0).sin(), lambda n: (torch.randn(n, 4), torch.randn(3, 4))),
    "linear": (lambda x: _lin(x, W).relu(), lambda n: (torch.randn(n, 16),)),
    "embedding": (lambda i: F.embedding(i, EMB) * 2, lambda n: (torch.randint(0, 50, (n,)),)),
    "where_mask": (lambda x: torch.where(x > 0, x, x * 0.1), lambda n: (torch.randn(n, 9),)),
    "arange": (lambda x: x + torch.arange(x.shape[-1]), lambda n: (torch.randn(2, n),)),
    "int_arg": (lambda x, k: x * k + k, lambda n: (torch.randn(n), n + 2)),
    "attention": (lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True),
                  lambda n: (torch.randn(1, 2, n, 8),)),
}


pytestmark = pytest.mark.usefixtures("fresh_compilers")


# the Triton emitter (run by Triton's interpreter on the CPU; on a GPU it compiles)
TRITON = ("pointwise", "broadcast", "sum_last", "softmax", "layer_norm", "embedding", "slice",
          "amax_argmax", "view_reshape")


@pytest.mark.parametrize("name,emitter", [(n, "cpp") for n in sorted(PROGRAMS)] + [(n, "triton") for n in TRITON])
def test_one_compile_for_every_size(name, emitter):
    fn, make = PROGRAMS[name]
    compiled = xcompile.compile(fn, backend="inductor", dynamic=True)
    before = PerSize.backend_compiles
    with torch.no_grad(), config.patch(kernel_raise_errors=True, cpu_kernel_backend=emitter):
        for n in SIZES:
            torch.manual_seed(n)
            args = make(n)
            _same(compiled(*args), fn(*args))
    assert PerSize.backend_compiles == before, "compiled once per size instead of once for all"


def test_sizes_are_kernel_arguments():
    seen = []
    from xcompile.kernels import compile as kcompile
    real = kcompile._compile

    def spy(*a, **k):
        seen.append(real(*a, **k))
        return seen[-1]
    kcompile._compile = spy
    try:
        f = xcompile.compile(lambda x: x.sum(-1), backend="inductor", dynamic=True)
        with torch.no_grad():
            f(torch.randn(5, 7))
    finally:
        kcompile._compile = real
    (fn,) = seen
    src, wrapper = fn.kernels[0].source, fn.wrapper_src
    sizes = fn.kernels[0].sizes
    assert len(sizes) == 2 and all(f"const int64_t {s}" in src for s in sizes), src
    assert f"r0 < {sizes[0]}" in src or f"r0 < {sizes[1]}" in src, src      # the reduction's bound
    assert all(f"{s} = arg0.size(" in wrapper for s in sizes), wrapper


def test_automatic_dynamic_compiles_symbolic_kernels_once():
    f = xcompile.compile(lambda x: (x * 2).sum(-1), backend="inductor")
    before = PerSize.backend_compiles
    with torch.no_grad():
        for n in (4, 5, 6, 7, 30):
            x = torch.randn(3, n)
            _same(f(x), (x * 2).sum(-1))
    assert PerSize.backend_compiles == before


def test_switched_off_compiles_per_size_and_stays_right():
    f = xcompile.compile(lambda x: x.cos().sum(-1), backend="inductor", dynamic=True)
    before = PerSize.backend_compiles
    with torch.no_grad(), config.patch(dynamic_kernels=False):
        for n in (4, 5, 6):
            x = torch.randn(3, n)
            _same(f(x), x.cos().sum(-1))
    assert PerSize.backend_compiles == before + 3


def test_guards_the_aten_trace_adds_are_checked():
    """Slicing ``x[:, 1:-1]`` makes the ATen trace assume more about the size than the frontend
    did (its result is not empty, its strides): those guards join the frame's, so a size they
    exclude recompiles instead of running kernels built on them."""
    def f(x):
        return x[:, 1:-1] * x[:, :-2]
    compiled = xcompile.compile(f, backend="inductor", dynamic=True)
    before = PerSize.backend_compiles
    with torch.no_grad():
        for n in (5, 6, 9, 3, 2, 40):
            x = torch.randn(4, n)
            _same(compiled(x), f(x))
    assert PerSize.backend_compiles == before


def test_index_errors_name_the_size_of_this_call():
    f = xcompile.compile(lambda i, e: F.embedding(i, e), backend="inductor", dynamic=True)
    f(torch.randint(0, 10, (5,)), torch.randn(10, 4))
    with pytest.raises(IndexError, match="index 12 is out of bounds for dimension 0 with size 11"):
        f(torch.tensor([1, 12, 3]), torch.randn(11, 4))


def test_a_range_from_another_compile_decides_nothing():
    """Symbol names repeat across compiles (they are named after their source): a marked range
    (min=10) in one compile must not let another decide that its ``s - 8`` is never empty."""
    f = xcompile.compile(lambda x: x[:, :-8].sum(-1), backend="inductor")
    x = torch.randn(3, 12)
    xcompile.mark_dynamic(x, 1, min=10)
    _same(f(x), x[:, :-8].sum(-1))
    g = xcompile.compile(lambda x: x[:, :-8].sum(-1), backend="inductor", dynamic=True)
    for n in (12, 9, 8, 20):
        y = torch.randn(3, n)
        _same(g(y), y[:, :-8].sum(-1))
