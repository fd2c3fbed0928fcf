"""Builtins and stdlib around model code that need more than a fold: ``id``, ``sys``,
``type.__subclasses__``, ``array`` and the ``typing`` objects.

``id(obj)``
    An object from outside the frame (a module, a class, a function, a list passed in...) has its
    real id, a constant guarded by the object's identity (ID_MATCH).  An object made in the frame
    (a list, dict, set, deque or user object) has no id before it exists at run time: its id is a
    ``FakeIdValue``, one per object, that compares equal only to the id of the same object.  It may
    be compared (``==``, ``!=``, ``is``) and kept in containers made in the frame; using it as a
    number, hashing it, or letting it outlive the frame is a graph break.  The id of a tensor
    input is a fake id too (guards keep distinct inputs distinct objects); the id of a tensor
    computed in the frame is a graph break (in-place ops and no-op conversions return their input,
    which the trace does not track as one object).
``sys.intern``     folds on a constant string.
``sys._getframe``  a graph break, as torch.compile (a skipped function).
``cls.__subclasses__()``
    the list of the class's subclasses now (classes are fixed by their guards; a subclass defined
    after compiling is not seen, as under torch.compile).
``typing``
    ``List[int]``, ``Optional[T]``, ``Dict[str, Any]``, ``typing.Any``... are constants
    (``TypingValue``): subscripted, compared, passed to ``torch.jit.annotate``, and
    ``typing.get_origin`` / ``typing.get_args`` answer from the real objects.
"""
from __future__ import annotations

import array
import operator
import sys
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

from . import attrs, calls, wrap
from .builtins_table import BUILTINS, builtin
from .builtins_table import consts as _consts
from .exc import PythonError, Unsupported
from .pyops import binary_op, fold, register_binary_rule, register_value_kind
from .stdlib_deque import DequeValue
from .values import (
    BuiltinValue,
    ClassValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    LazyValue,
    ListValue,
    ModuleValue,
    NestedFunctionValue,
    NewObjectValue,
    PartialValue,
    PythonModuleValue,
    SetValue,
    TensorValue,
    TorchOpValue,
    TupleValue,
    UserObjectValue,
    Value,
    real_object,
)

if TYPE_CHECKING:
    from .tracer import Tracer


# -- id ----------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class FakeIdValue(Value):
    """``id(obj)`` of an object that exists only once the compiled code runs: ``target`` is that
    object's value (one FakeIdValue per object, so equal ids are the same FakeIdValue)."""

    target: Any
    identity_unknown = True      # `id(a) is id(a)` is False in eager, `i is i` True: `is` breaks (pyops.is_op)

    def python_type(self) -> type:
        return int

    def describe(self) -> str:
        return f"the id() of a {self.target.describe()} made in the compiled frame"


_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)
# values made in the frame whose Value object is the real object's identity
_FRESH_KINDS = (ListValue, DictValue, SetValue, NewObjectValue, DequeValue, NestedFunctionValue)
# real objects that live as long as the program (their identity is fixed by what produced them)
_LASTING_KINDS = (ClassValue, BuiltinValue, TorchOpValue, PythonModuleValue, FunctionValue)


def _fake_ids(tx: "Tracer") -> dict:
    ids = tx.__dict__.get("_stdlib_fake_ids")
    if ids is None:
        ids = tx.__dict__["_stdlib_fake_ids"] = {}
    return ids


def _fake_id(tx: "Tracer", key: Any, target: Value) -> FakeIdValue:
    ids = _fake_ids(tx)
    v = ids.get(key)
    if v is None:
        v = ids[key] = FakeIdValue(target)
        ids[("keep", id(v))] = target              # (keeps ``key`` alive while the trace runs)
    return v


def _outside_object(tx: "Tracer", v: Value) -> tuple[bool, Any]:
    """(True, obj): the real object behind a value from outside the frame."""
    obj = real_object(v)
    if obj is not None and not isinstance(v, ConstantValue):
        return True, obj
    for obj, val in tx.memo.values():               # lists, dicts, sets, modules read from a source
        if val is v:
            return True, obj
    return False, None


