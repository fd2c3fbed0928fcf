"""Process-wide settings that change what a trace computes are guarded (issue #19 item 5):
the default dtype and torch.use_deterministic_algorithms recompile when they change."""
from __future__ import annotations

import pytest
import torch

import xcompile
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    dtype, det = torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled()
    yield
    torch.set_default_dtype(dtype)
    torch.use_deterministic_algorithms(det)
    xcompile.reset()


def test_default_dtype_change_recompiles():
    cnt = CompileCounter()
    f = xcompile.compile(lambda t: t + torch.ones(3), backend=cnt)
    x = torch.ones(3, dtype=torch.float32)
    assert f(x).dtype == torch.float32
    torch.set_default_dtype(torch.float64)
    out = f(x)
    assert out.dtype == (x + torch.ones(3)).dtype == torch.float64
    assert cnt.frame_count == 2
    torch.set_default_dtype(torch.float32)
    assert f(x).dtype == torch.float32
    assert cnt.frame_count == 2                   # the first entry is used again


def test_deterministic_algorithms_change_recompiles():
    cnt = CompileCounter()
    f = xcompile.compile(lambda t: t * 2, backend=cnt)
    x = torch.randn(3)
    f(x)
    torch.use_deterministic_algorithms(True)
    torch.testing.assert_close(f(x), x * 2)
    assert cnt.frame_count == 2


def test_global_state_guard_is_printed():
    f = xcompile.compile(lambda t: t + 1, backend="eager")
    f(torch.randn(2))
    from xcompile import _C
    code = f.__wrapped__.__code__ if hasattr(f, "__wrapped__") else None
    if code is None:
        pytest.skip("no handle on the compiled code")
    dump = _C.cache_entries(code)[0].guard.dump()
    assert "default_dtype" in dump and "deterministic" in dump
