"""Every CPython-version fact the bytecode decoder needs, in one table.

The interpreter's handlers never look at ``sys.version_info``: the decoder
(``bytecode/instructions.py``) uses the row for the running interpreter to turn
each version's instructions into one normalized form:

- opcode renames (3.11's directional jumps, ``LOAD_METHOD``) map onto one name;
- flag bits packed into ``arg`` (``LOAD_GLOBAL``'s push-NULL bit, 3.12's
  ``LOAD_ATTR`` method bit, ``LOAD_SUPER_ATTR``) become explicit fields;
- behaviour that differs for the same name (``FOR_ITER`` exhaustion, where
  ``KW_NAMES`` finds its tuple, on which side of the callable the NULL sits) is a field
  of the row;
- 3.13's super-instructions (``LOAD_FAST_LOAD_FAST`` ...) are read as the two plain
  instructions they stand for (``bytecode/instr.py`` does the same, so indices agree).
"""
from __future__ import annotations

import operator
import sys
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class VersionFacts:
    version: tuple[int, int]
    # opname -> normalized opname (only the names that change)
    renames: dict[str, str] = field(default_factory=dict)
    # LOAD_ATTR: the low bit of ``arg`` asks for a method load (3.12+); 3.11 has LOAD_METHOD instead
    load_attr_method_bit: bool = False
    # KW_NAMES: ``arg`` indexes co_consts (3.11, dis shows no argval) or dis resolves it (3.12)
    kw_names_from_consts: bool = True
    # FOR_ITER on exhaustion: pops the iterator and jumps to the target (3.11), or to the
    # instruction after the END_FOR found at the target (3.12)
    for_iter_skips_end_for: bool = False
    # ... and how many instructions at the target it skips: END_FOR (3.12), END_FOR and the
    # POP_TOP after it (3.13)
    for_iter_skip: int = 0
    # values END_FOR pops when run: 2 (3.12), 1 (3.13, where a POP_TOP of the iterator follows)
    end_for_pops: int = 2
    # SEND on an exhausted iterator: pops the receiver (3.11) or leaves it for END_SEND (3.12)
    send_keeps_receiver: bool = False
    # the NULL (or self) of a call sits above the callable: LOAD_GLOBAL / method LOAD_ATTR push
    # [callable, NULL|self] and CALL reads [callable, self_or_null, args...] (3.13); below it
    # before (3.11, 3.12: [NULL|method, callable|self, args...])
    null_above_callable: bool = False
    # MAKE_FUNCTION's ``arg`` holds the flags of the values below the code (3.11, 3.12); 3.13
    # sets each one afterwards with SET_FUNCTION_ATTRIBUTE
    make_function_flags: bool = True
    # a closure's cells are loaded with LOAD_FAST of the cell variable (3.13: LOAD_CLOSURE is a
    # pseudo-op the compiler turns into LOAD_FAST)
    closure_by_load_fast: bool = False
    # CALL_INTRINSIC_1 function ids (3.12+)
    intrinsic_1: tuple[str, ...] = ()
    # opcodes that exist only in this version and need no handler because they are never
    # reached on the no-exception path (documentation, checked by tests)
    exception_only: frozenset[str] = frozenset()


_COMMON_EXC_ONLY = frozenset({"PUSH_EXC_INFO", "POP_EXCEPT", "RERAISE", "WITH_EXCEPT_START",
                              "CHECK_EXC_MATCH", "CHECK_EG_MATCH", "PREP_RERAISE_STAR"})

_JUMP_RENAMES_311 = {
    "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "JUMP_BACKWARD_NO_INTERRUPT": "JUMP_BACKWARD",
    "LOAD_METHOD": "LOAD_ATTR",          # decoded with method=True
}

# CALL_INTRINSIC_1's function ids (the same in 3.12 and 3.13)
_INTRINSIC_1_312 = ("INTRINSIC_1_INVALID", "INTRINSIC_PRINT", "INTRINSIC_IMPORT_STAR",
                    "INTRINSIC_STOPITERATION_ERROR", "INTRINSIC_ASYNC_GEN_WRAP",
                    "INTRINSIC_UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE", "INTRINSIC_TYPEVAR",
                    "INTRINSIC_PARAMSPEC", "INTRINSIC_TYPEVARTUPLE", "INTRINSIC_SUBSCRIPT_GENERIC",
                    "INTRINSIC_TYPEALIAS")

TABLE: dict[tuple[int, int], VersionFacts] = {
    (3, 11): VersionFacts(
        version=(3, 11),
        renames=_JUMP_RENAMES_311,
        load_attr_method_bit=False,
        kw_names_from_consts=True,
        for_iter_skips_end_for=False,
        exception_only=_COMMON_EXC_ONLY,
    ),
    (3, 12): VersionFacts(
        version=(3, 12),
        renames={"JUMP_BACKWARD_NO_INTERRUPT": "JUMP_BACKWARD"},
        load_attr_method_bit=True,
        kw_names_from_consts=False,
        for_iter_skips_end_for=True,
        for_iter_skip=1,
        send_keeps_receiver=True,
        intrinsic_1=_INTRINSIC_1_312,
        exception_only=_COMMON_EXC_ONLY | {"CLEANUP_THROW"},
    ),
    (3, 13): VersionFacts(
        version=(3, 13),
        renames={"JUMP_BACKWARD_NO_INTERRUPT": "JUMP_BACKWARD"},
        load_attr_method_bit=True,
        kw_names_from_consts=False,       # (no KW_NAMES: CALL_KW takes the tuple from the stack)
        for_iter_skips_end_for=True,
        for_iter_skip=2,
        end_for_pops=1,
        send_keeps_receiver=True,
        null_above_callable=True,
        make_function_flags=False,
        closure_by_load_fast=True,
        intrinsic_1=_INTRINSIC_1_312,
        exception_only=_COMMON_EXC_ONLY | {"CLEANUP_THROW"},
    ),
}

# BINARY_OP's argument (the same in 3.11 to 3.13): index -> (symbol, operator function).
BINARY_OPS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("+", operator.add), ("&", operator.and_), ("//", operator.floordiv), ("<<", operator.lshift),
    ("@", operator.matmul), ("*", operator.mul), ("%", operator.mod), ("|", operator.or_),
    ("**", operator.pow), (">>", operator.rshift), ("-", operator.sub), ("/", operator.truediv),
    ("^", operator.xor),
    ("+=", operator.iadd), ("&=", operator.iand), ("//=", operator.ifloordiv), ("<<=", operator.ilshift),
    ("@=", operator.imatmul), ("*=", operator.imul), ("%=", operator.imod), ("|=", operator.ior),
    ("**=", operator.ipow), (">>=", operator.irshift), ("-=", operator.isub), ("/=", operator.itruediv),
    ("^=", operator.ixor),
)

COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
               ">": operator.gt, ">=": operator.ge}


def facts_for(version: tuple[int, int]) -> VersionFacts:
    try:
        return TABLE[version]
    except KeyError:
        raise NotImplementedError(f"xcompile supports CPython 3.11 to 3.13, not {version}") from None


CURRENT = facts_for(sys.version_info[:2]) if sys.version_info[:2] in TABLE else None
