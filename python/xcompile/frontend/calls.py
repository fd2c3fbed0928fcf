"""Calling a symbolic value: one function per callable value class.

    torch op / Tensor method   -> one graph node (folded to a constant if it returns metadata)
    Python function / method   -> inlined into the same graph
    nn.Module                  -> its forward inlined (modules.py)
    builtin / class            -> the handler in builtins_rules.BUILTINS, or Unsupported
"""
from __future__ import annotations

import abc
import collections
import contextlib
import sys
import types
from typing import TYPE_CHECKING, Any, Callable

import torch

from ..bytecode.versions import facts_for
from . import hub, rules, scalars
from .exc import PythonError, Unsupported
from .global_reads import constant_args, guard_answer, watching
from .module_creation import build_stateless, check_class_call, construct_module, new_module_value
from .seq_subclasses import list_init, new_storage, seq_base
from .values import (
    BoundMethodValue,
    BuiltinValue,
    ClassValue,
    ConstantValue,
    ContextExitValue,
    DictValue,
    FunctionValue,
    GradModeValue,
    ModuleValue,
    NestedFunctionValue,
    NewObjectValue,
    NoOpContextValue,
    NullValue,
    ObjectMethodValue,
    PartialValue,
    TensorMethodValue,
    TensorValue,
    TorchOpValue,
    UserObjectValue,
    Value,
    dict_storage,
)

if TYPE_CHECKING:
    from .tracer import Tracer


# torch callable -> rule(tx, args, kwargs) -> Value, or None for the usual graph node
# (numpy_tracing.py: torch.from_numpy / as_tensor of an ndarray).
_TORCH_OP_RULES: dict[Any, Callable[..., Value | None]] = {}
# Tensor method name -> rule(tx, tensor, args, kwargs) -> Value, or None for the usual handling
# (numpy_tracing.py: Tensor.numpy()).
_TENSOR_METHOD_RULES: dict[str, Callable[..., Value | None]] = {}


def register_torch_op_rule(fn: Any, rule: Callable[..., Value | None]) -> None:
    _TORCH_OP_RULES[fn] = rule


def register_tensor_method_rule(name: str, rule: Callable[..., Value | None]) -> None:
    _TENSOR_METHOD_RULES[name] = rule


def _torch_op(tx: "Tracer", v: TorchOpValue, args, kwargs) -> Value:
    fn = v.fn
    rule = _TORCH_OP_RULES.get(fn) if _TORCH_OP_RULES and type(fn).__hash__ is not None else None
    if rule is not None and (r := rule(tx, args, kwargs)) is not None:
        return r
    if fn in rules.FOLD_AT_TRACE:
        return ConstantValue(rules.FOLD_AT_TRACE[fn])
    if rules.is_torch_is_compiling(fn):
        return ConstantValue(True)
    if fn in rules.FORBIDDEN:
        raise Unsupported(rules.FORBIDDEN[fn], "Call it outside the compiled region.")
    if fn is torch.set_grad_enabled:
        return _set_grad_enabled(tx, args)
    if args and tx.gb.captures_scalars:
        if fn in scalars.TO_TENSOR and scalars.is_sym(args[0]):
            return scalars.to_tensor(tx, fn, args, kwargs)       # torch.tensor(t.item())
    if not constant_args(args, kwargs):
        return tx.gb.call("call_function", fn, args, kwargs)
    # no tensor in: a constant answer may have come from global state (global_reads.py)
    if isinstance(fn, types.FunctionType):
        read_state = [False]

        def watched(*a, **k):
            with watching() as seen:
                try:
                    return fn(*a, **k)
                finally:
                    read_state[0] = seen[0]

        result = tx.gb.call("call_function", fn, args, kwargs, fake_fn=watched, what=None)
        if isinstance(result, ConstantValue) and read_state[0]:
            guard_answer(tx, fn, args, kwargs, result.value)
        return result
    result = tx.gb.call("call_function", fn, args, kwargs)
    if isinstance(result, ConstantValue):
        guard_answer(tx, fn, args, kwargs, result.value)
    return result


