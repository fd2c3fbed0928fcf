"""xcompile.utils.compile_times: torch._dynamo.utils.compile_times's forms, with our phases."""
import pytest
import torch

import xcompile
import xcompile.utils


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    yield
    xcompile.reset()


def f(x):
    return (x.sin() * 2).sum()


def test_phases_per_compile_and_per_function():
    # warm_start off: a warm hit from an earlier run would skip the kernel passes timed here
    with xcompile.config.patch(warm_start=False):
        xcompile.compile(f, backend="inductor")(torch.randn(16))
        m = torch.nn.Linear(4, 3)
        xcompile.compile(m, backend="inductor")(torch.randn(2, 4, requires_grad=True)).sum().backward()
    text = xcompile.utils.compile_times()
    for phase in ("frontend.trace", "guards.build", "backend", "aot.joint_trace", "aot.partition",
                  "kernels.lower", "kernels.codegen+build"):
        assert phase in text, phase
    assert "f " in text and "Linear.forward" in text          # the per-function table
    headers, values = xcompile.utils.compile_times(repr="csv")
    runs = dict(zip(headers, values))
    assert len(runs["frontend.trace"].split(", ")) == 2         # two frames traced
    agg = dict(zip(*xcompile.utils.compile_times(repr="csv", aggregate=True)))
    assert float(agg["frontend.trace"]) == pytest.approx(sum(float(t) for t in runs["frontend.trace"].split(", ")),
                                                         abs=2e-4)


def test_reset_clears_and_bad_repr_is_an_error():
    xcompile.compile(f, backend="eager")(torch.randn(4))
    assert "frontend.trace" in xcompile.utils.compile_times()
    xcompile.reset()
    assert "frontend.trace" not in xcompile.utils.compile_times()
    with pytest.raises(ValueError, match="repr must be"):
        xcompile.utils.compile_times(repr="json")
