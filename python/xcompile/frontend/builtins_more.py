"""More rows of ``builtins_rules.BUILTINS``: the stdlib that models use around tensor code.

    itertools     chain (+ from_iterable), product, accumulate, islice, zip_longest,
                  combinations, permutations, pairwise, starmap, takewhile, dropwhile, compress
                  (count, repeat, groupby and returned iterators: stdlib_iterators.py)
    collections   OrderedDict, defaultdict
    operator      itemgetter, attrgetter, methodcaller, the operators missing from builtins_rules
    functools     lru_cache / cache wrappers: called at trace time on constant (or identity-
                  guarded) arguments, their result a constant as the cache makes it; else the
                  wrapped function is inlined; partial objects from outside (builtins_rules)
    builtins      setattr, delattr, dict.fromkeys, frozenset, object attribute helpers

Every iterator here is finite and built eagerly over values (``IteratorValue``), so the items
may be tensors; only the control decisions (lengths, keys, predicates) must be constants.
"""
from __future__ import annotations

import collections
import contextlib
import itertools
import operator
from typing import Any, Callable

from ..guards.sources import AttrSource
from . import hub
from .attrs import object_init
from .builtins_table import BUILTINS, builtin
from .builtins_table import consts as _consts
from .exc import PythonError, Unsupported
from .iteration import items_of
from .pyops import as_constant, binary_op, getitem, truth, unary_op
from .values import (
    BuiltinValue,
    ClassValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    IteratorValue,
    ModuleValue,
    PartialValue,
    SetValue,
    TupleValue,
    UserObjectValue,
    Value,
    is_constant,
    real_object,
)


def _call(tx, fn: Value, args: list[Value], kwargs: dict | None = None) -> Value:
    return hub.call_value(tx, fn, args, kwargs or {})


def _int(v: Value | None, what: str, default=None):
    if v is None:
        return default
    return _consts([v], what)[0]


def _it(items, kind: Any = None) -> IteratorValue:
    """A finite iterator over ``items``; ``kind`` is the eager iterator's type (how one returned
    from the frame is rebuilt: stdlib_iterators.REBUILD)."""
    return IteratorValue(list(items), kind=kind)


# -- itertools -----------------------------------------------------------------------------------------------
@builtin(itertools.chain)
def _chain(tx, args, kwargs):
    return _it((x for a in args for x in items_of(tx, a)), itertools.chain)


@builtin(itertools.chain.from_iterable)
def _chain_from_iterable(tx, args, kwargs):
    return _it((x for a in items_of(tx, args[0]) for x in items_of(tx, a)), itertools.chain)


@builtin(itertools.product)
def _product(tx, args, kwargs):
    repeat = _int(kwargs.get("repeat"), "product", 1)
    pools = [items_of(tx, a) for a in args] * repeat
    return _it((TupleValue(list(t)) for t in itertools.product(*pools)), itertools.product)


@builtin(itertools.accumulate)
def _accumulate(tx, args, kwargs):
    items = items_of(tx, args[0])
    fn = args[1] if len(args) > 1 else kwargs.get("func")
    acc = kwargs.get("initial")
    if isinstance(acc, ConstantValue) and acc.value is None:
        acc = None
    out = []
    if acc is not None:
        out.append(acc)
    for item in items:
        if acc is None:
            acc = item
        elif fn is None or (isinstance(fn, ConstantValue) and fn.value is None):
            acc = binary_op(tx, operator.add, acc, item)
        else:
            acc = _call(tx, fn, [acc, item])
        out.append(acc)
    return _it(out, itertools.accumulate)


@builtin(itertools.islice)
def _islice(tx, args, kwargs):
    bounds = _consts(args[1:], "islice")
    if not 1 <= len(bounds) <= 3 or kwargs:
        raise PythonError.of(TypeError("islice expected 2 to 4 arguments"))
    if any(b is not None and (not isinstance(b, int) or b < 0) for b in bounds):
        raise PythonError.of(ValueError("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize."))
    cut = slice(*bounds) if len(bounds) != 1 else slice(bounds[0])
    if hub.is_lazy(args[0]) and cut.stop is not None:     # a generator, itertools.count...: as far as islice reads
        items = []
        while len(items) < cut.stop and (v := hub.iter_next(tx, args[0])) is not None:
            items.append(v)
    else:
        items = items_of(tx, args[0])
    return _it(items[cut], itertools.islice)


