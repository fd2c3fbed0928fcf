"""Attribute reads on symbolic values (LOAD_ATTR), one function per value class."""
from __future__ import annotations

import collections
import functools
import inspect
import operator
import types
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..guards.sources import AttrSource, GenericAttrSource, ItemSource, Source
from . import hub, rules, scalars
from .exc import PythonError, Unsupported
from .global_reads import guard_module_property
from .module_creation import bound_module_init
from .seq_subclasses import storage_method as seq_storage_method
from .tensor_attrs import tensor_grad, tensor_instance_attr
from .tensor_classes import subclass_member
from .values import (
    BoundMethodValue,
    BuiltinValue,
    ClassValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    ListValue,
    ModuleValue,
    NestedFunctionValue,
    NewObjectValue,
    ObjectMethodValue,
    PartialValue,
    PythonModuleValue,
    SetValue,
    SuperValue,
    TensorMethodValue,
    TensorValue,
    TorchOpValue,
    TupleValue,
    UserObjectValue,
    Value,
    is_constant,
    real_object,
)

if TYPE_CHECKING:
    from .tracer import Tracer

MISSING = object()


class AttrMissing(PythonError):
    """The attribute does not exist (eager raises AttributeError): getattr/hasattr defaults apply,
    and ``except AttributeError`` in the traced code catches it."""

    def __init__(self, reason: str, hint: str | None = None):
        super().__init__(UserObjectValue(AttributeError(reason)), hint)


def _attr_error(v: Value, name: str) -> Unsupported:
    return AttrMissing(f"{v.describe()} has no attribute {name!r}",
                       "The same code raises AttributeError in eager mode.")


def object_init(self, *args, **kwargs):
    """Marker for ``super().__init__()`` reaching object.__init__ (a no-op; see builtins_more)."""


# -- class-level lookup (shared by objects, modules and super()) ------------------------------------------
def mro_lookup(cls: type, name: str, start: int = 0) -> tuple[int, Any]:
    """(index in cls.__mro__, raw class-dict entry) for the first class defining ``name``."""
    for i, k in enumerate(cls.__mro__[start:], start):
        if name in k.__dict__:
            return i, k.__dict__[name]
    return -1, MISSING


def class_member_source(obj_source: Source | None, mro_index: int, name: str) -> Source | None:
    """type(obj).__mro__[i].__dict__[name] as a source (functions found on the class)."""
    if obj_source is None:
        return None
    # object.__getattribute__: a class's own __getattribute__/__getattr__ never runs in a guard
    mro = AttrSource(GenericAttrSource(obj_source, "__class__"), "__mro__")
    return ItemSource(AttrSource(ItemSource(mro, mro_index), "__dict__"), name)


