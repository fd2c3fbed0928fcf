"""Writes to objects: ``obj.name = v`` and ``del obj.name`` on the values that allow it.

    new object (made in the frame)   its own attribute dict (``NewObjectValue.attrs``)
    object from outside the frame    recorded in ``tx.side_effects`` (read back from there by
                                     ``attrs.py``), applied with setattr after the graph
    nn.Module                        the same; nn.Module.__setattr__ routes it when applied
    property with a setter           the setter is inlined
    user __setattr__                 inlined (``object.__setattr__`` inside it records the store)

Objects whose class has other data descriptors (``__slots__``, C-level getsets) or a C-level
``__setattr__`` are Unsupported.
"""
from __future__ import annotations

import operator as op
import types
from typing import TYPE_CHECKING, Callable

import torch

from . import hub
from .attrs import MISSING, AttrMissing, load_attr, mro_lookup
from .exc import PythonError, Unsupported
from .module_creation import NewModuleValue, store_on_new_module
from .side_effects import DELETED
from .tensor_attrs import store_tensor_attr
from .values import (
    ClassValue,
    ConstantValue,
    FunctionValue,
    ModuleValue,
    NewObjectValue,
    TensorValue,
    UserObjectValue,
    Value,
)

if TYPE_CHECKING:
    from .tracer import Tracer

_PLAIN_SETATTR = (object.__setattr__, torch.nn.Module.__setattr__)


def _setter(tx: "Tracer", cls: type, name: str, obj_v: Value, value: Value | None) -> bool:
    """Run a class-level data descriptor's setter/deleter; False when there is none."""
    idx, raw = mro_lookup(cls, name)
    if raw is MISSING:
        return False
    if isinstance(raw, property):
        fn = raw.fset if value is not None else raw.fdel
        if fn is None:
            raise PythonError.of(AttributeError(f"property {name!r} of {cls.__name__!r} object has no "
                                                f"{'setter' if value is not None else 'deleter'}"))
        args = [obj_v, value] if value is not None else [obj_v]
        if isinstance(fn, types.FunctionType):
            tx.inline_call(None, FunctionValue(fn), args, {})
        else:                                   # a builtin or callable object as the accessor
            hub.call_value(tx, tx.wrap(fn, None, True), args, {})
        return True
    if hasattr(type(raw), "__set__") or hasattr(type(raw), "__delete__"):
        raise Unsupported(f"assignment to {name!r} of {obj_v.describe()}, a {type(raw).__name__} descriptor",
                          "Only plain attributes and properties can be assigned inside a compiled region.")
    return False


def _user_setattr(cls: type):
    """The class's __setattr__ when it is a Python function (to inline), else None."""
    idx, raw = mro_lookup(cls, "__setattr__")
    return raw if isinstance(raw, types.FunctionType) else None


def store_attribute(tx: "Tracer", obj: Value, name: str, value: Value, *, plain: bool = False) -> None:
    """``obj.name = value``; ``plain``: ``object.__setattr__(obj, name, value)`` (skips a user
    __setattr__, e.g. the one calling it)."""
    _write(tx, obj, name, value, plain)


def delete_attribute(tx: "Tracer", obj: Value, name: str) -> None:
    """``del obj.name``: AttributeError (catchable) when it does not exist."""
    try:
        load_attr(tx, obj, name)
    except AttrMissing:
        raise PythonError.of(AttributeError(name)) from None
    _write(tx, obj, name, None, False)


