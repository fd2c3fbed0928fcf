"""Memory a compiled step gives back when eager would (issue #32): the backward's saved tensors
as it goes, and the objects a compiled call builds as soon as the caller drops them."""
from __future__ import annotations

import dataclasses
import gc
import weakref

import pytest
import torch

import xcompile
from xcompile.kernels.wrapper import _dropping_inputs


@pytest.fixture(autouse=True)
def fresh():
    xcompile.reset()
    yield


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclasses.dataclass
class Out:
    loss: torch.Tensor
    logits: torch.Tensor


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_an_object_the_call_built_dies_with_its_last_reference(backend, no_gc):
    # The effect plan that builds a frame-made object (an HF ModelOutput) kept it in a reference
    # cycle: a training loop held the last step's logits until the collector ran.
    def f(x, w):
        logits = x @ w
        return Out(logits.logsumexp(-1).mean(), logits)

    c = xcompile.compile(f, backend=backend)
    x, w = torch.randn(4, 8), torch.randn(8, 16, requires_grad=True)
    for _ in range(2):
        c(x, w).loss.backward()
    out = c(x, w)
    expected = f(x, w)
    torch.testing.assert_close(out.logits, expected.logits)
    torch.testing.assert_close(out.loss, expected.loss)
    logits, whole = weakref.ref(out.logits), weakref.ref(out)
    loss = out.loss
    del out
    assert whole() is None, "the output object outlived its last reference"
    loss.backward()          # (the loss's graph may save the logits, as eager's does: until here)
    assert logits() is None, "the logits outlived the output object and the backward"


def test_inputs_are_dropped_after_their_last_statement():
    body = ["buf0 = empty(4)",
            "if (_err := k0(a, buf0, 4)):",
            "    k0_info.raise_error(_err, locals())",
            "k1(buf0, b)",
            "return (buf0,)"]
    out = _dropping_inputs(body, ["a", "b", "c"])
    assert out == ["del c",
                   "buf0 = empty(4)",
                   "if (_err := k0(a, buf0, 4)):",
                   "    k0_info.raise_error(_err, locals())",
                   "del a",
                   "k1(buf0, b)",
                   "del b",
                   "return (buf0,)"]
    # a name the return reads is not dropped before it
    assert _dropping_inputs(["return (a,)"], ["a"]) == ["return (a,)"]


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                               torch.nn.Tanh(), torch.nn.Linear(64, 4))


def test_the_backward_frees_saved_tensors_as_it_goes():
    # The compiled backward takes its saved tensors in a list it empties (call_boxed), after
    # autograd let go of them (maybe_clear_saved_tensors): when it starts, that list holds the
    # only reference to each saved activation, so the generated code frees each after its last
    # use, not when the backward returns (GPT-2's step peak was 342 MB, torch.compile's 176).
    m = _mlp()
    c = xcompile.compile(m, backend="inductor")
    x = torch.randn(8, 16)
    c(x).sum().backward()
    art = next(iter(_artifacts()))
    real = art.bw.boxed
    known = {id(p) for p in m.parameters()} | {id(x)}
    counts = []

    def checking(args):
        for t in args[:art.num_saved]:
            if isinstance(t, torch.Tensor) and id(t) not in known:
                counts.append(t._use_count())     # (the TensorImpl's holders: autograd's saved one?)
        return real(args)

    art.bw.boxed = checking
    try:
        c(x).sum().backward()
    finally:
        art.bw.boxed = real
    assert counts and all(n == 1 for n in counts), counts
    assert all(p.grad is not None for p in m.parameters())


def _artifacts():
    from xcompile.aot.runtime import TrainingArtifact
    return [o for o in gc.get_objects() if isinstance(o, TrainingArtifact) and o.bw is not None]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_gradients_with_the_boxed_backward_equal_eagers(backend):
    m = _mlp()
    ref = _mlp()
    c = xcompile.compile(m, backend=backend)
    for step in range(3):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step))
        c(x).pow(2).sum().backward()
        ref(x).pow(2).sum().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
    # retain_graph=True keeps the saved tensors for a second backward (maybe_clear honours it)
    for p in (*m.parameters(), *ref.parameters()):
        p.grad = None
    x = torch.randn(8, 16)
    loss, ref_loss = c(x).pow(2).sum(), ref(x).pow(2).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    ref_loss.backward(retain_graph=True)
    ref_loss.backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    with pytest.raises(RuntimeError, match="second time|freed"):
        loss.backward()
