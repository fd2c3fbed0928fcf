"""Real objects from outside the frame -> symbolic values, installing the guards they need.

``wrap(tx, obj, source, covered)`` is the only way an outside object enters the trace.
The rows of ``_ROWS`` are tried in order; each row says which value class the object
becomes and which guard protects what the trace assumes about it.

``covered``: the object's identity is already pinned by an enclosing guard (read through
a module under MODULE_TREE), so only mutable contents still need guards.
Objects without a source (read by trusted library code) get no guards.
"""
from __future__ import annotations

import collections
import functools
import types
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..guards.sources import AttrSource, ClosureSource, GlobalSource, ItemSource, LocalSource, ObjectKey, Source
from ..guards.spec import hashes_by_identity
from . import hub, rules, tracing_rules
from .dict_keys import identity_key
from .exc import Unsupported
from .side_effects import BlindList, BlindSet
from .tensor_classes import check_tensor_class, mark
from .values import (
    BoundMethodValue,
    BuiltinValue,
    ClassValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    LazyValue,
    ListValue,
    ModuleValue,
    PartialValue,
    PythonModuleValue,
    SetValue,
    TorchOpValue,
    TupleValue,
    UserObjectValue,
    Value,
    is_constant,
)

if TYPE_CHECKING:
    from .tracer import Tracer


def _root(src: Source) -> Source:
    while isinstance(src, (AttrSource, ItemSource)):
        src = src.base
    return src


def _needs_guard(source, covered) -> bool:
    return source is not None and not covered


def _tensor(tx: "Tracer", t: torch.Tensor, source, covered) -> Value:
    sub = check_tensor_class(t)             # a plain torch.Tensor subclass, or Unsupported (tensor_classes.py)
    known = tx.gb.by_id.get(id(t))
    if known is not None:
        if _needs_guard(source, covered):
            tx.guards.alias(source, known.source if known.source in tx.gb.input_sources else None, t)
        return known
    if covered or source is None:
        if sub is not None:
            raise Unsupported(f"tensor subclass {sub.__name__} reached as a module attribute or constant",
                              "Pass it as an argument of the compiled function.")
        return tx.gb.get_attr(t, source)
    tx.guards.tensor_input(source, t)
    v = tx.gb.placeholder(t, source)
    return v if sub is None else mark(v, sub)


def _module(tx, m, source, covered) -> Value:
    if "_modules" not in m.__dict__:          # its __init__ before nn.Module.__init__ ran
        raise Unsupported(f"an nn.Module {type(m).__name__} whose nn.Module.__init__ has not run yet",
                          "Module construction runs eagerly; build modules outside the compiled region.")
    if _needs_guard(source, covered):
        tx.guards.module_tree(source, m)
    return ModuleValue(m, source=source, covered=True)


def _int(tx: "Tracer", obj: int, source, covered) -> Value:
    """An int argument of the frame: a symbolic graph input when the dynamic-shapes policy says
    so (frontend/shapes.py), else a constant guarded by value."""
    if isinstance(source, LocalSource) and not covered and tx.shapes.int_is_symbolic(obj, source):
        tx.guards.object_type(source, obj)
        return tx.gb.sym_int_input(obj, source)
    return _constant(tx, obj, source, covered)


def _float(tx: "Tracer", obj: float, source, covered) -> Value:
    """A float from outside the frame (an argument, an optimizer's ``lr``): a symbolic graph
    input once it took two values at this source (frontend/shapes.py), else a constant guarded by
    value. Guards on its value specialize it again (shapes.produce_guards)."""
    if _needs_guard(source, covered) and tx.shapes.float_is_symbolic(obj, source):
        tx.guards.object_type(source, obj)
        return tx.gb.sym_float_input(obj, source)
    return _constant(tx, obj, source, covered)


def _number_tuple(tx: "Tracer", obj: tuple, source, covered) -> Value:
    """A tuple of numbers with a float (Adam's ``betas``): a constant guarded by value, or, once it
    changed at this source, a tuple whose items are read (and guarded) one by one."""
    if _needs_guard(source, covered) and tx.shapes.tuple_is_open(obj, source):
        return _tuple(tx, obj, source, covered)
    return _constant(tx, obj, source, covered)


def _constant(tx, obj, source, covered) -> Value:
    if _needs_guard(source, covered):
        tx.guards.constant(source, obj)
    return ConstantValue(obj, source=source, covered=True)


def _lazy_items(seq, source, covered) -> list[Value]:
    return [LazyValue(o, ItemSource(source, i) if source is not None else None, covered)
            for i, o in enumerate(seq)]


def _list(tx, obj, source, covered) -> Value:
    if source is None:
        return ListValue(_lazy_items(obj, source, False))
    # the type now; the length (contents are mutable: always) when the trace first reads the items
    if not covered:
        tx.guards.object_type(source, obj)
    return ListValue([], source=source, covered=covered, blind=BlindList(tx, obj, source))


