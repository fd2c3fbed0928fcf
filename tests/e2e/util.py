"""Small helpers shared by the e2e tests."""
from __future__ import annotations

import torch


def same(actual, expected, path="out"):
    """Structure, dtype, shape, stride, device, requires_grad and values (meta tensors: no values)."""
    assert type(actual) is type(expected), (
        f"{path}: {type(actual).__name__} != eager {type(expected).__name__}")
    if isinstance(expected, torch.Tensor):
        for prop in ("dtype", "shape", "device", "requires_grad"):
            a, e = getattr(actual, prop), getattr(expected, prop)
            assert a == e, f"{path}: {prop} {a} != eager {e}"
        assert actual.stride() == expected.stride(), (
            f"{path}: stride {actual.stride()} != eager {expected.stride()}")
        if expected.device.type != "meta":
            torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != eager {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != eager {list(expected)}"
        for k in expected:
            same(actual[k], expected[k], f"{path}[{k!r}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != eager {expected!r}"


def seeded(factory, seed):
    """Call ``factory`` under ``seed`` without disturbing the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory()


class Calls:
    """Runs a compiled program and its eager original on identical fresh inputs and tracks compiles."""

    def __init__(self, compiled, eager, counter):
        self.compiled, self.eager, self.cnt = compiled, eager, counter
        self._seed = 0

    def check(self, factory, *, compiles: int, what: str = ""):
        """Call with fresh inputs from ``factory() -> (args, kwargs)``; then ``compiles`` graphs exist."""
        self._seed += 1
        args_e, kw_e = seeded(factory, self._seed)
        args_c, kw_c = seeded(factory, self._seed)
        expected = self.eager(*args_e, **kw_e)
        actual = self.compiled(*args_c, **kw_c)
        same(actual, expected, f"{what} out")
        same((args_c, kw_c), (args_e, kw_e), f"{what} inputs after call")
        assert self.cnt.frame_count == compiles, (
            f"{what}: {self.cnt.frame_count} graphs compiled so far, expected {compiles}")
        return actual
