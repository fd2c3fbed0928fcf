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

from typing import TYPE_CHECKING

import torch

from .calls import register_tensor_method_rule, register_torch_op_rule
from .values import ConstantValue, ListValue, TensorValue, TupleValue, Value

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