def bind_class_member(tx: "Tracer", obj_v: Value, cls: type, idx: int, raw: Any, name: str,
                      member_source: Source | None) -> Value | None:
    """Functions, properties, static/class methods found on a class; None for plain class attributes."""
    if (init := bound_module_init(obj_v, raw)) is not None:   # nn.Module.__init__ of a module made here
        return init
    if isinstance(raw, types.FunctionType):
        return BoundMethodValue(FunctionValue(raw, source=member_source, covered=True), obj_v)
    if isinstance(raw, property):
        if raw.fget is None:
            raise Unsupported(f"property {name!r} has no getter")
        fsrc = AttrSource(member_source, "fget") if member_source is not None else None
        if not isinstance(raw.fget, types.FunctionType):      # property(operator.attrgetter("_x"))
            return hub.call_value(tx, tx.wrap(raw.fget, fsrc, True), [obj_v], {})
        return tx.inline_call(None, FunctionValue(raw.fget, source=fsrc, covered=True), [obj_v], {})
    if isinstance(raw, staticmethod):       # the class dict holds the staticmethod object
        fsrc = AttrSource(member_source, "__func__") if member_source is not None else None
        return tx.wrap(raw.__func__, fsrc, True)
    if isinstance(raw, classmethod):
        fsrc = AttrSource(member_source, "__func__") if member_source is not None else None
        return BoundMethodValue(tx.wrap(raw.__func__, fsrc, True), ClassValue(cls))
    if name == "__call__" and raw is functools._lru_cache_wrapper.__call__:  # lru_cache / cache
        return PartialValue(BuiltinValue(hub.lru_cached_call), [obj_v], {})
    if raw is object.__setattr__ or raw is torch.nn.Module.__setattr__:   # super().__setattr__(n, v)
        return PartialValue(BuiltinValue(object.__setattr__), [obj_v], {})
    if raw is object.__getattribute__:              # super().__getattribute__(n) in a __getattribute__
        return PartialValue(BuiltinValue(object.__getattribute__), [obj_v], {})
    if raw is object.__init__ and name == "__init__":                     # super().__init__()
        return PartialValue(BuiltinValue(object_init), [obj_v], {})
    if isinstance(obj_v, (NewObjectValue, UserObjectValue)) and obj_v.storage is not None and \
            getattr(raw, "__objclass__", None) in (dict, collections.OrderedDict):
        if name == "copy" and obj_v.storage.cls is collections.OrderedDict:   # self.__class__(self)
            return PartialValue(ClassValue(cls), [obj_v], {})
        return storage_method(obj_v.storage, name)          # dict.keys(self), super().__setitem__...
    if isinstance(obj_v, (NewObjectValue, UserObjectValue)) and obj_v.storage is not None and \
            getattr(raw, "__objclass__", None) in (list, tuple):
        return seq_storage_method(obj_v.storage, name)      # self.append(x), super().__getitem__(i)...
    if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType, types.BuiltinFunctionType)):
        raise Unsupported(f"calling builtin method {name!r} of {obj_v.describe()}")
    if isinstance(raw, functools._lru_cache_wrapper):   # @lru_cache on a method binds like a function
        return BoundMethodValue(tx.wrap(raw, member_source, True), obj_v)   # (transformers' warning_once)
    if hasattr(type(raw), "__get__") and not isinstance(raw, type):
        # any other descriptor (partialmethod, cached_property not yet cached, a custom one) binds
        # to the instance in eager: returning the raw object would be a wrong answer
        raise Unsupported(f"attribute {name!r} of {obj_v.describe()} is a {type(raw).__name__} descriptor",
                          "Read it outside the compiled region.")
    return None


def storage_method(storage: DictValue, name: str) -> Value:
    """A builtin dict method bound to the dict storage of a dict subclass made in the frame."""
    ops = {"__getitem__": operator.getitem, "__setitem__": operator.setitem, "__delitem__": operator.delitem,
           "__len__": len, "__iter__": iter}
    if name in ops:
        return PartialValue(BuiltinValue(ops[name]), [storage], {})
    if name == "__init__":                                   # dict.__init__(self, *a, **kw) == update
        return ObjectMethodValue(storage, "update")
    if name.startswith("__") and name != "__contains__":
        raise Unsupported(f"calling builtin method dict.{name} of a dict subclass")
    return ObjectMethodValue(storage, name)


def object_attr(tx: "Tracer", v: Value, obj: Any, name: str, *, covered: bool,
                instance_dict: dict | None = None, generic: bool = False) -> Value:
    """Python's attribute lookup for a plain object, statically: descriptors, instance dict, class.
    ``generic``: the read is ``object.__getattribute__`` past the class's own (sources say so)."""
    src = v.source
    attr_source = GenericAttrSource if generic else AttrSource
    cls = type(obj)
    idx, raw = mro_lookup(cls, name)
    msrc = class_member_source(src, idx, name) if idx >= 0 else None
    is_data_descr = raw is not MISSING and hasattr(type(raw), "__set__") or isinstance(raw, property)
    if is_data_descr:
        if isinstance(raw, property):
            got = bind_class_member(tx, v, cls, idx, raw, name, msrc)
            assert got is not None                  # a property's getter result
            return got
        return tx.wrap(getattr(obj, name), attr_source(src, name) if src else None, covered)
    d = instance_dict if instance_dict is not None else getattr(obj, "__dict__", {})
    if name in d:
        return tx.wrap(d[name], attr_source(src, name) if src else None, covered)
    if raw is not MISSING:
        bound = bind_class_member(tx, v, cls, idx, raw, name, msrc)
        if bound is not None:
            return bound
        return tx.wrap(raw, attr_source(src, name) if src else None, covered)
    return MISSING  # type: ignore[return-value]


