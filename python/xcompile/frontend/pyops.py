"""Python operators over symbolic values: arithmetic, comparison, identity, membership,
truthiness and subscripts.  Tensors become graph ops, constants fold, containers are
handled structurally."""
from __future__ import annotations

import collections
import operator
from typing import TYPE_CHECKING, Any, Callable

import torch

from . import hub, scalars
from .dict_keys import dict_key, has_syms, hash_key, maybe_dict_key
from .exc import PythonError, Unsupported
from .iteration import items_of, row_of
from .scalars import is_sym
from .values import (
    ConstantValue,
    DictValue,
    ListValue,
    ModuleValue,
    NullValue,
    SetValue,
    TensorValue,
    TupleValue,
    Value,
    dict_storage,
    is_constant,
    real_object,
)

if TYPE_CHECKING:
    from .tracer import Tracer

_DATA_DEPENDENT = ("Data-dependent control flow on a tensor's value cannot be captured in one graph.")
_DATA_DEPENDENT_HINT = ("Use torch.where / masking instead of a Python branch, or move the branch out of "
                        "the compiled region.")

_INPLACE = {operator.iadd: operator.add, operator.imul: operator.mul, operator.isub: operator.sub,
            operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
            operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
            operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
            operator.ilshift: operator.lshift, operator.irshift: operator.rshift}


def _fold_bool(fn: Callable, *args: Any) -> bool:
    r = fold(fn, *args)
    assert isinstance(r, ConstantValue)
    return bool(r.value)


def fold(fn: Callable, *args: Any, what: str = "") -> Value:
    """Run ``fn`` on Python constants at trace time."""
    try:
        r = fn(*args)
    except Exception as e:                     # eager raises the same: catchable in the traced code
        raise PythonError.of(e) from e
    if type(r) is list and all(is_constant(x) for x in r):
        return ListValue([ConstantValue(x) for x in r])
    if not is_constant(r):
        raise Unsupported(f"{what or getattr(fn, '__name__', fn)} produced a {type(r).__name__}")
    return ConstantValue(r)


def as_constant(v: Value, specialize: bool = False) -> tuple[bool, Any]:
    """(True, python value) when ``v`` is a constant or a container of constants.

    A symbolic size (dynamic shapes) is not a constant to a probe; with ``specialize=True``
    (where the interpreter cannot go on without the number: a dict key, an index into a list,
    an f-string) it counts as its current value, and a guard keeps it so
    (``scalars.specialize``). A captured scalar's value is never known."""
    if isinstance(v, ConstantValue):
        return True, v.value
    if isinstance(v, scalars.SymScalarValue):
        return (True, scalars.specialize(v).value) if specialize and scalars.is_backed(v) else (False, None)
    if isinstance(v, scalars.SymSliceValue):
        parts = [as_constant(p, specialize) for p in v.parts]
        return (True, slice(*(c for _, c in parts))) if all(ok for ok, _ in parts) else (False, None)
    if isinstance(v, (TupleValue, ListValue)):
        vals = []
        for x in v.items:
            ok, c = as_constant(x, specialize)
            if not ok:
                return False, None
            vals.append(c)
        if isinstance(v, ListValue):
            return True, vals
        if v.cls is torch.Size:                      # x.shape with symbolic sizes, specialized
            return True, torch.Size(vals)
        return True, (v.cls(*vals) if v.cls is not tuple and hasattr(v.cls, "_fields") else tuple(vals))
    return False, None


def _seq_items(v: Value) -> list[Value] | None:
    if isinstance(v, (TupleValue, ListValue)):
        return list(v.items)
    if isinstance(v, ConstantValue) and type(v.value) in (tuple, torch.Size):
        return [ConstantValue(x) for x in v.value]
    return None


def note_mutation(tx: "Tracer", v: Value) -> None:
    """``v`` (a list or dict) is about to change: a side effect if it came from outside the frame."""
    if v.source is not None:
        tx.side_effects.mutated(v)
    else:
        tx.side_effects.mutated_local(v)    # refused inside a torch.func transform (func_regions)


# ``a <op> b``: rules tried in order; the first that answers (returns a Value) gives the result.
# Each rule names the kinds it serves; the order is Python's: user dunders first, then sets,
# tensors, captured scalars, and the structural rules for constants and containers.
BinaryRule = Callable[["Tracer", Callable, Value, Value], "Value | None"]
_BINARY_RULES: list[tuple[str, BinaryRule]] = []


