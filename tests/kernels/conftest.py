"""Kernel tests need neither the frontend nor the C++ runtime.

- If ``import xcompile`` fails because the runtime extension is missing or broken, the
  package is entered as a plain namespace so ``xcompile.kernels`` (pure Python) still loads.
- Triton kernels run on the CPU through the interpreter when there is no GPU.
  TRITON_INTERPRET must stay set while the kernels run (triton reads it at launch too), so
  it is set for the whole session, before any kernel module is created.
"""
import os
import sys
import types

import torch

try:
    import xcompile  # noqa: F401
except ImportError:
    for name in [n for n in sys.modules if n == "xcompile" or n.startswith("xcompile.")]:
        del sys.modules[name]
    pkg = types.ModuleType("xcompile")
    pkg.__path__ = [os.path.join(os.path.dirname(__file__), "..", "..", "python", "xcompile")]
    sys.modules["xcompile"] = pkg

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
