"""Adapters so the guard and exception scenarios run on xcompile and, for validation, on
torch.compile (only with XCOMPILE_TEST_REFERENCE=1).  Tests take the ``cc`` fixture."""
from __future__ import annotations

import os

import pytest
import torch


class XCompileAdapter:
    name = "xcompile"
    # A graph refers to the parameters it was traced with; replacing one is a guard failure.
    recompiles_on_parameter_swap = 1

    def __init__(self):
        import xcompile
        import xcompile.testing
        self.xc = xcompile
        self.Unsupported = xcompile.exc.Unsupported

    def compile(self, fn, backend, **kwargs):
        return self.xc.compile(fn, backend=backend, **kwargs)

    def counter(self):
        return self.xc.testing.CompileCounter()

    def reset(self):
        self.xc.reset()

    def cache_limit(self, n):
        return self.xc.config.patch(cache_size_limit=n)


class TorchAdapter:
    name = "torch.compile"
    # torch lifts parameters to graph inputs: a same-shaped replacement needs no recompile.
    recompiles_on_parameter_swap = 0

    def __init__(self):
        import torch._dynamo
        import torch._dynamo.exc
        import torch._dynamo.testing
        self.dynamo = torch._dynamo
        self.Unsupported = torch._dynamo.exc.Unsupported

    def compile(self, fn, backend, **kwargs):
        return torch.compile(fn, backend=backend, **kwargs)

    def counter(self):
        return self.dynamo.testing.CompileCounter()

    def reset(self):
        self.dynamo.reset()

    def cache_limit(self, n):
        return self.dynamo.config.patch(recompile_limit=n)


_REFERENCE = os.environ.get("XCOMPILE_TEST_REFERENCE") == "1"
COMPILERS = ["xcompile"] + (["torch"] if _REFERENCE else [])


@pytest.fixture(params=COMPILERS)
def cc(request):
    adapter = XCompileAdapter() if request.param == "xcompile" else TorchAdapter()
    adapter.reset()
    yield adapter
    adapter.reset()


@pytest.fixture
def xc():
    """xcompile itself, reset around the test (for xcompile-only API tests)."""
    import xcompile
    import xcompile.testing
    xcompile.reset()
    yield xcompile
    xcompile.reset()
