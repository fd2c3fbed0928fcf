"""Signed zeros through the normalizations and reductions: where eager's result is a zero, ours
has the same sign bit (``atan2(y, -1)`` is pi for +0.0 and -pi for -0.0, so a wrong sign is a
wrong answer).  Eager's CPU layer_norm and batch_norm always end with ``+ bias`` (0 without
one), group_norm once it has a weight: that turns -0.0 into +0.0, the decompositions alone do not.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xcompile
from xcompile.backends.inductor import inductor

from .util import BACKENDS, compile_fn

pytestmark = [pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")]


def _ones(n):
    return torch.ones(n)


CASES = {
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "layer_norm_weight": lambda x: F.layer_norm(x, x.shape[-1:], _ones(x.shape[-1])),
    "layer_norm_affine": lambda x: F.layer_norm(x, x.shape[-1:], _ones(x.shape[-1]), torch.zeros(x.shape[-1])),
    "layer_norm_neg_bias": lambda x: F.layer_norm(x, x.shape[-1:], _ones(x.shape[-1]),
                                                  torch.full((x.shape[-1],), -0.0)),
    "mean": lambda x: (x.mean(-1), x.mean(0), x.mean()),
    "sum": lambda x: (x.sum(-1), x.sum(0), x.sum(), x.sum(-1, keepdim=True)),
    "var_std": lambda x: (x.var(-1, correction=0), x.std(0, correction=0), *torch.var_mean(x, -1, correction=0)),
    "prod": lambda x: x.prod(-1),
    "softmax": lambda x: (torch.softmax(x, -1), torch.log_softmax(x, -1), torch.log_softmax(x, 0),
                          torch.logsumexp(x, -1)),
    "group_norm": lambda x: F.group_norm(x.unsqueeze(-1), 1),
    "group_norm_per_channel": lambda x: F.group_norm(x.unsqueeze(-1), x.shape[1]),
    "group_norm_weight": lambda x: F.group_norm(x.unsqueeze(-1), 1, _ones(x.shape[1])),
    "group_norm_affine": lambda x: F.group_norm(x.unsqueeze(-1), 1, _ones(x.shape[1]), torch.zeros(x.shape[1])),
    "batch_norm_eval": lambda x: F.batch_norm(x, torch.zeros(x.shape[1]), _ones(x.shape[1])),
    "batch_norm_eval_affine": lambda x: F.batch_norm(x, torch.zeros(x.shape[1]), _ones(x.shape[1]),
                                                     _ones(x.shape[1]), torch.zeros(x.shape[1])),
    "batch_norm_eval_neg_mean": lambda x: F.batch_norm(x, torch.full((x.shape[1],), -0.0), _ones(x.shape[1])),
    "batch_norm_train": lambda x: F.batch_norm(x, None, None, training=True),
    "batch_norm_train_stats": lambda x: F.batch_norm(x, torch.zeros(x.shape[1]), _ones(x.shape[1]), training=True),
    "batch_norm_train_affine": lambda x: F.batch_norm(x, None, None, _ones(x.shape[1]), torch.zeros(x.shape[1]),
                                                      training=True),
    "rms_norm": lambda x: (F.rms_norm(x, x.shape[-1:]), F.rms_norm(x, x.shape[-1:], _ones(x.shape[-1]))),
    "normalize": lambda x: F.normalize(x, dim=-1),
}

INPUTS = {
    "neg_zero_col": lambda: torch.full((4, 1), -0.0),       # the reported case: a last dim of size 1
    "neg_zero": lambda: torch.full((3, 40), -0.0),          # vector lanes and a scalar tail
    "pos_zero_col": lambda: torch.full((4, 1), 0.0),
    "mixed": lambda: torch.tensor([[-0.0, 0.0, -0.0], [0.0, -0.0, -0.0]]),
}


def assert_same_zeros(got, want, where):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want), where
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, equal_nan=True, atol=1e-5, rtol=1e-5, msg=f"{where}[{i}]")
        zero = w == 0
        assert torch.equal(torch.signbit(g[zero]), torch.signbit(w[zero])), \
            f"{where}[{i}]: signs of zeros differ: got {g.flatten().tolist()}, eager {w.flatten().tolist()}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("inp", list(INPUTS))
@pytest.mark.parametrize("case", list(CASES))
def test_signed_zeros(case, inp, backend):
    fn, x = CASES[case], INPUTS[inp]()
    compiled = compile_fn(fn, [x], backend)
    assert_same_zeros(compiled(x.clone()), fn(x), f"{case}/{inp}")


def _layer_norm_atan2(x):
    y = F.layer_norm(x, (1,))
    return y, torch.atan2(y, torch.full_like(y, -1.0))


def test_layer_norm_then_atan2_through_backend():
    """The report: layer_norm over a last dim of size 1 of -0.0, then atan2 (pi, not -pi)."""
    x = torch.full((4, 1), -0.0)
    got = inductor(torch.fx.symbolic_trace(_layer_norm_atan2), [x])(x)
    assert_same_zeros(tuple(got), _layer_norm_atan2(x), "layer_norm+atan2")
    assert (got[1] > 0).all()


@pytest.mark.skipif(not hasattr(xcompile, "compile"), reason="needs the frontend")
def test_layer_norm_then_atan2_compiled():
    x = torch.full((4, 1), -0.0)
    got = xcompile.compile(_layer_norm_atan2, backend="inductor")(x)
    assert_same_zeros(tuple(got), _layer_norm_atan2(x), "layer_norm+atan2")


@pytest.mark.skipif(not hasattr(xcompile, "compile"), reason="needs the frontend")
@pytest.mark.parametrize("make", [
    lambda: nn.LayerNorm(1, elementwise_affine=False), lambda: nn.LayerNorm(1, bias=False),
    lambda: nn.BatchNorm1d(3), lambda: nn.BatchNorm1d(3, affine=False), lambda: nn.BatchNorm1d(3).eval(),
    lambda: nn.GroupNorm(1, 3), lambda: nn.GroupNorm(3, 3, affine=False),
], ids=["ln", "ln_nobias", "bn", "bn_noaffine", "bn_eval", "gn", "gn_noaffine"])
@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_signed_zeros_modules(make, grad):
    """Modules through the backend (training graphs too): outputs and gradients of -0.0 inputs."""
    m = make()
    shape = (4, 3, 1) if isinstance(m, (nn.BatchNorm1d, nn.GroupNorm)) else (4, 1)
    x1 = torch.full(shape, -0.0, requires_grad=grad)
    x2 = x1.detach().clone().requires_grad_(grad)
    m2 = copy.deepcopy(m)
    with torch.set_grad_enabled(grad):
        want = m(x1)
        got = xcompile.compile(m2, backend="inductor")(x2)
    assert_same_zeros(got, want, "output")
    if grad:
        go = torch.full_like(want, -0.0)
        want.backward(go)
        got.backward(go)
        assert_same_zeros(x2.grad, x1.grad, "input grad")
