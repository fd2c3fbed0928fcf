"""Backend "aot_eager": AOT forward/backward graphs, min-cut partition, both run as plain FX graphs.

The torch backend signature: ``aot_eager(gm, example_inputs) -> callable``. ``gm`` is the
frontend's torch-level graph (parameters and buffers as ``get_attr`` of the real objects);
the callable is called as ``fn(*inputs)`` and returns a tuple.
"""
from __future__ import annotations

import warnings

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

from .. import log
from ..aot.api import aot_compile
from .dynamic_kernels import aot_dynamic
from .eager import scalar_graph, unstrided_graph
from .per_size import PerSize, number_outputs, symbolic_inputs

_NO_FUNCTIONAL = ("Found a custom (non-ATen) operator whose output has alias annotations",
                  "mutating a non-functional tensor with a functional tensor")


def unfunctionalizable(e: BaseException) -> bool:
    """Functionalization met an in-place ATen op without a functional twin it knows
    (``aten::polygamma_``: its arguments are in another order than ``polygamma``'s), or one
    whose functionalization fails (``aten::_fused_adamw_`` with an empty ``max_exp_avg_sqs``, a
    fused AdamW step without amsgrad: torch 2.11 to 2.14 assert)."""
    return any(m in str(e) for m in _NO_FUNCTIONAL)


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list, *, partition: str = "min_cut"):
    runner = scalar_graph(gm, "aot_eager") or unstrided_graph(gm, "aot_eager")  # captured scalars, sparse: as is
    if runner is not None:
        return runner
    try:
        dynamic = symbolic_inputs(gm)
        if dynamic:          # symbolic sizes: graphs traced once for all sizes, else once per size
            return aot_dynamic(gm, example_inputs, partition) or \
                PerSize(lambda g, inputs: aot_eager(g, inputs, partition=partition), gm, example_inputs,
                        dynamic, "aot_eager")
        runner = number_outputs(lambda g, inputs: aot_eager(g, inputs, partition=partition), gm,
                                example_inputs, "aot_eager")
        if runner is not None:             # sizes returned as numbers: compiled without them
            return runner
        return aot_compile(gm, example_inputs, partition=partition)
    except (DynamicOutputShapeException, DataDependentOutputException, RuntimeError) as e:
        # an op whose output size depends on data once decomposed (x[mask] = v on a tensor that
        # requires grad becomes nonzero + index_put), or an in-place op functionalization has no
        # functional twin for (x.polygamma_(n)): the graph runs as it is, as inductor does
        if not isinstance(e, (DynamicOutputShapeException, DataDependentOutputException)) and not unfunctionalizable(e):
            raise
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        warnings.warn(f"xcompile aot_eager: running this graph eagerly ({why})", RuntimeWarning, stacklevel=2)
        log.log("fallbacks", "whole graph eager: %s", why)
        return gm.forward
