"""How the wrapper calls C++ kernels: ``_C.KernelLauncher`` reads the tensors' data pointers in C,
and small buffers only kernels touch share one allocation per call (plan.py's arena)."""
from __future__ import annotations

import pytest
import torch

from xcompile import _C

from .util import compile_fn


def _chain(x, w):
    m = x.mean(0)                           # small intermediates, read only by kernels
    v = ((x - m) ** 2).mean(0)
    return ((x - m) / (v + 1).sqrt() * w,)


def test_kernels_take_tensors_and_small_buffers_share_an_arena():
    x, w = torch.randn(16, 8), torch.randn(8)
    compiled = compile_fn(_chain, [x, w])
    assert all(isinstance(k.fn, _C.KernelLauncher) for k in compiled.kernels)
    assert "_arena_p + " in compiled.wrapper_src, compiled.wrapper_src
    assert ".data_ptr()" not in compiled.wrapper_src.replace("_arena.data_ptr()", ""), compiled.wrapper_src
    for _ in range(3):
        x, w = torch.randn(16, 8), torch.randn(8)
        torch.testing.assert_close(compiled(x, w), _chain(x, w))


def test_a_launcher_refuses_what_is_not_a_tensor_or_an_address():
    x = torch.randn(4)
    k = compile_fn(lambda t: (t * 2,), [x]).kernels[0].fn
    assert isinstance(k, _C.KernelLauncher) and k.n_sizes == 0
    with pytest.raises(TypeError, match="expected"):
        k(x)                                  # too few arguments
    with pytest.raises(TypeError, match="not a tensor"):
        k(*(["no"] * k.n_ptrs))
    out = torch.empty(4)
    args = [x if i == 0 else out for i in range(k.n_ptrs)]
    assert k(*args) is None                 # (the kernel's own error code: 0)
    torch.testing.assert_close(out, x * 2)
    k.note = "attributes are kept"           # (the warm cache records how to load it again)
    assert k.note == "attributes are kept"
