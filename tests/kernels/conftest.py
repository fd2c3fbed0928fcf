"""Kernel tests need neither the frontend nor the C++ runtime.

- If ``import xcompile`` fails because the runtime extension is missing or broken, the
  package is entered as a plain namespace so ``xcompile.kernels`` (pure Python) still loads.
- Triton kernels run on the CPU through the interpreter when there is no GPU.
  TRITON_INTERPRET must stay set while the kernels run (triton reads it at launch too), so
  it is set for the whole session, before any kernel module is created.
- The CUDA-graph tests' fixtures: ``cudagraph_stand_in`` (CPU graphs recorded by the stand-in
  device) and ``reasons`` (what was logged under XCOMPILE_LOGS=cudagraphs).
"""
import logging
import os
import sys
import types

import pytest
import torch

try:
    import xcompile
except ImportError:
    for name in [n for n in sys.modules if n == "xcompile" or n.startswith("xcompile.")]:
        del sys.modules[name]
    pkg = types.ModuleType("xcompile")
    pkg.__path__ = [os.path.join(os.path.dirname(__file__), "..", "..", "python", "xcompile")]
    sys.modules["xcompile"] = pkg

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def cudagraph_stand_in():
    """CUDA graphs recorded by the CPU stand-in device (test_cudagraphs*.py use it for every test)."""
    xcompile.reset()
    with xcompile.config.patch(cudagraph_stand_in=True, warm_start=False):
        yield
    xcompile.reset()


@pytest.fixture
def reasons():
    """The messages logged under XCOMPILE_LOGS=cudagraphs during the test."""
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    handler = Keep()
    logger = logging.getLogger("xcompile.cudagraphs")
    logger.addHandler(handler)
    xcompile.set_logs(cudagraphs=True)
    yield lambda: list(seen)
    xcompile.set_logs(cudagraphs=False)
    logger.removeHandler(handler)