# -- one reader per value class ------------------------------------------------------------------------------
def _tensor_attr(tx: "Tracer", v: TensorValue, name: str) -> Value:
    if v.cls is not torch.Tensor and (member := subclass_member(tx, v, name)) is not None:
        return member                                 # a method of a torch.Tensor subclass
    if name == "grad" and (got := tensor_grad(tx, v)) is not None:
        return got
    if name in rules.TENSOR_ATTRS_FORBIDDEN:
        raise Unsupported(rules.TENSOR_ATTRS_FORBIDDEN[name], "Read it outside the compiled region.")
    if name in rules.TENSOR_ATTRS_AS_OPS:
        return tx.gb.call("call_function", getattr, (v, ConstantValue(name)), what=f"Tensor.{name}")
    if name == "data":
        # not detach(): .data shares the storage but has a version counter of its own, so a
        # write through it does not invalidate what autograd saved of the tensor (torch.compile
        # emits the same op)
        get_data = torch._C._autograd._get_data_attr  # type: ignore[attr-defined]  # not in torch's stubs
        return tx.gb.call("call_function", get_data, (v,), what="Tensor.data")
    raw = inspect.getattr_static(torch.Tensor, name, MISSING)
    if raw is MISSING:
        inst = tensor_instance_attr(tx, v, name)          # `x.tag`: the tensor's own __dict__
        if inst is not None:
            return inst
        raise _attr_error(v, name)
    if callable(raw) and not isinstance(raw, property):
        return TensorMethodValue(v, name)    # forbidden methods (item, tolist...) break when called
    result = tx.gb.run_fake(lambda t: getattr(t, name), (v.fake,), {}, f"Tensor.{name}")
    if scalars.has_sym(result):                   # x.shape with symbolic sizes: read in the graph
        return tx.gb.call("call_function", getattr, (v, ConstantValue(name)), what=f"Tensor.{name}")
    if isinstance(result, torch.Tensor):
        raise Unsupported(f"reading tensor attribute Tensor.{name}")
    if not is_constant(result):
        raise Unsupported(f"Tensor.{name} is a {type(result).__name__}, which cannot be traced")
    return ConstantValue(result)


def _module_attr(tx: "Tracer", v: ModuleValue, name: str) -> Value:
    return hub.module_attr(tx, v, name)


def _user_object_attr(tx: "Tracer", v: UserObjectValue, name: str) -> Value:
    stored = hub.stored_attribute(tx, v.obj, name, v)
    if stored is not None:                        # assigned earlier in this trace
        return stored
    cls = type(v.obj)
    if cls.__getattribute__ not in (object.__getattribute__, BaseException.__getattribute__,
                                    dict.__getattribute__, list.__getattribute__, tuple.__getattribute__):
        return _custom_getattribute(tx, v, cls, name)
    r = object_attr(tx, v, v.obj, name, covered=False)
    if r is MISSING:
        return _call_getattr_hook(tx, v, cls, name, _attr_error(v, name))
    return r


def _class_function(tx: "Tracer", v: Value, cls: type, name: str):
    """A Python function defined on ``cls`` (``__getattribute__``, ``__getattr__``) as a value to
    inline (the object's type is guarded already), None when it is not a plain function."""
    idx, raw = mro_lookup(cls, name)
    if isinstance(raw, types.FunctionType):
        return FunctionValue(raw, source=class_member_source(v.source, idx, name), covered=True)
    return None


def _custom_getattribute(tx: "Tracer", v: Value, cls: type, name: str) -> Value:
    """``obj.name`` on a class with its own ``__getattribute__`` (HF configs map names through
    ``attribute_map``): the method is traced like any other; its ``super().__getattribute__(n)``
    is a generic read whose guards run no Python code. An AttributeError falls back to
    ``__getattr__`` as CPython's slot does."""
    fn = _class_function(tx, v, cls, "__getattribute__")
    if fn is None:
        raise Unsupported(f"attribute read on {v.describe()}, whose __getattribute__ is not a Python function")
    try:
        return _inline_lookup(tx, fn, v, name)
    except AttrMissing as e:
        return _call_getattr_hook(tx, v, cls, name, e)


def _call_getattr_hook(tx: "Tracer", v: Value, cls: type, name: str, missing: Exception) -> Value:
    """The class's ``__getattr__(self, name)`` after a failed lookup (traced), else ``missing``."""
    if not hasattr(cls, "__getattr__"):
        raise missing
    fn = _class_function(tx, v, cls, "__getattr__")
    if fn is None:
        raise Unsupported(f"attribute {name!r} of {v.describe()} comes from its builtin __getattr__")
    return _inline_lookup(tx, fn, v, name)


