"""Real sizes (issue #32): HF transformers models at the sizes people run, eager vs torch.compile vs xcompile.

Rows (4 layers each, random weights from a config, no download):

- inference under ``torch.no_grad()``, batch 1, sequence 128: ``bert`` (hidden 768, 12 heads),
  ``gpt2`` (n_embd 768, 12 heads), ``llama`` (hidden 1024, 16 heads, 4 KV heads: GQA),
  ``vit`` (ViT-B/16 shaped, 224 px);
- training steps, batch 4, sequence 128: ``gpt2-train`` and ``bert-train`` (forward with the
  model's own loss, backward, AdamW ``step()``, ``zero_grad()``), the model compiled and the
  optimizer outside it, as nanoGPT's ``train.py`` does.

The vocabulary is 8,192 (a 50k LM head would be a third of every step; it is one matmul).
Each row runs in a fresh process with empty kernel caches; the three variants are timed in
the same interleaved rounds (medians, benchmarks/_timing.py). Per row: ms per call (or step),
xcompile's speed against torch.compile (> 1: xcompile is faster), first-call seconds, and
whether the outputs (training: the parameters after 3 steps from the same start) equal eager's.
A graph xcompile runs eagerly (a kernel-generator fallback) is counted and fails the row.

``--memory``: each variant's step peak in a process of its own: the growth of the resident set
(VmHWM, reset through /proc/self/clear_refs after the compile) over two steps, in MB. Those
processes run with ``MALLOC_MMAP_THRESHOLD_=65536``, so every tensor buffer is its own mapping
and a freed one leaves the resident set at once (glibc would otherwise keep freed memory for
reuse, and a step would show only what it needed beyond the last one's).

    python benchmarks/real_sizes.py [--rows bert,gpt2-train] [--threads 1,2] [--rounds 5] [--memory]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
_TAG = "@@real-sizes@@ "
VOCAB, SEQ = 8192, 128
ROWS = ("bert", "gpt2", "llama", "vit", "gpt2-train", "bert-train")


# -- the models -----------------------------------------------------------------------------------

def _quiet_config(cfg):
    for k in ("hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop", "embd_pdrop",
              "attn_pdrop", "attention_dropout", "dropout"):
        if hasattr(cfg, k):
            setattr(cfg, k, 0.0)
    return cfg


def build(row: str):
    """(model, make_inputs(seed) -> kwargs, train)."""
    import torch
    import transformers as tf
    train = row.endswith("-train")
    name = row.removesuffix("-train")
    batch = 4 if train else 1

    def ids(g):
        return torch.randint(4, VOCAB, (batch, SEQ), generator=g)

    def causal(g):                      # a decoder's inputs: the ids are its labels
        x = ids(g)
        kw = {"input_ids": x, "use_cache": False}
        if train:
            kw["labels"] = x
        return kw

    if name == "bert":
        cfg = tf.BertConfig(vocab_size=VOCAB, hidden_size=768, num_hidden_layers=4, num_attention_heads=12,
                            intermediate_size=3072, max_position_embeddings=512)
        model = (tf.BertForMaskedLM if train else tf.BertModel)(_quiet_config(cfg))

        def inputs(g):
            kw = {"input_ids": ids(g), "attention_mask": torch.ones(batch, SEQ, dtype=torch.long)}
            if train:
                kw["labels"] = ids(g)
            return kw
    elif name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=VOCAB, n_embd=768, n_layer=4, n_head=12, n_positions=1024)
        model = tf.GPT2LMHeadModel(_quiet_config(cfg))

        inputs = causal
    elif name == "llama":
        cfg = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                             num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=1024)
        model = tf.LlamaForCausalLM(_quiet_config(cfg))

        inputs = causal
    elif name == "vit":
        cfg = tf.ViTConfig(hidden_size=768, num_hidden_layers=4, num_attention_heads=12, intermediate_size=3072,
                           image_size=224, patch_size=16)
        model = tf.ViTModel(_quiet_config(cfg), add_pooling_layer=False)

        def inputs(g):
            return {"pixel_values": torch.randn(batch, 3, 224, 224, generator=g)}
    else:
        raise SystemExit(f"unknown row {row!r}: one of {', '.join(ROWS)}")
    model.train(train)
    return model, inputs, train


# -- the child: one row, one fresh process --------------------------------------------------------

def _leaves(out):
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, (tuple, list)):
        for v in out:
            yield from _leaves(v)
    else:
        yield out


def _close(a, b, tol=2e-3) -> bool:
    import torch
    la = [x for x in _leaves(a) if isinstance(x, torch.Tensor)]
    lb = [x for x in _leaves(b) if isinstance(x, torch.Tensor)]
    return len(la) == len(lb) and all(x.shape == y.shape and x.dtype == y.dtype and
                                      torch.allclose(x, y, rtol=tol, atol=tol) for x, y in zip(la, lb))


def _variants(model, train):
    """{variant: (callable(kwargs), the model it runs)}: a copy of the model per variant (training
    changes the weights), each with its own AdamW."""
    import copy

    import torch

    import xcompile
    out = {}
    for key in ("eager", "torch", "xcompile"):
        m = copy.deepcopy(model)
        fn = {"eager": m, "torch": torch.compile(m), "xcompile": xcompile.compile(m)}[key]
        if train:
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

            def step(kw, fn=fn, opt=opt):
                loss = fn(**kw).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                return loss
            out[key] = (step, m)
        else:
            out[key] = (lambda kw, fn=fn: fn(**kw), m)
    return out


def child(row: str, threads: int, rounds: int) -> dict:
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(threads)
    sys.path.insert(0, HERE)
    import xcompile
    from _timing import per_call_us
    torch.manual_seed(0)
    model, inputs, train = build(row)
    result: dict = {"row": row, "threads": threads}
    variants = _variants(model, train)
    ctx = torch.enable_grad if train else torch.no_grad
    g = torch.Generator().manual_seed(1)
    first_inputs = [inputs(g) for _ in range(3)]
    with ctx():
        outs = {}
        for key, (fn, _m) in variants.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                outs[key] = [fn(kw) for kw in first_inputs[:1]]
                result[f"first_{key}"] = time.perf_counter() - t0
                outs[key] += [fn(kw) for kw in first_inputs[1:]]
            eager = [str(w.message) for w in caught if "running this graph eagerly" in str(w.message)]
            if eager:
                result[f"fallbacks_{key}"] = len(eager)
                result[f"why_{key}"] = eager[0][:200]
        for key in ("torch", "xcompile"):
            if train:   # the weights after 3 steps from the same start
                ok = all(torch.allclose(p, q, rtol=2e-3, atol=2e-4) for p, q in
                         zip(variants[key][1].parameters(), variants["eager"][1].parameters()))
            else:
                ok = all(_close(a, b) for a, b in zip(outs[key], outs["eager"]))
            result[f"ok_{key}"] = ok
        result["graphs_xcompile"] = xcompile.counters["stats"]["unique_graphs"]
        kw = inputs(g)
        us = per_call_us({k: v[0] for k, v in variants.items()}, (kw,), calls=1 if train else 3,
                         rounds=rounds, warmup=1)
    for k, v in us.items():
        result[f"ms_{k}"] = v / 1000.0
    return result


def _rss_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def memory_child(row: str, threads: int, variant: str) -> dict:
    """One variant's step peak: VmHWM growth over two steps after the compile."""
    import gc
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, inputs, train = build(row)
    fn, _m = _variants_one(model, train, variant)
    g = torch.Generator().manual_seed(1)
    ctx = torch.enable_grad if train else torch.no_grad
    with ctx():
        for _ in range(2):
            fn(inputs(g))          # compile and warm up
        kws = [inputs(g) for _ in range(2)]
        gc.collect()
        base = _rss_mb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")           # resets VmHWM to the current resident set
        for kw in kws:
            fn(kw)
        peak = _rss_mb("VmHWM")
    return {"row": row, "variant": variant, "peak_mb": peak - base}


