"""aot_eager on CUDA tensors (run by the GPU script; skipped without a GPU)."""
import copy

import pytest
import torch

import xcompile
from xcompile.backends.aot_eager import aot_eager

from .models import MODELS, trace

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]


@pytest.mark.parametrize("name", ["gelu_mlp", "conv_bn", "transformer"])
def test_cuda_gradients_match_eager(name):
    ctor, shape = MODELS[name]
    torch.manual_seed(0)
    eager = ctor().cuda()
    twin = copy.deepcopy(eager)
    with xcompile.config.patch(fallback_random=True):
        fn = aot_eager(trace(twin), [torch.randn(shape, device="cuda", requires_grad=True)])
        for step in range(2):
            xs = [torch.randn(shape, device="cuda", generator=None).requires_grad_(True)]
            xs.append(xs[0].detach().clone().requires_grad_(True))
            torch.manual_seed(step)
            (oe,) = eager(xs[0])
            torch.manual_seed(step)
            (oc,) = fn(xs[1])
            torch.testing.assert_close(oc, oe, atol=1e-4, rtol=1e-3)
            oe.square().mean().backward()
            oc.square().mean().backward()
            torch.testing.assert_close(xs[1].grad, xs[0].grad, atol=1e-4, rtol=1e-3)
    for (n, p), q in zip(eager.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-3, msg=lambda m: f"{n}: {m}")
    for (n, b), c in zip(eager.named_buffers(), twin.buffers()):
        torch.testing.assert_close(c, b, atol=1e-4, rtol=1e-3, msg=lambda m: f"{n}: {m}")
