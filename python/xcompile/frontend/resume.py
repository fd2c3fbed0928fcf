"""Where a broken frame continues: resume codes and instruction stubs, made once and reused.

A graph break at instruction ``i`` of the top frame leaves the frame in one of a few shapes
(``BreakKind``); each says how the breaking instruction runs in the replacement code
(``codegen.py``) and at which instruction(s) the rest of the frame resumes:

    call      CALL / CALL_KW / CALL_FUNCTION_EX: the runner makes the call, then resumes at i + 1
    branch    a conditional jump on a tensor: the runner tests it and resumes at i + 1 or at
              the jump target
    stub      any other instruction that only uses the stack (and names/constants): it runs
              in a tiny generated code object (``stub_code``), then the frame resumes at i + 1

Resume code objects are cached by (code, index, NULL slots, unbound locals), so every call of
a broken frame reaches the same resume code and the cache entries the hook compiled for it.
"""
from __future__ import annotations

import dis
import re
import types
import weakref
from dataclasses import dataclass
from typing import cast

from .. import _C
from ..bytecode import opcodes as op
from ..bytecode.analysis import V, pops_pushes
from ..bytecode.edit import change_arguments
from ..bytecode.instr import create, disassemble
from ..bytecode.resume import ResumeCode, ResumeError, check_resume_point, make_resume_code
from ..code_states import SKIP

# code -> {(index, NULL slots, unbound locals): its resume code} and {(index, NULL slots): stub}:
# weak in the code, so a function made at run time and broken does not keep its code, its
# resume codes and their C++ cache records alive once it is gone
_RESUME: weakref.WeakKeyDictionary[types.CodeType, dict[tuple, ResumeCode]] = weakref.WeakKeyDictionary()
_STUBS: weakref.WeakKeyDictionary[types.CodeType, dict[tuple, types.CodeType]] = weakref.WeakKeyDictionary()

_CALLS = ("CALL", "CALL_KW", "CALL_FUNCTION_EX")
# normalized conditional jumps -> (pops the condition?, jumps when the condition is ...)
BRANCHES = {
    "POP_JUMP_IF_FALSE": (True, False),
    "POP_JUMP_IF_TRUE": (True, True),
    "JUMP_IF_FALSE_OR_POP": (False, False),
    "JUMP_IF_TRUE_OR_POP": (False, True),
}
# Instructions a stub can run (they only pop their operands, and use names or constants):
# opname (as disassembled) -> values popped, from the raw argument. Pushes are popped + the
# net stack effect. Anything else (locals, jumps, ops that reach below their operands such as
# LIST_APPEND) cannot run on its own.
_STUB_POPS = {
    "FORMAT_VALUE": lambda a: 1 + bool(a & 0x04),
    "CONVERT_VALUE": lambda a: 1, "FORMAT_SIMPLE": lambda a: 1, "FORMAT_WITH_SPEC": lambda a: 2,
    "TO_BOOL": lambda a: 1,
    "BINARY_OP": lambda a: 2, "BINARY_SUBSCR": lambda a: 2, "COMPARE_OP": lambda a: 2,
    "CONTAINS_OP": lambda a: 2, "IS_OP": lambda a: 2, "STORE_SUBSCR": lambda a: 3,
    "DELETE_SUBSCR": lambda a: 2, "BINARY_SLICE": lambda a: 3, "STORE_SLICE": lambda a: 4,
    "UNARY_NEGATIVE": lambda a: 1, "UNARY_NOT": lambda a: 1, "UNARY_INVERT": lambda a: 1,
    "UNARY_POSITIVE": lambda a: 1, "GET_ITER": lambda a: 1, "GET_LEN": lambda a: 1,
    "LOAD_ATTR": lambda a: 1, "LOAD_METHOD": lambda a: 1, "STORE_ATTR": lambda a: 2,
    "DELETE_ATTR": lambda a: 1, "STORE_GLOBAL": lambda a: 1, "DELETE_GLOBAL": lambda a: 0,
    "LOAD_GLOBAL": lambda a: 0, "BUILD_TUPLE": lambda a: a, "BUILD_LIST": lambda a: a,
    "BUILD_SET": lambda a: a, "BUILD_STRING": lambda a: a, "BUILD_MAP": lambda a: 2 * a,
    "BUILD_CONST_KEY_MAP": lambda a: a + 1, "BUILD_SLICE": lambda a: a, "UNPACK_SEQUENCE": lambda a: 1,
    "UNPACK_EX": lambda a: 1, "BEFORE_WITH": lambda a: 1, "IMPORT_NAME": lambda a: 2,
    "IMPORT_FROM": lambda a: 1, "LIST_TO_TUPLE": lambda a: 1, "GET_YIELD_FROM_ITER": lambda a: 1,
    "LOAD_BUILD_CLASS": lambda a: 0,
}


class CannotResume(Exception):
    """The frame cannot continue after this break; it runs eagerly (the reason says why)."""


@dataclass(frozen=True)
class BreakKind:
    kind: str                   # "call" | "branch" | "stub" | "method" (a stub pushing [NULL, method])
    index: int                  # the breaking instruction
    pops: int                   # stack values it consumes (NULL slots included)
    pushes: int                 # values it leaves (call/stub), 0 for a branch
    resume_at: tuple[int, ...]  # call/stub: (i + 1,); branch: (when true, when false)
    keep_condition_on: tuple[bool, ...] = ()   # branch: the condition stays on the stack there


