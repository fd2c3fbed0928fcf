"""The devices a compiled graph can be recorded on and replayed from (kernels/cudagraphs.py).

A device records ``run`` (a callable over the fixed tensors ``inputs``) once, executing nothing
that lasts (as a CUDA capture), and returns
``(replay, outputs, keep)``: ``replay()`` runs the recording again, writing the same output
tensors, and ``keep`` is whatever must stay alive with the recording.

- ``CudaGraphs``: ``torch.cuda.CUDAGraph``, with a warm-up run on a side stream before the
  capture and one memory pool per ``GraphPool`` (the graphs of one compiled function).
  ``replay`` is the graph's bound ``replay`` (a C++ method of torch's binding).
- ``StandIn``: the CPU stand-in, so the bookkeeping (input copies, pointer checks, output
  liveness, fallbacks) is tested without a GPU. Its recording is the artifact; a replay runs
  it on the recorded inputs and copies the results' storages into the recorded outputs', which,
  like a CUDA graph's, stay at the same addresses and are overwritten by every replay. The
  recording run stands for the first replay (which it skips), as a capture executes nothing.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from .. import config


class GraphPool(list):
    """The graphs of one compiled function, in recording order (GraphReplay reads the list);
    ``handle`` is the memory pool they share (CUDA: ``torch.cuda.graph_pool_handle()``)."""

    def __init__(self):
        super().__init__()
        self.handle: Any = None

    __hash__ = object.__hash__  # type: ignore[assignment]  # one pool is one object (kept in a WeakSet)

    def __eq__(self, other):
        return self is other


class CudaGraphs:
    name = "cuda"

    def record(self, run: Callable[[], Any], inputs: list, pool: GraphPool):
        # no warm-up run here: the calls before the recording ran the graph (lazy inits, kernel
        # loads), and a capture executes nothing, so the call that records runs the graph once
        if pool.handle is None:
            pool.handle = torch.cuda.graph_pool_handle()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool.handle):
            outs = run()
        return graph.replay, outs, graph


class StandIn:
    name = "cpu stand-in"

    def record(self, run: Callable[[], Any], inputs: list, pool: GraphPool):
        # The recording run is this call's execution: GraphReplay replays right after recording,
        # and that first replay is skipped, so every call runs the graph once (a capture executes
        # nothing; its first replay is the call's run), writes into inputs and bound buffers too.
        outs = run()
        fixed = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        first = [True]

        def replay():
            if first[0]:
                first[0] = False
                return
            new = run()
            with torch.no_grad():
                done: set[int] = set()
                for f, n in zip(fixed, new):
                    if not isinstance(f, torch.Tensor) or f is n:
                        continue
                    fs, ns = f.untyped_storage(), n.untyped_storage()
                    if fs._cdata == ns._cdata or fs._cdata in done:
                        continue                     # an input returned, or a storage written already
                    done.add(fs._cdata)
                    if fs.nbytes() == ns.nbytes():   # whole storages: views and expanded outputs too
                        fs.copy_(ns)
                    else:
                        f.copy_(n)
        return replay, outs, None


def device_for(device_type: str):
    """The recording device for graphs on ``device_type``, or None (no replay there)."""
    if device_type == "cuda":
        return CudaGraphs()
    if device_type == "cpu" and config.cudagraph_stand_in:
        return StandIn()
    return None
