"""Registers how a ``module_creation.NewModuleValue`` (an nn.Module made in the frame) is called and
read: as a module (``modules.py``). Separate from module_creation.py, which calls.py imports."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import hub
from .attrs import register_reader
from .calls import register_caller
from .module_creation import NewModuleValue
from .values import Value

if TYPE_CHECKING:
    from .tracer import Tracer


def _call(tx: "Tracer", v: NewModuleValue, args, kwargs) -> Value:
    return hub.call_module(tx, v, list(args), dict(kwargs))


def _read(tx: "Tracer", v: NewModuleValue, name: str) -> Value:
    return hub.module_attr(tx, v, name)


register_caller(NewModuleValue, _call)
register_reader(NewModuleValue, _read)

__all__: list[str] = []
