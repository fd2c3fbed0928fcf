"""``nn.Parameter`` and ``nn.Module`` objects created inside the compiled frame.

torch.compile graph-breaks on the ``nn.Parameter()`` constructor (``graph_break_on_nn_param_ctor``,
on by default), so a module that makes parameters in its ``__init__`` (``nn.Linear(4, 4)`` built in
forward) breaks there too; xcompile breaks the same way, with the same reason and hint.

A torch.nn module without parameters or buffers (``nn.ReLU()``, ``nn.Dropout(p)``) is built at
trace time from constant arguments (``calls._stateless_torch_module``); that construction runs with
the global RNG state saved and restored, so a module whose ``__init__`` draws random numbers and
then turns out to have parameters leaves eager's random stream as it was.

Lazy modules (``nn.LazyLinear``, ``nn.LazyBatchNorm1d``...) called while uninitialized are
initialized at trace time, as torch.compile does: their ``_infer_parameters`` pre-hook runs for
real on the arguments' fake tensors (it reads only their shapes), materializing the parameters
(drawing their initial values from the global RNG, as eager's first call does) and turning the
module into its ``cls_to_become``; the trace then calls the initialized module.

Instances of user nn.Module subclasses made in the frame (``Scale(3)(x)``): torch.compile traces
their ``__init__`` and calls the new module; so does xcompile, for modules that never leave the
frame:

    the object     a real, fresh instance (``object.__new__(cls)``) made at trace time, one per
                   trace; ``NewModuleValue`` stands for it. ``super().__init__()`` reaching
                   ``nn.Module.__init__`` runs that (torch's own, no user code) on it for real
    __init__       the class's ``__init__`` is inlined on it; an assignment stores constants (and
                   modules made in the frame) on the real object through ``nn.Module.__setattr__``,
                   as eager would; buffers registered from traced tensors live in the trace's
                   view of ``_buffers`` (``modules.module_attr``)
    the call       like any module: hooks, then the inlined forward
    leaving        returned, stored outside the frame or needed after a graph break: Unsupported
                   (every eager call makes a new object; the trace has only this one)

Parameters (``nn.Parameter`` in ``__init__``: torch.compile's own break), tensors or outside
objects stored as attributes, a class with its own ``__new__``, ``__setattr__`` or metaclass
are Unsupported. torch.nn's own modules without parameters (``nn.ReLU()``) are built for real at
trace time (``module_creation.build_stateless``) and are new modules of the frame too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.nn.modules.lazy import LazyModuleMixin

from . import hub, scalars
from .builtins_table import builtin
from .exc import PythonError, Unsupported
from .values import (
    BuiltinValue,
    ConstantValue,
    FunctionValue,
    ModuleValue,
    PartialValue,
    TensorValue,
    Value,
    is_constant,
)

if TYPE_CHECKING:
    from .tracer import Tracer


def parameter_ctor_break() -> Unsupported:
    return Unsupported("Attempted to use `torch.nn.Parameter()` constructor inside the compiled region",
                       "Try to construct `torch.nn.Parameter()` outside the compiled region.",
                       "xcompile does not support this (as torch.compile: graph_break_on_nn_param_ctor).")


def user_module_break(cls: type) -> Unsupported:
    return Unsupported(f"creating {cls.__qualname__} (an nn.Module subclass) inside the compiled region",
                       "Create the module outside the compiled function (in __init__) and call it in "
                       "forward.")


def check_class_call(cls: object) -> None:
    """Raise the break for calling ``cls`` when it is nn.Parameter (or a subclass)."""
    if isinstance(cls, type) and issubclass(cls, torch.nn.Parameter):
        raise parameter_ctor_break()


def build_stateless(cls: type, args: list, kwargs: dict) -> torch.nn.Module:
    """``cls(*args, **kwargs)`` for a torch.nn module class, the RNG state kept; the Parameter
    break when the module turns out to hold parameters."""
    with torch.random.fork_rng(devices=[]):
        m = cls(*args, **kwargs)
    if any(True for _ in m.parameters()):
        raise parameter_ctor_break()
    return m


def is_uninitialized_lazy(m: torch.nn.Module) -> bool:
    return isinstance(m, LazyModuleMixin) and hasattr(m, "_initialize_hook") and m.has_uninitialized_params()


def _example(tx: "Tracer", v: Value, m: torch.nn.Module):
    v = tx.resolve(v)
    if isinstance(v, TensorValue):
        if scalars.has_sym(v.fake.shape):
            raise Unsupported(f"initializing lazy module {type(m).__name__} from an input of symbolic shape",
                              "Call the lazy module once eagerly (or with static shapes) before compiling.")
        return v.fake
    if isinstance(v, ConstantValue):
        return v.value
    raise Unsupported(f"initializing lazy module {type(m).__name__} with argument {v.describe()}")


def initialize_lazy(tx: "Tracer", v: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> None:
    """Run a lazy module's initialization hook now (see the module docstring)."""
    m = v.module
    if v.source is None:
        raise Unsupported(f"initializing lazy module {type(m).__name__} made inside the compiled region")
    fargs = [_example(tx, a, m) for a in args]
    fkwargs = {k: _example(tx, a, m) for k, a in kwargs.items()}
    cast(Any, m)._infer_parameters(m, fargs, fkwargs)


