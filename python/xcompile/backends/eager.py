"""Backend "eager": run the captured FX graph as it is.

``scalar_graph(gm, backend)`` is the path the other backends take for graphs with unbacked
symbols: captured scalars (``config.capture_scalar_outputs``: ``Tensor.item()`` and Python
arithmetic on it as graph ops) and tensors sized by them or by data-dependent ops
(``config.capture_dynamic_output_shape_ops``: ``nonzero``, ``x[mask]``, ``unique``...): their
AOT/ATen tracers and the kernel generator work on sizes known from the inputs only, so such a
graph runs as it is (autograd records it as eager does, so gradients are eager's). Logged
under ``XCOMPILE_LOGS=fallbacks``; no warning, since it is an expected outcome of the knob.

``unstrided_graph(gm, backend)``: the same path for graphs holding sparse (or otherwise unstrided)
tensors, which AOT's functional trace and the kernel generator do not take (they read strides:
a CSR tensor raises on ``stride()``); torch.compile's AOT backends do not take them either.
"""
from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils._pytree import tree_flatten

from .. import log


def eager(gm: torch.fx.GraphModule, example_inputs: list):
    # The bound forward skips nn.Module.__call__'s hook machinery: the cheapest way to run it.
    return gm.forward


_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _unbacked(v) -> bool:
    if isinstance(v, (*_SYM_TYPES, torch.Tensor)):
        return bool(free_unbacked_symbols(v))
    if isinstance(v, (tuple, list)):
        return any(_unbacked(i) for i in v)
    return False


def captured_scalar_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """Nodes that compute captured scalars (``item`` and Python arithmetic on its result) or
    tensors sized by unbacked symbols (``nonzero``, ``x[mask]``, ``torch.zeros(t.item())``): the
    frontend's example value of such a node holds an unbacked symbol (sizes of inputs under
    dynamic shapes are backed: see backends/per_size.py)."""
    return [n for n in gm.graph.nodes if _unbacked(n.meta.get("example_value"))
            or (n.op == "call_method" and n.target in ("item", "tolist"))]


def scalar_graph(gm: torch.fx.GraphModule, backend: str):
    """The graph's runner if it holds captured scalars (see the module doc), else None."""
    nodes = captured_scalar_nodes(gm)
    if not nodes:
        return None
    log.log("fallbacks", "whole graph eager (%s): %d captured scalar / data-dependent op(s) (%s)", backend,
            len(nodes),
            ", ".join(n.name for n in nodes[:8]))
    return gm.forward


def _unstrided(v) -> bool:
    return any(isinstance(t, torch.Tensor) and t.layout != torch.strided for t in tree_flatten(v)[0])


def unstrided_graph(gm: torch.fx.GraphModule, backend: str):
    """The graph's runner if a value in it is a sparse (unstrided) tensor (see the module doc), else None."""
    nodes = [n for n in gm.graph.nodes if _unstrided(n.meta.get("example_value"))]
    if not nodes:
        return None
    log.log("fallbacks", "whole graph eager (%s): %d sparse (unstrided) tensor(s) (%s)", backend, len(nodes),
            ", ".join(n.name for n in nodes[:8]))
    return gm.forward
