"""The interpreter's opcode handlers, one module per family; importing this package registers
every one of them in ``tracer.HANDLERS`` (``@handler("OPNAME")``).

    load_store  loads, stores, cells, attribute and global access, stack shuffles
    binary      binary, unary and comparison operators, `is`, `in`, intrinsics
    build       containers, strings, slices, unpacking, subscripts
    calls       calls and function creation
    control     jumps, loops, returns, `with` blocks, generators
    match       the `match` statement
and, in ``frontend/exceptions.py`` with the unwinding it shares with the tracer: raise,
try/except/finally and `with` exits on an exception.
"""
from __future__ import annotations

from .. import exceptions
from . import binary, build, calls, control, load_store, match

FAMILIES = (load_store, binary, build, calls, control, match, exceptions)

__all__ = ["FAMILIES"]