def _write(tx: "Tracer", obj: Value, name: str, value: Value | None, plain: bool) -> None:
    if isinstance(obj, NewObjectValue):
        custom = _user_setattr(obj.cls) if value is not None and not plain else None
        if custom is not None:                     # e.g. a frozen dataclass raising on assignment
            assert value is not None               # custom is only looked up for an assignment
            tx.inline_call(None, FunctionValue(custom), [obj, ConstantValue(name), value], {})
            return
        if not _setter(tx, obj.cls, name, obj, value):
            if value is None:
                obj.attrs.pop(name, None)
            else:
                obj.attrs[name] = value
        return
    if isinstance(obj, NewModuleValue):                   # a module made in the frame (module_creation.py)
        if not (value is not None and not plain and _setter(tx, type(obj.module), name, obj, value)):
            store_on_new_module(tx, obj, name, value, plain)
        return
    if isinstance(obj, (UserObjectValue, ModuleValue)):
        real = obj.obj if isinstance(obj, UserObjectValue) else obj.module
        cls = type(real)
        custom = _user_setattr(cls) if value is not None and not plain else None
        if custom is not None and custom not in _PLAIN_SETATTR:
            assert value is not None               # custom is only looked up for an assignment
            tx.inline_call(None, FunctionValue(custom), [obj, ConstantValue(name), value], {})
            return
        if not plain and cls.__setattr__ not in _PLAIN_SETATTR:
            raise Unsupported(f"assignment to attribute {name!r} of {obj.describe()}, whose class has "
                              f"a builtin __setattr__")
        if value is None and cls.__delattr__ not in (object.__delattr__, torch.nn.Module.__delattr__):
            raise Unsupported(f"deleting attribute {name!r} of {obj.describe()}, "
                              "whose class defines __delattr__")
        if isinstance(real, (type, types.ModuleType)):
            raise Unsupported(f"assignment to attribute {name!r} of {obj.describe()}")
        if _setter(tx, cls, name, obj, value):
            return
        if obj.source is None and not isinstance(real, BaseException):
            raise Unsupported(f"assignment to attribute {name!r} of {obj.describe()} reached through "
                              "library code", "Only objects reached from the frame's arguments, globals "
                              "and closures can be changed inside a compiled region.")
        if isinstance(real, BaseException):            # exceptions are made in the frame
            if value is None:
                delattr(real, name)
            else:
                ok, c = _constant(value)
                if not ok:
                    raise Unsupported(f"storing {value.describe()} on an exception")
                setattr(real, name, c)
            return
        if isinstance(real, torch.nn.Module) and value is not None:
            _check_module_assignment(real, name, value)
        if value is not None and _same_tensor(tx, real, name, value):
            return                                 # `self.n += 1` on a tensor: in place, already done
        _pin_same_object(tx, obj, real)
        tx.side_effects.store_attr(obj, real, name, DELETED if value is None else value)
        return
    if isinstance(obj, TensorValue):                      # `x.tag = 1` (tensor_attrs.py)
        store_tensor_attr(tx, obj, name, value)
        return
    if isinstance(obj, ClassValue):
        raise Unsupported(f"assignment to class attribute {obj.cls.__qualname__}.{name}",
                          "Changing classes inside a compiled region is not supported.")
    raise Unsupported(f"assignment to attribute {name!r} of {obj.describe()}",
                      "Only plain objects, nn.Modules and objects made in the frame can be changed.")


def _same_tensor(tx: "Tracer", real: object, name: str, value: Value) -> bool:
    """``value`` is the very tensor ``real.name`` holds now (an in-place op returned it)."""
    if not isinstance(value, TensorValue):
        return False
    current = tx.side_effects.attr(real, name)
    if current is None:
        d = getattr(real, "__dict__", {})
        t = d.get(name)
        if t is None and isinstance(real, torch.nn.Module):
            t = real._buffers.get(name, real._parameters.get(name))
        current = tx.gb.by_id.get(id(t)) if isinstance(t, torch.Tensor) else None
    return isinstance(current, TensorValue) and current.fake is value.fake


def _check_module_assignment(m: torch.nn.Module, name: str, value: Value) -> None:
    """The TypeErrors nn.Module.__setattr__ raises, raised at trace time."""
    is_none = isinstance(value, ConstantValue) and value.value is None
    if name in m._modules and not isinstance(value, ModuleValue) and not is_none:
        raise PythonError.of(TypeError(f"cannot assign {value.describe()} as child module {name!r} "
                                       "(torch.nn.Module or None expected)"))
    if name in m._parameters and not is_none and not (
            isinstance(value, TensorValue) and value.cls is torch.nn.Parameter):
        raise PythonError.of(TypeError(f"cannot assign {value.describe()} as parameter {name!r} "
                                       "(torch.nn.Parameter or None expected)"))


def _constant(v: Value):
    return hub.as_constant(v)


def _pin_same_object(tx: "Tracer", obj_v: Value | None, real: object) -> None:
    """Writes to ``real`` were recorded through another source: the two must stay one object."""
    first = tx.side_effects.attrs_source(real)
    if first is not None and obj_v is not None and obj_v.source is not None and obj_v.source != first:
        tx.guards.same_object(first, obj_v.source)


def stored_attribute(tx: "Tracer", real: object, name: str, obj_v: Value | None = None) -> Value | None:
    """What the trace stored in ``real.name`` (None: nothing; AttrMissing raised when deleted)."""
    v = tx.side_effects.attr(real, name)
    if v is not None:
        _pin_same_object(tx, obj_v, real)
    if v is DELETED:
        raise AttrMissing(f"{type(real).__name__} object has no attribute {name!r}",
                          "The attribute was deleted earlier in the traced code.")
    return v


__all__ = ["delete_attribute", "store_attribute", "stored_attribute"]