def _set_grad_enabled(tx: "Tracer", args) -> Value:
    if len(args) != 1 or not isinstance(args[0], ConstantValue):
        raise Unsupported("torch.set_grad_enabled with a non-constant argument")
    prev = tx.gb.grad_enabled
    switch_grad_mode(tx, bool(args[0].value))
    return GradModeValue(bool(args[0].value), prev=prev)


def _autocast(tx: "Tracer", args, kwargs) -> Value:
    consts = [hub.as_constant(a) for a in [*args, *kwargs.values()]]
    if not all(ok for ok, _ in consts):
        raise Unsupported("torch.autocast with non-constant arguments")
    vals = [c for _, c in consts]
    device = vals[0] if args else kwargs_device(kwargs)
    enabled = dict(zip(kwargs, vals[len(args):])).get("enabled", True)
    if enabled is False and isinstance(device, str) and not torch.is_autocast_enabled(device) \
            and not tx.gb.autocast_modes:
        return NoOpContextValue(f"torch.autocast({device!r}, enabled=False) (autocast already off)")
    named = dict(zip(("device_type", "dtype", "enabled", "cache_enabled"), vals[:len(args)]))
    named.update(zip(kwargs, vals[len(args):]))
    return hub.make_autocast(named.get("device_type"), named.get("dtype"), named.get("enabled", True),
                         named.get("cache_enabled"))


def kwargs_device(kwargs):
    v = kwargs.get("device_type")
    return v.value if isinstance(v, ConstantValue) else None


def switch_grad_mode(tx: "Tracer", enabled: bool) -> None:
    if tx.gb.grad_enabled != enabled:
        tx.gb.side_effect(torch._C._set_grad_enabled, (enabled,))
        tx.gb.grad_enabled = enabled


def _tensor_method(tx: "Tracer", v: TensorMethodValue, args, kwargs) -> Value:
    rule = _TENSOR_METHOD_RULES.get(v.name)
    if rule is not None and (r := rule(tx, v.tensor, args, kwargs)) is not None:
        return r
    if v.name in ("item", "tolist") and tx.gb.captures_scalars and not args and not kwargs:
        return scalars.item(tx, v.tensor) if v.name == "item" else scalars.tolist(tx, v.tensor)
    if v.name in rules.TENSOR_METHODS_FORBIDDEN:
        hint = rules.TENSOR_METHODS_HINTS.get(v.name, "Keep this outside the compiled region.")
        raise Unsupported(rules.TENSOR_METHODS_FORBIDDEN[v.name], hint)
    return tx.gb.call("call_method", v.name, [v.tensor, *args], kwargs)