def _inline_lookup(tx: "Tracer", fn: Value, v: Value, name: str) -> Value:
    """Trace ``fn(obj, name)``; an AttributeError it raises is a missing attribute, which
    ``getattr(obj, n, default)`` and ``hasattr`` catch."""
    try:
        return tx.inline_call(None, fn, [v, ConstantValue(name)], {})
    except PythonError as e:
        exc = getattr(e.value, "obj", None)
        if isinstance(e, AttrMissing) or not isinstance(exc, AttributeError):
            raise
        raise AttrMissing(str(exc)) from None


def generic_getattr(tx: "Tracer", v: Value, name: str) -> Value:
    """``object.__getattribute__(obj, name)``: instance dict and class, no ``__getattr__``."""
    if isinstance(v, UserObjectValue):
        stored = hub.stored_attribute(tx, v.obj, name, v)
        if stored is not None:
            return stored
        r = object_attr(tx, v, v.obj, name, covered=False, generic=True)
        if r is MISSING:
            raise _attr_error(v, name)
        return r
    if isinstance(v, NewObjectValue):
        return _new_object_attr(tx, v, name)
    raise Unsupported(f"object.__getattribute__ on {v.describe()}")


def _new_object_attr(tx: "Tracer", v: NewObjectValue, name: str) -> Value:
    if name == "__dict__":                        # the same dict: writes through it are attributes
        return DictValue(v.attrs)
    if name == "__class__":
        return ClassValue(v.cls)
    idx, raw = mro_lookup(v.cls, name)
    if isinstance(raw, property) or name not in v.attrs:
        if raw is MISSING:
            raise _attr_error(v, name)
        bound = bind_class_member(tx, v, v.cls, idx, raw, name, None)
        return bound if bound is not None else tx.wrap(raw, None)
    return v.attrs[name]


def _python_module_attr(tx: "Tracer", v: PythonModuleValue, name: str) -> Value:
    mod = v.module
    if not hasattr(mod, name):
        raise _attr_error(v, name)
    trusted = rules.is_trusted_module_name(mod.__name__)
    if type(mod) is not types.ModuleType:
        _, raw = mro_lookup(type(mod), name)
        if raw is not MISSING and hasattr(type(raw), "__set__"):
            # a property of a module subclass (torch.backends.mkldnn.enabled, .cudnn.allow_tf32):
            # it reads global state at each access, so its answer is guarded by asking again
            value = guard_module_property(tx, mod, name)
            if value is not NotImplemented:
                return ConstantValue(value)
    src = None if trusted or v.source is None else AttrSource(v.source, name)
    return tx.wrap(getattr(mod, name), src)


def _class_attr(tx: "Tracer", v: ClassValue, name: str) -> Value:
    cls = v.cls
    idx, raw = mro_lookup(cls, name)
    if raw is MISSING:
        if not hasattr(cls, name):
            raise _attr_error(v, name)
        raw = getattr(cls, name)
    trusted = rules.is_trusted_module_name(getattr(cls, "__module__", None))
    src = None if trusted or v.source is None else AttrSource(v.source, name)
    if isinstance(raw, staticmethod):
        return tx.wrap(raw.__func__, src)
    if isinstance(raw, classmethod):
        return BoundMethodValue(tx.wrap(raw.__func__, AttrSource(src, "__func__") if src else None), v)
    if isinstance(raw, property):
        raise Unsupported(f"reading property {name!r} on class {cls.__qualname__}")
    return tx.wrap(getattr(cls, name), src)


def _constant_attr(tx: "Tracer", v: ConstantValue, name: str) -> Value:
    special = hub.signature_attr(tx, v, name)
    if special is not None:
        return special
    try:
        r = getattr(v.value, name)
    except AttributeError:
        raise _attr_error(v, name) from None
    if callable(r) and not isinstance(r, type):
        return ObjectMethodValue(v, name)
    if is_constant(r):
        return ConstantValue(r)
    raise Unsupported(f"attribute {name!r} of {v.describe()} is a {type(r).__name__}")


