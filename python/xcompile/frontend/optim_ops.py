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
from .values import TensorValue, Value

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
