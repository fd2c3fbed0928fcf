"""optimize()'s guard hooks do what torch._dynamo's do (issue #10: arguments do what they say).

guard_fail_fn gets a GuardFail(reason, orig_code) on each recompile; guard_export_fn gets each new
cache entry's guards (the lines XCOMPILE_LOGS=guards prints); optimize_assert takes them from a
``hooks`` object and refuses export arguments with an error naming them.
"""
from __future__ import annotations

import pytest
import torch

import xcompile


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    yield
    xcompile.reset()


def test_guard_fail_fn_gets_the_failed_guard_and_the_code():
    fails, exports = [], []

    def f(x):
        return x * 2

    cf = xcompile.optimize("eager", guard_fail_fn=fails.append, guard_export_fn=exports.append)(f)
    cf(torch.ones(2))
    assert fails == [] and len(exports) == 1
    cf(torch.ones(2))                                 # a hit: no hook runs
    assert fails == [] and len(exports) == 1
    cf(torch.ones(3))
    assert len(fails) == 1 and len(exports) == 2
    assert fails[0].orig_code is f.__code__
    assert "size=[2]" in fails[0].reason and "L['x']" in fails[0].reason
    assert any("L['x']" in line for line in exports[1])


def test_guard_export_fn_sees_a_broken_frames_entries():
    exports = []

    def f(x):
        y = x + 1
        print("", end="")                             # a graph break
        return y * 2

    cf = xcompile.optimize("eager", guard_export_fn=exports.append)(f)
    torch.testing.assert_close(cf(torch.ones(2)), (torch.ones(2) + 1) * 2)
    assert len(exports) >= 2                          # the frame and its resume function
    assert all(isinstance(line, str) for e in exports for line in e)


def test_optimize_assert_hooks_and_refused_export():
    fails = []

    class Hooks:
        guard_export_fn = None
        guard_fail_fn = staticmethod(fails.append)

    g = xcompile.optimize_assert("eager", hooks=Hooks())(lambda x: x + 1)
    g(torch.ones(2))
    g(torch.ones(4))
    assert len(fails) == 1
    with pytest.raises(NotImplementedError, match="export"):
        xcompile.optimize_assert("eager", export=True)
    with pytest.raises(NotImplementedError, match="export_constraints"):
        xcompile.optimize_assert("eager", export_constraints=[])


def test_a_hook_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="guard_fail_fn must be callable"):
        xcompile.optimize("eager", guard_fail_fn=3)
