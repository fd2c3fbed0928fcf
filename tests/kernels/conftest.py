"""Kernel tests run Triton kernels on the CPU through the interpreter when there is no GPU.

TRITON_INTERPRET must stay set while the kernels run (triton reads it at launch too), so it is
set for the whole session, before any kernel module is created."""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
