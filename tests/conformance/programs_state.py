"""Grad-mode context managers and in-place ops on inputs (the harness checks the inputs' state
after the call against eager, and gradients where ``grad=True``)."""
import contextlib

import torch

from .harness import CaseTable, nc, rg, ri, rn

T = CaseTable("state")


@T.case(rg(3, 4))
def no_grad_block(a):
    with torch.no_grad():
        b = a * 2
    return b, a * 3


@T.case(rg(3, 4), grad=True)
def no_grad_inside_differentiable(a):
    with torch.no_grad():
        scale = a.abs().amax()
    return a * scale


@T.case(rg(3, 4), grad=True)
def enable_grad_inside_no_grad(a):
    with torch.no_grad():
        x = a + 1
        with torch.enable_grad():
            y = a * 2
    return x, y


@T.case(rg(3, 4))
def set_grad_enabled_false(a):
    with torch.set_grad_enabled(False):
        y = a.exp()
    return y, y.requires_grad


@T.case(rn(3, 4))
def inference_mode_block(a):
    with torch.inference_mode():
        y = a * 2
    return y + 0


@T.case(rg(3, 4), grad=True)
def detach_and_requires_grad_flags(a):
    d = a.detach()
    return a * d, d.requires_grad, (a * 2).requires_grad


@T.case(rn(3, 4))
def contextlib_nullcontext(a):
    with contextlib.nullcontext():
        return a + 1


@T.case(rn(3, 4))
def autocast_cpu_disabled(a):
    with torch.autocast("cpu", enabled=False):
        return a @ a.t()


@T.case(rn(3, 4))
def inplace_on_input(a):
    a.add_(1)
    a.mul_(2)
    return a


@T.case(rn(3, 4), rn(3, 4))
def inplace_on_one_input_returns_other(a, b):
    a.sub_(b)
    return b * 2


@T.case(rn(3, 4))
def inplace_input_not_returned(a):
    a.relu_()
    return a.sum()


@T.case(rn(3, 4))
def inplace_on_input_view(a):
    a[0].zero_()
    a[:, 1:2].fill_(3.0)
    return a.mean()


@T.case(rn(3, 4))
def inplace_method_chain(a):
    b = a.clone()
    b.clamp_(-0.5, 0.5).mul_(4).add_(a)
    return b


@T.case(rn(3, 4), rn(3, 4))
def copy_into_input(a, b):
    a.copy_(b * 2)
    return a + 1


@T.case(nc(4, 3), rn(3, 4))
def inplace_on_noncontiguous_input(a, b):
    a.t().add_(b)
    return a


@T.case(ri(3, 4))
def inplace_int_ops(a):
    a += 3
    a *= 2
    a //= 3
    return a


@T.case(rn(3, 4))
def inplace_out_of_place_mix(a):
    b = a * 2
    b += a
    a -= 1
    return a, b


@T.case(rn(5), rn(5))
def out_kwarg(a, b):
    out = torch.empty(5)
    torch.add(a, b, out=out)
    return out


@T.case(rn(4, 4))
def zero_and_fill_fresh(a):
    z = torch.empty_like(a).fill_(1.5)
    z.zero_()
    return z + a
