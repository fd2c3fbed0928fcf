"""Python builtins and stdlib callables over symbolic values: one handler per callable.

``BUILTINS[fn](tx, args, kwargs) -> Value``.  Callables without a row fold at trace time
when they are pure and all their arguments are constants (``call_constant_function``);
anything else is Unsupported with the callable's name.
"""
from __future__ import annotations

import functools
import math
import operator
from typing import TYPE_CHECKING, Any, Callable

import torch

from . import builtins_more, hub, introspection  # noqa: F401  (their rows: itertools, collections, inspect...)
from .attrs import AttrMissing, load_attr
from .builtins_table import BUILTINS, Handler, builtin
from .builtins_table import consts as _consts
from .dict_keys import maybe_dict_key
from .exc import PythonError, Unsupported
from .iteration import get_iter, items_of, length_of
from .pyops import as_constant, binary_op, fold, getitem, truth, unary_op
from .tensor_minmax import tensor_minmax
from .values import (
    BoundMethodValue,
    BuiltinValue,
    ClassValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    IteratorValue,
    ListValue,
    ModuleValue,
    NestedFunctionValue,
    NewObjectValue,
    ObjectMethodValue,
    PartialValue,
    SetValue,
    TensorMethodValue,
    TensorValue,
    TorchOpValue,
    TupleValue,
    UserObjectValue,
    Value,
    dict_storage,
)

if TYPE_CHECKING:
    pass

def _call(tx, fn, args, kwargs=None) -> Value:
    return hub.call_value(tx, fn, args, kwargs or {})


# -- sizes, types ---------------------------------------------------------------------------------------
@builtin(len)
def _len(tx, args, kwargs):
    return ConstantValue(length_of(tx, args[0]))


def _class_of(v: Value) -> type:
    try:
        return v.python_type()
    except NotImplementedError:
        raise Unsupported(f"type of {v.describe()}") from None


def _classes(v: Value) -> tuple[type, ...]:
    if isinstance(v, ClassValue):
        return (v.cls,)
    if isinstance(v, TupleValue):
        return tuple(c for item in v.items for c in _classes(item))
    if isinstance(v, ConstantValue) and v.value is None:
        return (type(None),)
    raise Unsupported(f"isinstance() with {v.describe()} as the class")


@builtin(isinstance)
def _isinstance(tx, args, kwargs):
    obj, classes = args
    return ConstantValue(issubclass(_class_of(obj), _classes(classes)))


@builtin(issubclass)
def _issubclass(tx, args, kwargs):
    a, classes = args
    if not isinstance(a, ClassValue):
        raise Unsupported("issubclass() of a non-class")
    return ConstantValue(issubclass(a.cls, _classes(classes)))