def _variants_one(model, train, variant):
    import torch

    import xcompile
    fn = {"eager": lambda m: m, "torch": torch.compile, "xcompile": xcompile.compile}[variant](model)
    if not train:
        return (lambda kw: fn(**kw)), model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(kw):
        loss = fn(**kw).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step, model


# -- the parent ----------------------------------------------------------------------------------

def _run(args: list[str], threads: int, timeout: float, **extra_env: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-real-") as tmp:
        env = dict(os.environ, **extra_env, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   XCOMPILE_CACHE_DIR=os.path.join(tmp, "xcompile"), OMP_NUM_THREADS=str(threads),
                   HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__)] + args, env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"crash": f"timeout after {timeout}s"}
    for line in p.stdout.splitlines():
        if line.startswith(_TAG):
            return json.loads(line[len(_TAG):])
    tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"crash": f"exit {p.returncode}: {tail[:200]}"}


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default=",".join(ROWS))
    p.add_argument("--threads", default="1")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--memory", action="store_true")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--child", default="")
    p.add_argument("--variant", default="")
    a = p.parse_args(argv)
    if a.child:
        threads = int(a.threads)
        r = memory_child(a.child, threads, a.variant) if a.variant else child(a.child, threads, a.rounds)
        print(_TAG + json.dumps(r), flush=True)
        return 0
    failed = 0
    print(f"{'row':<12} {'thr':>3} {'eager ms':>9} {'torch ms':>9} {'xcomp ms':>9} {'vs eager':>8} "
          f"{'vs torch':>8} {'1st torch':>9} {'1st xc':>7}  ok   notes", flush=True)
    for threads in (int(t) for t in a.threads.split(",")):
        ratios = {"train": [], "infer": []}
        for row in a.rows.split(","):
            r = _run(["--child", row, "--threads", str(threads), "--rounds", str(a.rounds)], threads, a.timeout)
            if "crash" in r:
                print(f"{row:<12} {threads:>3} CRASH {r['crash']}", flush=True)
                failed += 1
                continue
            ok = r["ok_xcompile"] and not r.get("fallbacks_xcompile")
            failed += not ok
            vs_torch = r["ms_torch"] / r["ms_xcompile"]
            ratios["train" if row.endswith("-train") else "infer"].append(vs_torch)
            notes = []
            if r.get("fallbacks_xcompile"):
                notes.append(f"{r['fallbacks_xcompile']} graphs eager: {r['why_xcompile']}")
            if not r["ok_torch"]:
                notes.append("torch.compile differs from eager")
            notes.append(f"{r['graphs_xcompile']} graphs")
            if a.memory:
                peaks = {v: _run(["--child", row, "--threads", str(threads), "--variant", v], threads,
                                 a.timeout, MALLOC_MMAP_THRESHOLD_="65536").get("peak_mb", float("nan"))
                         for v in ("eager", "torch", "xcompile")}
                notes.append("step peak MB eager/torch/xcompile " + "/".join(f"{peaks[v]:.0f}" for v in peaks))
            print(f"{row:<12} {threads:>3} {r['ms_eager']:>9.1f} {r['ms_torch']:>9.1f} {r['ms_xcompile']:>9.1f} "
                  f"{r['ms_eager'] / r['ms_xcompile']:>7.2f}x {vs_torch:>7.2f}x {r['first_torch']:>8.1f}s "
                  f"{r['first_xcompile']:>6.1f}s  {'yes' if ok else 'NO '}  {'; '.join(notes)}", flush=True)
        for kind, xs in ratios.items():
            if xs:
                print(f"  {threads} thread(s), {kind}: geomean xcompile vs torch.compile {_geomean(xs):.2f}x, "
                      f"lowest {min(xs):.2f}x", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
