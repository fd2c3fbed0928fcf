"""aot_eager vs eager: outputs, input and parameter gradients, buffers, on fresh inputs."""
import pytest
import torch

import xcompile

from .models import MODELS
from .util import TOL, assert_same_outputs, assert_same_state, loss_of, make_pair, run_both


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_eager(name, dtype):
    tol = TOL[dtype]
    with xcompile.config.patch(fallback_random=True):
        eager, fn, twin, shape = make_pair(name, dtype)
        for step in range(2):                       # fresh random inputs each call
            e, c = run_both(eager, fn, name, shape, dtype, seed=step, rng_seed=100 + step)
            assert_same_outputs(e, c, tol)
            loss_of(e[2], seed=step).backward()
            loss_of(c[2], seed=step).backward()
            torch.testing.assert_close(c[0].grad, e[0].grad, **tol)
            assert_same_state(eager, twin, tol)


@pytest.mark.parametrize("name", ["gelu_mlp", "conv_bn"])
def test_save_all_partition_matches_eager(name):
    tol = TOL[torch.float64]
    eager, fn, twin, shape = make_pair(name, torch.float64, partition="save_all")
    e, c = run_both(eager, fn, name, shape, torch.float64, seed=7)
    assert_same_outputs(e, c, tol)
    loss_of(e[2], 7).backward()
    loss_of(c[2], 7).backward()
    torch.testing.assert_close(c[0].grad, e[0].grad, **tol)
    assert_same_state(eager, twin, tol)


@pytest.mark.parametrize("name", ["gelu_mlp", "conv_bn", "inplace_input", "input_view"])
def test_no_grad_call_uses_inference_graph(name):
    """Under no_grad the compiled call runs the forward-only graph; effects still match eager."""
    tol = TOL[torch.float32]
    eager, fn, twin, shape = make_pair(name)
    with torch.no_grad():
        e, c = run_both(eager, fn, name, shape, torch.float32, seed=3)
    assert_same_outputs(e, c, tol)
    assert not c[2][0].requires_grad
    assert fn._inference is not None
    assert_same_state(eager, twin, tol, grads=False)


def test_eval_mode_batchnorm_reads_running_stats():
    tol = TOL[torch.float32]
    eager, fn, twin, shape = make_pair("conv_bn", train=False)
    e, c = run_both(eager, fn, "conv_bn", shape, torch.float32, seed=5)
    assert_same_outputs(e, c, tol)
    loss_of(e[2], 5).backward()
    loss_of(c[2], 5).backward()
    assert_same_state(eager, twin, tol)
