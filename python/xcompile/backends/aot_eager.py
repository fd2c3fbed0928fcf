"""Backend "aot_eager": AOT forward/backward graphs, min-cut partition, both run as plain FX graphs.

The torch backend signature: ``aot_eager(gm, example_inputs) -> callable``. ``gm`` is the
frontend's torch-level graph (parameters and buffers as ``get_attr`` of the real objects);
the callable is called as ``fn(*inputs)`` and returns a tuple.
"""
from __future__ import annotations

import torch

from ..aot.api import aot_compile
from .eager import scalar_graph


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list, *, partition: str = "min_cut"):
    runner = scalar_graph(gm, "aot_eager")            # captured scalars: the graph runs as it is
    if runner is not None:
        return runner
    return aot_compile(gm, example_inputs, partition=partition)
