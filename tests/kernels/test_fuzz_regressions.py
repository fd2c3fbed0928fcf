"""Regressions found by the kernel fuzzer (test_fuzz.py), minimised; compared with eager."""
from __future__ import annotations

import pytest
import torch

from .util import BACKENDS, assert_close, check, compile_fn, make_tensor


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("e", [True, False])
def test_pow_bool_bool_stays_bool(backend, e):
    # the meta kernel says int64; eager's result_type(bool tensor, bool scalar) is bool
    x = torch.rand(3, 4).t() > 0.5
    check(lambda a: (torch.pow(a, e), torch.pow(a, e) + 1), [x], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", [torch.float64, torch.float32, torch.float16, torch.int32, torch.bool])
def test_cast_to_bfloat16_rounds_to_nearest(backend, src):
    # TRITON_INTERPRET truncated float32 -> bfloat16 and read float64 -> bfloat16 as garbage
    x = (torch.randn(8, 5, dtype=torch.float64) * 3).to(src)
    check(lambda a: (a.to(torch.bfloat16), torch.sigmoid(a.to(torch.bfloat16))), [x], backend, tol=dict(atol=0, rtol=0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dst", [torch.float64, torch.float32, torch.float16, torch.int64, torch.bool])
def test_cast_from_bfloat16(backend, dst):
    x = (torch.randn(8, 5, dtype=torch.float64) * 3).to(torch.bfloat16)
    check(lambda a: (a.to(dst), (a * 2).to(dst)), [x], backend, tol=dict(atol=0, rtol=0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
def test_copysign(backend, dtype):
    # Triton had no copysign; the sign of -0.0 counts
    x = (torch.randn(4, 5, dtype=torch.float64) * 3).to(dtype)
    y = torch.tensor([1.0, -1.0, 0.0, -0.0, 2.5], dtype=torch.float64).to(dtype)
    check(lambda a, b: (torch.copysign(a, b), torch.copysign(b, a) * 2), [x, y], backend, fresh=False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pow_tensor_exponent(backend, dtype):
    # Triton had no pow with a tensor exponent: negative bases, integer/odd/zero exponents, 0 ** y
    x = torch.tensor([-2.0, -1.5, 0.0, 0.0, 1.0, 3.0, -0.5, 2.0], dtype=dtype)
    y = torch.tensor([3.0, 2.0, 2.0, -1.0, float("nan"), 0.5, 0.0, -2.5], dtype=dtype)
    check(lambda a, b: (torch.pow(a, b), 1.5 ** a, torch.pow(-2.0, b)), [x, y], backend, fresh=False)


def _cl(*shape):
    return torch.randn(*shape).contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["fused_cond", "cond_first", "scalar_self", "scalar_other", "masked_fill"])
def test_where_layout_as_eager(backend, case):
    # where took the meta kernel's strides: where(logical_and(0-d, channels_last), x, x) came
    # out contiguous where eager's TensorIterator (condition first) gives channels-last
    x, s = _cl(3, 3, 2, 8), torch.randn(())
    t = torch.randn(3, 3, 8, 2).transpose(-1, -2)
    fn = {
        "fused_cond": lambda x, s, t: torch.where(torch.logical_and(s, x), x, x),
        "cond_first": lambda x, s, t: (torch.where(t > 0, x, x), torch.where(x > 0, t, t + 1)),
        "scalar_self": lambda x, s, t: torch.where(t > 0, 1.5, x),
        "scalar_other": lambda x, s, t: torch.where(x > 0, t, -1.0),
        "masked_fill": lambda x, s, t: (x.masked_fill(t > 0, 2.0), t.masked_fill(x > 0, 2.0)),
    }[case]
    check(fn, [x, s, t], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pow_scalar_base_is_contiguous(backend):
    # pow(Scalar, Tensor) is contiguous in eager whatever the exponent's layout (its meta function
    # sets no strides); we followed the exponent like other elementwise ops
    t = torch.randn(2, 5, 17).transpose(-1, -2)[..., :2]
    e = torch.randn(1, 8, 2, 2).expand(8, 8, 2, 2).transpose(-1, -2)
    check(lambda t, e: (3 ** torch.isnan(t), 1.5 ** t, -(1.5 ** e), 2.0 ** t + t), [t, e], backend, fresh=False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool])
@pytest.mark.parametrize("shape", [(), (3, 4)])
@pytest.mark.parametrize("base", [2, 1.5, True])
def test_pow_scalar_base_dtype(backend, dtype, shape, base):
    # the 0-d base must promote like the Python scalar (a 0-d float64 base made 0-d results float64)
    if dtype == torch.bool and base is True:
        pytest.skip("eager has no bool ** bool")
    x = make_tensor(shape, dtype, 0, 3) if dtype != torch.bool else torch.rand(shape) > 0.5
    check(lambda a: base ** a, [x], backend, fresh=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fused_read_of_stored_value_has_buffer_dtype(backend):
    # a reduction-fused kernel read back masked_fill's int64 -2 where its bool buffer holds true
    def fn(a, i):
        t = torch.all(a).masked_fill(i.sum() > 0, -2)
        h = (a * 3).to(torch.float16)
        return torch.where(i > 0, t, a), h.sum() + h.to(torch.float32)
    a, i = torch.randn(1, 3), torch.arange(3).view(1, 3)
    check(fn, [a, i], backend, fresh=False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.float16])
@pytest.mark.parametrize("e", [0.5, 2.0, 1.0, 3.0, -1.0, 0.0, 2])
def test_pow_float_exponent_promotes(backend, dtype, e):
    # fuzz seeds 20196, 20203: pow(bool/int tensor, 0.5) computed sqrt in the tensor's dtype (the
    # float exponent did not take part in type promotion) and the C++ did not compile;
    # int32 ** 2.0 multiplied in int32 (overflow) where eager computes in float
    x = make_tensor((5, 3), dtype, 0, 9) if dtype != torch.bool else torch.rand(5, 3) > 0.5
    if dtype == torch.int32:
        x[0, 0] = 70000              # 70000 ** 2 overflows int32
    if dtype == torch.bool and isinstance(e, int):
        pytest.skip("bool ** int is covered by test_pow_bool_bool_stays_bool")
    check(lambda a: (torch.pow(a, e), torch.pow(a.any(1), e)), [x], backend, fresh=False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_sign_of_nan_is_zero(backend, dtype):
    # fuzz seed 60273: sign(log(log_softmax(x))) -- eager's sign(NaN) is 0, we returned NaN
    x = torch.tensor([float("nan"), -float("nan"), 1.5, -2.0, 0.0, -0.0, float("inf"), -float("inf")],
                     dtype=dtype)
    check(lambda a: (torch.sign(a), torch.sgn(a * 2), torch.sign(torch.log(a))), [x], backend,
          fresh=False, tol=dict(atol=0, rtol=0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_result_checks_no_index(backend):
    # fuzz seed 60074: indexing an empty tensor with an out-of-range index gathers nothing, and
    # eager does not check; our kernel checked the hoisted index before its empty loop
    def fn(a):
        t = a[torch.tensor([4, -3])]
        return torch.where(t, t, t).to(torch.float32) + 0.5, a.sum(1)
    check(fn, [torch.rand(3, 0, 5, 5) > 0.5], backend, fresh=False)


_INT_DIVISIONS = {
    "remainder": lambda a, b: torch.remainder(a, b), "fmod": lambda a, b: torch.fmod(a, b),
    "floor_divide": lambda a, b: a // b, "trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "floor": lambda a, b: torch.div(a, b, rounding_mode="floor"), "scalar": lambda a, b: (a * b) % 0,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", list(_INT_DIVISIONS))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_division_by_zero_raises(backend, op, dtype):
    # fuzz seed 60093: remainder(t, t) with a 0 in t -- eager raises ZeroDivisionError, we returned numbers
    fn = _INT_DIVISIONS[op]
    a, b = torch.tensor([[7, 3], [5, 9]], dtype=dtype), torch.tensor([[2, 1], [0, 4]], dtype=dtype)
    compiled = compile_fn(fn, [a, b], backend)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, b)
    if op != "scalar":
        b = torch.tensor([[2, 1], [3, 4]], dtype=dtype)
        assert_close(compiled(a, b), fn(a, b))
