"""Builtin ``min`` / ``max`` over tensors (``max([a, b, c])``, ``min(x, y)``, ``max(x, 0.5)``).

CPython's ``max`` walks the items and keeps ``item`` when ``item > best`` is true (``<`` for
``min``); on tensors that comparison is ``bool()`` of a one-element tensor. The walk becomes a
chain of ``torch.where(item > best, item, best)``, which keeps Python's choice exactly (ties keep
the earlier item; a NaN never wins a comparison, so it is kept only when it came first).

Where eager would not get a value: a tensor with other than one element raises the RuntimeError
``bool()`` raises, catchable like eager's. Tensors of different dtypes or shapes are Unsupported
(``where`` would promote / broadcast, eager returns one of them unchanged), and so is a tensor
against a Python number: eager returns the number itself when it wins, a type no graph output
can have (torch.compile returns a tensor there).

As with torch.compile, the result is a new tensor with the winner's value; eager returns the
winning tensor object itself. Under autograd the losing tensors get zero gradients from the
``where`` (eager: no gradient, ``.grad`` stays None unless they are used elsewhere); tensors of which
only some require grad are Unsupported (whether eager's result requires grad depends on the values).
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import torch

from .exc import PythonError, Unsupported
from .pyops import binary_op
from .values import ConstantValue, TensorValue, Value

if TYPE_CHECKING:
    from .tracer import Tracer


def _check_one_element(v: TensorValue) -> None:
    n = v.fake.numel()
    if not isinstance(n, int):
        raise Unsupported(f"min()/max() over {v.describe()} of symbolic size",
                          "bool() of a tensor needs exactly one element; mark its size static.")
    if n == 0:
        raise PythonError.of(RuntimeError("Boolean value of Tensor with no values is ambiguous"))
    if n != 1:
        raise PythonError.of(RuntimeError("Boolean value of Tensor with more than one value is ambiguous"))


def _is_number(v: Value) -> bool:
    return isinstance(v, ConstantValue) and type(v.value) in (int, float, bool)


def tensor_minmax(tx: "Tracer", fn, items: list[Value]) -> Value:
    """``fn(items)`` (``fn`` the builtin min or max) when some item is a tensor."""
    cmp = operator.gt if fn is max else operator.lt
    if len(items) == 1:                                  # nothing is compared
        return items[0]
    for v in items:
        if isinstance(v, TensorValue):
            _check_one_element(v)
        elif _is_number(v):
            raise Unsupported(f"{fn.__name__}() of a tensor and a number ({v.describe()})",
                              "Eager returns the tensor or the Python number, whichever wins: the type of "
                              "the result depends on the values. Use torch.clamp(x, min=...) / "
                              "torch.clamp(x, max=...) for a tensor result.")
        else:
            raise Unsupported(f"{fn.__name__}() over tensors and {v.describe()}")
    tensors = [v for v in items if isinstance(v, TensorValue)]
    first = tensors[0]
    for t in tensors[1:]:
        if t.fake.dtype != first.fake.dtype or t.fake.shape != first.fake.shape:
            raise Unsupported(f"{fn.__name__}() over tensors of different dtypes or shapes "
                              f"({first.describe()}, {t.describe()})",
                              "Eager returns one of them unchanged; a graph would promote or broadcast. "
                              "Use torch.maximum / torch.minimum.")
    grads = {t.fake.requires_grad for t in tensors}
    if len(grads) > 1 and tx.gb.grad_enabled:
        raise Unsupported(f"{fn.__name__}() over tensors of which only some require grad",
                          "Eager's result requires grad only when such a tensor wins, which depends on the "
                          "values; detach them all or none.")
    best = items[0]
    for item in items[1:]:
        cond = binary_op(tx, cmp, item, best)            # a one-element bool tensor
        best = tx.gb.call("call_function", torch.where, (cond, item, best))
    return best


__all__ = ["tensor_minmax"]
