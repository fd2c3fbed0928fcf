"""Backend "eager": run the captured FX graph as it is.

``scalar_graph(gm, backend)`` is the path the other backends take for graphs with captured
scalars (``config.capture_scalar_outputs``: ``Tensor.item()`` and Python arithmetic on it as
graph ops): their AOT/ATen tracers and the kernel generator work on tensors only, so such a
graph runs as it is (autograd records it as eager does, so gradients are eager's). Logged
under ``XCOMPILE_LOGS=fallbacks``; no warning, since it is an expected outcome of the knob.
"""
from __future__ import annotations

import torch

from .. import log


def eager(gm: torch.fx.GraphModule, example_inputs: list):
    # The bound forward skips nn.Module.__call__'s hook machinery: the cheapest way to run it.
    return gm.forward


def scalar_graph(gm: torch.fx.GraphModule, backend: str):
    """The graph's runner if it holds captured scalars (see the module doc), else None."""
    from ..frontend.scalars import graph_scalar_nodes
    nodes = graph_scalar_nodes(gm)
    if not nodes:
        return None
    log.log("fallbacks", "whole graph eager (%s): %d captured scalar op(s) (%s)", backend, len(nodes),
            ", ".join(n.name for n in nodes[:8]))
    return gm.forward