def _function(tx: "Tracer", v: Value, args, kwargs) -> Value:
    fn = getattr(v, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is not None and rules.is_function_transform_code(code):
        raise Unsupported("calling a function made by a function transform (torch.func / torch.vmap)",
                          "Function transforms run eagerly; move them outside the compiled region "
                          "or accept the graph break.")
    return tx.inline_call(None, v, list(args), dict(kwargs))


def _bound_method(tx: "Tracer", v: BoundMethodValue, args, kwargs) -> Value:
    return call_value(tx, v.func, [v.self_value, *args], kwargs)


def _partial(tx: "Tracer", v: PartialValue, args, kwargs) -> Value:
    return call_value(tx, v.func, [*v.args, *args], {**v.kwargs, **kwargs})


def _module(tx: "Tracer", v: ModuleValue, args, kwargs) -> Value:
    return hub.call_module(tx, v, list(args), dict(kwargs))


def _builtin(tx: "Tracer", v: BuiltinValue | ClassValue, args, kwargs) -> Value:
    fn = v.fn if isinstance(v, BuiltinValue) else v.cls
    if any(scalars.is_sym(a) for a in [*args, *kwargs.values()]):   # captured scalars (Tensor.item())
        if fn in scalars.BUILTINS:                                   # int(s), max(s, t), math.sqrt(s)...
            return scalars.call_builtin(tx, fn, list(args), dict(kwargs))
        if not scalars.passes_through(fn):                            # range(s), str(s), round(s)...
            if not all(scalars.is_backed(a) for a in [*args, *kwargs.values()] if scalars.is_sym(a)):
                raise scalars.needs_value(f"{getattr(fn, '__name__', fn)}()")
            # symbolic sizes (dynamic shapes): their values now, guarded to stay so
            args = [scalars.specialize(a) if scalars.is_sym(a) else a for a in args]
            kwargs = {k: scalars.specialize(a) if scalars.is_sym(a) else a for k, a in kwargs.items()}
    h = hub.BUILTINS.get(fn)
    if h is not None:
        return h(tx, list(args), dict(kwargs))
    return hub.call_constant_function(tx, fn, args, kwargs)


def _class(tx: "Tracer", v: ClassValue, args, kwargs) -> Value:
    cls = v.cls
    if cls in rules.GRAD_MODE_CLASSES:
        if args or kwargs:
            raise Unsupported(f"{cls.__name__} with arguments")
        return GradModeValue(rules.GRAD_MODE_CLASSES[cls])
    if cls is torch.inference_mode:
        return hub.make_inference_mode(tx, list(args), dict(kwargs))
    if cls is torch.set_grad_enabled:
        return _set_grad_enabled(tx, args)
    if cls is contextlib.nullcontext and not args:
        return NoOpContextValue("contextlib.nullcontext()")
    if cls is torch.autograd.profiler.record_function:
        # a profiler range (the optimizer's step wraps itself in one): not part of the graph,
        # as under torch.compile
        return NoOpContextValue("torch.autograd.profiler.record_function()")
    if cls is torch.autocast:
        return _autocast(tx, args, kwargs)
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return hub.make_namedtuple(tx, cls, list(args), dict(kwargs))
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return _make_exception(cls, args, kwargs)
    check_class_call(cls)                                 # nn.Parameter(...): torch's break
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and \
            (cls.__module__ or "").startswith("torch.nn."):
        return _stateless_torch_module(tx, cls, args, kwargs)
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and \
            not rules.is_trusted_module_name(cls.__module__):
        return construct_module(tx, cls, list(args), dict(kwargs))      # (module_creation.py)
    if is_plain_user_class(cls) and cls not in hub.BUILTINS:
        return _construct(tx, cls, args, kwargs)
    return _builtin(tx, v, args, kwargs)


def _stateless_torch_module(tx: "Tracer", cls: type, args, kwargs) -> Value:
    """``nn.ReLU()(x)`` / ``nn.Dropout(p)`` made in forward: a torch.nn module without
    parameters or buffers is built at trace time from constant arguments (every call of eager
    builds an equal one) and its forward is inlined."""
    consts = [hub.as_constant(a) for a in [*args, *kwargs.values()]]
    if not all(ok for ok, _ in consts):
        raise Unsupported(f"creating {cls.__name__} with non-constant arguments inside the compiled region")
    vals = [c for _, c in consts]
    m = build_stateless(cls, vals[:len(args)], dict(zip(kwargs, vals[len(args):])))   # (module_creation.py)
    if any(True for _ in m.buffers()):
        raise Unsupported(f"creating {cls.__name__} (which has parameters or buffers) inside the compiled region",
                          "Create the module in __init__ and call it in forward.")
    return new_module_value(tx, m)             # made in the frame: never leaves it (module_creation.py)


def _make_exception(cls: type, args, kwargs) -> Value:
    """An exception object made at trace time: its arguments must be constants (it is a real
    object, read by except clauses, ``e.args``, ``str(e)``)."""
    consts = [hub.as_constant(a) for a in [*args, *kwargs.values()]]
    if not all(ok for ok, _ in consts):
        raise Unsupported(f"creating {cls.__name__} with non-constant arguments",
                          "Pass constants (strings, numbers, shapes) to exceptions raised in compiled code.")
    vals = [c for _, c in consts]
    try:
        return UserObjectValue(cls(*vals[:len(args)], **dict(zip(kwargs, vals[len(args):]))))
    except Exception as e:                     # its own __init__ failed: eager fails the same way
        raise PythonError.of(e) from e


def is_plain_user_class(cls) -> bool:
    if not isinstance(cls, type) or type(cls) not in (type, abc.ABCMeta) \
            or rules.is_trusted_module_name(cls.__module__):
        return False
    if cls.__module__ == "builtins" or issubclass(cls, torch.nn.Module) or "__slots__" in cls.__dict__:
        return False
    base = dict_base(cls) or seq_base(cls)         # dict / list / tuple subclasses keep a storage
    if cls.__new__ is not (object.__new__ if base is None else base.__new__) or \
            cls.__getattribute__ not in (object.__getattribute__, dict.__getattribute__,
                                         list.__getattribute__, tuple.__getattribute__):
        return False
    if cls.__setattr__ is not object.__setattr__ and not isinstance(cls.__setattr__, types.FunctionType):
        return False                          # a Python __setattr__ (frozen dataclasses) is inlined
    return \
        all(k.__module__ != "builtins" or k in (object, dict, base) for k in cls.__mro__)


def dict_base(cls: type) -> type[object] | None:
    """dict or OrderedDict for a user subclass of them (HF ModelOutput), else None (also for
    defaultdict and other builtin dict subclasses, which stay unsupported)."""
    if not issubclass(cls, dict) or cls in (dict, collections.OrderedDict):
        return None
    builtin_bases = [k for k in cls.__mro__ if k.__module__ in ("builtins", "collections") and k is not object]
    if builtin_bases in ([dict], [collections.OrderedDict, dict]):
        return builtin_bases[0]
    return None


def _construct(tx: "Tracer", cls: type[object], args, kwargs) -> Value:
    obj = NewObjectValue(cls)
    base = dict_base(cls)
    if base is None and (seq := seq_base(cls)) is not None:     # list / tuple subclasses
        obj.storage = new_storage(tx, seq, list(args), dict(kwargs))
        if cls.__init__ is seq.__init__:  # type: ignore[misc]
            if seq is list:
                list_init(tx, obj.storage, list(args), dict(kwargs))
            return obj
    elif base is not None:
        obj.storage = DictValue({}, cls=base)
        if cls.__init__ is base.__init__:        # the builtin dict constructor fills the storage
            hub.call_object_method(tx, ObjectMethodValue(obj.storage, "update"), list(args), dict(kwargs))
            return obj
    init = cls.__init__
    if init is object.__init__:
        if args or kwargs:
            raise Unsupported(f"{cls.__name__}() takes no arguments")
        return obj
    if not isinstance(init, types.FunctionType):
        raise Unsupported(f"constructing {cls.__qualname__} (its __init__ is not a Python function)")
    r = tx.inline_call(None, FunctionValue(init), [obj, *args], dict(kwargs))
    if not (isinstance(r, ConstantValue) and r.value is None):
        raise Unsupported("__init__() should return None")
    return obj


def _object_method(tx: "Tracer", v: ObjectMethodValue, args, kwargs) -> Value:
    return hub.call_object_method(tx, v, list(args), dict(kwargs))


# Context values with their own enter/exit behaviour: value class -> (enter(tx, ctx), exit(tx, ctx)).
CONTEXT_VALUES: dict[type, tuple[Callable[..., None], Callable[..., None]]] = {}


def _context_exit(tx: "Tracer", v: ContextExitValue, args, kwargs) -> Value:
    ctx = v.ctx
    if isinstance(ctx, GradModeValue):
        assert ctx.exit_to is not None          # BEFORE_WITH (or the held exit's rule) set it
        switch_grad_mode(tx, ctx.exit_to)
        if v.holder and v.source is not None:
            tx.exited_holders.append(v.source)     # the runner drops it from its ContextExit
    elif type(ctx) in CONTEXT_VALUES:
        CONTEXT_VALUES[type(ctx)][1](tx, ctx)
    else:
        if isinstance(ctx, hub.CONTEXT_CLASSES):
            return hub.exit_context(tx, ctx, list(args))
    return ConstantValue(None)


_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType)


