"""Lowering rows for pointwise ops: arithmetic, comparisons, activations and their backwards,
casts, where/clamp/lerp, arange and fills (the table and its helpers: ``lowering_base.py``).

Ops without a row (matmul, convolution, attention, ...) are extern ATen kernels.
"""
from __future__ import annotations

import math

import torch
import torch.fx
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as K
from torch._prims_common import elementwise_dtypes

from .._torch_compat import CLAMP_ONE_NAN_BOUND_IGNORED
from .graph import TV
from .ir import ZeroDivCheck
from .lowering_base import bload, iter_layout, meta_like, opmath, out_meta, pointwise, register
from .lowering_base import const as _c
from .sizes import FloatArg, SymbolicUnsupported, vshape

aten = torch.ops.aten




# -- row builders ------------------------------------------------------------------------------------

def _unary(opname, kind=K.DEFAULT):
    def row(L, node, x, *rest, **kw):
        return pointwise(L, node, [x], lambda ops, dt, a: getattr(ops, opname)(a), kind)
    return row


def _binary(opname, kind=K.DEFAULT):
    def row(L, node, a, b, **kw):
        return pointwise(L, node, [a, b], lambda ops, dt, x, y: getattr(ops, opname)(x, y), kind)
    return row


# -- arithmetic ---------------------------------------------------------------------------------------

@register(aten.add.Tensor, aten.add.Scalar)
def _add(L, node, a, b, alpha=1):
    def fn(ops, dt, x, y):
        return ops.add(x, y if alpha == 1 else ops.mul(y, _c(ops, alpha, dt)))
    return pointwise(L, node, [a, b], fn)


@register(aten.sub.Tensor, aten.sub.Scalar)
def _sub(L, node, a, b, alpha=1):
    def fn(ops, dt, x, y):
        return ops.sub(x, y if alpha == 1 else ops.mul(y, _c(ops, alpha, dt)))
    return pointwise(L, node, [a, b], fn)


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def _rsub(L, node, a, b, alpha=1):
    return _sub(L, node, b, a, alpha)


for _op, _name in [(aten.mul, "mul"), (aten.maximum, "maximum"), (aten.minimum, "minimum"),
                   (aten.bitwise_and, "bitwise_and"), (aten.bitwise_or, "bitwise_or"),
                   (aten.bitwise_xor, "bitwise_xor"), (aten.bitwise_left_shift, "lshift"),
                   (aten.bitwise_right_shift, "rshift"), (aten.copysign, "copysign")]:
    register(_op)(_binary(_name, K.INT_TO_FLOAT if _name == "copysign" else K.DEFAULT))
for _op, _name in [(aten.atan2, "atan2"), (aten.hypot, "hypot")]:
    register(_op)(_binary(_name, K.INT_TO_FLOAT))
for _op, _name in [(aten.eq, "eq"), (aten.ne, "ne"), (aten.lt, "lt"), (aten.le, "le"), (aten.gt, "gt"),
                   (aten.ge, "ge")]:
    register(_op)(_binary(_name, K.ALWAYS_BOOL))


@register(aten.div.Tensor, aten.div.Scalar)
def _div(L, node, a, b):
    return pointwise(L, node, [a, b], lambda ops, dt, x, y: ops.truediv(x, y), K.INT_TO_FLOAT)


def _int_divisor(node, b, op: str):
    """``fn(ops, dt, x, y)`` that makes the kernel raise eager's ZeroDivisionError when an integer
    divisor ``y`` is 0 (a nonzero Python number needs no check)."""
    check = ZeroDivCheck(op, 0, 1, False, RuntimeError)

    def guard(ops, dt, x, y):
        if dt.is_floating_point or dt == torch.bool or (isinstance(b, (int, float)) and b != 0):
            return
        # a literal 0 fails for every element: x == x (integers) is a flag shaped like the loop
        flag = ops.eq(x, x) if isinstance(b, (int, float)) else ops.eq(y, ops.constant(0, dt))
        ops.indirect_indexing(ops.to_dtype(flag, torch.int64), 1, check)
    return guard