def register_binary_rule(name: str, rule: BinaryRule, *, before: str | None = None) -> None:
    """Add a row to the binary-operator table, at the end or before the rule named ``before``."""
    if any(n == name for n, _ in _BINARY_RULES):
        raise ValueError(f"binary rule {name!r} is already registered")
    at = len(_BINARY_RULES) if before is None else [n for n, _ in _BINARY_RULES].index(before)
    _BINARY_RULES.insert(at, (name, rule))


def binary_op(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value:
    for _name, rule in _BINARY_RULES:
        r = rule(tx, op, a, b)
        if r is not None:
            return r
    raise Unsupported(f"operator {getattr(op, '__name__', op)} on {a.describe()} and {b.describe()}")


def _user_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    r = hub.user_binary_op(tx, op, a, b)                  # __add__ / __radd__ ... of user classes
    return None if r is hub.NOT_DEFINED else r


def _set_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if isinstance(a, SetValue) or isinstance(b, SetValue):
        return hub.set_binary_op(tx, op, a, b)
    return None


def _tensor_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        if op in _INPLACE and not isinstance(a, TensorValue):
            op = _INPLACE[op]           # `n = 0; n += t`: an int has no __iadd__, so `n + t`
        return tx.gb.call("call_function", op, (a, b))
    return None


def _sym_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if is_sym(a) or is_sym(b):                            # captured scalars (Tensor.item())
        if op in _FLOORING and (_float_typed(a) or _float_typed(b)) and \
                all(scalars.is_backed(v) for v in (a, b) if is_sym(v)):
            a, b = (scalars.specialize(v) if is_sym(v) else v for v in (a, b))
            return binary_op(tx, op, a, b)
        return scalars.binary(tx, op, a, b)
    return None


# Floor division and remainder with a float: make_fx (aot_eager's and inductor's trace) records
# torch's reading of them, floor(a / b), not Python's (1.0 // 0.1 is 9.0, -0.0 // 0.3 is -0.0),
# so a symbolic operand is specialized to its value (a guard) and the operation folds.
_FLOORING = (operator.floordiv, operator.mod, operator.ifloordiv, operator.imod)


def _float_typed(v: Value) -> bool:
    return (is_sym(v) and isinstance(v.sym, torch.SymFloat)) or \
        (isinstance(v, ConstantValue) and type(v.value) is float)


def _list_extend_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if isinstance(a, ListValue) and op is operator.iadd:
        note_mutation(tx, a)
        a.items.extend(items_of(tx, b))
        return a
    return None


def _fold_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    """Constants (and tuples of constants) fold; lists are left to the rules below, which keep
    ``[x] + [y]`` a new list of the same values."""
    if isinstance(a, ListValue) or isinstance(b, ListValue):
        return None
    ca, va = as_constant(a)
    cb, vb = as_constant(b)
    return fold(op, va, vb) if ca and cb else None


def _concat_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if _INPLACE.get(op, op) is not operator.add:
        return None
    ia, ib = _seq_items(a), _seq_items(b)
    if ia is None or ib is None:
        return None
    if isinstance(a, ListValue) and isinstance(b, ListValue):
        return ListValue(ia + ib)
    if not isinstance(a, ListValue) and not isinstance(b, ListValue):
        size = _is_size(a) or (_is_size(b) and _seq_type(a) is tuple)   # Size.__radd__ answers first
        return TupleValue(ia + ib, cls=torch.Size) if size else TupleValue(ia + ib)
    return None


def _seq_type(v: Value) -> type | None:
    if isinstance(v, TupleValue):
        return v.cls
    return type(v.value) if isinstance(v, ConstantValue) else None


def _is_size(v: Value) -> bool:
    """A ``torch.Size`` (with symbolic sizes, a TupleValue): its slices, sums and repeats are Sizes."""
    return _seq_type(v) is torch.Size


def _repeat_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if _INPLACE.get(op, op) is not operator.mul:
        return None
    seq, n = (a, b) if isinstance(b, ConstantValue) else (b, a)
    items = _seq_items(seq)
    if items is not None and isinstance(n, ConstantValue) and isinstance(n.value, int):
        if isinstance(seq, ListValue):
            return ListValue(items * n.value)
        return TupleValue(items * n.value, cls=torch.Size) if _is_size(seq) else TupleValue(items * n.value)
    return None


_COMPARISONS = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)


def _compare_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    """Comparisons of constant containers, lists included."""
    if op not in _COMPARISONS:
        return None
    ca, va = as_constant(a)
    cb, vb = as_constant(b)
    return fold(op, va, vb) if ca and cb else None