def _user_object(tx: "Tracer", v: UserObjectValue, args, kwargs) -> Value:
    cls = type(v.obj)
    if getattr(v.obj, "__objclass__", None) in (dict, collections.OrderedDict) and args and \
            isinstance(dict_storage(args[0]), DictValue) and isinstance(v.obj, _DESCRIPTORS):
        return call_value(tx, hub.storage_method(dict_storage(args[0]), v.obj.__name__), args[1:], kwargs)
    idx, raw = hub.mro_lookup(cls, "__call__")
    if idx < 0 or raw is object.__call__:
        raise Unsupported(f"{v.describe()} is not callable")
    method = hub.bind_class_member(tx, v, cls, idx, raw, "__call__", hub.class_member_source(v.source, idx, "__call__"))
    return call_value(tx, method, args, kwargs)


def _new_object(tx: "Tracer", v: NewObjectValue, args, kwargs) -> Value:
    if not hub.defines(v, "__call__"):
        raise Unsupported(f"{v.describe()} is not callable", "The same code raises TypeError in eager mode.")
    return call_value(tx, hub.load_attr(tx, v, "__call__"), args, kwargs)


def _grad_mode_value(tx: "Tracer", v: GradModeValue, args, kwargs) -> Value:
    raise Unsupported("using torch.no_grad()/enable_grad() as a function decorator inside a compiled region")