def _int_division(name: str):
    def row(L, node, a, b):
        guard = _int_divisor(node, b, str(node.target))

        def fn(ops, dt, x, y):
            guard(ops, dt, x, y)
            return getattr(ops, name)(x, y)
        return pointwise(L, node, [a, b], fn)
    return row


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(L, node, a, b, rounding_mode=None):
    if rounding_mode is None:
        return _div(L, node, a, b)
    guard = _int_divisor(node, b, str(node.target))

    def fn(ops, dt, x, y):
        if dt.is_floating_point:
            if rounding_mode == "floor":
                return ops.floordiv(x, y)
            return ops.trunc(ops.truediv(x, y))
        guard(ops, dt, x, y)
        return ops.floordiv(x, y) if rounding_mode == "floor" else ops.truncdiv(x, y)
    return pointwise(L, node, [a, b], fn)


register(aten.floor_divide.default, aten.floor_divide.Scalar)(_int_division("floordiv"))
register(aten.remainder.Tensor, aten.remainder.Scalar)(_int_division("remainder"))
register(aten.fmod.Tensor, aten.fmod.Scalar)(_int_division("fmod"))


@register(aten.neg)
def _neg(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.neg(a))


@register(aten.abs)
def _abs(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.abs(a), K.COMPLEX_TO_FLOAT)


@register(aten.reciprocal)
def _reciprocal(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.reciprocal(a), K.INT_TO_FLOAT)


@register(aten.square)
def _square(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.mul(a, a), K.BOOL_TO_LONG)


@register(aten.sign, aten.sgn)
def _sign(L, node, x):
    if x.dtype == torch.bool:
        return pointwise(L, node, [x], lambda ops, dt, a: a)
    return pointwise(L, node, [x], lambda ops, dt, a: ops.sign(a))


for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
              "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
              "erfc", "sigmoid", "lgamma"):
    register(getattr(aten, _name))(_unary(_name, K.INT_TO_FLOAT))
for _name in ("floor", "ceil", "trunc"):
    register(getattr(aten, _name))(_unary(_name))
for _name in ("isnan", "isinf", "signbit", "logical_not"):
    register(getattr(aten, _name))(_unary(_name, K.ALWAYS_BOOL))


@register(aten.round.default)
def _round(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.round(a))


@register(aten.bitwise_not)
def _bitwise_not(L, node, x):
    name = "logical_not" if x.dtype == torch.bool else "bitwise_not"
    return pointwise(L, node, [x], lambda ops, dt, a: getattr(ops, name)(a))


def _logical(name):
    def row(L, node, a, b):
        def fn(ops, dt, x, y):
            if dt != torch.bool:
                x, y = ops.to_dtype(x, torch.bool), ops.to_dtype(y, torch.bool)
            return getattr(ops, name)(x, y)
        return pointwise(L, node, [a, b], fn, K.ALWAYS_BOOL)
    return row


for _name in ("logical_and", "logical_or", "logical_xor"):
    register(getattr(aten, _name))(_logical(_name))


@register(aten.pow.Tensor_Scalar)
def _pow_scalar(L, node, x, e):
    val = out_meta(node)
    if isinstance(e, bool) and x.dtype == torch.bool:
        # eager keeps bool ** bool a bool (result_type); the meta kernel says int64
        return pointwise(L, node, [x], (lambda ops, dt, a: a) if e else
                         (lambda ops, dt, a: ops.constant(True, torch.bool)), out_dtype=torch.bool)
    if val.dtype.is_floating_point or (isinstance(e, int) and 0 <= e <= 8):
        # the exponent takes part in type promotion: int ** 0.5 and bool ** 2.0 compute in float
        cdt, _ = elementwise_dtypes(meta_like(x), meta_like(e), type_promotion_kind=K.BOOL_TO_LONG)
        if e == 2:
            return pointwise(L, node, [x], lambda ops, dt, a: ops.mul(a, a), compute_dtype=cdt)
        if e == 1:
            return pointwise(L, node, [x], lambda ops, dt, a: a, compute_dtype=cdt)
        if e == 0.5 and val.dtype.is_floating_point:
            return pointwise(L, node, [x], lambda ops, dt, a: ops.sqrt(a), compute_dtype=cdt)
        if isinstance(e, (int, float)) and float(e).is_integer() and -2 <= e <= 8:
            n = int(e)  # ATen multiplies out small integer powers too

            def fn(ops, dt, a):
                r = a if abs(n) >= 1 else ops.constant(1, dt)
                for _ in range(abs(n) - 1):
                    r = ops.mul(r, a)
                return ops.reciprocal(r) if n < 0 else r
            return pointwise(L, node, [x], fn, compute_dtype=cdt)
        return pointwise(L, node, [x, e], lambda ops, dt, a, b: ops.pow(a, b), K.BOOL_TO_LONG)
    return NotImplemented


