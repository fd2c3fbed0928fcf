"""``model.generate()`` with a compiled forward, as the transformers docs show it:
``model.forward = xcompile.compile(model.forward)``.  Greedy decoding must give eager's tokens
with the default dynamic cache (a new length each step: recompiles, never wrong tokens) and with
``cache_implementation="static"``, where the prefill and the decode step compile once and a
second ``generate()`` compiles nothing."""
from __future__ import annotations

import os
import warnings

import pytest
import torch

import xcompile
from xcompile.testing import CompileCounterWithBackend

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.models


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=128, vocab_size=1000,
                                   max_position_embeddings=256)
    return transformers.LlamaForCausalLM(cfg).eval()


def _gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=256,
                                  bos_token_id=0, eos_token_id=1)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _generate(model, ids, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # the cache-limit warning of the dynamic cache
        return model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0, **kw)


@pytest.mark.parametrize("make", [_llama, _gpt2], ids=["llama", "gpt2"])
def test_generate_dynamic_cache_gives_eager_tokens(make):
    model = make()
    ids = torch.randint(2, 1000, (2, 7))
    expected = _generate(model, ids)
    model.forward = xcompile.compile(model.forward, backend="eager")
    torch.testing.assert_close(_generate(model, ids), expected, rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_generate_static_cache_compiles_the_decode_step_once(backend):
    model = _llama()
    ids, fresh = torch.randint(2, 1000, (1, 8)), torch.randint(2, 1000, (1, 8))
    expected = [_generate(model, x, cache_implementation="static") for x in (ids, fresh)]
    cnt = CompileCounterWithBackend(backend)
    model.forward = xcompile.compile(model.forward, backend=cnt)
    with xcompile.config.patch(kernel_raise_errors=True):
        torch.testing.assert_close(_generate(model, ids, cache_implementation="static"), expected[0],
                                   rtol=0, atol=0)
        first = cnt.frame_count
        assert 1 <= first <= 2, first              # the prefill and the one-token decode step
        torch.testing.assert_close(_generate(model, fresh, cache_implementation="static"), expected[1],
                                   rtol=0, atol=0)
    assert cnt.frame_count == first, (first, cnt.frame_count)


def test_generate_static_cache_replays_the_decode_step():
    """mode="reduce-overhead" (the transformers docs' static-cache recipe), recorded by the CPU
    stand-in device: the decode step is recorded once, replayed for every token, and writes the
    cache in place (its tensors stay put, so they are used like static inputs); a second
    generate() with a new cache records again once."""
    from xcompile.kernels import cudagraphs
    model = _llama()
    ids, fresh = torch.randint(2, 1000, (1, 8)), torch.randint(2, 1000, (1, 8))
    expected = [_generate(model, x, cache_implementation="static") for x in (ids, fresh)]
    model.forward = xcompile.compile(model.forward, mode="reduce-overhead")
    with xcompile.config.patch(cudagraph_stand_in=True, warm_start=False, kernel_raise_errors=True):
        for x, e in zip((ids, fresh), expected):
            torch.testing.assert_close(_generate(model, x, cache_implementation="static"), e, rtol=0, atol=0)
    graphs = cudagraphs.recorded_graphs()
    assert len(graphs) == 1, graphs
    assert graphs[0].stats["replays"] >= 40 and graphs[0].stats["rerecords"] == 1