def _dict_eq_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if op not in (operator.eq, operator.ne):
        return None
    da, db = dict_storage(a), dict_storage(b)
    if not (isinstance(da, DictValue) or isinstance(db, DictValue)):
        return None
    eq = _dict_eq(da, db)
    return None if eq is None else ConstantValue(eq if op is operator.eq else not eq)


def _identity_eq_rule(tx: "Tracer", op: Callable, a: Value, b: Value) -> Value | None:
    if op not in (operator.eq, operator.ne):
        return None
    same = _same_object(a, b)
    return None if same is None else ConstantValue(same if op is operator.eq else not same)


for _rule_name, _rule in (("user", _user_rule), ("set", _set_rule), ("tensor", _tensor_rule),
                          ("sym", _sym_rule), ("list_extend", _list_extend_rule),
                          ("fold", _fold_rule), ("concat", _concat_rule),
                          ("repeat", _repeat_rule), ("compare", _compare_rule),
                          ("dict_eq", _dict_eq_rule), ("identity_eq", _identity_eq_rule)):
    register_binary_rule(_rule_name, _rule)


def _dict_eq(a: Value, b: Value) -> bool | None:
    """``a == b`` for dicts (and dict subclasses made in the frame) when it is known at trace time:
    different keys, or constant values (OrderedDicts compare in order); None when it is not."""
    if a is b:
        return True
    if not isinstance(a, DictValue) or not isinstance(b, DictValue):
        return False if isinstance(a, (TupleValue, ListValue, SetValue, TensorValue)) or \
            isinstance(b, (TupleValue, ListValue, SetValue, TensorValue)) else None
    ordered = issubclass(a.cls, collections.OrderedDict) and issubclass(b.cls, collections.OrderedDict)
    if (list(a.items) if ordered else set(a.items)) != (list(b.items) if ordered else set(b.items)):
        return False
    for k in a.items:
        ok_a, ca = as_constant(a.items[k])
        ok_b, cb = as_constant(b.items[k])
        if not (ok_a and ok_b):
            return None
        if ca != cb:
            return False
    return True


def _same_object(a: Value, b: Value) -> bool | None:
    if a is b:
        return True
    ra, rb = real_object(a), real_object(b)
    if ra is not None and rb is not None:
        return ra is rb
    if isinstance(a, TensorValue) and isinstance(b, TensorValue):
        return a.node is b.node
    kinds = (TensorValue, TupleValue, ListValue, DictValue, ModuleValue)
    if isinstance(a, kinds) != isinstance(b, kinds) or type(a) is not type(b):
        return False
    return None


def is_op(a: Value, b: Value) -> bool:
    if getattr(a, "identity_unknown", False) or getattr(b, "identity_unknown", False):
        raise Unsupported(f"`is` on {(a if getattr(a, 'identity_unknown', False) else b).describe()}",
                          "Whether two such ints are one object is only known at run time; compare them with ==.")
    if isinstance(a, ConstantValue) and isinstance(b, ConstantValue):
        return a.value is b.value
    same = _same_object(a, b)
    if same is None:
        return False
    return same


def unary_op(tx: "Tracer", op: Callable, a: Value) -> Value:
    r = hub.user_unary_op(tx, op, a)
    if r is not hub.NOT_DEFINED:
        return r
    if isinstance(a, TensorValue):
        return tx.gb.call("call_function", op, (a,))
    if isinstance(a, ConstantValue):
        return fold(op, a.value)
    row = row_of(_UNARY, a)
    if row is not None:
        return row(tx, op, a)
    if is_sym(a):
        return scalars.unary(tx, op, a)
    raise Unsupported(f"operator {op.__name__} on {a.describe()}")


# The truth table: value class -> bool(v), a function of (tx, v), looked up along the class MRO.
_TRUTH: dict[type, Callable[["Tracer", Any], bool]] = {}
# The subscript table: value class -> v[key], a function of (tx, container, key, subclass), where
# ``subclass`` is the value the user indexed when ``container`` is the dict storage of a dict
# subclass made in the frame (else ``container`` itself).
_GETITEM: dict[type, Callable[..., Value]] = {}
# Item assignment (tx, container, key, value) and unary operators (tx, op, v) of other value kinds.
_SETITEM: dict[type, Callable[..., None]] = {}
_UNARY: dict[type, Callable[..., Value]] = {}


