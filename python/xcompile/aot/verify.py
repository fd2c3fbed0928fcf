"""Checks run on the AOT graphs when ``config.verify`` (``XCOMPILE_CHECK=1``) is on.

Each check raises ``AssertionError`` naming the node and the rule it breaks.
"""
from __future__ import annotations

from typing import Any, Sequence, cast

import torch
import torch.fx

from .ops import is_compute_intensive, is_random
from .partition import Partition


def check_functional(gm: torch.fx.GraphModule, what: str) -> None:
    """Linted, and no op writes into its inputs."""
    gm.graph.lint()
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            assert not n.target._schema.is_mutable, f"{what}: {n.name} ({n.target}) mutates an input"


def check_partition(part: Partition, num_primals: int, num_tangents: int) -> None:
    """Graph signatures agree, and the backward recomputes nothing expensive or random."""
    check_functional(part.fw_gm, "forward graph")
    check_functional(part.bw_gm, "backward graph")
    fw_in = [n for n in part.fw_gm.graph.nodes if n.op == "placeholder"]
    bw_in = [n for n in part.bw_gm.graph.nodes if n.op == "placeholder"]
    fw_out = cast("Sequence[Any]", part.fw_gm.graph.output_node().args[0])   # the output tuple
    assert len(fw_in) == num_primals, "forward graph: one placeholder per primal"
    assert len(fw_out) == part.num_fw_outs + len(part.saved), "forward graph: fw outs then saved values"
    assert len(bw_in) == len(part.saved) + num_tangents, "backward graph: saved values then tangents"
    in_forward = {n.name for n in part.fw_gm.graph.nodes if n.op == "call_function"}
    for n in part.bw_gm.graph.nodes:
        if n.op == "call_function" and n.name in in_forward and (is_compute_intensive(n) or is_random(n)):
            raise AssertionError(f"backward graph recomputes {n.name} ({n.target}), which the "
                                 "partitioner must never recompute")
