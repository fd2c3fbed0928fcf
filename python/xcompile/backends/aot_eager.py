"""Backend "aot_eager": AOT forward/backward graphs, min-cut partition, both run as plain FX graphs.

The torch backend signature: ``aot_eager(gm, example_inputs) -> callable``. ``gm`` is the
frontend's torch-level graph (parameters and buffers as ``get_attr`` of the real objects);
the callable is called as ``fn(*inputs)`` and returns a tuple.
"""
from __future__ import annotations

import torch

from ..aot.api import aot_compile


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list, *, partition: str = "min_cut"):
    return aot_compile(gm, example_inputs, partition=partition)
