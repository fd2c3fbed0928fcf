"""The other AOT backends torch users name, with torch's meanings:

    aot_eager_default_partitioner   aot_eager with the default partitioner: the backward reads what
                                    the forward computed, nothing is recomputed ("save_all")
    aot_eager_decomp_partition      the forward/backward graphs decomposed with the kernel
                                    generator's decomposition table (inductor's in torch) and
                                    split by the min-cut partitioner, run as plain FX graphs (what
                                    inductor would compile, without the kernels: for bisecting)
    cudagraphs                      torch's CUDA-graph backend: aot_eager's forward and backward
                                    graphs, each recorded and replayed (kernels/cudagraphs.py); on
                                    the CPU they run without replay, as torch's backend skips CUDA
                                    graphs for CPU tensors
"""
from __future__ import annotations

import warnings

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

from .. import log
from ..aot.api import aot_compile, run_as_is
from ..kernels import cudagraphs as cudagraph_replay
from ..kernels.decompose import DECOMPOSITIONS
from .aot_eager import aot_eager, unfunctionalizable
from .eager import scalar_graph, unstrided_graph
from .per_size import PerSize, symbolic_inputs


def aot_eager_default_partitioner(gm: torch.fx.GraphModule, example_inputs: list):
    return aot_eager(gm, example_inputs, partition="save_all")


def aot_eager_decomp_partition(gm: torch.fx.GraphModule, example_inputs: list):
    runner = scalar_graph(gm, "aot_eager_decomp_partition") or unstrided_graph(gm, "aot_eager_decomp_partition")
    if runner is not None:
        return runner
    dynamic = symbolic_inputs(gm)
    if dynamic:                                  # symbolic sizes: traced once per size
        return PerSize(aot_eager_decomp_partition, gm, example_inputs, dynamic, "aot_eager_decomp_partition")
    try:
        return aot_compile(gm, example_inputs, partition="min_cut", decompositions=DECOMPOSITIONS)
    except (DynamicOutputShapeException, DataDependentOutputException, RuntimeError) as e:
        if not isinstance(e, (DynamicOutputShapeException, DataDependentOutputException)) and not unfunctionalizable(e):
            raise
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        warnings.warn(f"xcompile aot_eager_decomp_partition: running this graph eagerly ({why})",
                      RuntimeWarning, stacklevel=2)
        log.log("fallbacks", "whole graph eager: %s", why)
        return gm.forward


def cudagraphs(gm: torch.fx.GraphModule, example_inputs: list):
    """aot_eager's forward/backward graphs, each replayed as a CUDA graph (kernels/cudagraphs.py;
    CPU graphs run without replay, as torch's backend skips them, unless config.cudagraph_stand_in)."""
    if scalar_graph(gm, "cudagraphs") is not None or unstrided_graph(gm, "cudagraphs") is not None \
            or symbolic_inputs(gm):
        log.log("cudagraphs", "graph runs without replay: %s", "captured scalars" if not symbolic_inputs(gm)
                else "dynamic shapes (the sizes are symbolic)")
        return aot_eager(gm, example_inputs)
    fw, bw, inference = cudagraph_replay.replaying(gm, run_as_is, run_as_is, run_as_is)
    try:
        return aot_compile(gm, example_inputs, fw_compiler=fw, bw_compiler=bw, inference_compiler=inference,
                           partition="min_cut")
    except (DynamicOutputShapeException, DataDependentOutputException):
        return aot_eager(gm, example_inputs)


__all__ = ["aot_eager_decomp_partition", "aot_eager_default_partitioner", "cudagraphs"]
