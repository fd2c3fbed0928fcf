"""Session-wide test setup, loaded before any test module is imported.

Without a GPU, Triton kernels run through Triton's interpreter (TRITON_INTERPRET=1). Triton
reads the variable when it is imported and when a function is decorated with ``@triton.jit``,
so it must be set before anything imports triton; ``import torch._dynamo`` (tests that run
torch.compile as the reference import it at module level) does. Set here, at the root, it
holds for the whole session whatever the collection order (tests/kernels/conftest.py set it
too late once such a test module was collected before it).
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


import pytest


@pytest.fixture
def fresh_compilers():
    """xcompile's caches and torch.compile's (the reference) reset around a test: a module opts
    in with ``pytestmark = pytest.mark.usefixtures("fresh_compilers")``."""
    import torch._dynamo

    import xcompile
    xcompile.reset()
    torch._dynamo.reset()
    yield
    xcompile.reset()
    torch._dynamo.reset()


def pytest_collection_finish(session):
    """torch's test library (torch.testing._internal.common_utils, imported by the OpInfo
    tests for op_db) calls torch.backends.disable_global_flags() when imported, for the whole
    process: tests that set torch.backends flags as users do (tests/e2e/test_global_state_reads)
    then raised. Collection has imported it by now; setting flags is allowed again."""
    # (the flag is a global of the functions that read it; torch.backends itself may be another object)
    torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
