"""Version-independent builders for the instruction sequences the split test's generated code needs.

The frontend's code generator and ``split.py`` describe *what* to run (call this with n
arguments, make a closure from that code object); these functions return the instructions
the running CPython wants for it (3.11: ``PRECALL`` + ``CALL``; 3.12: ``CALL``).
"""
from __future__ import annotations

import types
from typing import Any, Sequence

from xcompile.bytecode import opcodes as op
from xcompile.bytecode.instr import Instruction, create


def load_const(value: Any) -> Instruction:
    return create("LOAD_CONST", None, value)


def load_fast(name: str) -> Instruction:
    return create("LOAD_FAST", None, name)


def store_fast(name: str) -> Instruction:
    return create("STORE_FAST", None, name)


def load_global(name: str, *, push_null: bool = False) -> Instruction:
    """LOAD_GLOBAL; with ``push_null`` it also pushes the NULL a following call needs."""
    return create("LOAD_GLOBAL", int(push_null), name)


def call(nargs: int) -> list[Instruction]:
    """Call with the stack ``[NULL, callable, arg1..argN]`` (or ``[callable, self, args]``);
    leaves the result."""
    out = [create("PRECALL", nargs)] if "PRECALL" in op.OPMAP else []
    return out + [create("CALL", nargs)]


def make_function(code: types.CodeType, closure: Sequence[str] = ()) -> list[Instruction]:
    """Push a new function for ``code`` with this frame's globals; ``closure`` names this
    frame's cell or free variables for the new function's ``co_freevars``, in order."""
    if tuple(closure) != tuple(code.co_freevars):
        raise ValueError(f"closure {tuple(closure)} != co_freevars {code.co_freevars}")
    if not closure:
        return [load_const(code), create("MAKE_FUNCTION", 0)]
    cells = [create("LOAD_CLOSURE", None, name) for name in closure]
    return cells + [create("BUILD_TUPLE", len(closure)), load_const(code), create("MAKE_FUNCTION", 0x08)]


def return_value() -> Instruction:
    return create("RETURN_VALUE")