@builtin(itertools.zip_longest)
def _zip_longest(tx, args, kwargs):
    fill = kwargs.get("fillvalue", ConstantValue(None))
    seqs = [items_of(tx, a) for a in args]
    n = max((len(s) for s in seqs), default=0)
    return _it((TupleValue([s[i] if i < len(s) else fill for s in seqs]) for i in range(n)), itertools.zip_longest)


def _combinatoric(fn):
    def h(tx, args, kwargs):
        items = items_of(tx, args[0])
        r = args[1] if len(args) > 1 else kwargs.get("r")
        idx = fn(range(len(items))) if r is None else fn(range(len(items)), _int(r, fn.__name__))
        return _it((TupleValue([items[i] for i in t]) for t in idx), fn)
    return h


BUILTINS[itertools.combinations] = _combinatoric(itertools.combinations)
BUILTINS[itertools.permutations] = _combinatoric(itertools.permutations)
BUILTINS[itertools.combinations_with_replacement] = _combinatoric(itertools.combinations_with_replacement)


@builtin(itertools.pairwise)
def _pairwise(tx, args, kwargs):
    items = items_of(tx, args[0])
    return _it((TupleValue([a, b]) for a, b in zip(items, items[1:])), itertools.pairwise)


@builtin(itertools.starmap)
def _starmap(tx, args, kwargs):
    return _it((_call(tx, args[0], items_of(tx, a)) for a in items_of(tx, args[1])), itertools.starmap)


@builtin(itertools.takewhile)
def _takewhile(tx, args, kwargs):
    out = []
    if hub.is_lazy(args[1]):                              # a generator, itertools.count...: item by item
        while (item := hub.iter_next(tx, args[1])) is not None and truth(tx, _call(tx, args[0], [item])):
            out.append(item)
        return _it(out, itertools.takewhile)
    for item in items_of(tx, args[1]):
        if not truth(tx, _call(tx, args[0], [item])):
            break
        out.append(item)
    return _it(out, itertools.takewhile)


@builtin(itertools.dropwhile)
def _dropwhile(tx, args, kwargs):
    items = items_of(tx, args[1])
    i = 0
    while i < len(items) and truth(tx, _call(tx, args[0], [items[i]])):
        i += 1
    return _it(items[i:], itertools.dropwhile)


@builtin(itertools.compress)
def _compress(tx, args, kwargs):
    return _it((d for d, s in zip(items_of(tx, args[0]), items_of(tx, args[1])) if truth(tx, s)), itertools.compress)


# -- collections ---------------------------------------------------------------------------------------------
@builtin(collections.OrderedDict)
def _ordered_dict(tx, args, kwargs):
    d = hub.dict_builtin(tx, args, kwargs)
    d.cls = collections.OrderedDict
    return d


@builtin(collections.defaultdict)
def _defaultdict(tx, args, kwargs):
    factory = args[0] if args else None
    if isinstance(factory, ConstantValue) and factory.value is None:
        factory = None
    d = hub.dict_builtin(tx, list(args[1:]), kwargs)
    d.cls = collections.defaultdict
    d.default_factory = factory
    return d


def _fromkeys_of(cls: type):
    def h(tx, args, kwargs):
        if kwargs or not 1 <= len(args) <= 2:
            raise PythonError.of(TypeError(f"fromkeys expected 1 or 2 arguments, got {len(args)}"))
        keys = _consts(items_of(tx, args[0]), f"{cls.__name__}.fromkeys")
        value = args[1] if len(args) > 1 else ConstantValue(None)
        return DictValue({k: value for k in keys}, cls=cls)
    return h


for _cls in (dict, collections.OrderedDict, collections.defaultdict):
    BUILTINS[_cls.fromkeys] = _fromkeys_of(_cls)


@builtin(frozenset)
def _frozenset(tx, args, kwargs):
    return ConstantValue(frozenset(_consts(items_of(tx, args[0]), "frozenset") if args else ()))


# -- operator: getters and callers ------------------------------------------------------------------------
# The callables the getters become while tracing; real implementations too, so the replacement
# code of a graph break can rebuild a getter that is live at the break.
def _itemgetter_call(keys, obj):
    return operator.itemgetter(*keys)(obj)


def _attrgetter_call(names, obj):
    return operator.attrgetter(*names)(obj)


def _methodcaller_call(name, args, kwargs, obj):
    return getattr(obj, name)(*args, **kwargs)


