"""Regressions found by the training fuzzer (tests/aot/fuzz_training_gen.py), minimised."""
import pytest
import torch

import xcompile

BACKENDS = ["aot_eager", "inductor"]


def _storage(t):
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_through_detach_of_input_shares_its_memory(backend):
    # fuzz seed 159: x.detach() is no autograd view of x, but eager's result shares x's memory
    def f(x):
        t = x.detach().flatten()[1:4]
        t.fill_(0.25)
        return t, x.detach(), x * 2

    xcompile.reset()
    cf = xcompile.compile(f, backend=backend)
    for _ in range(2):
        xe = torch.randn(3, 3, requires_grad=True)
        xc = xe.detach().clone().requires_grad_(True)
        eo, co = f(xe), cf(xc)
        for a, b, x, y in ((eo[0], co[0], xe, xc), (eo[1], co[1], xe, xc)):
            assert _storage(b) == _storage(y) and not b.requires_grad
            assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            torch.testing.assert_close(b, a)
        torch.testing.assert_close(xc, xe)
        co[1][0, 0] = 7.0                   # writes through the alias land in the input, as in eager
        assert xc[0, 0].item() == 7.0
        co[2].sum().backward()
        torch.testing.assert_close(xc.grad, torch.full((3, 3), 2.0))
