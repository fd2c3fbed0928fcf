"""Tensor calls that torch's optimizers make under compile, traced as torch.compile traces them.

Under ``torch.compiler.is_compiling()`` (True while we trace, as for torch.compile) an
optimizer keeps its step count a tensor (``optimizer._get_value``), so the step size it passes
as ``value=`` of ``param.addcdiv_(exp_avg, denom, value=-step_size)`` is a 0-d tensor. The
``value`` of ``addcdiv`` / ``addcmul`` is a Python number in torch's schema: a tensor there
makes the fake kernel read its value (a data-dependent operator, a graph break per parameter).
It is traced as the same arithmetic, ``self + tensor1 / tensor2 * value``
(``self + tensor1 * tensor2 * value``), in place for the ``_`` methods.
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, cast

import torch

from .calls import register_tensor_method_rule, register_torch_op_rule
from .values import ConstantValue, FunctionValue, ListValue, TensorValue, TupleValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer


def _with_tensor_value(name: str, combine, in_place: bool):
    def rule(tx: "Tracer", self_v: Value, args: list, kwargs: dict) -> Value | None:
        value = kwargs.get("value")
        if not isinstance(value, TensorValue) or len(args) != 2 or set(kwargs) != {"value"}:
            return None                            # the usual call (a Python number, or an error of eager's)
        t1, t2 = args
        term = tx.gb.call("call_function", torch.mul, [tx.gb.call("call_function", combine, [t1, t2], {}), value], {})
        return tx.gb.call("call_method", "add_" if in_place else "add", [self_v, term], {})
    rule.__name__ = f"_{name}_tensor_value"
    return rule


for _name, _combine in (("addcdiv", torch.div), ("addcmul", torch.mul)):
    register_tensor_method_rule(_name, _with_tensor_value(_name, _combine, False))
    register_tensor_method_rule(_name + "_", _with_tensor_value(_name + "_", _combine, True))
    _method = _with_tensor_value(_name, _combine, False)
    register_torch_op_rule(getattr(torch, _name),
                           lambda tx, args, kwargs, _m=_method: _m(tx, args[0], list(args[1:]), kwargs)
                           if len(args) == 3 else None)


def _foreach_with_tensor_scalars(combine, in_place: bool):
    """``torch._foreach_addcdiv_(params, t1s, t2s, scalars)`` with ``scalars`` a 1-d tensor (the
    foreach Adam's stacked step sizes under compile: ``_stack_if_compiling``). torch's fake
    kernel of that overload cannot run on fakes; traced as its per-tensor arithmetic,
    ``self[i] + t1s[i] / t2s[i] * scalars[i]``, as for the single-tensor step above."""
    def rule(tx: "Tracer", args: list, kwargs: dict) -> Value | None:
        if len(args) != 4 or kwargs or not isinstance(args[3], TensorValue) or \
                not all(isinstance(a, (ListValue, TupleValue)) for a in args[:3]):
            return None
        selves, t1s, t2s = (list(a.items) for a in args[:3])
        scalars = args[3]
        n = len(selves)
        if len(t1s) != n or len(t2s) != n or not all(isinstance(v, TensorValue) for v in selves + t1s + t2s) or \
                tuple(scalars.fake.shape) != (n,):
            return None                            # (eager's own error, or another overload)
        out = []
        for i in range(n):
            scale = tx.gb.call("call_function", torch.select, [scalars, ConstantValue(0), ConstantValue(i)], {})
            term = tx.gb.call("call_function", torch.mul,
                              [tx.gb.call("call_function", combine, [t1s[i], t2s[i]], {}), scale], {})
            out.append(tx.gb.call("call_method", "add_" if in_place else "add", [selves[i], term], {}))
        return ConstantValue(None) if in_place else ListValue(out)
    return rule


for _name, _combine in (("addcdiv", torch.div), ("addcmul", torch.mul)):
    register_torch_op_rule(getattr(torch, f"_foreach_{_name}_"), _foreach_with_tensor_scalars(_combine, True))
    register_torch_op_rule(getattr(torch, f"_foreach_{_name}"), _foreach_with_tensor_scalars(_combine, False))


def _fused_adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, lr, beta1,
                     beta2, weight_decay, eps, maximize, decoupled):
    """What ``torch._fused_adam_`` / ``torch._fused_adamw_`` compute on the CPU (their kernel's
    order of operations; within an ulp of it), traced in their place. torch's functionalization
    of those ops fails without amsgrad (their empty ``max_exp_avg_sqs`` list: "mutating a
    non-functional tensor with a functional tensor", torch 2.11 to 2.14), so AOT and the kernels
    could not take a fused Adam's step; its math they can fuse."""
    for i in range(len(params)):
        p, g, m, v = params[i], grads[i], exp_avgs[i], exp_avg_sqs[i]
        if maximize:
            g = -g
        if weight_decay != 0:
            if decoupled:
                p.mul_(1 - lr * weight_decay)
            else:
                g = g + p * weight_decay
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        step = state_steps[i].double()           # (the kernel reads the step as a double)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
        step_size = lr / bias_correction1
        if amsgrad:
            max_exp_avg_sqs[i].copy_(torch.maximum(max_exp_avg_sqs[i], v))
            v = max_exp_avg_sqs[i]
        denom = v.sqrt() / bias_correction2_sqrt + eps
        p.sub_(step_size * m / denom)


_FUSED_ADAM_KWARGS = {"amsgrad", "lr", "beta1", "beta2", "weight_decay", "eps", "maximize"}


def _fused_adam_rule(decoupled: bool):
    def rule(tx: "Tracer", args: list, kwargs: dict) -> Value | None:
        extra = {k: v for k, v in kwargs.items() if k not in _FUSED_ADAM_KWARGS}
        unscaled = set(extra) <= {"grad_scale", "found_inf"} and \
            all(isinstance(v, ConstantValue) and v.value is None for v in extra.values())
        lists = len(args) == 6 and all(isinstance(a, (ListValue, TupleValue)) for a in args)
        if not (unscaled and lists and set(kwargs) - set(extra) == _FUSED_ADAM_KWARGS) \
                or not all(isinstance(v, TensorValue) and v.fake.device.type == "cpu" for a in args for v in a.items) \
                or isinstance(kwargs["lr"], TensorValue):
            return None              # (a grad scaler, a tensor lr, CUDA: the op itself)
        kw = {k: kwargs[k] for k in _FUSED_ADAM_KWARGS}
        kw["decoupled"] = ConstantValue(decoupled)
        tx.inline_call(None, FunctionValue(cast(types.FunctionType, _fused_adam_step)), list(args), kw)
        return ConstantValue(None)
    rule.__name__ = "_fused_adamw_rule" if decoupled else "_fused_adam_rule"
    return rule


register_torch_op_rule(torch._fused_adam_, _fused_adam_rule(False))
register_torch_op_rule(torch._fused_adamw_, _fused_adam_rule(True))
