"""Writes into inputs made in place by the kernel that computes them (kernels/inplace.py): the
optimizer's pattern is written without a buffer or a copy, and every program where the old value
is still needed after the write (another element, a later kernel, a returned alias) keeps the copy
at the end, with eager's values."""
from __future__ import annotations

import pytest
import torch

from .util import compile_fn

IN_PLACE = "written in place into the input"


def _run(fn, make, n_calls=2):
    """Compiled and eager on equal fresh inputs, ``n_calls`` times: outputs and every input after."""
    torch.manual_seed(0)
    args = make()
    compiled = compile_fn(fn, [a.clone() for a in args])
    for _ in range(n_calls):
        args = make()
        mine, theirs = [a.clone() for a in args], [a.clone() for a in args]
        out, expected = compiled(*mine), fn(*theirs)
        torch.testing.assert_close(out, expected)
        for m, t in zip(mine, theirs):
            torch.testing.assert_close(m, t)
    return compiled


def _adam(p, g, m, v):
    m.mul_(0.9).add_(g, alpha=0.1)
    v.mul_(0.999).addcmul_(g, g, value=0.001)
    p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)
    return ()


def test_an_optimizer_update_writes_every_state_in_place():
    compiled = _run(_adam, lambda: [torch.randn(64, 32), torch.randn(64, 32), torch.randn(64, 32),
                                    torch.rand(64, 32)])
    assert compiled.wrapper_src.count(IN_PLACE) == 3, compiled.wrapper_src
    assert "copy_" not in compiled.wrapper_src and "empty_strided" not in compiled.wrapper_src


def _flip(p):
    p.copy_(p.flip(0) + 1)              # (an extern makes the reversed copy first)
    return ()


def _shift(p):
    p.copy_(torch.cat([p[1:], p[:1]]) + 1)     # reads other elements of p than it writes
    return ()


def _broadcast_row(p):
    p.add_(p[0].clone())                # every row reads row 0, which the first row overwrites
    return ()


def _transposed(p):
    p.copy_(p.t() * 2)
    return ()


def _old_value_read_later(p, q):
    s = p.sum()                         # a reduction of the old p, and the new p, in one program
    p.mul_(2)
    return (q * s + p.sum(),)


def _old_value_reduced_after(p):
    old = p.clone()                     # a later kernel (a reduction) reads the old p
    p.mul_(2)
    return (old.sum(0),)


def _old_and_new_reduced_after(p):
    p3 = p * 3
    p.mul_(2)
    return (p3.sum(0) + p.sum(0),)


def _old_value_returned(p):
    old = p * 1
    p.mul_(2)
    return (old, p + 1)


def _copied_elsewhere(p, q):
    q.copy_(p)                          # q gets p's old value, p a new one
    p.add_(1)
    return ()


def _two_writes_one_value(p, q):
    v = p * 2
    p.copy_(v)
    q.copy_(v)
    return ()


def _matmul_after(p, w):
    p.mul_(2)
    return (p @ w,)


def _gather_after(p, idx):
    p.add_(1)
    return (p[idx],)


@pytest.mark.parametrize("fn, make", [
    (_flip, lambda: [torch.randn(8, 4)]),
    (_shift, lambda: [torch.randn(8, 4)]),
    (_broadcast_row, lambda: [torch.randn(8, 4)]),
    (_transposed, lambda: [torch.randn(6, 6)]),
    (_old_value_read_later, lambda: [torch.randn(16, 4), torch.randn(16, 4)]),
    (_old_value_reduced_after, lambda: [torch.randn(8, 4)]),
    (_old_and_new_reduced_after, lambda: [torch.randn(8, 4)]),
    (_old_value_returned, lambda: [torch.randn(16)]),
    (_copied_elsewhere, lambda: [torch.randn(16), torch.randn(16)]),
    (_two_writes_one_value, lambda: [torch.randn(16), torch.randn(16)]),
    (_matmul_after, lambda: [torch.randn(8, 8), torch.randn(8, 8)]),
    (_gather_after, lambda: [torch.randn(8), torch.randint(0, 8, (5,))]),
], ids=lambda v: getattr(v, "__name__", "") if callable(v) and v.__name__ != "<lambda>" else "")
def test_writes_that_need_the_old_value_are_right(fn, make):
    _run(fn, make)


@pytest.mark.parametrize("fn, make", [
    (_shift, lambda: [torch.randn(8, 4)]),
    (_broadcast_row, lambda: [torch.randn(8, 4)]),
    (_transposed, lambda: [torch.randn(6, 6)]),
])
def test_a_kernel_reading_other_elements_of_the_input_does_not_write_it_in_place(fn, make):
    compiled = _run(fn, make)
    assert IN_PLACE not in compiled.wrapper_src, compiled.wrapper_src


def test_a_write_through_a_strided_input_is_copied():
    base = torch.randn(8, 8)

    def fn(p):
        p.mul_(2)
        return ()
    _run(fn, lambda: [base.clone()[:, ::2]])
    compiled = compile_fn(fn, [base.clone()[:, ::2]])
    assert IN_PLACE not in compiled.wrapper_src, compiled.wrapper_src