# -- dunder protocols of user classes ------------------------------------------------------------------------
class _NotDefined:
    def __repr__(self) -> str:
        return "<not defined>"


NOT_DEFINED = _NotDefined()


def user_class_of(v: Value) -> type | None:
    """The class of a user object value (made in the frame or from outside), else None."""
    if isinstance(v, NewObjectValue):
        return v.cls
    if isinstance(v, UserObjectValue) and not isinstance(v.obj, BaseException):
        return type(v.obj)
    return None


def defines(v: Value, name: str) -> bool:
    cls = user_class_of(v)
    if cls is None:
        return False
    _, raw = mro_lookup(cls, name)
    return isinstance(raw, (types.FunctionType, staticmethod, classmethod))


def call_dunder(tx: "Tracer", v: Value, name: str, args: list[Value]) -> Value | _NotDefined:
    """``type(v).name(v, *args)`` when the class defines it in Python, else NOT_DEFINED."""
    if not defines(v, name):
        return NOT_DEFINED
    return hub.call_value(tx, load_attr(tx, v, name), list(args), {})


def _binary_names() -> dict:
    names = {op.add: "add", op.sub: "sub", op.mul: "mul", op.truediv: "truediv", op.floordiv: "floordiv",
             op.mod: "mod", op.pow: "pow", op.matmul: "matmul", op.and_: "and", op.or_: "or",
             op.xor: "xor", op.lshift: "lshift", op.rshift: "rshift"}
    table: dict[Callable, tuple[str, ...]] = {f: (f"__{n}__", f"__r{n}__") for f, n in names.items()}
    inplace = {op.iadd: op.add, op.isub: op.sub, op.imul: op.mul, op.itruediv: op.truediv,
               op.ifloordiv: op.floordiv, op.imod: op.mod, op.ipow: op.pow, op.imatmul: op.matmul,
               op.iand: op.and_, op.ior: op.or_, op.ixor: op.xor, op.ilshift: op.lshift,
               op.irshift: op.rshift}
    for f, base in inplace.items():
        table[f] = ("__i" + table[base][0][2:],) + table[base]
    for f, a, b in ((op.eq, "eq", "eq"), (op.ne, "ne", "ne"), (op.lt, "lt", "gt"), (op.gt, "gt", "lt"),
                    (op.le, "le", "ge"), (op.ge, "ge", "le")):
        table[f] = (f"__{a}__", f"__{b}__")
    return table


_BINARY = _binary_names()
_UNARY = {"neg": "__neg__", "pos": "__pos__", "invert": "__invert__", "abs": "__abs__"}


def _not_implemented(v: Value | _NotDefined) -> bool:
    return isinstance(v, ConstantValue) and v.value is NotImplemented


def user_binary_op(tx: "Tracer", op, a: Value, b: Value) -> Value | _NotDefined:
    """Python's binary operator protocol for user objects (in-place, then forward, then reflected)."""
    if user_class_of(a) is None and user_class_of(b) is None:
        return NOT_DEFINED
    names = _BINARY.get(op)
    if names is None:
        return NOT_DEFINED
    if len(names) == 3:                                  # in-place: __iadd__ first
        r = call_dunder(tx, a, names[0], [b])
        if r is not NOT_DEFINED and not _not_implemented(r):
            return r
        names = names[1:]
    r = call_dunder(tx, a, names[0], [b])
    if r is not NOT_DEFINED and not _not_implemented(r):
        return r
    r = call_dunder(tx, b, names[1], [a])
    if r is not NOT_DEFINED and not _not_implemented(r):
        return r
    if names[0] == "__ne__":                             # object.__ne__: the inverse of __eq__
        for x, y in ((a, b), (b, a)):
            r = call_dunder(tx, x, "__eq__", [y])
            if isinstance(r, ConstantValue) and isinstance(r.value, bool):
                return ConstantValue(not r.value)
            if r is not NOT_DEFINED and not _not_implemented(r):
                return NOT_DEFINED                       # (not a bool: its truth is not known here)
    return NOT_DEFINED


def user_unary_op(tx: "Tracer", op, a: Value) -> Value | _NotDefined:
    name = _UNARY.get(getattr(op, "__name__", ""))
    return NOT_DEFINED if name is None else call_dunder(tx, a, name, [])

hub.register(
    NOT_DEFINED=NOT_DEFINED, call_dunder=call_dunder, defines=defines,
    delete_attribute=delete_attribute, store_attribute=store_attribute,
    stored_attribute=stored_attribute, user_binary_op=user_binary_op, user_class_of=user_class_of,
    user_unary_op=user_unary_op,
)
