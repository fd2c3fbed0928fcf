"""The cache limit of a method counts per instance (``self``): many modules of one class each
compile, while one instance that keeps recompiling still stops at config.cache_size_limit."""
import warnings

import pytest
import torch
import torch.nn as nn

import xcompile
from xcompile import _C
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def test_twelve_instances_of_one_class_each_compile():
    cnt = CompileCounter()
    mods = [nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(12)]
    cms = [xcompile.compile(m, backend=cnt) for m in mods]
    x = torch.randn(2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # no cache-limit warning
        for _ in range(2):
            for m, cm in zip(mods, cms):
                torch.testing.assert_close(cm(x), m(x))
    assert cnt.frame_count == 12


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        self.steps = self.steps + 1
        return self.lin(x) * self.steps


def test_one_instance_still_stops_at_the_limit_and_others_still_compile():
    cnt = CompileCounter()
    a, b = Counter(), Counter()
    ca, cb = xcompile.compile(a, backend=cnt), xcompile.compile(b, backend=cnt)
    x = torch.randn(3, 2)
    with xcompile.config.patch(cache_size_limit=3), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for i in range(5):
            torch.testing.assert_close(ca(x), a.lin(x) * (i + 1))
        assert cnt.frame_count == 3 and a.steps == 5
        assert sum("cache_size_limit" in str(m.message) for m in w) == 1
        torch.testing.assert_close(cb(x), b.lin(x) * 1)        # b is not frozen by a's limit
        assert cnt.frame_count == 4


def test_accumulated_limit_freezes_the_code():
    cnt = CompileCounter()
    mods = [nn.Sequential(nn.Linear(2, 2)) for _ in range(4)]
    x = torch.randn(1, 2)
    with xcompile.config.patch(accumulated_cache_size_limit=2), warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        outs = [xcompile.compile(m, backend=cnt)(x) for m in mods]
    for m, o in zip(mods, outs):
        torch.testing.assert_close(o, m(x))
    assert cnt.frame_count == 2
    assert len(_C.cache_entries(nn.Sequential.forward.__code__)) == 2
