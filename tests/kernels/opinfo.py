"""The op table: each lowered op once, with the dtypes it supports and the input domain.

Tests expand it over dtypes x layouts x backends.  Ops that share a dtype and an input layout
are compiled as ONE graph (they fuse horizontally into a kernel or two), so the whole table
costs a few compiler runs per case, not one per op.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn.functional as F

aten = torch.ops.aten


def _bw(fn):
    """A backward op of broadcast operands (the ops themselves take equal shapes)."""
    return lambda g, x: fn(*torch.broadcast_tensors(g, x))


FLOAT = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
F32_64 = (torch.float32, torch.float64)
INT = (torch.int64, torch.int32)
ALL = FLOAT + INT + (torch.bool,)


@dataclasses.dataclass
class OpInfo:
    name: str
    fn: Callable
    dtypes: tuple
    domain: tuple | None = None        # (low, high) for floating inputs
    triton: bool = True                # runs under the Triton interpreter
    arity: int = 1


UNARY = [
    OpInfo("neg", torch.neg, FLOAT + INT),
    OpInfo("abs", torch.abs, FLOAT + INT),
    OpInfo("exp", torch.exp, FLOAT + (torch.int64,), (-5, 5)),
    OpInfo("exp2", torch.exp2, FLOAT, (-5, 5)),
    OpInfo("expm1", torch.expm1, FLOAT, (-3, 3)),
    OpInfo("log", torch.log, FLOAT, (0.05, 10)),
    OpInfo("log2", torch.log2, FLOAT, (0.05, 10)),
    OpInfo("log10", torch.log10, FLOAT, (0.05, 10)),
    OpInfo("log1p", torch.log1p, FLOAT, (-0.9, 10)),
    OpInfo("sqrt", torch.sqrt, FLOAT + (torch.int64,), (0, 10)),
    OpInfo("rsqrt", torch.rsqrt, FLOAT, (0.05, 10)),
    OpInfo("sin", torch.sin, FLOAT, (-4, 4)),
    OpInfo("cos", torch.cos, FLOAT, (-4, 4)),
    OpInfo("tan", torch.tan, F32_64, (-1.2, 1.2)),
    OpInfo("asin", torch.asin, F32_64, (-0.95, 0.95), triton=False),
    OpInfo("acos", torch.acos, F32_64, (-0.95, 0.95), triton=False),
    OpInfo("atan", torch.atan, F32_64, (-5, 5), triton=False),
    OpInfo("sinh", torch.sinh, F32_64, (-3, 3)),
    OpInfo("cosh", torch.cosh, F32_64, (-3, 3)),
    OpInfo("tanh", torch.tanh, FLOAT, (-6, 6)),
    OpInfo("asinh", torch.asinh, F32_64, (-5, 5)),
    OpInfo("acosh", torch.acosh, F32_64, (1.1, 6)),
    OpInfo("atanh", torch.atanh, F32_64, (-0.9, 0.9)),
    OpInfo("erf", torch.erf, FLOAT, (-3, 3)),
    OpInfo("erfc", torch.erfc, F32_64, (-1, 1)),
    OpInfo("lgamma", torch.lgamma, F32_64, (0.5, 6), triton=False),
    OpInfo("sigmoid", torch.sigmoid, FLOAT + (torch.int64,), (-8, 8)),
    OpInfo("reciprocal", torch.reciprocal, FLOAT, (0.2, 5)),
    OpInfo("floor", torch.floor, FLOAT + INT, (-10, 10)),
    OpInfo("ceil", torch.ceil, FLOAT + INT, (-10, 10)),
    OpInfo("trunc", torch.trunc, FLOAT, (-10, 10)),
    OpInfo("round", torch.round, F32_64, (-10, 10)),
    OpInfo("sign", torch.sign, FLOAT + INT),
    OpInfo("square", torch.square, FLOAT + INT),
    OpInfo("relu", torch.relu, FLOAT + INT),
    OpInfo("gelu", F.gelu, FLOAT),
    OpInfo("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), FLOAT),
    OpInfo("silu", F.silu, FLOAT),
    OpInfo("softplus", F.softplus, F32_64),
    OpInfo("mish", F.mish, F32_64),
    OpInfo("elu", F.elu, F32_64),
    OpInfo("leaky_relu", lambda x: F.leaky_relu(x, 0.2), FLOAT),
    OpInfo("hardtanh", F.hardtanh, FLOAT),
    OpInfo("hardsigmoid", F.hardsigmoid, F32_64),
    OpInfo("hardswish", F.hardswish, F32_64),
    OpInfo("clamp", lambda x: torch.clamp(x, -0.5, 0.7), FLOAT + INT),
    OpInfo("clamp_min", lambda x: torch.clamp_min(x, 0.25), FLOAT),
    OpInfo("isnan", torch.isnan, FLOAT + INT),
    OpInfo("isinf", lambda x: torch.isinf(x / 0.0 if x.is_floating_point() else x), F32_64),
    OpInfo("logical_not", torch.logical_not, ALL),
    OpInfo("bitwise_not", torch.bitwise_not, INT + (torch.bool,)),
    OpInfo("to_float", lambda x: x.float(), ALL),
    OpInfo("to_int", lambda x: x.to(torch.int32), ALL),
    OpInfo("to_bool", lambda x: x.bool(), ALL),
    OpInfo("to_half", lambda x: x.half(), F32_64 + INT),
    OpInfo("mul_scalar", lambda x: x * 3, FLOAT + INT),
    OpInfo("add_float_scalar", lambda x: x + 2.5, FLOAT + INT + (torch.bool,)),
    OpInfo("rsub", lambda x: 1 - x, FLOAT + INT),
    OpInfo("pow2", lambda x: x ** 2, FLOAT + INT),
    OpInfo("pow3", lambda x: x ** 3, FLOAT + INT),
    OpInfo("pow_half", lambda x: x ** 0.5, F32_64, (0, 5)),
    OpInfo("pow_float", lambda x: x ** 1.7, F32_64, (0.1, 5), triton=False),
]

BINARY = [
    OpInfo("add", torch.add, ALL, arity=2),
    OpInfo("add_alpha", lambda a, b: torch.add(a, b, alpha=2), FLOAT + INT, arity=2),
    OpInfo("sub", torch.sub, FLOAT + INT, arity=2),
    OpInfo("mul", torch.mul, ALL, arity=2),
    OpInfo("div", torch.div, FLOAT + INT, (0.5, 4), arity=2),
    OpInfo("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), F32_64 + INT, (0.5, 4), arity=2),
    OpInfo("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), F32_64 + INT, (0.5, 4), arity=2),
    OpInfo("remainder", torch.remainder, F32_64 + INT, (0.5, 4), arity=2),
    OpInfo("fmod", torch.fmod, F32_64 + INT, (0.5, 4), arity=2),
    OpInfo("maximum", torch.maximum, FLOAT + INT + (torch.bool,), arity=2),
    OpInfo("minimum", torch.minimum, FLOAT + INT, arity=2),
    OpInfo("pow", torch.pow, F32_64, (0.5, 2), triton=False, arity=2),
    OpInfo("atan2", torch.atan2, F32_64, triton=False, arity=2),
    OpInfo("eq", torch.eq, ALL, arity=2),
    OpInfo("ne", torch.ne, ALL, arity=2),
    OpInfo("lt", torch.lt, FLOAT + INT, arity=2),
    OpInfo("le", torch.le, FLOAT + INT, arity=2),
    OpInfo("gt", torch.gt, FLOAT + INT + (torch.bool,), arity=2),
    OpInfo("ge", torch.ge, FLOAT + INT, arity=2),
    OpInfo("logical_and", torch.logical_and, ALL, arity=2),
    OpInfo("logical_or", torch.logical_or, ALL, arity=2),
    OpInfo("logical_xor", torch.logical_xor, ALL, arity=2),
    OpInfo("bitwise_and", torch.bitwise_and, INT + (torch.bool,), arity=2),
    OpInfo("bitwise_or", torch.bitwise_or, INT + (torch.bool,), arity=2),
    OpInfo("bitwise_xor", torch.bitwise_xor, INT + (torch.bool,), arity=2),
    OpInfo("where", lambda a, b: torch.where(a > b, a, b), FLOAT + INT, arity=2),
    OpInfo("masked_fill", lambda a, b: a.masked_fill(b > 0.5, 7), FLOAT + INT, arity=2),
    OpInfo("lerp", lambda a, b: torch.lerp(a, b, 0.3), FLOAT, arity=2),
    OpInfo("addcmul", lambda a, b: torch.addcmul(a, a, b, value=0.5), FLOAT, arity=2),
    OpInfo("mixed_int_float", lambda a, b: a * b.float(), FLOAT + INT, arity=2),
    # backward ops of activations (grad, input or output): training graphs are made of them;
    # they do not broadcast, so the operands are broadcast first (expanded views)
    OpInfo("gelu_backward", _bw(lambda g, x: aten.gelu_backward(g, x)), FLOAT, (-4, 4), arity=2),
    OpInfo("gelu_tanh_backward", _bw(lambda g, x: aten.gelu_backward(g, x, approximate="tanh")), FLOAT, (-4, 4),
           arity=2),
    OpInfo("threshold_backward", _bw(lambda g, x: aten.threshold_backward(g, x, 0.25)), FLOAT + INT, arity=2),
    OpInfo("silu_backward", _bw(lambda g, x: aten.silu_backward(g, x)), F32_64, (-6, 6), arity=2),
    OpInfo("sigmoid_backward", _bw(lambda g, y: aten.sigmoid_backward(g, y)), F32_64, (0, 1), arity=2),
    OpInfo("tanh_backward", _bw(lambda g, y: aten.tanh_backward(g, y)), F32_64, (-1, 1), arity=2),
    OpInfo("hardswish_backward", _bw(lambda g, x: aten.hardswish_backward(g, x)), F32_64, (-4, 4), arity=2),
    OpInfo("hardtanh_backward", _bw(lambda g, x: aten.hardtanh_backward(g, x, -0.5, 0.5)), F32_64, arity=2),
    OpInfo("leaky_relu_backward", _bw(lambda g, x: aten.leaky_relu_backward(g, x, 0.1, False)), F32_64, arity=2),
    OpInfo("softplus_backward", _bw(lambda g, x: aten.softplus_backward(g, x, 1.0, 20.0)), F32_64, (-5, 5), arity=2),
    OpInfo("hardsigmoid_backward", _bw(lambda g, x: aten.hardsigmoid_backward(g, x)), F32_64, (-4, 4), arity=2),
    OpInfo("elu_backward", _bw(lambda g, x: aten.elu_backward(g, 1.2, 1.0, 0.9, False, x)), F32_64, arity=2),
    OpInfo("elu_backward_result", _bw(lambda g, y: aten.elu_backward(g, 1.2, 1.0, 1.0, True, y)), F32_64, arity=2),
    OpInfo("mish_backward", _bw(lambda g, x: aten.mish_backward(g, x)), F32_64, (-5, 5), arity=2),
]


def supported(ops, dtype, backend):
    return [op for op in ops if dtype in op.dtypes and (backend == "cpp" or op.triton)]


def domain_tensor(op: OpInfo, shape, dtype, make):
    if op.domain is None or not dtype.is_floating_point:
        return make(shape, dtype)
    lo, hi = op.domain
    return make(shape, dtype, lo, hi)