def _tuple_attr(tx: "Tracer", v: TupleValue, name: str) -> Value:
    fields = getattr(v.cls, "_fields", None) or getattr(v.cls, "__match_args__", None)
    if fields and name in fields:
        return tx.resolve(v.items[fields.index(name)])
    if name in ("count", "index", "_asdict", "_replace"):
        return ObjectMethodValue(v, name)
    raise _attr_error(v, name)


def _container_attr(tx: "Tracer", v: Value, name: str) -> Value:
    if hasattr(v.python_type(), name) and callable(getattr(v.python_type(), name)):
        return ObjectMethodValue(v, name)
    raise _attr_error(v, name)


def _function_attr(tx: "Tracer", v: Value, name: str) -> Value:
    obj = v.fn if isinstance(v, (FunctionValue, TorchOpValue, BuiltinValue)) else None
    if isinstance(v, NestedFunctionValue):
        meta = {"__name__": v.code.co_name, "__qualname__": v.code.co_qualname}
        if name in meta:
            return ConstantValue(meta[name])
        if name == "__code__":
            return ConstantValue(v.code)
    elif obj is not None and name in ("__name__", "__qualname__", "__module__", "__doc__"):
        return ConstantValue(getattr(obj, name, None))
    elif isinstance(v, FunctionValue) and name == "__code__":    # the function is fixed by its guard
        return ConstantValue(v.fn.__code__)
    elif isinstance(v, TorchOpValue) and hasattr(v.fn, name):
        return tx.wrap(getattr(v.fn, name), None)
    raise Unsupported(f"reading attribute {name!r} of {v.describe()}")


def _bound_method_attr(tx: "Tracer", v: BoundMethodValue, name: str) -> Value:
    if name == "__self__":
        return v.self_value
    if name == "__func__":
        return v.func
    return _function_attr(tx, v.func, name)


def _super_attr(tx: "Tracer", v: SuperValue, name: str) -> Value:
    return super_attr(tx, v, name)


def super_attr(tx: "Tracer", sv: SuperValue, name: str) -> Value:
    obj = real_object(sv.obj)
    if isinstance(sv.obj, NewObjectValue):
        obj_cls = sv.obj.cls
    elif isinstance(sv.obj, ModuleValue):          # (also a module made in the frame: no real_object)
        obj_cls = type(sv.obj.module)
    elif obj is None:
        raise Unsupported(f"super() on {sv.obj.describe()}")
    else:
        obj_cls = type(obj)
    mro = obj_cls.__mro__
    if sv.cls not in mro:
        raise Unsupported("super(): object is not an instance of the class")
    idx, raw = mro_lookup(obj_cls, name, mro.index(sv.cls) + 1)
    if raw is MISSING:
        raise AttrMissing(f"'super' object has no attribute {name!r}")
    msrc = class_member_source(sv.obj.source, idx, name)
    bound = bind_class_member(tx, sv.obj, obj_cls, idx, raw, name, msrc)
    if bound is None:
        return tx.wrap(raw, msrc, True)
    return bound


_READERS: dict[type, Callable[["Tracer", Any, str], Value]] = {
    TensorValue: _tensor_attr,
    ModuleValue: _module_attr,
    UserObjectValue: _user_object_attr,
    NewObjectValue: _new_object_attr,
    PythonModuleValue: _python_module_attr,
    ClassValue: _class_attr,
    ConstantValue: _constant_attr,
    TupleValue: _tuple_attr,
    ListValue: _container_attr,
    DictValue: _container_attr,
    SetValue: _container_attr,
    FunctionValue: _function_attr,
    NestedFunctionValue: _function_attr,
    TorchOpValue: _function_attr,
    BuiltinValue: _function_attr,
    BoundMethodValue: _bound_method_attr,
    SuperValue: _super_attr,
}


def register_reader(value_cls: type, read: Callable[["Tracer", Any, str], Value]) -> None:
    """How attributes of a ``value_cls`` value are read: ``read(tx, v, name) -> Value``."""
    _READERS.setdefault(value_cls, read)


def load_attr(tx: "Tracer", v: Value, name: str) -> Value:
    reader = _READERS.get(type(v))
    if reader is None:
        raise Unsupported(f"reading attribute {name!r} of {v.describe()}")
    return reader(tx, v, name)

hub.register(
    bind_class_member=bind_class_member, class_member_source=class_member_source,
    generic_getattr=generic_getattr, load_attr=load_attr, mro_lookup=mro_lookup,
    storage_method=storage_method,
)
