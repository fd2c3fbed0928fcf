"""An int attribute of an nn.Module read and rebound in forward (``self.steps = self.steps + 1``)
is static, as in torch.compile: each call recompiles until the cache limit, results stay eager's.
The cache-limit warning names the failing fact (``L['self'].steps == 2``), the user line that
rebinds it and what to do instead."""
import inspect
import warnings

import pytest
import torch
from torch import nn

import xcompile
from xcompile import config
from xcompile.exc import CacheLimitExceeded
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.steps = 0

    def forward(self, x):
        self.steps = self.steps + 1
        return self.lin(x) * self.steps


class AugCounter(Counter):
    def forward(self, x):
        y = self.lin(x)
        self.steps += 1
        return y - self.steps


def _run(cls, calls=6, limit=3):
    torch.manual_seed(0)
    me, mc = cls(), cls()
    mc.load_state_dict(me.state_dict())
    cnt = CompileCounter()
    cm = xcompile.compile(mc, backend=cnt)
    with config.patch(cache_size_limit=limit), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(calls):
            x = torch.randn(2, 3)
            torch.testing.assert_close(cm(x), me(x))
    assert mc.steps == me.steps == calls
    return cnt, [str(x.message) for x in w if "cache_size_limit" in str(x.message)]


def test_int_attribute_recompiles_up_to_the_limit_then_one_useful_warning():
    cnt, msgs = _run(Counter)
    assert cnt.frame_count == 3                                # static, like torch.compile
    assert len(msgs) == 1
    msg = msgs[0]
    assert "L['self'].steps == 2 (it is 3 now)" in msg        # the newest entry baked steps == 2
    line = inspect.getsourcelines(Counter.forward)[1] + 1
    assert f"line {line}, in forward: self.steps = self.steps + 1" in msg
    assert __file__ in msg
    assert ("xcompile treats integer attributes of an nn.Module as static" in msg
            and "self.steps += 1 on a buffer" in msg and "outside the module" in msg)


def test_augmented_assignment_is_named_too():
    cnt, msgs = _run(AugCounter, calls=5, limit=2)
    assert cnt.frame_count == 2
    assert "L['self'].steps == 1 (it is 2 now)" in msgs[0]
    assert "self.steps += 1" in msgs[0]


def test_fail_on_cache_limit_hit_raises_with_the_same_detail():
    m = Counter()
    cm = xcompile.compile(m, backend="eager")
    with config.patch(cache_size_limit=2, fail_on_cache_limit_hit=True):
        cm(torch.randn(1, 3))
        cm(torch.randn(1, 3))
        with pytest.raises(CacheLimitExceeded, match=r"L\['self'\]\.steps == 1 \(it is 2 now\)"):
            cm(torch.randn(1, 3))


def test_other_recompile_reasons_get_no_module_attribute_hint():
    def f(x, tag):
        return x * len(tag)
    cf = xcompile.compile(f, backend="eager")
    with config.patch(cache_size_limit=1), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cf(torch.randn(2), "a")
        cf(torch.randn(2), "bb")
    msgs = [str(x.message) for x in w if "cache_size_limit" in str(x.message)]
    assert len(msgs) == 1 and "nn.Module as static" not in msgs[0] and "last reason" in msgs[0]


def test_a_counter_in_a_buffer_compiles_once():
    class BufferCounter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

        def forward(self, x):
            self.steps += 1
            return x * self.steps
    me, mc = BufferCounter(), BufferCounter()
    cnt = CompileCounter()
    cm = xcompile.compile(mc, backend=cnt)
    for _ in range(5):
        x = torch.randn(3)
        torch.testing.assert_close(cm(x), me(x))
    assert int(mc.steps) == 5 and cnt.frame_count == 1