@builtin(id)
def _id(tx: "Tracer", args, kwargs):
    if len(args) != 1 or kwargs:
        raise PythonError.of(TypeError(f"id() takes exactly one argument ({len(args)} given)"))
    v = tx.resolve(args[0])
    if isinstance(v, ConstantValue) and any(v.value is s for s in _SINGLETONS):
        return ConstantValue(id(v.value))
    if isinstance(v, TensorValue):
        if v.node.op in ("placeholder", "get_attr"):
            return _fake_id(tx, v.node, v)
        raise Unsupported("id() of a tensor computed in the compiled region",
                          "Compare tensors with `is` outside the compiled region, or key by a name instead.",
                          "In-place ops and no-op conversions (x.float() of a float tensor) return their "
                          "input tensor; the trace does not know which results are the same object.")
    if v.source is not None:
        if isinstance(v, ConstantValue):             # guarded by value so far: an equal object is not enough
            tx.guards.identity(v.source, v.value)
            return ConstantValue(id(v.value))
        ok, obj = _outside_object(tx, v)
        if ok:
            if not v.covered:
                tx.guards.identity(v.source, obj)
            return ConstantValue(id(obj))
    elif isinstance(v, _LASTING_KINDS):
        return ConstantValue(id(real_object(v)))
    elif isinstance(v, ModuleValue):                 # one real module, whatever value reached it
        return _fake_id(tx, ("module", id(v.module)), v)
    if v.source is None and isinstance(v, _FRESH_KINDS):
        return _fake_id(tx, id(v), v)
    raise Unsupported(f"id() of {v.describe()}",
                      "Only objects from outside the frame, tensor inputs and containers or objects "
                      "made in the frame have an id the trace can reason about.")


def _fake_id_rule(tx: "Tracer", op, a: Value, b: Value) -> Value | None:
    if not (isinstance(a, FakeIdValue) or isinstance(b, FakeIdValue)):
        return None
    if op in (operator.eq, operator.ne) and isinstance(a, FakeIdValue) and isinstance(b, FakeIdValue):
        return ConstantValue((a is b) == (op is operator.eq))
    raise Unsupported(f"operator {getattr(op, '__name__', op)} on {a.describe()} and {b.describe()}",
                      "The id of an object made in the compiled frame is only known at run time; compare "
                      "it with another such id.")


def _fake_id_truth(tx: "Tracer", v: FakeIdValue) -> bool:
    return True                                      # ids are never 0


def _fake_id_unary(tx: "Tracer", op, v: FakeIdValue) -> Value:
    raise Unsupported(f"operator {op.__name__} on {v.describe()}")


register_binary_rule("fake_id", _fake_id_rule, before="user")


def _lazy_tuple_rule(tx: "Tracer", op, a: Value, b: Value) -> Value | None:
    """Comparing a tuple from outside the frame whose items were not read yet (``sys.version_info
    >= (3, 8)``): its items are read (guarded), then compared as usual."""
    if op not in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
        return None
    lazy = [v for v in (a, b) if isinstance(v, TupleValue) and any(isinstance(i, LazyValue) for i in v.items)]
    if not lazy:
        return None
    for v in lazy:
        v.items = [tx.resolve(i) for i in v.items]
    return binary_op(tx, op, a, b)


register_binary_rule("lazy_tuple", _lazy_tuple_rule, before="fold")
register_value_kind(FakeIdValue, truth=_fake_id_truth, unary=_fake_id_unary)


# -- sys -----------------------------------------------------------------------------------------------------
@builtin(sys.intern)
def _intern(tx: "Tracer", args, kwargs):
    s = _consts(args, "sys.intern")
    return fold(sys.intern, *s)


_SKIPPED_HINT = ("If it is a Python builtin, please file an issue so that support for it can be added; "
                 "otherwise move the call outside the compiled region.")


@builtin(sys._getframe)
def _getframe(tx: "Tracer", args, kwargs):
    raise Unsupported("Attempted to call function marked as skipped", _SKIPPED_HINT,
                      "module: sys, qualname: _getframe, skip reason: frame objects of the compiled code "
                      "do not exist while it is traced")


@builtin(array.array)
def _array(tx: "Tracer", args, kwargs):
    raise Unsupported("Unsupported function call", "Avoid calling `<class 'array.array'>` in your code.",
                      "xcompile does not know how to trace the function `<class 'array.array'>`")


