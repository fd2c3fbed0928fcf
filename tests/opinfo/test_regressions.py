"""Wrong answers and crashes the OpInfo harness found (issue #31), each reduced to its cause.

- ``sparse.sampled_addmm`` / ``sparse.mm.reduce`` (CSR inputs): compiling raised where eager
  runs. The TENSOR_MATCH guard's text read ``stride()``, which a CSR tensor refuses, and AOT's
  functional trace reads strides too (inductor fell back only because its ATen trace failed).
  A graph holding a sparse tensor now runs as captured on the AOT backends and inductor
  (``backends/eager.unstrided_graph``, logged under ``fallbacks``), as torch's AOT backends
  do not take sparse tensors either.
- ``native_group_norm`` of an empty batch with gradients: the kernel generator raised
  ZeroDivisionError (the graph then ran eagerly): ``as_strided`` of an empty base recovered the
  index with ``% 0``. Such an ``as_strided`` is an ATen call now.
- ``var_mean`` / ``std_mean`` over no elements: the mean was 0 (Welford's accumulator starts at 0)
  where eager gives nan; the kernel generator's mean of an empty reduction is nan now.
- ``x.polygamma_(n)`` on aot_eager: functionalization has no functional twin for it and raised
  BackendCompilerFailed; the graph runs as captured now (logged), as inductor already did.
"""
import warnings

import pytest
import torch

import xcompile

from .harness import catching_fallbacks, compile_on

BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor", "inductor-dynamic")


pytestmark = pytest.mark.usefixtures("fresh_compilers")
_compile = compile_on


SPARSE = {
    "sampled_addmm (CSR)": (lambda a, b, c: torch.sparse.sampled_addmm(a, b, c),
                            lambda: (torch.randn(3, 3).to_sparse_csr(), torch.randn(3, 4), torch.randn(4, 3))),
    "mm (CSR @ dense)": (lambda a, b: torch.mm(a, b) * 2,
                         lambda: (torch.randn(3, 4).to_sparse_csr(), torch.randn(4, 2))),
    "mm (COO @ dense)": (lambda a, b: torch.mm(a, b) + 1,
                         lambda: (torch.randn(3, 4).to_sparse(), torch.randn(4, 2))),
    "to_sparse inside": (lambda x: (x * 2).to_sparse().to_dense() + 1, lambda: (torch.randn(3, 4),)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SPARSE))
def test_sparse_tensors_run_as_eager_does(backend, name):
    fn, make = SPARSE[name]
    cf = _compile(fn, backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                # "Sparse CSR tensor support is in beta state"
        for _ in range(2):                             # new values, same guards
            args = make()
            ref, out = fn(*args), cf(*args)
            assert (out.layout, out.shape, out.dtype) == (ref.layout, ref.shape, ref.dtype)
            torch.testing.assert_close(out.to_dense(), ref.to_dense())


EMPTY = {
    "native_group_norm, empty batch": (
        lambda x, w, b: torch.native_group_norm(x, w, b, 0, 2, 1, 1, 1e-5)[0] * 2,
        lambda: (torch.randn(0, 2, requires_grad=True), torch.randn(2, requires_grad=True),
                 torch.randn(2, requires_grad=True))),
    "as_strided of an empty intermediate": (
        lambda x: torch.as_strided(x * 2, (0, 3), (3, 1)) + 1, lambda: (torch.randn(0, 3),)),
}


@pytest.mark.parametrize("name", sorted(EMPTY))
def test_empty_as_strided_compiles(name):
    fn, make = EMPTY[name]
    args = make()
    with catching_fallbacks() as caught:
        out = xcompile.compile(fn, backend="inductor")(*args)
    assert not [ln for ln in caught.lines if "whole graph eager" in ln], caught.lines
    ref = fn(*make())
    assert (out.shape, out.dtype) == (ref.shape, ref.dtype)
    if out.requires_grad:
        out.sum().backward()
        assert all(a.grad is not None and a.grad.shape == a.shape for a in args)


MOMENTS = {
    "var_mean of an empty vector": lambda x: torch.var_mean(x[:0]),
    "std_mean of an empty vector": lambda x: torch.std_mean(x[:0], correction=0),
    "var_mean over an empty dim": lambda x: torch.var_mean(x[:0].reshape(0, 1).expand(0, 3) * 2, 0),
    "std_mean over an empty dim, keepdim": lambda x: torch.std_mean(x[:0].reshape(0, 1) + 1, 0, keepdim=True),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_moments_of_nothing_are_nan(backend, name):
    fn = MOMENTS[name]
    x = torch.randn(5)
    ref, out = fn(x), _compile(fn, backend)(x)
    for r, o in zip(ref, out):
        assert (o.shape, o.dtype) == (r.shape, r.dtype)
        torch.testing.assert_close(o, r, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_polygamma_in_place_runs(backend):
    fn = lambda x: x.polygamma_(1) * 2  # noqa: E731
    x = torch.rand(4) + 0.5
    a, b = x.clone(), x.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _compile(fn, backend)(b)
    ref = fn(a)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(b, a)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("op", ["squeeze_", "unsqueeze_", "t_"])
def test_in_place_change_of_an_inputs_dims_under_dynamic_shapes(backend, op):
    """``x.squeeze_(0)`` changes the fake input's dims during the trace: the symbolic-size
    guard was built from the changed fake (ValueError 'add_tensor_match: sizes has the wrong
    number of dimensions'); it is built from the input as it arrived."""
    fn = {"squeeze_": lambda x: x.squeeze_(0) * 2, "unsqueeze_": lambda x: x.unsqueeze_(0) * 2,
          "t_": lambda x: x.t_() * 2}[op]
    compiled = xcompile.compile(fn, backend=backend, dynamic=True)
    for shape in ((1, 3), (1, 5), (1, 4)):
        x = torch.randn(shape)
        xe = x.clone()
        out, ref = compiled(x), fn(xe)
        def geometry(t):       # (a size-1 dim's stride addresses nothing)
            return t.shape, [s for n, s in zip(t.shape, t.stride()) if n != 1]
        assert (geometry(out), geometry(x)) == (geometry(ref), geometry(xe))
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(x, xe)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_squeeze_in_place_of_a_symbolic_dim_does_not_crash(backend):
    """``x.squeeze_(2)`` with dim 2 symbolic (OpInfo's squeeze sample on inductor-dynamic): the
    trace ran torch's squeeze_ kernel on the fake, which died in C++ (SIGSEGV in as_strided_)
    on every backend; it runs eagerly now."""
    compiled = xcompile.compile(lambda x: x.squeeze_(2) * 2, backend=backend, dynamic=True)
    for shape in ((5, 1, 5, 1), (4, 1, 3, 1)):
        x = torch.randn(shape)
        xe = x.clone()
        torch.testing.assert_close(compiled(x), xe.squeeze_(2) * 2)
        assert x.shape == xe.shape