def _set(tx, obj, source, covered) -> Value:
    """A set from outside: only its type is guarded; writes are recorded blindly (BlindSet) and
    replayed after the graph; reading its contents is Unsupported (no guard on set contents)."""
    if _needs_guard(source, covered):
        tx.guards.object_type(source, obj)
    return SetValue([], source=source, covered=covered, blind=BlindSet(obj, source))


def _tuple(tx, obj, source, covered) -> Value:
    if _needs_guard(source, covered):
        tx.guards.sequence(source, obj)
    cls = type(obj) if type(obj) is not tuple else tuple
    return TupleValue(_lazy_items(obj, source, covered), cls=cls, source=source, covered=covered)


def _dict(tx, obj, source, covered) -> DictValue:
    """A dict from outside. Its keys are constants, or objects that hash by identity (tensors and
    modules: an optimizer's ``state``, keyed by parameters), each the key object itself: the keys
    guard (DICT_KEYS, identity for those) pins them, so such a key is not a graph input of its
    own (it is the value the trace already has for that object, or a constant of the graph)."""
    keys: list[Any] = []
    for k in obj:
        if is_constant(k):
            keys.append(k)
        elif hashes_by_identity(k):
            key = identity_key(tx.wrap(k, None, True))
            if key is None:
                raise Unsupported(f"a dict keyed by {type(k).__name__} objects with a __hash__ of their own")
            keys.append(key)
        else:
            raise Unsupported(f"dict with keys of type {type(k).__name__}",
                              "Use constant keys (str, int...), tensors or modules.")
    if source is not None:
        tx.guards.sequence(source, obj, type_known=covered)
    items: dict[Any, Value] = {}
    for key, (k, v) in zip(keys, obj.items()):
        at = None if source is None else ItemSource(source, k if key is k else ObjectKey(k))
        items[key] = LazyValue(v, at, False)
    factory = None
    if isinstance(obj, collections.defaultdict) and obj.default_factory is not None:
        factory = tx.wrap(obj.default_factory, AttrSource(source, "default_factory") if source else None, covered)
    return DictValue(items, source=source, covered=covered, cls=type(obj), default_factory=factory)


def _identity_guarded(make: Callable) -> Callable:
    def row(tx, obj, source, covered):
        if _needs_guard(source, covered):
            tx.guards.identity(source, obj)
        return make(obj, source)
    return row


def _bound_method(tx, obj: types.MethodType, source, covered) -> Value:
    func = tx.wrap(obj.__func__, AttrSource(source, "__func__") if source is not None else None, covered)
    self_v = tx.wrap(obj.__self__, AttrSource(source, "__self__") if source is not None else None, covered)
    return BoundMethodValue(func, self_v, source=source)


def _partial(tx, obj: functools.partial, source, covered) -> Value:
    def sub(attr, key=None):
        if source is None:
            return None
        s = AttrSource(source, attr)
        return s if key is None else ItemSource(s, key)
    if _needs_guard(source, covered):
        tx.guards.object_type(source, obj)
    func = tx.wrap(obj.func, sub("func"), covered)
    args = [tx.wrap(a, sub("args", i), covered) for i, a in enumerate(obj.args)]
    kwargs = {k: tx.wrap(v, sub("keywords", k), covered) for k, v in obj.keywords.items()}
    return PartialValue(func, args, kwargs)


def _is_dict_subclass(obj) -> bool:
    return isinstance(obj, dict) and hub.dict_base(type(obj)) is not None and hub.is_plain_user_class(type(obj))


def _dict_subclass(tx, obj, source, covered) -> Value:
    """A user dict subclass from outside (HF ModelOutput): a user object whose dict contents are
    a DictValue (keys guarded as a dict's; writes replayed through the builtin base class)."""
    v = _user_object(tx, obj, source, covered)
    storage = _dict(tx, obj, source, True)
    storage.cls = hub.dict_base(type(obj))
    if source is None:
        tx.side_effects.unreachable(storage)
    v.storage = storage
    return v


def _user_object(tx, obj, source, covered) -> UserObjectValue:
    if _needs_guard(source, covered):
        if isinstance(_root(source), (GlobalSource, ClosureSource)):
            tx.guards.identity(source, obj)
        else:
            tx.guards.object_type(source, obj)
    return UserObjectValue(obj, source=source, covered=covered)


_METHOD_SELF_TYPES = (list, dict, collections.OrderedDict, collections.defaultdict, torch.Tensor,
                     torch.nn.Parameter)


def _is_container_method(o) -> bool:
    """``d.update`` / ``lst.append`` / ``t.add_`` as an object: a resume function gets one on its
    stack when a break happens inside the call's arguments (``d.update(f(x))``)."""
    if not isinstance(o, types.BuiltinMethodType):
        return False
    cls = type(getattr(o, "__self__", None))
    if cls in _METHOD_SELF_TYPES:
        return True
    # a dict / list subclass instance's builtin method (the class does not override the name, so
    # looking it up again on the object finds the same one)
    base = next((b for b in (dict, list) if issubclass(cls, b)), None)
    return base is not None and getattr(cls, o.__name__, None) is getattr(base, o.__name__, None)