@builtin(operator.itemgetter)
def _itemgetter(tx, args, kwargs):
    return PartialValue(BuiltinValue(_itemgetter_call), [TupleValue(list(args))], {})


@builtin(_itemgetter_call)
def _itemgetter_apply(tx, args, kwargs):
    keys, obj = args[0].items, args[1]
    picked = [getitem(tx, obj, k) for k in keys]
    return picked[0] if len(picked) == 1 else TupleValue(picked)


@builtin(operator.attrgetter)
def _attrgetter(tx, args, kwargs):
    names = _consts(args, "attrgetter")
    return PartialValue(BuiltinValue(_attrgetter_call), [ConstantValue(tuple(names))], {})


@builtin(_attrgetter_call)
def _attrgetter_apply(tx, args, kwargs):
    names, obj = args[0].value, args[1]
    out = []
    for dotted in names:
        v = obj
        for part in dotted.split("."):
            v = hub.load_attr(tx, v, part)
        out.append(v)
    return out[0] if len(out) == 1 else TupleValue(out)


@builtin(operator.methodcaller)
def _methodcaller(tx, args, kwargs):
    name = _consts([args[0]], "methodcaller")[0]
    return PartialValue(BuiltinValue(_methodcaller_call),
                        [ConstantValue(name), TupleValue(list(args[1:])), DictValue(dict(kwargs))], {})


@builtin(_methodcaller_call)
def _methodcaller_apply(tx, args, kwargs):
    name, margs, mkwargs, obj = args[0].value, args[1].items, args[2].items, args[3]
    return _call(tx, hub.load_attr(tx, obj, name), list(margs), dict(mkwargs))


_op: Callable[..., Any]
for _op in (operator.lshift, operator.rshift, operator.isub, operator.itruediv, operator.ifloordiv,
            operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor,
            operator.ilshift, operator.irshift):
    BUILTINS[_op] = (lambda op: lambda tx, args, kwargs: binary_op(tx, op, args[0], args[1]))(_op)
for _op in (operator.pos, operator.invert, operator.inv):
    BUILTINS[_op] = (lambda op: lambda tx, args, kwargs: unary_op(tx, op, args[0]))(_op)


@builtin(operator.contains)
def _contains(tx, args, kwargs):
    return ConstantValue(hub.contains(tx, args[1], args[0]))


@builtin(operator.is_)
def _is(tx, args, kwargs):
    return ConstantValue(hub.is_op(args[0], args[1]))


@builtin(operator.is_not)
def _is_not(tx, args, kwargs):
    return ConstantValue(not hub.is_op(args[0], args[1]))


@builtin(operator.setitem)
def _setitem(tx, args, kwargs):
    hub.setitem(tx, args[0], args[1], args[2])
    return ConstantValue(None)


@builtin(operator.delitem)
def _delitem(tx, args, kwargs):
    hub.delitem(tx, args[0], args[1])
    return ConstantValue(None)


@builtin(operator.index)
def _index(tx, args, kwargs):
    ok, c = as_constant(args[0], specialize=True)
    if not ok or not isinstance(c, int):
        raise Unsupported(f"operator.index of {args[0].describe()}")
    return ConstantValue(operator.index(c))


# -- attributes ----------------------------------------------------------------------------------------------
@builtin(setattr)
def _setattr(tx, args, kwargs):
    hub.store_attribute(tx, args[0], _consts([args[1]], "setattr")[0], args[2])
    return ConstantValue(None)


@builtin(delattr)
def _delattr(tx, args, kwargs):
    hub.delete_attribute(tx, args[0], _consts([args[1]], "delattr")[0])
    return ConstantValue(None)


@builtin(object.__setattr__)
def _object_setattr(tx, args, kwargs):
    """``object.__setattr__(self, name, v)`` / ``super().__setattr__`` inside a user __setattr__."""
    hub.store_attribute(tx, args[0], _consts([args[1]], "__setattr__")[0], args[2], plain=True)
    return ConstantValue(None)


@builtin(object.__getattribute__)
def _object_getattribute(tx, args, kwargs):
    """``object.__getattribute__(self, name)`` / ``super().__getattribute__(name)``."""
    if len(args) != 2 or kwargs:
        raise PythonError.of(TypeError(f"expected 2 arguments, got {len(args)}"))
    return hub.generic_getattr(tx, args[0], _consts([args[1]], "__getattribute__")[0])


