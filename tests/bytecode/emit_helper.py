"""Version-independent builders for the instruction sequences the split test's generated code needs.

The frontend's code generator and ``split.py`` describe *what* to run (call this with n
arguments, make a closure from that code object); these functions return the instructions
the running CPython wants for it (3.11: ``PRECALL`` + ``CALL``; 3.12: ``CALL``; 3.13: the
NULL above the callable, closures through ``LOAD_FAST`` and ``SET_FUNCTION_ATTRIBUTE``).
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


def load_closure(name: str) -> Instruction:
    """Push the cell of a cell or free variable (3.13: LOAD_CLOSURE is a pseudo-op the compiler
    writes as LOAD_FAST of the cell's slot)."""
    return create("LOAD_FAST" if op.FACTS.null_above_callable else "LOAD_CLOSURE", None, name)


def with_null(load_callable: list[Instruction]) -> list[Instruction]:
    """The instructions that push a callable, with the NULL a following ``call`` needs: below
    the callable (3.11, 3.12) or above it (3.13)."""
    if op.FACTS.null_above_callable:
        return load_callable + [create("PUSH_NULL")]
    return [create("PUSH_NULL")] + load_callable


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
    flags = op.has_arg("MAKE_FUNCTION")          # 3.13: no flags, SET_FUNCTION_ATTRIBUTE instead
    if not closure:
        return [load_const(code), create("MAKE_FUNCTION", 0 if flags else None)]
    cells = [load_closure(name) for name in closure] + [create("BUILD_TUPLE", len(closure)), load_const(code)]
    if flags:
        return cells + [create("MAKE_FUNCTION", 0x08)]
    return cells + [create("MAKE_FUNCTION"), create("SET_FUNCTION_ATTRIBUTE", 0x08)]


def return_value() -> Instruction:
    return create("RETURN_VALUE")