# -- cls.__subclasses__() ---------------------------------------------------------------------------------
def _subclasses_of(cls):
    """What ``cls.__subclasses__`` becomes while tracing (a real function: a break may rebuild it)."""
    return type.__subclasses__(cls)


@builtin(_subclasses_of)
def _subclasses(tx: "Tracer", args, kwargs):
    if len(args) != 1 or kwargs or not isinstance(args[0], ClassValue):
        raise Unsupported("type.__subclasses__ with unexpected arguments")
    subclasses: list[type] = type.__subclasses__(args[0].cls)
    return ListValue([ClassValue(c) for c in subclasses])


def _is_bound_subclasses(o) -> bool:
    return isinstance(o, types.BuiltinMethodType) and getattr(o, "__name__", None) == "__subclasses__" \
        and isinstance(getattr(o, "__self__", None), type)


def _wrap_bound_subclasses(tx: "Tracer", o, source, covered) -> Value:
    return PartialValue(BuiltinValue(_subclasses_of), [ClassValue(o.__self__)], {})


wrap.register_row(_is_bound_subclasses, _wrap_bound_subclasses)


@builtin(type.__subclasses__)
def _type_subclasses(tx: "Tracer", args, kwargs):
    raise Unsupported("Unsupported method call", "Avoid calling `type.__subclasses__` in your code.",
                      "xcompile does not know how to trace method `__subclasses__` of class `type`")


# -- typing --------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class TypingValue(ConstantValue):
    """A ``typing`` object (``List[int]``, ``Optional``, ``Any``, a TypeVar) or a ``list[int]``
    alias: immutable, compared and hashed as the real object."""

    def describe(self) -> str:
        return f"typing object {self.value!r}"


def is_typing_object(o: Any) -> bool:
    if isinstance(o, (types.GenericAlias, types.UnionType)):
        return True
    return not isinstance(o, type) and getattr(type(o), "__module__", None) == "typing" \
        and not isinstance(o, (types.FunctionType, types.BuiltinFunctionType))


def _wrap_typing(tx: "Tracer", o, source, covered) -> Value:
    if source is not None and not covered:
        tx.guards.identity(source, o)
    return TypingValue(o, source=source, covered=True)


wrap.register_row(is_typing_object, _wrap_typing)


def _real(v: Value) -> Any:
    """The real object a subscript of a typing object takes (classes, typing objects, None...)."""
    if isinstance(v, ConstantValue):
        return v.value
    if isinstance(v, TupleValue):
        return tuple(_real(i) for i in v.items)
    if isinstance(v, ListValue):
        return [_real(i) for i in v.items]
    obj = real_object(v)
    if obj is None or isinstance(v, (UserObjectValue, ModuleValue)):
        raise Unsupported(f"subscripting a typing object with {v.describe()}")
    return obj


def typing_result(tx: "Tracer", r: Any) -> Value:
    """A value for an object computed from typing objects at trace time (sourceless: it is fixed
    by the guards of what it came from)."""
    if is_typing_object(r):
        return TypingValue(r)
    if isinstance(r, tuple):
        return TupleValue([typing_result(tx, x) for x in r])
    return tx.wrap(r, None)


def _typing_getitem(tx: "Tracer", v: TypingValue, key: Value, subclass: Value) -> Value:
    try:
        r = v.value[_real(key)]
    except Exception as e:  # noqa: BLE001  (eager raises the same)
        raise PythonError.of(e) from None
    return typing_result(tx, r)


def _typing_attr(tx: "Tracer", v: TypingValue, name: str) -> Value:
    try:
        r = getattr(v.value, name)
    except AttributeError:
        raise attrs.AttrMissing(f"{v.value!r} has no attribute {name!r}") from None
    if callable(r) and not isinstance(r, type) and not is_typing_object(r):
        raise Unsupported(f"calling method {name!r} of {v.describe()}")
    return typing_result(tx, r)


