"""``inspect`` over traced callables: signatures are read at trace time.

Model code asks how many parameters a function takes (``len(inspect.signature(fn).parameters)``,
``"x" in inspect.signature(fn).parameters``).  The callable is fixed by its guards, so its
signature is a constant of the trace: ``inspect.signature`` is answered from the real function,
never traced through (``inspect.unwrap`` keys a dict by ``id()``).  The result is a
``ConstantValue`` around the real ``Signature``; ``.parameters`` is a dict made in the frame
(name -> ``Parameter`` constant), so ``len``, ``in``, ``keys()``, ``items()`` and iteration are
the dict's own.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from . import hub
from .builtins_table import builtin
from .exc import PythonError, Unsupported
from .values import (
    BoundMethodValue,
    ClassValue,
    ConstantValue,
    DictValue,
    ModuleValue,
    NestedFunctionValue,
    PartialValue,
    Value,
    real_object,
)

if TYPE_CHECKING:
    from .tracer import Tracer


def _callable_of(v: Value) -> Any:
    """The real callable behind ``v`` whose signature eager would compute."""
    if isinstance(v, BoundMethodValue):
        fn = _callable_of(v.func)
        self_obj = real_object(v.self_value)
        if self_obj is None:
            # a method of an object made in the frame: its signature without the first parameter
            sig = inspect.signature(fn)
            return _Dropped(sig.replace(parameters=list(sig.parameters.values())[1:]))
        return fn.__get__(self_obj)
    if isinstance(v, ModuleValue):
        return v.module
    if isinstance(v, NestedFunctionValue):
        raise Unsupported("inspect.signature() of a function made in the compiled frame")
    if isinstance(v, PartialValue):
        raise Unsupported("inspect.signature() of a functools.partial made in the compiled frame")
    obj = real_object(v)
    if obj is None or not callable(obj):
        raise Unsupported(f"inspect.signature() of {v.describe()}")
    return obj


class _Dropped:
    """A signature computed already (bound method of an object made in the frame)."""

    def __init__(self, sig: inspect.Signature):
        self.sig = sig


@builtin(inspect.signature)
def _signature(tx: "Tracer", args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("inspect.signature() with options")
    target = _callable_of(args[0])
    if isinstance(target, _Dropped):
        return ConstantValue(target.sig)
    try:
        return ConstantValue(inspect.signature(target))
    except (TypeError, ValueError) as e:       # eager raises the same
        raise PythonError.of(e) from None


def signature_attr(tx: "Tracer", v: ConstantValue, name: str) -> Value | None:
    """Attributes of a Signature / Parameter constant (None: not one of those)."""
    obj = v.value
    if isinstance(obj, inspect.Signature):
        if name == "parameters":
            return DictValue({k: ConstantValue(p) for k, p in obj.parameters.items()})
        if name == "return_annotation":
            return _plain(tx, obj.return_annotation)
        return None
    if isinstance(obj, inspect.Parameter):
        if name in ("default", "annotation"):
            return _plain(tx, getattr(obj, name))
        return None
    return None


def _plain(tx: "Tracer", obj: Any) -> Value:
    if isinstance(obj, type):
        return ClassValue(obj)
    return tx.wrap(obj, None)


__all__ = ["signature_attr"]

hub.register(
    signature_attr=signature_attr,
)