@builtin(type)
def _type(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("type() with 3 arguments (class creation)")
    return ClassValue(_class_of(args[0]))


@builtin(callable)
def _callable(tx, args, kwargs):
    v = args[0]
    if isinstance(v, (ConstantValue, TensorValue, TupleValue, ListValue, DictValue)):
        return ConstantValue(False)
    if isinstance(v, (FunctionValue, NestedFunctionValue, BoundMethodValue, TorchOpValue, BuiltinValue,
                      ClassValue, PartialValue, ModuleValue, TensorMethodValue, ObjectMethodValue)):
        return ConstantValue(True)
    cls = hub.user_class_of(v)
    if cls is not None:
        return ConstantValue(callable(cls) and hasattr(cls, "__call__") and cls.__call__ is not object.__call__
                             if isinstance(v, NewObjectValue) else callable(v.obj))
    raise Unsupported(f"callable() of {v.describe()}")


# -- numbers --------------------------------------------------------------------------------------------
def _fold_or_unsupported(fn, what):
    def h(tx, args, kwargs):
        if fn in (str, repr) and len(args) == 1 and isinstance(args[0], UserObjectValue) \
                and isinstance(args[0].obj, BaseException):          # made at trace time: constant
            return fold(fn, args[0].obj)
        if fn in (str, repr, format) and len(args) == 1 and isinstance(args[0], ClassValue):
            return fold(fn, args[0].cls)        # str(type(x)): the class is fixed (guarded) at trace time
        if any(isinstance(a, TensorValue) for a in args):
            raise Unsupported(f"{what}() of a tensor needs its value at trace time",
                              "Keep the value as a tensor, or move this out of the compiled region.")
        return fold(fn, *_consts(args, what), **{k: c for k, c in zip(kwargs, _consts(list(kwargs.values()), what))})
    return h


_fn: Callable[..., Any]
for _fn in (int, float, complex, str, hash, repr, format, chr, ord, bin, hex, oct):
    BUILTINS[_fn] = _fold_or_unsupported(_fn, _fn.__name__)


@builtin(bool)
def _bool(tx, args, kwargs):
    return ConstantValue(truth(tx, args[0]) if args else False)


@builtin(abs, operator.abs)
def _abs(tx, args, kwargs):
    return unary_op(tx, operator.abs, args[0])


@builtin(operator.neg)
def _neg(tx, args, kwargs):
    return unary_op(tx, operator.neg, args[0])


@builtin(round)
def _round(tx, args, kwargs):
    if isinstance(args[0], TensorValue):
        return tx.gb.call("call_function", round, args, kwargs)
    return fold(round, *_consts(args, "round"))


BUILTINS[pow] = lambda tx, args, kwargs: (binary_op(tx, operator.pow, args[0], args[1]) if len(args) == 2
                                         else fold(pow, *_consts(args, "pow")))
BUILTINS[divmod] = lambda tx, args, kwargs: fold(divmod, *_consts(args, "divmod"))


def _sort_keys(tx, items: list[Value], key: Value | None, what: str) -> list[Any]:
    """The constant sort keys of ``items`` (``key(item)`` when a key function is given)."""
    if key is None or (isinstance(key, ConstantValue) and key.value is None):
        if any(isinstance(i, TensorValue) for i in items):
            raise Unsupported(f"{what}() over tensors compares their values",
                              "Use tensor ops (torch.maximum, torch.sort...) instead.")
        return _consts(items, what)
    return _consts([_call(tx, key, [i]) for i in items], f"{what}() key")


def _minmax(fn):
    def h(tx, args, kwargs):
        unknown = set(kwargs) - {"key", "default"}
        if unknown:
            raise Unsupported(f"{fn.__name__}() with keyword arguments {sorted(unknown)}")
        items = items_of(tx, args[0]) if len(args) == 1 else list(args)
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            raise PythonError.of(ValueError(f"{fn.__name__}() arg is an empty sequence"))
        key = kwargs.get("key")
        if (key is None or isinstance(key, ConstantValue) and key.value is None) and \
                any(isinstance(i, TensorValue) for i in items):
            return tensor_minmax(tx, fn, items)               # a chain of torch.where
        keys = _sort_keys(tx, items, key, fn.__name__)
        try:
            best = fn(range(len(items)), key=keys.__getitem__)     # the first best, like Python
        except TypeError as e:
            raise PythonError.of(e) from None
        return items[best]
    return h


BUILTINS[min] = _minmax(min)
BUILTINS[max] = _minmax(max)


@builtin(sum)
def _sum(tx, args, kwargs):
    items = items_of(tx, args[0])
    acc = args[1] if len(args) > 1 else kwargs.get("start", ConstantValue(0))
    for item in items:
        acc = binary_op(tx, operator.add, acc, item)
    return acc


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("matmul", operator.matmul), ("pow", operator.pow), ("and_", operator.and_),
                   ("or_", operator.or_), ("xor", operator.xor), ("eq", operator.eq), ("ne", operator.ne),
                   ("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("iadd", operator.iadd), ("imul", operator.imul)):
    BUILTINS[_op] = (lambda op: lambda tx, args, kwargs: binary_op(tx, op, args[0], args[1]))(_op)

BUILTINS[operator.getitem] = lambda tx, args, kwargs: getitem(tx, args[0], args[1])
BUILTINS[operator.not_] = lambda tx, args, kwargs: ConstantValue(not truth(tx, args[0]))
BUILTINS[operator.truth] = lambda tx, args, kwargs: ConstantValue(truth(tx, args[0]))


# -- containers and iteration ------------------------------------------------------------------------------
@builtin(tuple)
def _tuple(tx, args, kwargs):
    return TupleValue(items_of(tx, args[0]) if args else [])


@builtin(list)
def _list(tx, args, kwargs):
    return ListValue(items_of(tx, args[0]) if args else [])


def mapping_source(tx, v: Value) -> Value:
    """What dict(v) / d.update(v) read from a dict subclass made in the frame, as CPython's
    dict_merge: the storage itself for a dict subclass without __iter__, else keys() and
    v[k] (OrderedDict subclasses, overridden methods) collected into a DictValue."""
    if dict_storage(v) is v or not isinstance(v, (NewObjectValue, UserObjectValue)):
        return v
    if v.storage.cls is dict and not hub.defines(v, "__iter__"):
        return v.storage
    keys = items_of(tx, hub.call_value(tx, load_attr(tx, v, "keys"), [], {}))
    out: dict[Any, Value] = {}
    for k in keys:
        ok, kc = as_constant(k)
        if not ok:
            raise Unsupported("dict() of a mapping with non-constant keys")
        out[kc] = getitem(tx, v, k)
    return DictValue(out)


@builtin(dict)
def dict_builtin(tx, args, kwargs):
    items: dict[Any, Value] = {}
    if args:
        src = mapping_source(tx, args[0])
        if isinstance(src, DictValue):
            items.update({k: tx.resolve(v) for k, v in src.items.items()})
        else:
            for pair in items_of(tx, src):
                k, v = items_of(tx, pair)
                ok, kc = maybe_dict_key(k)
                if not ok:
                    raise Unsupported("dict() with non-constant keys")
                items[kc] = v
    items.update(kwargs)
    return DictValue(items)


@builtin(set)
def _set(tx, args, kwargs):
    s = SetValue([])
    for item in (items_of(tx, args[0]) if args else []):
        hub.set_add(s, item)
    return s


@builtin(range)
def _range(tx, args, kwargs):
    return ConstantValue(range(*_consts(args, "range")))


@builtin(slice)
def _slice(tx, args, kwargs):
    return ConstantValue(slice(*_consts(args, "slice")))


@builtin(enumerate)
def _enumerate(tx, args, kwargs):
    start = _consts([args[1] if len(args) > 1 else kwargs.get("start", ConstantValue(0))], "enumerate")[0]
    if hub.is_lazy(args[0]):                          # a generator: count as it is consumed
        src, n = args[0], [start]

        def pull(tx):
            v = hub.iter_next(tx, src)
            if v is None:
                return None
            n[0] += 1
            return TupleValue([ConstantValue(n[0] - 1), v])
        return hub.lazy("enumerate", pull)
    return IteratorValue([TupleValue([ConstantValue(i), v]) for i, v in enumerate(items_of(tx, args[0]), start)])


@builtin(zip)
def _zip(tx, args, kwargs):
    strict = kwargs.get("strict")
    if strict is not None and as_constant(strict)[1]:
        seqs = [items_of(tx, a) for a in args]
        if len({len(s) for s in seqs}) > 1:
            raise PythonError.of(ValueError("zip() arguments have different lengths"))
        return IteratorValue([TupleValue(list(t)) for t in zip(*seqs)])
    if any(hub.is_lazy(a) for a in args):
        its = [get_iter(tx, a) for a in args]
        return hub.lazy("zip", lambda tx: _row(tx, its, TupleValue))
    return IteratorValue([TupleValue(t) for t in _lockstep(tx, args)])


def _row(tx, its, make):
    row = []
    for it in its:
        v = hub.iter_next(tx, it)
        if v is None:
            return None
        row.append(v)
    return make(row)


def _lockstep(tx, iterables: list[Value]) -> list[list[Value]]:
    """Rows of items pulled in turn until one iterable ends (like zip: a generator is advanced
    only as far as zip advances it)."""
    its = [get_iter(tx, a) for a in iterables]
    rows: list[list[Value]] = []
    while its:
        row = []
        for it in its:
            v = hub.iter_next(tx, it)
            if v is None:
                return rows
            row.append(v)
        rows.append(row)
    return rows


@builtin(reversed)
def _reversed(tx, args, kwargs):
    return IteratorValue(list(reversed(items_of(tx, args[0]))))


@builtin(sorted)
def _sorted(tx, args, kwargs):
    items = items_of(tx, args[0])
    rev = _consts([kwargs.get("reverse", ConstantValue(False))], "sorted")[0]
    return ListValue(sort_values(tx, items, kwargs.get("key"), rev))


def sort_values(tx, items: list[Value], key: Value | None, reverse: bool) -> list[Value]:
    """Python's stable sort of values by constant keys."""
    keys = _sort_keys(tx, items, key, "sorted")
    try:
        order = sorted(range(len(items)), key=keys.__getitem__, reverse=bool(reverse))
    except TypeError as e:
        raise PythonError.of(e) from None
    return [items[i] for i in order]


BUILTINS[any] = lambda tx, args, kwargs: ConstantValue(any(truth(tx, i) for i in items_of(tx, args[0])))
BUILTINS[all] = lambda tx, args, kwargs: ConstantValue(all(truth(tx, i) for i in items_of(tx, args[0])))


@builtin(iter)
def _iter(tx, args, kwargs):
    return get_iter(tx, args[0])


@builtin(next)
def _next(tx, args, kwargs):
    v = hub.iter_next(tx, args[0])
    if v is None:
        if len(args) > 1:
            return args[1]
        raise PythonError.of(StopIteration())
    return v


@builtin(map)
def _map(tx, args, kwargs):
    fn = args[0]
    if any(hub.is_lazy(a) for a in args[1:]):
        its = [get_iter(tx, a) for a in args[1:]]
        return hub.lazy("map", lambda tx: _row(tx, its, lambda row: _call(tx, fn, row)))
    return IteratorValue([_call(tx, fn, row) for row in _lockstep(tx, list(args[1:]))])


@builtin(filter)
def _filter(tx, args, kwargs):
    fn = args[0]
    keep = (lambda v: truth(tx, v)) if isinstance(fn, ConstantValue) and fn.value is None \
        else (lambda v: truth(tx, _call(tx, fn, [v])))
    if hub.is_lazy(args[1]):
        src = args[1]

        def pull(tx):
            while (v := hub.iter_next(tx, src)) is not None:
                if keep(v):
                    return v
            return None
        return hub.lazy("filter", pull)
    return IteratorValue([v for v in items_of(tx, args[1]) if keep(v)])


# -- attributes -----------------------------------------------------------------------------------------------
@builtin(getattr)
def _getattr(tx, args, kwargs):
    name = _consts([args[1]], "getattr")[0]
    try:
        return load_attr(tx, args[0], name)
    except AttrMissing:
        if len(args) > 2:
            return args[2]
        raise


@builtin(hasattr)
def _hasattr(tx, args, kwargs):
    name = _consts([args[1]], "hasattr")[0]
    try:
        load_attr(tx, args[0], name)
        return ConstantValue(True)
    except AttrMissing:
        return ConstantValue(False)


# -- functools ---------------------------------------------------------------------------------------------------
@builtin(functools.partial)
def _partial(tx, args, kwargs):
    return PartialValue(args[0], list(args[1:]), dict(kwargs))


@builtin(functools.reduce)
def _reduce(tx, args, kwargs):
    fn, items = args[0], items_of(tx, args[1])
    if len(args) > 2:
        acc = args[2]
    elif items:
        acc, items = items[0], items[1:]
    else:
        raise Unsupported("reduce() of an empty sequence with no initial value")
    for item in items:
        acc = _call(tx, fn, [acc, item])
    return acc


# -- things that never trace ---------------------------------------------------------------------------------
def _never(reason: str, hint: str) -> Handler:
    def h(tx, args, kwargs):
        raise Unsupported(reason, hint)
    return h


BUILTINS[print] = _never("call to builtin print",
                         "Printing happens at trace time only; remove the print or move it outside the "
                         "compiled region.")
BUILTINS[id] = _never("call to builtin id", "Object ids depend on the run; avoid id() in compiled code.")
for _fn in (input, open, eval, exec, vars, locals, globals, breakpoint):
    BUILTINS[_fn] = _never(f"call to builtin {_fn.__name__}", "Move it outside the compiled region.")


# -- namedtuples, pure constant functions (methods of containers: container_methods.py) -------------------
def make_namedtuple(tx, cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    fields = cls._fields  # type: ignore[attr-defined]  # a namedtuple class
    defaults = getattr(cls, "_field_defaults", {})
    vals = dict(zip(fields, args))
    vals.update(kwargs)
    for f in fields:
        if f not in vals:
            if f not in defaults:
                raise Unsupported(f"{cls.__name__}() missing argument {f!r}")
            vals[f] = tx.wrap(defaults[f], None)
    return TupleValue([vals[f] for f in fields], cls=cls)


_PURE_CLASSES = (torch.Size, torch.device, torch.finfo, torch.iinfo, frozenset)
_PURE_MODULES = ("math", "operator", "_operator")
_PURE_BUILTIN_TYPES = (int, float, complex, str, bytes, bool)


def call_constant_function(tx, fn: Any, args: list[Value], kwargs: dict[str, Value]) -> Value:
    owner = getattr(fn, "__self__", None)            # identity, not ==: a bound ndarray method's
    pure = fn in _PURE_CLASSES or getattr(fn, "__module__", None) in _PURE_MODULES \
        or any(owner is t for t in _PURE_BUILTIN_TYPES)   # self compares elementwise (float.fromhex...)
    name = getattr(fn, "__name__", repr(fn))
    if pure:
        cargs = _consts(args, name)
        ckw = dict(zip(kwargs, _consts(list(kwargs.values()), name)))
        return fold(functools.partial(fn, **ckw), *cargs, what=name)
    raise Unsupported(f"call to {'builtin ' if isinstance(fn, type(len)) else ''}{name}",
                      "This callable is not supported inside a compiled region yet.")


BUILTINS[math.floor] = lambda tx, args, kwargs: fold(math.floor, *_consts(args, "math.floor"))
BUILTINS[math.ceil] = lambda tx, args, kwargs: fold(math.ceil, *_consts(args, "math.ceil"))

hub.register(
    BUILTINS=BUILTINS, call_constant_function=call_constant_function, dict_builtin=dict_builtin,
    make_namedtuple=make_namedtuple, mapping_source=mapping_source,
)