def register_value_kind(value_cls: type, *, truth: Callable | None = None, getitem: Callable | None = None,
                        setitem: Callable | None = None, unary: Callable | None = None) -> None:
    """Rows of the truth, subscript, item assignment and unary operator tables for ``value_cls``
    (modules.py, scalars.py, numpy_tracing.py...)."""
    for table, row in ((_TRUTH, truth), (_GETITEM, getitem), (_SETITEM, setitem), (_UNARY, unary)):
        if row is not None:
            table[value_cls] = row


def truth(tx: "Tracer", v: Value) -> bool:
    row = row_of(_TRUTH, v)
    if row is not None:
        return row(tx, v)
    for name in ("__bool__", "__len__"):                  # user classes: Python's protocol
        r = hub.call_dunder(tx, v, name, [])
        if r is not hub.NOT_DEFINED:
            return truth(tx, r)
    if dict_storage(v) is not v:                          # a dict subclass made in the frame
        return truth(tx, dict_storage(v))
    obj = real_object(v)
    if obj is not None and isinstance(obj, torch.nn.Module):
        if hasattr(type(obj), "__len__"):
            return hub.length_of(tx, v) > 0
        return True
    if obj is not None and (hasattr(type(obj), "__bool__") or hasattr(type(obj), "__len__")):
        if type(obj).__module__ != "builtins" and not isinstance(obj, type):
            raise Unsupported(f"truth value of {v.describe()}, which defines __bool__/__len__")
    return True


def _tensor_truth(tx: "Tracer", v: TensorValue) -> bool:
    raise Unsupported("data-dependent branching: the condition is a tensor", _DATA_DEPENDENT_HINT,
                      _DATA_DEPENDENT)


def _null_truth(tx: "Tracer", v: NullValue) -> bool:
    raise Unsupported("truth value of NULL")


def set_member(items: list[Value], item: Value) -> bool:
    """Set membership: constants by value (a symbolic size is specialized: ``hash_key``),
    everything else by identity (tensors never by value)."""
    ok, k = hash_key(item)
    for x in items:
        okx, cx = hash_key(x)
        if ok and okx:
            if cx == k:
                return True
        elif _same_object(x, item):
            return True
    return False


def set_add(s: SetValue, item: Value) -> None:
    if not set_member(s.items, item):
        # a symbolic size was specialized by the test: the member is its number (iterable, poppable)
        s.items.append(ConstantValue(hash_key(item)[1]) if has_syms(item) else item)


def contains(tx: "Tracer", item: Value, container: Value) -> bool:
    r = hub.call_dunder(tx, container, "__contains__", [item])
    if r is not hub.NOT_DEFINED:
        return truth(tx, r)
    container = dict_storage(container)
    if isinstance(container, SetValue):
        return set_member(container.items, item)
    if isinstance(container, DictValue):
        ok, k = maybe_dict_key(item)
        if not ok:
            raise Unsupported(f"`in` test of {item.describe()} against a dict")
        return k in container.items
    if isinstance(container, ConstantValue):
        ok, k = as_constant(item)
        if ok:
            return _fold_bool(operator.contains, container.value, k)
    if isinstance(container, ModuleValue) and isinstance(container.module, torch.nn.ModuleDict):
        ok, k = as_constant(item)
        if ok:
            return k in container.module
    items = items_of(tx, container)
    ok, k = hash_key(item)
    for x in items:
        okx, cx = hash_key(x)
        if ok and okx:
            if cx == k:
                return True
        elif isinstance(x, TensorValue) or isinstance(item, TensorValue):
            if x is item or (isinstance(x, TensorValue) and isinstance(item, TensorValue) and x.node is item.node):
                return True
            if _compares_by_value(x) and _compares_by_value(item):
                raise Unsupported("`in` test between a tensor and a tensor or number (compares values)",
                                  _DATA_DEPENDENT_HINT)
        elif _same_object(x, item):
            return True
    return False


def _compares_by_value(v: Value) -> bool:
    """Does ``tensor == v`` (or ``v == tensor``) give a tensor whose truth is data-dependent?"""
    return isinstance(v, TensorValue) or is_sym(v) or \
        (isinstance(v, ConstantValue) and type(v.value) in (bool, int, float, complex))


def getitem(tx: "Tracer", container: Value, key: Value) -> Value:
    r = hub.call_dunder(tx, container, "__getitem__", [key])
    if r is not hub.NOT_DEFINED:
        return r
    storage = dict_storage(container)
    row = row_of(_GETITEM, storage)
    if row is None:
        raise Unsupported(f"subscript of {storage.describe()}")
    return row(tx, storage, key, container)


