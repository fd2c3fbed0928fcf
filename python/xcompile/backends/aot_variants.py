"""The other AOT backends torch users name, with torch's meanings:

    aot_eager_default_partitioner   aot_eager with the default partitioner: the backward reads what
                                    the forward computed, nothing is recomputed ("save_all")
    aot_eager_decomp_partition      the forward/backward graphs decomposed with the kernel
                                    generator's decomposition table (inductor's in torch) and
                                    split by the min-cut partitioner, run as plain FX graphs (what
                                    inductor would compile, without the kernels: for bisecting)
    cudagraphs                      torch.compile(mode="reduce-overhead")'s CUDA-graph backend. xcompile
                                    has no CUDA-graph replay yet: the AOT graphs run as aot_eager's
                                    do (on the CPU torch's backend does the same: it skips CUDA
                                    graphs for CPU tensors)
"""
from __future__ import annotations

import warnings

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

from .. import log
from ..aot.api import aot_compile
from ..kernels.decompose import DECOMPOSITIONS
from .aot_eager import aot_eager
from .eager import scalar_graph
from .per_size import PerSize, symbolic_inputs


def aot_eager_default_partitioner(gm: torch.fx.GraphModule, example_inputs: list):
    return aot_eager(gm, example_inputs, partition="save_all")


def aot_eager_decomp_partition(gm: torch.fx.GraphModule, example_inputs: list):
    runner = scalar_graph(gm, "aot_eager_decomp_partition")
    if runner is not None:
        return runner
    dynamic = symbolic_inputs(gm)
    if dynamic:                                  # symbolic sizes: traced once per size
        return PerSize(aot_eager_decomp_partition, gm, example_inputs, dynamic, "aot_eager_decomp_partition")
    try:
        return aot_compile(gm, example_inputs, partition="min_cut", decompositions=DECOMPOSITIONS)
    except (DynamicOutputShapeException, DataDependentOutputException) as e:
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        warnings.warn(f"xcompile aot_eager_decomp_partition: running this graph eagerly ({why})",
                      RuntimeWarning, stacklevel=2)
        log.log("fallbacks", "whole graph eager: %s", why)
        return gm.forward


_warned_cuda = False


def cudagraphs(gm: torch.fx.GraphModule, example_inputs: list):
    global _warned_cuda
    on_cuda = any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in example_inputs)
    if on_cuda and not _warned_cuda:
        _warned_cuda = True
        warnings.warn("xcompile backend 'cudagraphs': CUDA-graph replay is not implemented yet; the "
                      "AOT graphs run as backend 'aot_eager' runs them", RuntimeWarning, stacklevel=2)
    log.log("fallbacks", "cudagraphs: no CUDA-graph replay (%s inputs)", "CUDA" if on_cuda else "CPU")
    return aot_eager(gm, example_inputs)


__all__ = ["aot_eager_decomp_partition", "aot_eager_default_partitioner", "cudagraphs"]
