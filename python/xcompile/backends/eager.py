"""Backend "eager": run the captured FX graph as it is.

``scalar_graph(gm, backend)`` is the path the other backends take for graphs with captured
scalars (``config.capture_scalar_outputs``: ``Tensor.item()`` and Python arithmetic on it as
graph ops): their AOT/ATen tracers and the kernel generator work on tensors only, so such a
graph runs as it is (autograd records it as eager does, so gradients are eager's). Logged
under ``XCOMPILE_LOGS=fallbacks``; no warning, since it is an expected outcome of the knob.
"""
from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from .. import log


def eager(gm: torch.fx.GraphModule, example_inputs: list):
    # The bound forward skips nn.Module.__call__'s hook machinery: the cheapest way to run it.
    return gm.forward


_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def captured_scalar_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """Nodes that compute captured scalars (``item`` and Python arithmetic on its result): the
    frontend's example value of such a node is a SymInt/SymFloat/SymBool of an unbacked symbol
    (sizes of inputs under dynamic shapes are backed: see backends/per_size.py)."""
    return [n for n in gm.graph.nodes if (isinstance(n.meta.get("example_value"), _SYM_TYPES)
                                          and free_unbacked_symbols(n.meta["example_value"]))
            or (n.op == "call_method" and n.target in ("item", "tolist"))]


def scalar_graph(gm: torch.fx.GraphModule, backend: str):
    """The graph's runner if it holds captured scalars (see the module doc), else None."""
    nodes = captured_scalar_nodes(gm)
    if not nodes:
        return None
    log.log("fallbacks", "whole graph eager (%s): %d captured scalar op(s) (%s)", backend, len(nodes),
            ", ".join(n.name for n in nodes[:8]))
    return gm.forward