def classify(code: types.CodeType, index: int, opname: str, arg: int | None, target: int | None,
             kw_names: tuple) -> BreakKind:
    """How the breaking instruction ``index`` (normalized ``opname``) runs and where the frame
    resumes."""
    if opname in _CALLS:
        assert arg is not None                  # CALL / CALL_FUNCTION_EX always have one
        if opname == "CALL":
            pops = arg + 2
        elif opname == "CALL_KW":
            pops = arg + 3                      # 3.13: the kw-names tuple on top
        else:
            pops = 3 + (arg & 1)
        return _checked(code, BreakKind("call", index, pops, 1, (index + 1,)))
    if opname in BRANCHES:
        pops_cond, jumps_when = BRANCHES[opname]
        assert target is not None
        nxt = index + 1
        when_true, when_false = (target, nxt) if jumps_when else (nxt, target)
        keep = (not pops_cond and jumps_when, not pops_cond and not jumps_when)
        return _checked(code, BreakKind("branch", index, 1, 0, (when_true, when_false), keep))
    raw = disassemble(code)[index]
    if raw.opname == "LOAD_METHOD" or (raw.opname == "LOAD_ATTR" and op.FACTS.name_shift.get("LOAD_ATTR")
                                       and cast(int, raw.arg) & 1):
        # a method load: the stub loads the bound method, the frame resumes with [NULL, method]
        return _checked(code, BreakKind("method", index, 1, 1, (index + 1,)))
    count = _STUB_POPS.get(raw.opname)
    if count is None:
        raise CannotResume(f"the break is at {raw.opname}, which the replacement code cannot run on its own")
    _, kinds = pops_pushes(raw, jump=False)
    if any(k is not V for k in kinds):
        raise CannotResume(f"{raw.opname} may leave a NULL on the stack")
    pops = count(raw.arg)
    net = dis.stack_effect(raw.opcode, raw.arg if op.has_arg(raw.opname) else None, jump=False)
    return _checked(code, BreakKind("stub", index, pops, pops + net, (index + 1,)))


def _checked(code: types.CodeType, kind: BreakKind) -> BreakKind:
    for j in kind.resume_at:
        reason = check_resume_point(code, j)
        if reason is not None:
            raise CannotResume(f"cannot resume at instruction {j}: {reason}")
    return kind


def resume_code(code: types.CodeType, index: int, null_positions: frozenset[int],
                unbound: frozenset[str]) -> ResumeCode:
    key = (index, null_positions, unbound)
    by_code = _RESUME.setdefault(code, {})
    rc = by_code.get(key)
    if rc is None:
        try:
            rc = make_resume_code(code, index, null_positions=null_positions, unbound=unbound,
                                  name=_resume_name(code, index))
        except ResumeError as e:
            raise CannotResume(f"cannot resume at instruction {index}: {e.reason}") from e
        by_code[key] = rc          # compiled through the hook on its first call, like user code
    return rc


_RESUMED = re.compile(r"^xcompile_resume_in_(.*)_at_\d+$")


def _resume_name(code: types.CodeType, index: int) -> str:
    """``xcompile_resume_in_<function>_at_<line>``, naming the user's function also when the
    break is in a resume function."""
    m = _RESUMED.match(code.co_name)
    fn = m.group(1) if m else code.co_name
    lineno = None
    for ins in disassemble(code)[index::-1]:
        if ins.lineno is not None:
            lineno = ins.lineno
            break
    return f"xcompile_resume_in_{fn}_at_{lineno if lineno is not None else code.co_firstlineno}"


def stub_code(code: types.CodeType, index: int, null_positions: tuple[int, ...], n_in: int,
              n_out: int) -> types.CodeType:
    """``stub(*operands)`` runs instruction ``index`` of ``code`` on ``operands`` (the popped
    values, bottom first, NULL slots pushed by the stub itself) and returns the pushed values
    as a tuple."""
    key = (index, null_positions)
    stubs = _STUBS.setdefault(code, {})
    stub = stubs.get(key)
    if stub is not None:
        return stub
    raw = disassemble(code)[index]
    if raw.opname in ("LOAD_METHOD", "LOAD_ATTR"):
        inst = create("LOAD_ATTR", 0, raw.argval, positions=raw.positions)   # the bound-method form
    else:
        inst = create(raw.opname, raw.arg, raw.argval, positions=raw.positions)
    names = [f"operand{p}" for p in range(n_in) if p not in null_positions]
    body = [create("PUSH_NULL") if p in null_positions else create("LOAD_FAST", None, f"operand{p}")
            for p in range(n_in)]
    if raw.opname == "UNARY_NOT" and op.FACTS.jumps_need_bool:
        # 3.13's UNARY_NOT reads an exact bool (the TO_BOOL before it ran in the traced code,
        # which left the value as it was)
        body.append(create("TO_BOOL", positions=raw.positions))
    body += [inst, create("BUILD_TUPLE", n_out), create("RETURN_VALUE")]
    name = f"xcompile_break_at_{code.co_name}_{raw.lineno or code.co_firstlineno}"
    flags = code.co_flags & ~(op.CO_VARARGS | op.CO_VARKEYWORDS)
    stub = change_arguments(body, template=code.replace(co_flags=flags), argnames=names, cellvars=(),
                            freevars=(), name=name, qualname=name)
    _C.set_code_state(stub, SKIP)     # never compiled: it is the breaking instruction itself
    stubs[key] = stub
    return stub


__all__ = ["BreakKind", "CannotResume", "classify", "resume_code", "stub_code"]
