"""Arithmetic, broadcasting, comparisons, dtype casts and type promotion."""
import operator

import torch

from .harness import CaseTable, nc, rb, rg, ri, rn, rp

T = CaseTable("arith")


@T.case(rn(3, 4), rn(3, 4))
def add(a, b):
    return a + b


@T.case(rn(3, 4), rn(3, 4))
def sub_mul_div(a, b):
    return (a - b) * a / (b.abs() + 1)


@T.case(rn(5), rn(5))
def chain_of_ops(a, b):
    x = a * 2 + b
    x = x - 3.5
    x = x * x
    return x / 4


@T.case(rn(3, 4))
def scalar_on_left(a):
    return 1 - a, 2 * a, 3 / (a.abs() + 1), 2 ** a


@T.case(rp(4, 4), rp(4, 4))
def pow_and_sqrt(a, b):
    return a ** b, a ** 2, torch.sqrt(a), a ** 0.5


@T.case(rn(6), rp(6))
def floordiv_mod(a, b):
    return a // b, a % b, torch.fmod(a, b), torch.remainder(a, b)


@T.case(ri(6, low=-20, high=20), ri(6, low=1, high=5))
def int_floordiv_mod(a, b):
    return a // b, a % b, a * b, a - b


@T.case(ri(6, high=100), ri(6, high=100))
def int_true_div_promotes(a, b):
    return a / (b + 1)


@T.case(rn(3, 4))
def negation_and_abs(a):
    return -a, abs(a), +a, torch.neg(a)


@T.case(rn(4, 1), rn(1, 5))
def broadcast_outer(a, b):
    return a + b, a * b


@T.case(rn(2, 3, 4), rn(4))
def broadcast_trailing(a, b):
    return a - b


@T.case(rn(2, 1, 4), rn(3, 1))
def broadcast_both_sides(a, b):
    return a * b + 1


@T.case(rn(3, 4), rn(4, 3))
def broadcast_with_transpose(a, b):
    return a + b.t()


@T.case(nc(4, 5), rn(4, 5))
def noncontiguous_input(a, b):
    return a * b + a


@T.case(nc(4, 5))
def noncontiguous_unary(a):
    return a.sin()


@T.case(rn(3, 4), rn(3, 4))
def comparisons(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b


@T.case(rb(3, 4), rb(3, 4))
def bool_logic(a, b):
    return a & b, a | b, a ^ b, ~a


@T.case(ri(3, 4, high=256), ri(3, 4, high=256))
def int_bitwise(a, b):
    return a & b, a | b, a ^ b, a << 2, b >> 1


@T.case(rn(3, 4))
def unary_math(a):
    return torch.exp(a), torch.tanh(a), torch.sigmoid(a), a.cos(), torch.erf(a)


@T.case(rp(3, 4))
def log_family(a):
    return a.log(), torch.log2(a), torch.log1p(a), a.rsqrt(), a.reciprocal()


@T.case(rn(3, 4))
def rounding(a):
    a = a * 10
    return a.floor(), a.ceil(), a.round(), a.trunc(), a.frac(), torch.round(a, decimals=1)


@T.case(rn(3, 4))
def clamp_family(a):
    return a.clamp(-0.5, 0.5), a.clamp(min=0), torch.clamp(a, max=0.1), a.clamp_min(0.2)


@T.case(rn(3, 4), rn(3, 4))
def minimum_maximum(a, b):
    return torch.minimum(a, b), torch.maximum(a, b), torch.max(a, b)


@T.case(rn(3, 4))
def sign_family(a):
    return a.sign(), torch.sgn(a), torch.signbit(a), a.sign() * a


@T.case(rn(3, 4))
def to_dtype(a):
    return a.to(torch.float64), a.double(), a.half(), a.to(torch.int32), a.bool()


@T.case(ri(3, 4))
def int_to_float(a):
    return a.float() / 2, a.to(dtype=torch.float16), a.type(torch.float32)


@T.case(rn(3, 4), rn(3, 4, dtype=torch.float64))
def promotion_float_double(a, b):
    return a + b, a * 2.5, b * 2


@T.case(rn(3, 4), ri(3, 4))
def promotion_float_int(a, b):
    return a + b, b + 1, b * 1.5, b.float() + a


@T.case(rn(3, 4, dtype=torch.float16), rn(3, 4))
def promotion_half(a, b):
    return a + b, a * 2, (a + 1).dtype


@T.case(rn(3, 4, dtype=torch.bfloat16))
def bfloat16_ops(a):
    return a * 2 + 1, a.float().exp()


@T.case(rn(3, 4))
def type_as_and_new(a):
    b = torch.ones(3, 4, dtype=torch.float64)
    return a.type_as(b), a.new_zeros(2, 2), a.new_ones((3,)), a.new_full((2,), 7.0)


@T.case(rn(3, 4))
def factory_functions(a):
    z = torch.zeros_like(a)
    o = torch.ones(3, 4)
    f = torch.full((3, 4), 2.5)
    r = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    e = torch.eye(3, 4)
    return a + z + o * f + r + e


@T.case(rn(5))
def arange_linspace(a):
    return a + torch.arange(5), a * torch.linspace(0, 1, 5), torch.arange(0, 10, 2) * 1.0


@T.case(rn(3, 4), rn(3, 4), rn(3, 4))
def addcmul_lerp(a, b, c):
    return torch.addcmul(a, b, c, value=0.5), torch.lerp(a, b, 0.3), torch.addcdiv(a, b, c.abs() + 1)


@T.case(rn(3, 4), rn(3, 4))
def operator_module(a, b):
    return operator.add(a, b), operator.mul(a, 3), operator.neg(b), operator.truediv(a, 2)


@T.case(rn(3, 4), rn(3, 4))
def method_arith(a, b):
    return a.add(b, alpha=2), a.sub(b), a.mul(b), a.div(b.abs() + 1), a.pow(2)


@T.case(rn(3, 4), 2.5, 3)
def python_scalar_args(a, s, k):
    return a * s + k, a ** k


@T.case(rn(3, 4))
def nan_and_inf(a):
    x = a / torch.zeros_like(a)
    return torch.isnan(x), torch.isinf(x), torch.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0)


@T.case(rg(3, 4), rg(3, 4), grad=True)
def arith_with_grad(a, b):
    return (a * b + a.sin()).tanh()


@T.case(rn(3, 4))
def augmented_assignment_locals(a):
    x = a
    x = x + 1
    x *= 2          # rebinds? no: in-place on the new tensor x, a is untouched
    x -= a
    return x, a
