"""torch.func transforms inside and around compiled code: results equal to eager, no leaked state."""
import pytest
import torch

import xcompile


def _sin(x):
    return torch.sin(x)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_vmap_inside_compiled_function(backend):
    def g(x):
        return torch.vmap(_sin)(x) * 2 + 1

    cg = xcompile.compile(g, backend=backend)
    for _ in range(2):
        x = torch.randn(3, 5)
        out = cg(x)
        assert type(out) is torch.Tensor           # not a fake or batched tensor
        torch.testing.assert_close(out, g(x))
        assert torch._C._functorch.maybe_current_level() is None   # no functorch layer leaked


def test_compiled_function_called_under_vmap_runs_eagerly():
    cf = xcompile.compile(_sin, backend="eager")
    x = torch.randn(4, 3)
    torch.testing.assert_close(cf(x), torch.sin(x))          # compiled outside vmap
    torch.testing.assert_close(torch.vmap(cf)(x), torch.sin(x))  # batched tensors: eager
    torch.testing.assert_close(cf(x), torch.sin(x))


def test_vmap_with_fullgraph_names_the_transform():
    with xcompile.config.patch(capture_func_transforms=False):      # (on: traced, one graph)
        cg = xcompile.compile(lambda x: torch.vmap(_sin)(x), fullgraph=True, backend="eager")
        with pytest.raises(xcompile.exc.Unsupported, match="function transform"):
            cg(torch.randn(2, 2))


def test_vmap_with_fullgraph_is_one_graph():
    cg = xcompile.compile(lambda x: torch.vmap(_sin)(x), fullgraph=True, backend="eager")
    x = torch.randn(2, 2)
    torch.testing.assert_close(cg(x), torch.sin(x))