_CALLERS: dict[type, Callable[..., Value]] = {
    TorchOpValue: _torch_op,
    TensorMethodValue: _tensor_method,
    FunctionValue: _function,
    NestedFunctionValue: _function,
    BoundMethodValue: _bound_method,
    PartialValue: _partial,
    ModuleValue: _module,
    BuiltinValue: _builtin,
    ClassValue: _class,
    ObjectMethodValue: _object_method,
    ContextExitValue: _context_exit,
    UserObjectValue: _user_object,
    NewObjectValue: _new_object,
    GradModeValue: _grad_mode_value,
}


def register_caller(value_cls: type, call: Callable[..., Value]) -> None:
    """How a value of ``value_cls`` is called: ``call(tx, v, args, kwargs) -> Value``."""
    _CALLERS[value_cls] = call


def register_context_value(value_cls: type, enter: Callable[..., None], exit_: Callable[..., None]) -> None:
    """A context value with its own behaviour: ``enter(tx, ctx)`` at BEFORE_WITH, ``exit_(tx, ctx)``
    when the block's exit is called."""
    CONTEXT_VALUES[value_cls] = (enter, exit_)


def call_value(tx: "Tracer", fn: Value, args: list[Value], kwargs: dict[str, Any]) -> Value:
    fn = tx.resolve(fn)
    args = [tx.resolve(a) for a in args]
    kwargs = {k: tx.resolve(a) for k, a in kwargs.items()}
    caller = _CALLERS.get(type(fn))
    if caller is None:
        if isinstance(fn, TensorValue):
            raise Unsupported("calling a tensor")
        raise Unsupported(f"calling {fn.describe()}")
    return caller(tx, fn, args, kwargs)

hub.register(
    CONTEXT_VALUES=CONTEXT_VALUES, call_value=call_value, dict_base=dict_base,
    is_plain_user_class=is_plain_user_class, switch_grad_mode=switch_grad_mode,
)


_NULL_ABOVE_CALLABLE = facts_for(sys.version_info[:2]).null_above_callable


def split_callable(first: Value, second: Value, args: list) -> tuple[Value, list]:
    """The callable and the positional arguments from the two slots below a call's arguments
    (bottom first): [NULL | method, callable | self] (3.11, 3.12) or
    [callable | method, NULL | self] (3.13)."""
    if _NULL_ABOVE_CALLABLE:
        return (first, args) if isinstance(second, NullValue) else (first, [second, *args])
    return (second, args) if isinstance(first, NullValue) else (first, [second, *args])