def _constant_key(container: Value, key: Value) -> Any:
    ok, k = as_constant(key, specialize=True)
    if not ok:
        if isinstance(key, TensorValue) and isinstance(container, (ListValue, TupleValue)):
            raise Unsupported("indexing a list with a tensor", "The index value is data-dependent.")
        raise Unsupported(f"indexing {container.describe()} with {key.describe()}")
    return k


def _tensor_getitem(tx: "Tracer", container: TensorValue, key: Value, subclass: Value) -> Value:
    return tx.gb.call("call_function", operator.getitem, (container, key))


def _sequence_getitem(tx: "Tracer", container, key: Value, subclass: Value) -> Value:
    k = _constant_key(container, key)
    try:
        picked = container.items[k]
    except (IndexError, TypeError) as e:
        raise PythonError.of(e) from e
    if isinstance(k, slice):
        if isinstance(container, ListValue):
            return ListValue(list(picked))
        return TupleValue(list(picked), cls=torch.Size) if _is_size(container) else TupleValue(list(picked))
    return tx.resolve(picked)


def _dict_getitem(tx: "Tracer", container: DictValue, key: Value, subclass: Value) -> Value:
    k = dict_key(key, f"indexing {container.describe()} with")
    if k not in container.items:
        if subclass is not container:                     # dict.__getitem__ of a subclass
            r = hub.call_dunder(tx, subclass, "__missing__", [key])
            if r is not hub.NOT_DEFINED:
                return r
        if container.default_factory is None:
            raise PythonError.of(KeyError(k))
        note_mutation(tx, container)
        container.items[k] = hub.call_value(tx, container.default_factory, [], {})
    v = container.items[k] = tx.resolve(container.items[k])
    return v


def _constant_getitem(tx: "Tracer", container: ConstantValue, key: Value, subclass: Value) -> Value:
    return fold(operator.getitem, container.value, _constant_key(container, key), what="subscript")


def setitem(tx: "Tracer", container: Value, key: Value, value: Value) -> None:
    if hub.call_dunder(tx, container, "__setitem__", [key, value]) is not hub.NOT_DEFINED:
        return
    container = dict_storage(container)
    if isinstance(container, TensorValue):
        tx.gb.call("call_function", operator.setitem, (container, key, value))
        return
    row = row_of(_SETITEM, container)
    if row is not None:
        row(tx, container, key, value)
        return
    if isinstance(container, DictValue):
        k = dict_key(key, f"item assignment on {container.describe()} with key")
        note_mutation(tx, container)
        container.items[k] = value
        return
    ok, k = as_constant(key, specialize=True)
    if not ok:
        raise Unsupported(f"item assignment on {container.describe()} with key {key.describe()}")
    if isinstance(container, ListValue):
        note_mutation(tx, container)
        if isinstance(k, slice):
            container.items[k] = items_of(tx, value)
        else:
            container.items[k] = value
        return
    if isinstance(container, DictValue):
        note_mutation(tx, container)
        container.items[k] = value
        return
    raise Unsupported(f"item assignment on {container.describe()}")


def delitem(tx: "Tracer", container: Value, key: Value) -> None:
    if hub.call_dunder(tx, container, "__delitem__", [key]) is not hub.NOT_DEFINED:
        return
    container = dict_storage(container)
    ok, k = maybe_dict_key(key) if isinstance(container, DictValue) else as_constant(key, specialize=True)
    if ok and isinstance(container, (ListValue, DictValue)):
        note_mutation(tx, container)
        del container.items[k]
        return
    raise Unsupported(f"del on {container.describe()}")

hub.register(
    as_constant=as_constant, contains=contains, delitem=delitem, is_op=is_op,
    note_mutation=note_mutation, set_add=set_add, set_member=set_member, setitem=setitem,
)

register_value_kind(TensorValue, truth=_tensor_truth, getitem=_tensor_getitem)
register_value_kind(ConstantValue, truth=lambda tx, v: bool(v.value), getitem=_constant_getitem)
for _cls in (TupleValue, ListValue):
    register_value_kind(_cls, truth=lambda tx, v: len(v.items) > 0, getitem=_sequence_getitem)
register_value_kind(DictValue, truth=lambda tx, v: len(v.items) > 0, getitem=_dict_getitem)
register_value_kind(SetValue, truth=lambda tx, v: len(v.items) > 0)
register_value_kind(NullValue, truth=_null_truth)
register_value_kind(scalars.SymScalarValue, truth=lambda tx, v: scalars.truth(v))
