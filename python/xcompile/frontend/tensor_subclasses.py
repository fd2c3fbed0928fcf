"""Tensor subclass instances made in the frame: ``t.as_subclass(cls)`` and
``torch.Tensor._make_subclass(cls, t)`` (rules registered with the tensor-method and builtin
tables). Which subclasses are followed and how their class is kept: ``tensor_classes.py``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from .builtins_table import builtin
from .calls import register_tensor_method_rule
from .exc import Unsupported
from .tensor_classes import PLAIN_CLASSES, is_plain_subclass, mark
from .values import ClassValue, ConstantValue, TensorValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer


# -- subclass instances made in the frame ---------------------------------------------------------------------
def _target_class(v: Value, what: str) -> type:
    if not isinstance(v, ClassValue) or not isinstance(v.cls, type) or not issubclass(v.cls, torch.Tensor):
        raise Unsupported(f"{what} with {v.describe()}")
    cls = v.cls
    if cls not in PLAIN_CLASSES and not is_plain_subclass(cls):
        raise Unsupported(f"{what} to {cls.__name__}, a subclass with its own __torch_function__ / "
                          "__torch_dispatch__")
    return cls


def _alias(tx: "Tracer", t: TensorValue, op: Callable, cls: type) -> Value:
    r = tx.gb.call("call_function", op, (t,))
    assert isinstance(r, TensorValue)
    if cls in PLAIN_CLASSES:
        r.cls = torch.Tensor
        r.node.meta.pop("tensor_class", None)
        return r
    return mark(r, cls)


def _as_subclass(tx: "Tracer", t: TensorValue, args, kwargs) -> Value | None:
    if len(args) != 1 or kwargs:
        return None
    cls = _target_class(args[0], "Tensor.as_subclass")
    if cls is torch.nn.Parameter:
        raise Unsupported("Tensor.as_subclass(nn.Parameter) inside the compiled region")
    return _alias(tx, t, torch.ops.aten.alias.default, cls)


@builtin(torch.Tensor._make_subclass)
def _make_subclass(tx: "Tracer", args: list, kwargs: dict) -> Value:
    names = ("cls", "data", "require_grad")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    if set(bound) - set(names) or "cls" not in bound or "data" not in bound:
        raise Unsupported("torch.Tensor._make_subclass with unexpected arguments")
    cls = _target_class(bound["cls"], "torch.Tensor._make_subclass")
    data = tx.resolve(bound["data"])
    if not isinstance(data, TensorValue):
        raise Unsupported(f"torch.Tensor._make_subclass of {data.describe()}")
    rg = bound.get("require_grad", ConstantValue(False))
    if not (isinstance(rg, ConstantValue) and rg.value is False):
        raise Unsupported("torch.Tensor._make_subclass(..., require_grad=True) inside the compiled region",
                          "It makes a new leaf tensor; make it outside the compiled region.")
    if cls is torch.nn.Parameter:
        raise Unsupported("torch.Tensor._make_subclass(nn.Parameter, ...) inside the compiled region")
    return _alias(tx, data, torch.ops.aten.detach.default, cls)     # a new leaf: no autograd history


register_tensor_method_rule("as_subclass", _as_subclass)


__all__: list[str] = []