# -- user modules made in the frame ------------------------------------------------------------------
@dataclass(eq=False)
class NewModuleValue(ModuleValue):
    """An nn.Module made in the frame (see the module docstring); never leaves it. ``overlay``
    holds the attributes the real object cannot (tensors of the trace), read first."""

    overlay: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"module {type(self.module).__name__} made in the compiled region"


def new_module_value(tx: "Tracer", m: torch.nn.Module) -> NewModuleValue:
    v = NewModuleValue(m)
    tx.memo[id(m)] = (m, v)                  # read back through an attribute: this same value
    return v


def construct_module(tx: "Tracer", cls: type, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """``cls(*args, **kwargs)`` for a user nn.Module subclass."""
    c: Any = cls                              # (mypy: reading the class's own slots)
    init = c.__init__
    if type(cls) is not type or cls.__new__ is not object.__new__ or \
            cls.__setattr__ is not torch.nn.Module.__setattr__ or \
            cls.__delattr__ is not torch.nn.Module.__delattr__ or \
            cls.__getattribute__ is not object.__getattribute__ or \
            c.__getattr__ is not torch.nn.Module.__getattr__ or not hasattr(init, "__code__"):
        raise user_module_break(cls)
    m: torch.nn.Module = object.__new__(cls)
    v = new_module_value(tx, m)
    r = tx.inline_call(None, FunctionValue(init), [v, *args], dict(kwargs))
    if not (isinstance(r, ConstantValue) and r.value is None):
        raise PythonError.of(TypeError("__init__() should return None"))
    if "_modules" not in m.__dict__:
        raise Unsupported(f"{cls.__qualname__}.__init__ made inside the compiled region did not call "
                          "nn.Module.__init__")
    if any(True for _ in m.parameters()):
        raise parameter_ctor_break()
    return v


def module_init(self, *args, **kwargs):
    """Marker: ``super().__init__()`` of a module made in the frame reaching nn.Module.__init__."""


@builtin(module_init)
def _module_init(tx: "Tracer", args: list, kwargs: dict) -> Value:
    v = args[0]
    assert isinstance(v, NewModuleValue)
    consts = [hub.as_constant(a) for a in [*args[1:], *kwargs.values()]]
    if not all(ok for ok, _ in consts):
        raise Unsupported("nn.Module.__init__ with non-constant arguments")
    vals = [c for _, c in consts]
    try:
        torch.nn.Module.__init__(v.module, *vals[:len(args) - 1], **dict(zip(kwargs, vals[len(args) - 1:])))
    except Exception as e:                   # eager raises the same
        raise PythonError.of(e) from e
    return ConstantValue(None)


def bound_module_init(obj_v: Value, raw: Any) -> Value | None:
    """The call target for ``super().__init__`` on a module made in the frame (None: not one)."""
    if raw is torch.nn.Module.__init__ and isinstance(obj_v, NewModuleValue):
        return PartialValue(BuiltinValue(module_init), [obj_v], {})
    return None


_NOT_STORABLE = object()


def _storable(tx: "Tracer", value: Value) -> Any:
    """The real object to store for ``value``: a constant, a module made in the frame."""
    if isinstance(value, NewModuleValue):
        return value.module
    ok, c = hub.as_constant(value)
    return c if ok and is_constant(c) else _NOT_STORABLE


def store_on_new_module(tx: "Tracer", v: NewModuleValue, name: str, value: Value | None, plain: bool) -> None:
    """``v.name = value`` (None: ``del v.name``) on the real new module, as eager does it; a
    tensor or other traced value goes to ``v.overlay`` (a plain attribute only)."""
    m = v.module
    if name in v.overlay:
        del v.overlay[name]
        if value is None:
            return
    real = _NOT_STORABLE if value is None else _storable(tx, tx.resolve(value))
    if value is not None and real is _NOT_STORABLE:
        d = m.__dict__
        if any(name in d.get(k, ()) for k in ("_parameters", "_buffers", "_modules")) or \
                not isinstance(tx.resolve(value), TensorValue):
            raise Unsupported(f"storing {value.describe()} as attribute {name!r} of {v.describe()}",
                              "Modules made inside the compiled region can hold constants, tensors (as plain "
                              "attributes) and other such modules.")
        d.pop(name, None)
        v.overlay[name] = value
        return
    try:
        if value is None:
            (object.__delattr__ if plain else torch.nn.Module.__delattr__)(m, name)
        else:
            (object.__setattr__ if plain else torch.nn.Module.__setattr__)(m, name, cast(Any, real))
    except (AttributeError, TypeError, KeyError) as e:
        raise PythonError.of(e) from e


__all__ = ["NewModuleValue", "bound_module_init", "build_stateless", "check_class_call", "construct_module",
           "initialize_lazy", "is_uninitialized_lazy", "new_module_value", "parameter_ctor_break",
           "store_on_new_module", "user_module_break"]
