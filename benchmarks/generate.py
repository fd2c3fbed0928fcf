"""generate() with a static KV cache: ms per generate() call (prefill + N decode steps) for eager,
torch.compile and xcompile.compile of ``model.forward`` (inductor), rounds interleaved in one
process, tokens checked against eager.

    python benchmarks/generate.py [--threads 1] [--tokens 32] [--rounds 7] [--model llama|gpt2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import transformers  # noqa: E402

import xcompile  # noqa: E402


def make(name: str):
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_embd=256, n_layer=4, n_head=4, vocab_size=8000, n_positions=512)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                                   num_key_value_heads=4, intermediate_size=688, vocab_size=8000,
                                   max_position_embeddings=512)
    return transformers.LlamaForCausalLM(cfg).eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", default="llama")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import logging
    logging.disable(logging.WARNING)
    models = {"eager": make(a.model), "torch.compile": make(a.model), "xcompile": make(a.model)}
    models["torch.compile"].forward = torch.compile(models["torch.compile"].forward)
    models["xcompile"].forward = xcompile.compile(models["xcompile"].forward)
    ids = torch.randint(0, 8000, (1, 16))
    kw = dict(max_new_tokens=a.tokens, do_sample=False, cache_implementation="static", pad_token_id=0)
    first = {}
    outs = {}
    for name, m in models.items():
        t0 = time.perf_counter()
        outs[name] = m.generate(ids, **kw)
        first[name] = time.perf_counter() - t0
    for name in models:
        assert torch.equal(outs[name], outs["eager"]), f"{name} generated other tokens than eager"
    samples = {n: [] for n in models}
    for _ in range(a.rounds):
        for name, m in models.items():
            t0 = time.perf_counter()
            m.generate(ids, **kw)
            samples[name].append((time.perf_counter() - t0) * 1e3)
    ms = {n: statistics.median(v) for n, v in samples.items()}
    print(f"generate(), static cache, {a.model}, {a.tokens} new tokens, {a.threads} thread(s), "
          f"median of {a.rounds} interleaved rounds; tokens equal eager's")
    print(f"{'':16s}{'first call s':>14s}{'ms/generate':>14s}{'ms/token':>10s}{'vs eager':>10s}")
    for name in models:
        print(f"{name:16s}{first[name]:14.2f}{ms[name]:14.1f}{ms[name] / a.tokens:10.2f}"
              f"{ms['eager'] / ms[name]:9.2f}x")
    print(f"xcompile / torch.compile speed: {ms['torch.compile'] / ms['xcompile']:.2f}x")


if __name__ == "__main__":
    main()
