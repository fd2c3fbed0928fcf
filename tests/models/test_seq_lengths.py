"""Real models at three sequence lengths (dynamic shapes, issue #11): under ``torch.no_grad()``,
``xcompile.compile(model)`` gives eager's values at each length and compiles no more graphs
than ``torch.compile`` on the same calls (both with a counting eager backend: the first length
static, then one entry with a symbolic length that serves the third)."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as TorchCounter

import xcompile
from xcompile.backends.per_size import PerSize
from xcompile.testing import CompileCounter, CompileCounterWithBackend

from .builders import VOCAB, B, build, seeded

pytestmark = pytest.mark.models

LENGTHS = (6, 9, 13)
MODELS = ("bert", "gpt2", "llama", "mistral")


def _inputs(name: str, t: int) -> dict:
    ids = torch.randint(4, VOCAB, (B, t))
    kw = {"input_ids": ids, "attention_mask": torch.ones(B, t, dtype=torch.long)}
    if name != "bert":
        kw["use_cache"] = False
    return kw


def _leaves(out):
    if isinstance(out, dict):
        return [v for v in out.values() if isinstance(v, torch.Tensor)]
    return [v for v in out if isinstance(v, torch.Tensor)]


@pytest.mark.parametrize("name", MODELS)
def test_sequence_lengths(name):
    xcompile.reset()
    torch._dynamo.reset()
    model = build(name).model.eval()
    cnt, tcnt = CompileCounter(), TorchCounter()
    xc = xcompile.compile(model, backend=cnt)
    tc = torch.compile(model, backend=tcnt)
    with torch.no_grad():
        for i, t in enumerate(LENGTHS):
            kw = seeded(lambda t=t: _inputs(name, t), 10 + i)
            expected = model(**kw)
            got = xc(**kw)
            tc(**kw)
            for a, b in zip(_leaves(got), _leaves(expected)):
                torch.testing.assert_close(a, b, rtol=1.3e-6, atol=1e-5)
    assert cnt.frame_count <= tcnt.frame_count, (cnt.frame_count, tcnt.frame_count)
    assert cnt.frame_count >= 1
    xcompile.reset()
    torch._dynamo.reset()


@pytest.mark.parametrize("name", MODELS)
def test_sequence_lengths_one_inductor_compile(name):
    """On inductor the entry with a symbolic length compiles its kernels once: the third and a
    fourth length run them (sizes are kernel arguments), and the values are eager's."""
    xcompile.reset()
    model = build(name).model.eval()
    cnt = CompileCounterWithBackend("inductor")
    xc = xcompile.compile(model, backend=cnt)
    before = PerSize.backend_compiles
    with torch.no_grad():
        for i, t in enumerate((*LENGTHS, 31)):
            kw = seeded(lambda t=t: _inputs(name, t), 10 + i)
            expected = model(**kw)
            for a, b in zip(_leaves(xc(**kw)), _leaves(expected)):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert cnt.frame_count == 2
    assert PerSize.backend_compiles == before, "compiled per length instead of once"
    xcompile.reset()
