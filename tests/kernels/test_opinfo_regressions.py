"""Wrong answers torch's OpInfo samples found (issue #31), each reduced to its cause.

- ``fft.ifft`` / ``fft.ihfft`` of a real input that requires grad: the result is a view with
  the conjugate bit (eager conjugates the one-sided transform lazily); the AOT runtime rebuilt
  outputs (``_deview`` in the forward, ``as_strided`` of a base) without the bit.
"""
import pytest
import torch

import xcompile

BACKENDS = ("aot_eager", "inductor")


def _same(ref, out):
    ref = ref if isinstance(ref, tuple) else (ref,)
    out = out if isinstance(out, tuple) else (out,)
    assert len(ref) == len(out)
    for r, o in zip(ref, out):
        assert (r.is_conj(), r.is_neg()) == (o.is_conj(), o.is_neg())
        torch.testing.assert_close(o.detach().resolve_conj().resolve_neg(),
                                   r.detach().resolve_conj().resolve_neg(), rtol=0, atol=0)


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    yield
    xcompile.reset()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
@pytest.mark.parametrize("fft", ("ifft", "ihfft"))
def test_inverse_fft_of_real_input_keeps_conjugate_bit(backend, dtype, fft):
    fn = getattr(torch.fft, fft)
    x = torch.randn(5, 6, 7, dtype=dtype, requires_grad=True)
    f = lambda x: fn(x, n=10, dim=1, norm="ortho")  # noqa: E731
    ref = f(x)
    out = xcompile.compile(f, backend=backend)(x)
    _same(ref, out)
    w = torch.randn(ref.shape, dtype=ref.dtype)
    g_ref, = torch.autograd.grad((ref * w).real.sum(), x)
    g_out, = torch.autograd.grad((out * w).real.sum(), x)
    torch.testing.assert_close(g_out, g_ref)


CONJ_NEG_VIEWS = {
    "input.conj()": lambda x: x.conj(),
    "intermediate.conj()": lambda x: (x * 2).conj(),
    "input.conj() and a view": lambda x: (x.conj(), x.view(2, 2)),
    "two views of an intermediate": lambda x: ((x * 2).conj(), (x * 2).view(2, 2)),
    "input.conj().imag": lambda x: x.conj().imag,
    "intermediate.conj().imag": lambda x: (x * 2).conj().imag,
    "input.imag": lambda x: x.imag,
    "view_as_real(input)": lambda x: torch.view_as_real(x),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("requires_grad", (False, True))
@pytest.mark.parametrize("name", sorted(CONJ_NEG_VIEWS))
def test_views_keep_conjugate_and_negative_bits(backend, requires_grad, name):
    f = CONJ_NEG_VIEWS[name]
    x = torch.randn(4, dtype=torch.complex64, requires_grad=requires_grad)
    _same(f(x), xcompile.compile(f, backend=backend)(x))