def _union_rule(tx: "Tracer", op, a: Value, b: Value) -> Value | None:
    """``int | None``, ``torch.Tensor | List[int]``: a ``types.UnionType`` / typing Union."""
    if op is not operator.or_:
        return None

    def part(v: Value) -> bool:
        return isinstance(v, TypingValue) or isinstance(v, ClassValue) and type(v.cls).__or__ is type.__or__ \
            or isinstance(v, ConstantValue) and v.value is None
    if not (part(a) and part(b)) or not (isinstance(a, (TypingValue, ClassValue))
                                        or isinstance(b, (TypingValue, ClassValue))):
        return None
    try:
        r = _real(a) | _real(b)
    except TypeError as e:
        raise PythonError.of(e) from None
    return typing_result(tx, r)


register_binary_rule("typing_union", _union_rule, before="fold")
register_value_kind(TypingValue, getitem=_typing_getitem)
attrs.register_reader(TypingValue, _typing_attr)


def _typing_fold(fn):
    def h(tx: "Tracer", args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported(f"typing.{fn.__name__}() with unexpected arguments")
        return typing_result(tx, fn(_real(args[0])))
    return h


def _has_typing(v: Value) -> bool:
    return isinstance(v, TypingValue) or isinstance(v, ClassValue) and v.cls is typing.Any \
        or isinstance(v, TupleValue) and any(_has_typing(i) for i in v.items)


def _typing_isinstance(plain, is_sub: bool):
    """``isinstance(x, List)`` / ``isinstance(x, int | None)`` / ``isinstance(x, Optional[int])``:
    answered from the type of ``x`` and the real typing objects (eager's TypeError for a
    subscripted generic)."""
    def h(tx: "Tracer", args, kwargs):
        if len(args) != 2 or kwargs or not _has_typing(args[1]):
            return plain(tx, args, kwargs)
        if is_sub:
            if not isinstance(args[0], ClassValue):
                raise Unsupported("issubclass() of a non-class")
            cls = args[0].cls
        else:
            try:
                cls = args[0].python_type()
            except NotImplementedError:
                raise Unsupported(f"type of {args[0].describe()}") from None
        classes = _real(args[1])
        flat = classes if isinstance(classes, tuple) else (classes,)
        if any(isinstance(c, (typing.TypeVar, typing.ParamSpec)) for c in flat):
            raise Unsupported(f"{'issubclass' if is_sub else 'isinstance'}() against a TypeVar")
        if not is_sub and any(c is typing.Any for c in flat):
            raise PythonError.of(TypeError("typing.Any cannot be used with isinstance()"))
        try:
            return ConstantValue(issubclass(cls, classes))
        except TypeError as e:
            raise PythonError.of(e) from None
    return h


BUILTINS[isinstance] = _typing_isinstance(BUILTINS[isinstance], False)
BUILTINS[issubclass] = _typing_isinstance(BUILTINS[issubclass], True)
BUILTINS[typing.get_origin] = _typing_fold(typing.get_origin)
BUILTINS[typing.get_args] = _typing_fold(typing.get_args)


def _annotate(tx: "Tracer", args, kwargs) -> Value | None:
    """``torch.jit.annotate(T, value)`` is ``value`` (a torch callable: a rule of calls.py)."""
    bound = [*args, *(kwargs[k] for k in ("the_type", "the_value") if k in kwargs)]
    if len(bound) != 2:
        return None
    return bound[1]


calls.register_torch_op_rule(torch.jit.annotate, _annotate)


def _class_getitem(tx: "Tracer", v: ClassValue, key: Value, subclass: Value) -> Value:
    """``list[int]``, ``dict[str, T]``, ``Generic`` subclasses ``C[int]``: a typing alias."""
    cls = v.cls
    hook = getattr(cls, "__class_getitem__", None)
    if hook is None or not (cls.__module__ == "builtins" or getattr(hook, "__func__", None) is
                            getattr(typing.Generic.__class_getitem__, "__func__", None)):
        raise Unsupported(f"subscript of class {cls.__qualname__}")
    try:
        r = cast(Any, cls)[_real(key)]
    except Exception as e:  # noqa: BLE001  (eager raises the same)
        raise PythonError.of(e) from None
    return typing_result(tx, r)


register_value_kind(ClassValue, getitem=_class_getitem)


__all__ = ["FakeIdValue", "TypingValue", "is_typing_object", "typing_result"]
