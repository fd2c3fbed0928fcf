"""The C++ prelude's inline float exp / tanh / sigmoid and GELU's erf (kernels/cpp_prelude.py) against
float64 on a dense sweep of float32 bit patterns (every sign and exponent, subnormals too)
and on the edges: overflow to inf, underflow to 0 through the subnormals, NaN, +-inf, +-0."""
import math

import pytest
import torch

from .util import compile_fn

EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1e-40, -1e-40, 1.2e-38, 1e-30,
         -1e-30, 0.5, -0.5, 0.625, -0.625, 0.6249999, 1.0, 3.91, 3.92, -3.92, 3.93, 4.0, -4.0, 4.5,
         9.0, -9.0, 20.0, -20.0, 44.0, 88.0, 88.37, 88.72283, 88.72284, 88.7229, 89.0, -87.0,
         -87.33, -87.34, -100.0, -103.97, -103.972, -103.98, -104.0, -200.0, 1e30, -1e30,
         3.4e38, -3.4e38]


def _sweep(step=4099) -> torch.Tensor:
    """Every ``step``-th float32 bit pattern (odd step: all low-bit patterns occur) and the edges."""
    bits = torch.arange(0, 2 ** 32, step, dtype=torch.int64)
    bits = torch.where(bits >= 2 ** 31, bits - 2 ** 32, bits).to(torch.int32)
    return torch.cat([bits.view(torch.float32), torch.tensor(EDGES, dtype=torch.float32)])


def _ulps(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """|got - ref| in units of the float32 spacing at ``ref`` (float64); 0 where both are the
    same inf or both NaN, inf where only one is."""
    r32 = ref.to(torch.float32)
    _, e = torch.frexp(ref)
    ulp = torch.ldexp(torch.ones_like(ref), (e - 24).clamp(min=-149))
    err = (got.double() - ref).abs() / ulp
    special = ~torch.isfinite(r32) | ~torch.isfinite(got)
    same = (got == r32) | (torch.isnan(got) & torch.isnan(r32))
    err = torch.where(special, torch.where(same, 0.0, math.inf), err)
    return err


CASES = {   # name: (fn, float64 reference, max ulps)
    "exp": (torch.exp, torch.exp, 1.0),
    "sigmoid": (torch.sigmoid, torch.sigmoid, 2.0),
    "tanh": (torch.tanh, torch.tanh, 2.0),
    "erf": (torch.erf, torch.erf, 4.0),   # libmvec erff (returns 1.0 from 3.65 on)
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inline_math_against_float64(name):
    """Within ``max_ulp`` of float64, or no further off than eager's float32 (eager's sigmoid
    gives 0 where the result is subnormal, as ours does)."""
    fn, ref_fn, max_ulp = CASES[name]
    x = _sweep()
    got = compile_fn(lambda t: fn(t), [x])(x)[0]
    ref = ref_fn(x.double())
    err = _ulps(got, ref)
    bound = torch.maximum(_ulps(fn(x), ref), torch.full_like(ref, max_ulp))
    bad = err > bound
    if bad.any():
        i = int(bad.nonzero()[0])
        pytest.fail(f"{name}({x[i].item()!r}) = {got[i].item()!r}, float64 {ref[i].item()!r}: "
                    f"{err[i].item()} ulp (eager {fn(x[i:i + 1]).item()!r}); {int(bad.sum())} such")
    # the edges exactly as eager (inf, nan, 0, +-1 and the signs of zeros)
    e = torch.tensor(EDGES, dtype=torch.float32)
    ge, we = got[-len(EDGES):], fn(e)
    special = ~torch.isfinite(we) | (we == 0) | (we.abs() == 1)
    torch.testing.assert_close(ge[special], we[special], equal_nan=True, atol=0, rtol=0)
    assert torch.equal(torch.signbit(ge[we == 0]), torch.signbit(we[we == 0]))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_as_accurate_as_eager(approximate):
    """GELU loses relative accuracy for x << 0 (1 + erf cancels) in eager too: the absolute
    error against float64 stays within eager's, and the values close to eager's."""
    x = torch.cat([torch.randn(100000) * 3, _sweep(65537).nan_to_num(0.0).clamp(-50, 50)])
    f = lambda t: torch.nn.functional.gelu(t, approximate=approximate)  # noqa: E731
    got, eager, want = compile_fn(f, [x])(x)[0], f(x), f(x.double())
    assert (got.double() - want).abs().max() <= 1.1 * (eager.double() - want).abs().max()
    torch.testing.assert_close(got, eager, atol=2e-6, rtol=1e-5)
    e = torch.tensor([v for v in EDGES if not abs(v) > 1e30], dtype=torch.float32)  # eager: gelu(inf) = nan
    torch.testing.assert_close(compile_fn(f, [e])(e)[0], f(e), equal_nan=True, atol=2e-6, rtol=1e-5)
