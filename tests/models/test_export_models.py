"""xcompile.export on real models (transformers, diffusers): one graph each, called with the
model's own arguments, equal to eager on fresh inputs, the result rebuilt as the model's output
class (a ModelOutput: transformers registers it with pytree)."""
import pytest
import torch

import xcompile

from .builders import build


def _leaves(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if hasattr(x, "to_tuple"):
        x = x.to_tuple()
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        return [t for i in x for t in _leaves(i)]
    return []


@pytest.mark.models
@pytest.mark.parametrize("name", ["bert", "gpt2", "t5", "llama", "unet2d_cond"])
def test_model_exports_to_one_graph(name):
    b = build(name)
    with torch.no_grad():
        gm, guards = xcompile.export(b.model, *b.args, **b.kwargs)
        assert any(g.kind == "TENSOR_MATCH" for g in guards)
        for _ in range(2):
            args, kwargs = b.fresh()
            got, want = gm(*args, **kwargs), b.model(*args, **kwargs)
            assert type(got) is type(want)
            g, w = _leaves(got), _leaves(want)
            assert len(g) == len(w) > 0
            for a, e in zip(g, w):
                torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
