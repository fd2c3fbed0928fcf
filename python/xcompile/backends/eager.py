"""Backend "eager": run the captured FX graph as it is."""
from __future__ import annotations

import torch


def eager(gm: torch.fx.GraphModule, example_inputs: list):
    # The bound forward skips nn.Module.__call__'s hook machinery: the cheapest way to run it.
    return gm.forward
