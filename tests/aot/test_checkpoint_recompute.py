"""``torch.utils.checkpoint`` inside a compiled graph (issue #12): the region is traced inline and
its ops are tagged; the AOT partitioner saves what the regions read and recomputes the rest in the
backward, as eager's checkpoint does. Gradients equal eager's; fewer bytes are saved than
without checkpointing."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import xcompile
from xcompile.backends.aot_eager import aot_eager
from xcompile.backends.inductor import inductor

BACKENDS = {"aot_eager": aot_eager, "inductor": inductor}


class MLP(torch.nn.Module):
    def __init__(self, layers: int, ckpt: bool):
        super().__init__()
        self.ckpt = ckpt
        self.w = torch.nn.Parameter(torch.randn(64))
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.LayerNorm(64))
            for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False) if self.ckpt else layer(x)
        return (x * self.w).sum()


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _train(backend_name: str, ckpt: bool) -> int:
    """One step against eager (gradients compared); the bytes the compiled forward saved."""
    torch.manual_seed(0)
    ref = MLP(6, ckpt)
    mine = copy.deepcopy(ref)
    made = []

    def backend(gm, example_inputs):
        made.append(BACKENDS[backend_name](gm, example_inputs))
        return made[-1]
    compiled = xcompile.compile(mine, backend=backend)
    x = torch.randn(32, 64, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    ref(x).backward()
    compiled(x2).backward()
    torch.testing.assert_close(x2.grad, x.grad, rtol=1e-4, atol=1e-4)
    for p, q in zip(ref.parameters(), mine.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-4)
    (program,) = made
    (art,) = program._training.values()
    return art.partition.saved_bytes


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_checkpointed_layers_save_less_and_train_the_same(backend):
    plain = _train(backend, ckpt=False)
    ckpt = _train(backend, ckpt=True)
    # 6 layers: without checkpointing each saves its matmul output, GELU input and norm
    # statistics; with it only the layer inputs (and the parameters, saved either way)
    assert ckpt < plain * 0.8, (ckpt, plain)


def test_region_output_read_after_the_region():
    """A region's output used by later ops and returned: kept, not recomputed from scratch."""
    def f(x, w):
        h = checkpoint(lambda t: (t @ w).relu().sin(), x, use_reentrant=False)
        return h * 2, (h.cos() * w.sum()).sum()
    compiled = xcompile.compile(f, backend="aot_eager")
    x, w = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    a, b = f(x, w)
    (a.sum() + b).backward()
    ca, cb = compiled(x, w2)
    (ca.sum() + cb).backward()
    torch.testing.assert_close((ca, cb), (a, b))
    torch.testing.assert_close(w2.grad, w.grad)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_saved_tensors_hooks_see_real_tensors_only(backend):
    """A ``saved_tensors_hooks`` pack hook active while the frame is compiled is not called on
    the trace's fake tensors (it read their data pointer and the compile failed); at run time
    it sees what the compiled forward saves."""
    seen = []

    def pack(t):
        seen.append(t.untyped_storage().data_ptr())
        return t
    torch.manual_seed(0)
    model = MLP(3, ckpt=True)
    compiled = xcompile.compile(model, backend=BACKENDS[backend])
    x = torch.randn(8, 64)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)        # no "running this graph eagerly"
        loss = compiled(x)
    loss.backward()
    assert seen, "the compiled forward saved nothing through the hook"
    ref = MLP(3, ckpt=True)
    ref.load_state_dict(model.state_dict())
    torch.testing.assert_close(loss, ref(x))
