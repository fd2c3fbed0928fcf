"""20 AdamW steps: the compiled model follows eager's loss curve and ends with the same weights."""
import pytest
import torch

import xcompile

from .util import assert_same_state, make_input, make_pair

STEPS = 20


def train(run, params, name, shape, dtype):
    opt = torch.optim.AdamW(params, lr=1e-2)
    losses = []
    for step in range(STEPS):
        x = make_input(name, shape, dtype, seed=step)
        torch.manual_seed(10_000 + step)                 # same dropout masks on both sides
        (out,) = run(x)[:1]
        loss = (out.float() ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.slow
@pytest.mark.parametrize("name,dtype", [("gelu_mlp", torch.float32), ("conv_bn", torch.float32),
                                        ("transformer", torch.float32)])
def test_adamw_loss_curve_matches_eager(name, dtype):
    with xcompile.config.patch(fallback_random=True):
        eager, fn, twin, shape = make_pair(name, dtype)
        ref = train(eager, list(eager.parameters()), name, shape, dtype)
        got = train(fn, list(twin.parameters()), name, shape, dtype)
    tol = dict(rtol=1e-4, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), **tol)
    assert len(set(ref)) == STEPS                        # the curve moves: the steps did something
    assert_same_state(eager, twin, dict(rtol=1e-3, atol=1e-5), grads=False)
