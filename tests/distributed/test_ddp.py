"""Compiled DistributedDataParallel on 2 ranks (gloo, CPU), next to eager DDP.

Each test spawns 2 processes (tests/distributed/harness.py: FileStore rendezvous, a hard time
limit, a failing rank stops both); each rank trains the same model under eager DDP and under
compiled DDP and returns what it saw (tests/distributed/ddp_programs.py). Gradients and
parameters must match eager DDP's and be the same on both ranks; the compiled graph is split
into one subgraph per DDP bucket (the buckets DDP really all-reduced, read by a comm hook).
"""
from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from . import ddp_programs
from .harness import run_ranks

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                 reason="needs torch.distributed with gloo")]


def _close(a: dict, b: dict, atol: float, rtol: float = 1e-4) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if a[k] is None or b[k] is None:
            assert a[k] is None and b[k] is None, f"{k}: a gradient in one run only"
            continue
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=rtol, msg=lambda m, k=k: f"{k}: {m}")


def _check_training(r0: dict, r1: dict, atol: float) -> None:
    for r in (r0, r1):
        assert r["loss_c"] == pytest.approx(r["loss_e"], rel=1e-4, abs=1e-6)
        for ge, gc in zip(r["grads_e"], r["grads_c"]):
            _close(ge, gc, atol=1e-6)
        _close(r["params_e"], r["params_c"], atol=atol)
    # DDP keeps the ranks in step: after the all-reduce both hold the same gradients and parameters
    for k, v in r0["params_c"].items():
        assert torch.equal(v, r1["params_c"][k]), k
    for g0, g1 in zip(r0["grads_c"], r1["grads_c"]):
        for k, v in g0.items():
            assert (v is None and g1[k] is None) or torch.equal(v, g1[k]), k


def _check_buckets(r: dict) -> None:
    """One subgraph per bucket: the parameters of each subgraph are those of one DDP bucket."""
    buckets = r["buckets_c"][-1]                  # the buckets of the last step, in the order sent
    assert buckets == r["buckets_e"][-1]          # DDP built the same buckets as under eager
    assert len(buckets) >= 2
    assert len(r["subgraphs"]) == len(buckets)
    assert sorted(map(sorted, buckets)) == sorted(r["subgraphs"])
    # the last subgraph's bucket is sent first: its all-reduce starts before the backward ends
    assert sorted(buckets[0]) == r["subgraphs"][-1]
    assert sum("DDP bucket boundary" in b for b in r["breaks"]) == len(buckets) - 1


# All training runs in one spawn (process start and imports paid once), each test checks its own.
RUNS = {
    # compile(DDP(mlp)), kernel backend: buckets split
    "mlp": dict(model_name="mlp", mode="outer", backend="inductor"),
    # DDP(compile(mlp)) with optimize_ddp=False: one graph
    "off": dict(model_name="mlp", mode="inner", backend="aot_eager", optimize_ddp=False),
    # DDP(compile(transformer)), kernel backend
    "transformer": dict(model_name="transformer", mode="inner", backend="inductor", bucket_cap_mb=0.01, lr=1e-3),
    # find_unused_parameters=True with a layer never called, accumulation over 2 micro-steps (no_sync)
    "unused": dict(model_name="mlp_unused", mode="outer", backend="aot_eager", find_unused=True, no_sync=True),
    # static_graph=True
    "static": dict(model_name="mlp", mode="inner", backend="aot_eager", static_graph=True),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    per_rank = run_ranks(ddp_programs.scenarios, tmp_path_factory.mktemp("ddp"), list(RUNS.values()), timeout=240)
    return {name: (per_rank[0][i], per_rank[1][i]) for i, name in enumerate(RUNS)}


def test_mlp_compiled_ddp_matches_eager(runs):
    r0, r1 = runs["mlp"]
    _check_training(r0, r1, atol=1e-5)
    _check_buckets(r0)
    assert len(r0["subgraphs"]) == 3              # 6 layers of 16.6 KB, bucket_cap_mb=0.02: 2 per bucket


def test_optimize_ddp_off_gives_one_graph(runs):
    r0, r1 = runs["off"]
    _check_training(r0, r1, atol=1e-6)
    assert len(r0["subgraphs"]) == 1 and len(r0["subgraphs"][0]) == 12
    assert not any("DDP" in b for b in r0["breaks"])


def test_transformer_compiled_ddp_matches_eager(runs):
    r0, r1 = runs["transformer"]
    _check_training(r0, r1, atol=1e-4)
    _check_buckets(r0)


def test_no_sync_and_unused_parameter(runs):
    """find_unused_parameters=True with a layer never called (no gradient, as in eager DDP) and
    gradient accumulation over 2 micro-steps, the first under no_sync()."""
    r0, r1 = runs["unused"]
    _check_training(r0, r1, atol=1e-6)
    for r in (r0, r1):
        for grads in r["grads_c"]:
            assert grads["unused.weight"] is None and grads["unused.bias"] is None
        # DDP's buckets (built once, in registration order) hold the unused layer with layers.5.bias
        assert len(r["subgraphs"]) == len(r["buckets_c"][-1]) == 4


def test_static_graph(runs):
    r0, r1 = runs["static"]
    _check_training(r0, r1, atol=1e-6)
    _check_buckets(r0)


def test_failing_rank_stops_both(tmp_path):
    """Rank 1 raises inside the compiled step while rank 0 waits in the all-reduce: the run ends
    with rank 1's error, well before the time limit."""
    t0 = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match="mat1 and mat2 shapes cannot be multiplied"):
        run_ranks(ddp_programs.train, tmp_path, "mlp", mode="outer", backend="aot_eager", fail_on_rank=1,
                  timeout=150)
    assert time.monotonic() - t0 < 60