@builtin(object_init)
def _object_init_call(tx, args, kwargs):
    if len(args) > 1 or kwargs:
        raise PythonError.of(TypeError("object.__init__() takes exactly one argument "
                                       "(the instance to initialize)"))
    return ConstantValue(None)


@builtin(contextlib._GeneratorContextManager)
def _generator_context(tx, args, kwargs):
    return hub.make_generator_context(tx, list(args), dict(kwargs))


# -- sets -----------------------------------------------------------------------------------------------------
def set_operation(tx, op: str, a: Value, b: Value) -> SetValue:
    """``a | b``, ``a & b``, ``a - b``, ``a ^ b`` for a set made in the frame (constants compare by
    value, other values by identity)."""
    left = a.items if isinstance(a, SetValue) else items_of(tx, a)
    right = b.items if isinstance(b, SetValue) else items_of(tx, b)
    out = SetValue([])
    if op == "|":
        for x in [*left, *right]:
            hub.set_add(out, x)
    elif op == "&":
        for x in left:
            if hub.set_member(right, x):
                hub.set_add(out, x)
    elif op == "-":
        for x in left:
            if not hub.set_member(right, x):
                hub.set_add(out, x)
    else:
        for x in [*left, *right]:
            if hub.set_member(left, x) != hub.set_member(right, x):
                hub.set_add(out, x)
    return out


_SET_BINARY = {operator.or_: "|", operator.and_: "&", operator.sub: "-", operator.xor: "^",
               operator.ior: "|", operator.iand: "&", operator.isub: "-", operator.ixor: "^"}


def set_binary_op(tx, op, a: Value, b: Value) -> Value | None:
    """Set operators when an operand is a set made in the frame (None: not a set operation)."""
    if not (isinstance(a, SetValue) or isinstance(b, SetValue)) or op not in _SET_BINARY:
        return None
    r = set_operation(tx, _SET_BINARY[op], a, b)
    if op in (operator.ior, operator.iand, operator.isub, operator.ixor) and isinstance(a, SetValue):
        a.items[:] = r.items                      # in place: the same set object
        return a
    return r


# -- functools -----------------------------------------------------------------------------------------------
def lru_cached_call(tx, args, kwargs):
    """A call of an ``lru_cache`` / ``cache`` wrapper (``args[0]``).  Eager answers a repeated key
    from the cache: with arguments that are constants, or objects the guards pin by identity, the
    call is made at trace time and a constant result is the answer for every later call too (its
    side effects happen once, as in eager: transformers' ``logger.warning_once``).  Otherwise the
    wrapped function is traced."""
    wrapper_v, call_args = args[0], list(args[1:])
    wrapper = real_object(wrapper_v)
    real_args = _pinned(tx, [*call_args, *kwargs.values()])
    if real_args is not None:
        pos, kw = real_args[:len(call_args)], dict(zip(kwargs, real_args[len(call_args):]))
        try:
            result = wrapper(*pos, **kw)
        except Exception as e:  # noqa: BLE001  (eager raises the same, from the same call)
            raise PythonError.of(e) from None
        if not is_constant(result):              # cached now: eager's call returns this very object
            raise Unsupported(f"an lru_cache'd function returned a {type(result).__name__}",
                              "The call runs eagerly and is answered from the cache.")
        return ConstantValue(result)
    wsrc = wrapper_v.source
    fn = FunctionValue(wrapper.__wrapped__, source=AttrSource(wsrc, "__wrapped__") if wsrc else None,
                       covered=wrapper_v.covered)
    return hub.call_value(tx, fn, call_args, kwargs)


BUILTINS[lru_cached_call] = lru_cached_call


def _pinned(tx, vals) -> list | None:
    """The real objects behind ``vals`` when each is a constant or an object with a source (an
    identity guard is added); None when any is not."""
    out = []
    for v in vals:
        ok, c = as_constant(v)
        if ok:
            out.append(c)
            continue
        if isinstance(v, (UserObjectValue, ModuleValue, ClassValue, FunctionValue)) and v.source is not None \
                and getattr(v, "storage", None) is None:
            obj = real_object(v)
            try:
                hash(obj)
            except TypeError:
                return None
            tx.guards.identity(v.source, obj)
            out.append(obj)
            continue
        return None
    return out

hub.register(
    lru_cached_call=lru_cached_call, set_binary_op=set_binary_op, set_operation=set_operation,
)