@register(aten.pow.Tensor_Tensor, aten.pow.Scalar)
def _pow(L, node, a, b):
    if not out_meta(node).dtype.is_floating_point:
        return NotImplemented
    return pointwise(L, node, [a, b], lambda ops, dt, x, y: ops.pow(x, y), K.BOOL_TO_LONG)


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(L, node, cond, a, b, iterate=True):
    compute, _ = elementwise_dtypes(meta_like(a), meta_like(b), type_promotion_kind=K.NO_OPMATH)
    compute = opmath(compute)
    val = out_meta(node)
    size = vshape(val)

    def body(ops, idx):
        c = bload(ops, cond, idx, torch.bool)
        return ops.where(c, bload(ops, a, idx, compute), bload(ops, b, idx, compute))
    if not iterate:
        return L.pointwise(val.dtype, size, body, compute_dtype=compute)
    # eager's TensorIterator orders (condition, self, other); the meta kernel may not agree
    ins = [cond, a, b]
    out = L.pointwise(val.dtype, size, body, compute_dtype=compute,
                      layout=iter_layout(L, node, ins, val.dtype, size, actual=True))
    L.eager_layouts[out.ref.name] = iter_layout(L, node, ins, val.dtype, size, actual=False)
    return out


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(L, node, x, mask, value):
    return _where(L, node, mask, value, x, iterate=False)   # a clone of x, filled: x's layout (meta)


@register(aten.clamp.default, aten.clamp.Tensor)
def _clamp(L, node, x, min=None, max=None):
    if CLAMP_ONE_NAN_BOUND_IGNORED and node.target is aten.clamp.default and (min is None) != (max is None):
        bound = min if max is None else max           # (torch 2.11: a lone nan bound leaves x as it is)
        if isinstance(bound, FloatArg):
            raise SymbolicUnsupported(f"torch.clamp with one bound, a symbolic float ({bound}), on torch 2.11")
        if isinstance(bound, float) and math.isnan(bound):
            return pointwise(L, node, [x], lambda ops, dt, a: a)
    ins = [x] + [v for v in (min, max) if v is not None]

    def fn(ops, dt, a, *bounds):
        bounds = list(bounds)
        if min is not None:
            a = ops.maximum(a, bounds.pop(0))
        if max is not None:
            a = ops.minimum(a, bounds.pop(0))
        return a
    return pointwise(L, node, ins, fn)


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def _clamp_min(L, node, x, m):
    return _clamp(L, node, x, min=m)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def _clamp_max(L, node, x, m):
    return _clamp(L, node, x, max=m)


@register(aten.lerp.Scalar, aten.lerp.Tensor)
def _lerp(L, node, a, b, w):
    def fn(ops, dt, x, y, t):
        diff = ops.sub(y, x)
        small = ops.lt(ops.abs(t), _c(ops, 0.5, dt))
        lo = ops.add(x, ops.mul(t, diff))
        hi = ops.sub(y, ops.mul(diff, ops.sub(_c(ops, 1.0, dt), t)))
        return ops.where(small, lo, hi)
    return pointwise(L, node, [a, b, w], fn)


@register(aten.addcmul.default)
def _addcmul(L, node, x, t1, t2, value=1):
    return pointwise(L, node, [x, t1, t2],
                     lambda ops, dt, a, b, c: ops.add(a, ops.mul(ops.mul(b, c), _c(ops, value, dt))))


@register(aten.addcdiv.default)
def _addcdiv(L, node, x, t1, t2, value=1):
    return pointwise(L, node, [x, t1, t2],
                     lambda ops, dt, a, b, c: ops.add(a, ops.mul(ops.truediv(b, c), _c(ops, value, dt))))


# -- activations -------------------------------------------------------------------------------------------

@register(aten.relu)
def _relu(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.relu(a))


def gelu_fn(ops, dt, a, approximate="none"):
    half = _c(ops, 0.5, dt)
    if approximate == "tanh":
        inner = ops.mul(_c(ops, math.sqrt(2.0 / math.pi), dt),
                        ops.add(a, ops.mul(_c(ops, 0.044715, dt), ops.mul(a, ops.mul(a, a)))))
        return ops.mul(ops.mul(half, a), ops.add(_c(ops, 1.0, dt), ops.tanh(inner)))
    cdf = ops.add(_c(ops, 1.0, dt), ops.erf_approx(ops.mul(a, _c(ops, math.sqrt(0.5), dt))))
    return ops.mul(ops.mul(a, half), cdf)