def _container_method(tx, obj, source, covered) -> Value:
    """The method looked up again on its object, which is guarded as what it is (was: an identity
    guard on the bound method, a new object every call: a recompile every call)."""
    self_v = tx.wrap(obj.__self__, AttrSource(source, "__self__") if source is not None else None, covered)
    return hub.load_attr(tx, self_v, obj.__name__)


def _outside_generator(tx, obj, source, covered) -> Value:
    v = _user_object(tx, obj, source, covered)
    return hub.OutsideGeneratorValue(obj, source=v.source, covered=v.covered)


def _is_builtin_callable(obj) -> bool:
    return isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)) or obj in _builtin_table()


@functools.lru_cache(None)
def _builtin_table():
    return hub.BUILTINS


def _tuple_like(cls: type) -> bool:
    """tuple, a namedtuple or a structseq (torch.return_types): a TupleValue of that class. Other
    tuple subclasses are objects (seq_subclass_inputs.py, or a generic user object)."""
    return cls is tuple or hasattr(cls, "_fields") or hasattr(cls, "n_fields") or cls is torch.Size


def _is_plain_dict(obj) -> bool:
    return type(obj) in (dict, collections.OrderedDict, collections.defaultdict)


_ROWS: list[tuple[Callable[[Any], bool], Callable]] = [
    (lambda o: isinstance(o, torch.Tensor), _tensor),
    (lambda o: isinstance(o, torch.nn.Module), _module),
    (lambda o: type(o) is int, _int),
    (lambda o: type(o) is float, _float),
    (lambda o: type(o) is tuple and any(type(i) is float for i in o) and is_constant(o), _number_tuple),
    (is_constant, _constant),
    (lambda o: type(o) is list, _list),
    (lambda o: isinstance(o, tuple) and _tuple_like(type(o)), _tuple),
    (_is_plain_dict, _dict),
    (lambda o: type(o) is set, _set),
    (lambda o: _is_hashable(o) and (o in rules.FOLD_AT_TRACE or o in rules.FORBIDDEN) or rules.is_torch_op(o),
     _identity_guarded(lambda o, s: TorchOpValue(o, source=s))),
    # Python functions with a handler (inspect.signature) are answered, not traced through
    (lambda o: isinstance(o, types.FunctionType) and o in _builtin_table(),
     _identity_guarded(lambda o, s: BuiltinValue(o, source=s))),
    (lambda o: isinstance(o, types.FunctionType), _identity_guarded(lambda o, s: FunctionValue(o, source=s))),
    (lambda o: isinstance(o, types.MethodType), _bound_method),
    (lambda o: isinstance(o, types.ModuleType),
     _identity_guarded(lambda o, s: PythonModuleValue(o, source=s))),
    (lambda o: isinstance(o, type), _identity_guarded(lambda o, s: ClassValue(o, source=s))),
    (lambda o: isinstance(o, functools.partial), _partial),
    (lambda o: isinstance(o, types.GeneratorType), _outside_generator),
    (_is_container_method, _container_method),
    (lambda o: _is_hashable(o) and _is_builtin_callable(o),
     _identity_guarded(lambda o, s: BuiltinValue(o, source=s))),
    (_is_dict_subclass, _dict_subclass),
    (lambda o: True, _user_object),
]


def _is_hashable(o) -> bool:
    try:
        hash(o)
        return True
    except TypeError:
        return False


# Rows other modules add (numpy_tracing.py: arrays, NumPy functions), tried before ``_ROWS``.
_EXTRA_ROWS: list[tuple[Callable[[Any], bool], Callable]] = []


def register_row(pred: Callable[[Any], bool], make: Callable) -> None:
    """``make(tx, obj, source, covered)`` wraps the objects ``pred`` accepts (it installs their guards)."""
    _EXTRA_ROWS.append((pred, make))


# Objects whose value carries identity (a mutation through one path must be seen through another).
_MEMO_TYPES = (list, dict, set, torch.nn.Module)


def wrap(tx: "Tracer", obj: Any, source: Source | None, covered: bool = False) -> Value:
    special = tracing_rules.wrap_special(tx, obj, source, covered)   # marked objects, compiled fns
    if special is not None:
        return special
    for pred, make in _EXTRA_ROWS:
        if pred(obj):
            return make(tx, obj, source, covered)
    memo_key = id(obj) if isinstance(obj, _MEMO_TYPES) else None
    if memo_key is not None and memo_key in tx.memo:
        v = tx.memo[memo_key][1]
        if source is not None and v.source is not None and source != v.source:
            tx.guards.same_object(v.source, source)   # f(xs, xs) must not serve f(xs, ys)
        return v
    for pred, make in _ROWS:
        if pred(obj):
            v = make(tx, obj, source, covered)
            break
    if memo_key is not None:
        tx.memo[memo_key] = (obj, v)
        if source is None and isinstance(v, (ListValue, DictValue, SetValue)):
            tx.side_effects.unreachable(v)          # from library code: cannot be changed later
    return v
