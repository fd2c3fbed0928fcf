"""``nn.Parameter`` and ``nn.Module`` objects created inside the compiled frame.

torch.compile graph-breaks on the ``nn.Parameter()`` constructor (``graph_break_on_nn_param_ctor``,
on by default), so a module that makes parameters in its ``__init__`` (``nn.Linear(4, 4)`` built in
forward) breaks there too; xcompile breaks the same way, with the same reason and hint.

A torch.nn module without parameters or buffers (``nn.ReLU()``, ``nn.Dropout(p)``) is built at
trace time from constant arguments (``calls._stateless_torch_module``); that construction runs with
the global RNG state saved and restored, so a module whose ``__init__`` draws random numbers and
then turns out to have parameters leaves eager's random stream as it was.

An instance of a user ``nn.Module`` subclass made in the frame is Unsupported: its ``__init__``
would run at trace time, once, instead of at every call.

Lazy modules (``nn.LazyLinear``, ``nn.LazyBatchNorm1d``...) called while uninitialized are
initialized at trace time, as torch.compile does: their ``_infer_parameters`` pre-hook runs for
real on the arguments' fake tensors (it reads only their shapes), materializing the parameters
(drawing their initial values from the global RNG, as eager's first call does) and turning the
module into its ``cls_to_become``; the trace then calls the initialized module.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.nn.modules.lazy import LazyModuleMixin

from . import scalars
from .exc import Unsupported
from .values import ConstantValue, ModuleValue, TensorValue, Value

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
    m._infer_parameters(m, fargs, fkwargs)


__all__ = ["build_stateless", "check_class_call", "initialize_lazy", "is_uninitialized_lazy",
           "parameter_ctor_break", "user_module_break"]