@register(aten.gelu.default)
def _gelu(L, node, x, approximate="none"):
    return pointwise(L, node, [x], lambda ops, dt, a: gelu_fn(ops, dt, a, approximate), K.INT_TO_FLOAT)


@register(aten.gelu_backward.default)
def _gelu_backward(L, node, grad, x, approximate="none"):
    """torch's formula, with GELU's own erf (``erf_approx``; eager's vectorized kernel uses an
    approximation too): libm's erff made it 1.5x slower than eager."""
    def fn(ops, dt, g, a):
        if approximate == "tanh":
            beta, kappa = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5, 0.044715
            x2 = ops.mul(a, a)
            inner = ops.mul(_c(ops, beta, dt), ops.add(a, ops.mul(_c(ops, kappa, dt), ops.mul(x2, a))))
            t = ops.tanh(inner)
            left, right = ops.mul(_c(ops, 0.5, dt), a), ops.add(_c(ops, 1.0, dt), t)
            dt_inner = ops.mul(_c(ops, beta, dt), ops.add(_c(ops, 1.0, dt), ops.mul(_c(ops, 3 * kappa, dt), x2)))
            right_d = ops.mul(ops.mul(left, ops.sub(_c(ops, 1.0, dt), ops.mul(t, t))), dt_inner)
            return ops.mul(g, ops.add(ops.mul(_c(ops, 0.5, dt), right), right_d))
        cdf = ops.mul(_c(ops, 0.5, dt), ops.add(_c(ops, 1.0, dt),
                                               ops.erf_approx(ops.mul(a, _c(ops, math.sqrt(0.5), dt)))))
        pdf = ops.mul(_c(ops, 0.5 * (2.0 / math.sqrt(math.pi)) * math.sqrt(0.5), dt),
                      ops.exp(ops.mul(ops.mul(a, a), _c(ops, -0.5, dt))))
        return ops.mul(g, ops.add(cdf, ops.mul(a, pdf)))
    return pointwise(L, node, [grad, x], fn)


# backward ops of activations: pointwise over (grad, input or output), in that order, so the
# result is laid out as eager's TensorIterator lays it out (a decomposition into where/mul
# would follow the condition's layout instead)

def _backward_row(formula, x_first=False):
    """``x_first``: eager's kernel lists the input before the grad (its layout wins)."""
    def row(L, node, grad, x, *args):
        if x_first:
            return pointwise(L, node, [x, grad], lambda ops, dt, a, g: formula(ops, dt, g, a, *args))
        return pointwise(L, node, [grad, x], lambda ops, dt, g, a: formula(ops, dt, g, a, *args))
    return row


def _zero_where(ops, dt, cond, g):
    return ops.where(cond, _c(ops, 0, dt), g)


def _silu_bw(ops, dt, g, a):
    s = ops.sigmoid(a)
    return ops.mul(ops.mul(g, s), ops.add(_c(ops, 1.0, dt), ops.mul(a, ops.sub(_c(ops, 1.0, dt), s))))


def _hardswish_bw(ops, dt, g, a):
    inner = ops.where(ops.lt(a, _c(ops, 3.0, dt)),
                      ops.mul(g, ops.add(ops.truediv(a, _c(ops, 3.0, dt)), _c(ops, 0.5, dt))), g)
    return _zero_where(ops, dt, ops.le(a, _c(ops, -3.0, dt)), inner)


def _hardsigmoid_bw(ops, dt, g, a):
    inside = ops.logical_and(ops.gt(a, _c(ops, -3.0, dt)), ops.lt(a, _c(ops, 3.0, dt)))
    # eager multiplies by 1.0f / 6.0f, a float constant even for double
    return ops.where(inside, ops.mul(g, _c(ops, 0.1666666716337204, dt)), _c(ops, 0, dt))


def _elu_bw(ops, dt, g, a, alpha, scale, input_scale, is_result):
    neg = alpha * scale
    if is_result:
        small = ops.mul(ops.mul(g, _c(ops, input_scale, dt)), ops.add(a, _c(ops, neg, dt)))
    else:
        small = ops.mul(ops.mul(g, _c(ops, input_scale * neg, dt)), ops.exp(ops.mul(a, _c(ops, input_scale, dt))))
    return ops.where(ops.le(a, _c(ops, 0, dt)), small, ops.mul(g, _c(ops, scale, dt)))


def _softplus_bw(ops, dt, g, a, beta=1.0, threshold=20.0):
    z = ops.exp(ops.mul(a, _c(ops, beta, dt)))
    return ops.where(ops.gt(ops.mul(a, _c(ops, beta, dt)), _c(ops, threshold, dt)), g,
                     ops.truediv(ops.mul(g, z), ops.add(z, _c(ops, 1.0, dt))))


def _mish_bw(ops, dt, g, a):
    t = ops.tanh(softplus_fn(ops, dt, a))
    out = ops.mul(ops.mul(a, ops.sigmoid(a)), ops.sub(_c(ops, 1.0, dt), ops.mul(t, t)))
    return ops.mul(g, ops.add(t, out))


for _bw_op, _formula in [
        (aten.silu_backward.default, _silu_bw),
        (aten.sigmoid_backward.default,
         lambda ops, dt, g, y: ops.mul(ops.mul(g, ops.sub(_c(ops, 1.0, dt), y)), y)),
        (aten.tanh_backward.default, lambda ops, dt, g, y: ops.mul(g, ops.sub(_c(ops, 1.0, dt), ops.mul(y, y)))),
        (aten.hardswish_backward.default, _hardswish_bw),
        (aten.hardsigmoid_backward.default, _hardsigmoid_bw),
        (aten.hardtanh_backward.default,
         lambda ops, dt, g, a, lo, hi: _zero_where(
             ops, dt, ops.logical_or(ops.le(a, _c(ops, lo, dt)), ops.ge(a, _c(ops, hi, dt))), g)),
        (aten.softplus_backward.default, _softplus_bw),
        (aten.mish_backward.default, _mish_bw)]:
    register(_bw_op)(_backward_row(_formula))
register(aten.threshold_backward.default)(_backward_row(
    lambda ops, dt, g, a, th: _zero_where(ops, dt, ops.le(a, _c(ops, th, dt)), g), x_first=True))
register(aten.leaky_relu_backward.default)(_backward_row(
    lambda ops, dt, g, a, slope, is_result: ops.where(ops.gt(a, _c(ops, 0, dt)), g, ops.mul(g, _c(ops, slope, dt))),
    x_first=True))


@register(aten.elu_backward.default)
def _elu_backward(L, node, grad, alpha, scale, input_scale, is_result, x):
    return pointwise(L, node, [grad, x],
                     lambda ops, dt, g, a: _elu_bw(ops, dt, g, a, alpha, scale, input_scale, is_result))


@register(aten.silu.default)
def _silu(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.mul(a, ops.sigmoid(a)), K.INT_TO_FLOAT)


@register(aten.hardsigmoid.default)
def _hardsigmoid(L, node, x):
    def fn(ops, dt, a):
        t = ops.minimum(ops.maximum(ops.add(a, _c(ops, 3.0, dt)), _c(ops, 0.0, dt)), _c(ops, 6.0, dt))
        return ops.truediv(t, _c(ops, 6.0, dt))
    return pointwise(L, node, [x], fn, K.INT_TO_FLOAT)


@register(aten.hardswish.default)
def _hardswish(L, node, x):
    def fn(ops, dt, a):
        t = ops.minimum(ops.maximum(ops.add(a, _c(ops, 3.0, dt)), _c(ops, 0.0, dt)), _c(ops, 6.0, dt))
        return ops.truediv(ops.mul(a, t), _c(ops, 6.0, dt))
    return pointwise(L, node, [x], fn, K.INT_TO_FLOAT)


@register(aten.hardtanh.default)
def _hardtanh(L, node, x, min_val=-1.0, max_val=1.0):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.minimum(ops.maximum(a, _c(ops, min_val, dt)),
                                                                 _c(ops, max_val, dt)))


@register(aten.leaky_relu.default)
def _leaky_relu(L, node, x, slope=0.01):
    def fn(ops, dt, a):
        return ops.where(ops.gt(a, _c(ops, 0, dt)), a, ops.mul(a, _c(ops, slope, dt)))
    return pointwise(L, node, [x], fn)


@register(aten.elu.default)
def _elu(L, node, x, alpha=1.0, scale=1.0, input_scale=1.0):
    def fn(ops, dt, a):
        neg = ops.mul(_c(ops, alpha * scale, dt), ops.expm1(ops.mul(a, _c(ops, input_scale, dt))))
        return ops.where(ops.gt(a, _c(ops, 0, dt)), ops.mul(a, _c(ops, scale, dt)), neg)
    return pointwise(L, node, [x], fn, K.INT_TO_FLOAT)


def softplus_fn(ops, dt, a, beta=1.0, threshold=20.0):
    ab = ops.mul(a, _c(ops, beta, dt))
    soft = ops.truediv(ops.log1p(ops.exp(ab)), _c(ops, beta, dt))
    return ops.where(ops.gt(ab, _c(ops, threshold, dt)), a, soft)


@register(aten.softplus.default)
def _softplus(L, node, x, beta=1.0, threshold=20.0):
    return pointwise(L, node, [x], lambda ops, dt, a: softplus_fn(ops, dt, a, beta, threshold), K.INT_TO_FLOAT)


@register(aten.mish.default)
def _mish(L, node, x):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.mul(a, ops.tanh(softplus_fn(ops, dt, a))),
                     K.INT_TO_FLOAT)


@register(aten.threshold.default)
def _threshold(L, node, x, threshold, value):
    return pointwise(L, node, [x], lambda ops, dt, a: ops.where(ops.le(a, _c(ops, threshold, dt)),
                                                               _c(ops, value, dt), a))


# -- copies and casts ------------------------------------------------------------------------------------

def _copy_to(L, node, x: TV, dtype: torch.dtype) -> TV:
    val = out_meta(node)

    def body(ops, idx):
        return bload(ops, x, idx, dtype)
    return L.pointwise(dtype, vshape(val), body, compute_dtype=dtype)


@register(aten._to_copy.default)
def _to_copy(L, node, x, **kw):
    val = out_meta(node)
    if val.device != x_device(L, x) or kw.get("layout") not in (None, torch.strided):
        return NotImplemented
    return _copy_to(L, node, x, val.dtype)


def x_device(L, x):
    return L.device


@register(aten.clone.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _clone(L, node, x, **kw):
    return _copy_to(L, node, x, x.dtype)


@register(aten.copy.default)
def _copy(L, node, dst, src, non_blocking=False):
    val = out_meta(node)
    return L.pointwise(dst.dtype, vshape(val), lambda ops, idx: bload(ops, src, idx, dst.dtype),
                       compute_dtype=dst.dtype)


# -- constants --------------------------------------------------------------------------------------------

def _fill(L, node, value) -> TV:
    val = out_meta(node)
    dt = val.dtype
    return L.pointwise(dt, vshape(val), lambda ops, idx: ops.constant(value, dt), compute_dtype=dt)


@register(aten.full.default)
def _full(L, node, size, value, **kw):
    return _fill(L, node, value)


@register(aten.full_like.default)
def _full_like(L, node, x, value, **kw):
    return _fill(L, node, value)


@register(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default)
def _zeros(L, node, *args, **kw):
    return _fill(L, node, 0)


@register(aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default, aten.empty_strided.default)
def _empty(L, node, *args, **kw):
    # eager fills new memory under torch.use_deterministic_algorithms(True) with
    # torch.utils.deterministic.fill_uninitialized_memory (the global-state guard and the warm
    # cache key hold both flags): NaN for floats, the largest value for integers, True for bools
    return _fill(L, node, _uninitialized_value(out_meta(node).dtype))


def _uninitialized_value(dtype: torch.dtype) -> float | int | bool:
    if not (torch.are_deterministic_algorithms_enabled() and torch._C._get_deterministic_fill_uninitialized_memory()):
        return 0
    if dtype.is_floating_point or dtype.is_complex:
        return math.nan
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max


@register(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def _ones(L, node, *args, **kw):
    return _fill(L, node, 1)


@register(aten.scalar_tensor.default)
def _scalar_tensor(L, node, value, **kw):
    return _fill(L, node, value)


@register(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(L, node, *args, **kw):
    nums = [a for a in args if not isinstance(a, torch.dtype)]
    start, step = (0, 1)
    if len(nums) >= 2:
        start = nums[0]
    if len(nums) >= 3:
        step = nums[2]
    val = out_meta(node)
    dt = val.dtype
    comp = torch.float64 if dt.is_floating_point else dt

    def body(ops, idx):
        i = ops.index_expr(idx[0], comp)
        return ops.add(ops.mul(i, ops.constant(step, comp)), ops.constant(start, comp))
    return L.pointwise(dt, vshape(val), body, compute_dtype=comp)

